package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/config"
	"strand/core/env"
	"strand/core/group"
	"strand/core/metadata"
	"strand/core/quorum"
	"strand/core/replica"
	"strand/core/wire"
)

// Config is everything a Node is started with.
type Config struct {
	// Broker is the node's static configuration (server.properties).
	Broker config.Broker
	// Bugs are the planted bugs; the zero value is the correct protocol.
	Bugs Bugs
	// ControllerSnapshotIntervalRecords, if positive, overrides how many
	// committed metadata records the controller lets pass between
	// snapshots (controller.Config.SnapshotIntervalRecords).
	ControllerSnapshotIntervalRecords int64
	// QuorumObserver, if set, is given to the metadata quorum's Raft (the
	// simulator's Raft checkers); nil in production.
	QuorumObserver quorum.Observer
	// OnInitialUnfence, if set, runs once on the event loop when this
	// broker is first ready for clients: it has registered, applied the
	// metadata log up to its registration (its initial catch-up, before
	// which the image may lack topics the cluster has, or show leaderships
	// of the previous incarnation), and the controller has unfenced it, so
	// the Metadata it answers names it among the live brokers. Kafka's
	// broker enables its broker listeners at the same point, after
	// BrokerLifecycleManager's initialUnfenceFuture; realnet starts serving
	// them then. A client served earlier saw no live broker and no
	// controller (kafkajs's admin failed with "Broker -1 not found"). It
	// never runs on a node without the broker role.
	OnInitialUnfence func()
	// ClusterID is the cluster.id the node's log directories were
	// formatted with (meta.properties), which Metadata (v2+) and
	// DescribeCluster report, as Kafka's brokers do; clients such as
	// kafka-go and sarama show it. Empty means the id an unformatted
	// `strand serve` would derive from controller.quorum.voters
	// (config.DeriveClusterID).
	ClusterID string
	// Log receives the node's operator log lines (SPEC.md §2.4):
	// the environment binds the node id and stamps the time. The zero Log
	// discards them.
	Log env.Log
}

// Bugs are the planted bugs a node runs with. They travel in Config to
// every partition's replica.Config and producer.Config, never in globals,
// so that simulated nodes in parallel goroutines differ freely.
type Bugs struct {
	// Replica are the planted replication bugs (core/replica).
	Replica replica.Bugs
	// DedupOff is producer.BugDedupOff: retries of an idempotent
	// producer's batches are appended again.
	DedupOff bool
	// Group are the planted group coordinator bugs (core/group), given to
	// every coordinator this node hosts.
	Group group.Bugs
	// Quorum are the planted Raft bugs (core/quorum), given to this node's
	// metadata quorum voter.
	Quorum quorum.Bugs
	// OpenControlPlane: a listener serves every API, whatever its kind
	// (apiFor), so the controller RPCs reach the controller from a client
	// listener and Produce is appended from a controller listener.
	OpenControlPlane bool
	// ControlPlaneAnyPrincipal: a secured plane's CLUSTER_ACTION admits
	// every principal (authorize.go), so a forged heartbeat from a
	// non-member on a secured controller listener is served.
	ControlPlaneAnyPrincipal bool
	// ACL are the authorizer's planted bugs (acl-deny-ignored,
	// acl-prefix-overmatch).
	ACL acl.Bugs
	// ACLStaleForever: the broker never lets an ACL go once it has seen
	// it, so removals never take effect on it (acl-stale-forever).
	ACLStaleForever bool
	// SessionLogStartUntold: the leader's fetch sessions (KIP-227) count a
	// changed log start offset as told without naming the partition in an
	// incremental answer (fetch_session.go), so a follower learns a
	// DeleteRecords log start only when its HW moves or records come.
	SessionLogStartUntold bool
}

// IDSource returns fresh 16-byte ids: topic ids, and the incarnation id a
// broker registers with. core/ has no randomness, so the environment injects
// it (seeded in the simulator, crypto/rand in realnet).
type IDSource func() [16]byte

// Limits the node applies on top of config.Limits.
const (
	// replicaFetchMaxWaitMs is replica.fetch.wait.max.ms (Kafka's default).
	replicaFetchMaxWaitMs = 500
	// replicaFetchBackoffMs is replica.fetch.backoff.ms (Kafka's default).
	replicaFetchBackoffMs = 1000
	// replicaFetchResponseMaxBytes is replica.fetch.response.max.bytes.
	replicaFetchResponseMaxBytes = 10 << 20
	// shutdownHeartbeatIntervalMs paces heartbeats during a controlled
	// shutdown, so leadership moves and the answer comes promptly.
	shutdownHeartbeatIntervalMs = 100
	// metadataFetchBackoffMs is the wait before a failed metadata-log fetch
	// is sent again: controller.quorum.retry.backoff.ms, as a Kafka broker
	// follows the metadata log as a Raft observer. replica.fetch.backoff.ms
	// (1 s) made a broker that started before its controller was elected
	// wait a second for its first metadata.
	metadataFetchBackoffMs = 20
	// registerBackoffMsMin is the first wait before a failed
	// BrokerRegistration is sent again (Kafka's broker lifecycle backoff);
	// it doubles up to registerBackoffMsMax.
	registerBackoffMsMin = 100
	registerBackoffMsMax = 1000
	// startingHeartbeatIntervalMs paces heartbeats until the controller
	// reports this incarnation caught up with the metadata log, as Kafka's
	// BrokerLifecycleManager does in its STARTING state (10 ms), so that
	// the heartbeat that gets the broker unfenced follows its catch-up at
	// once instead of a whole broker.heartbeat.interval.ms later.
	startingHeartbeatIntervalMs = 10
	// hwCheckpointIntervalMs is replica.high.watermark.checkpoint.interval.ms.
	hwCheckpointIntervalMs = 5000
	// replicaFetchMaxBytes is replica.fetch.max.bytes (per partition).
	replicaFetchMaxBytes = 1 << 20
	// decompressedBytesMax bounds decompression while validating a produce
	// (core/batch keeps zstd windows under it: at least 8 MiB).
	decompressedBytesMaxFloor = 16 << 20
)

// nodeEnv is what every part of a node shares: its configuration and
// identity, and the environment's handles (core/env), through which alone
// the node reaches time, the network and its disks. Node holds it, and each
// of the node's parts (partitionManager, metadataFollower, controllerRole,
// groupCoordinators) points to the same one.
type nodeEnv struct {
	cfg         Config
	id          int32
	clock       env.Clock
	net         env.Network
	disks       []env.Disk
	newID       IDSource
	incarnation [16]byte
}

// Node is one Strand process: broker, controller, or both.
// All methods run on the node's event loop (core/env's contract).
type Node struct {
	nodeEnv
	// listenerKinds gives each of the node's listeners its kind, and
	// advertised each kind its ApiVersions table (api_table.go). Fixed at
	// New: PrecheckRequest reads listenerKinds on connection goroutines.
	listenerKinds map[string]listenerKind
	advertised    map[listenerKind][]kmsg.ApiVersionsResponseApiKey
	// controllerRole is the controller side of the node: the metadata
	// quorum's voter and core/controller with the controller role, and,
	// on every node, the way to the active controller.
	controllerRole *controllerRole

	// meta is the metadata this node has applied, and the broker's
	// registration in it.
	meta *metadataFollower

	// parts are the partitions this node hosts and what waits on them.
	parts *partitionManager

	// producerIDs hands out idempotent producers' ids (InitProducerId).
	producerIDs *producerIDManager

	// groups are the group coordinators of the __consumer_offsets
	// partitions this broker leads.
	groups *groupCoordinators

	// acls is the authorizer, the freshness of the ACLs it decides with,
	// the audit of denials, and the authorization of the request whose
	// handler is running (acl_state.go).
	acls *aclState
}

// New starts a node: it starts the metadata quorum's voter and the
// controller when it has the controller role, registers with the controller when it has the broker
// role, and arms the periodic timers. disks are the log directories, in
// log.dirs order; partition logs are opened as metadata assigns them.
func New(cfg Config, clock env.Clock, net env.Network, disks []env.Disk, ids IDSource) (*Node, error) {
	b := cfg.Broker
	if err := checkStartable(b, disks, ids); err != nil {
		return nil, err
	}
	n := &Node{
		nodeEnv: nodeEnv{
			cfg:         cfg,
			id:          int32(b.NodeID),
			clock:       clock,
			net:         net,
			disks:       disks,
			newID:       ids,
			incarnation: ids(),
		},
		listenerKinds: listenerKindsByName(b),
		advertised:    map[listenerKind][]kmsg.ApiVersionsResponseApiKey{},
	}
	for _, kind := range listenerKindsOf(b.Roles.Broker, b.Roles.Controller) {
		n.advertised[kind] = versionsTable(kind)
	}
	produceListeners := map[string]bool{}
	for _, l := range b.Listeners {
		produceListeners[l.Name] = n.listenerServes(l.Name, kmsg.Produce.Int16())
	}
	e := &n.nodeEnv
	n.acls = newACLState(e)
	n.meta = &metadataFollower{nodeEnv: e, acls: n.acls, image: metadata.NewImage(), brokerEpoch: -1}
	n.parts = newPartitionManager(e, n.meta, nil, produceListeners)
	n.parts.acls = n.acls
	n.groups = &groupCoordinators{nodeEnv: e, meta: n.meta, parts: n.parts, acls: n.acls, coordinators: map[int32]*coordinatorSlot{}}
	n.producerIDs = &producerIDManager{nodeEnv: e, meta: n.meta}
	n.parts.groups = n.groups
	n.meta.parts, n.meta.groups = n.parts, n.groups
	if err := n.parts.logConfig.Validate(); err != nil {
		return nil, fmt.Errorf("broker: log settings: %w", err)
	}
	if err := n.groups.groupConfig(0, 1).Validate(); err != nil {
		return nil, fmt.Errorf("broker: group coordinator settings: %w", err)
	}
	cr, err := newControllerRole(e, disks[0])
	if err != nil {
		return nil, err
	}
	n.controllerRole, n.meta.controllerRole, n.parts.controllerRole, n.groups.controllerRole, n.producerIDs.controllerRole = cr, cr, cr, cr, cr
	cr.acls, cr.meta = n.acls, n.meta
	if b.Roles.Broker {
		previous, err := takeCleanShutdown(disks)
		if err != nil {
			return nil, err
		}
		someOffline, err := n.parts.openManagers()
		if err != nil {
			return nil, err
		}
		if someOffline {
			previous = -1 // the logs of the offline directory were not recovered
		}
		n.meta.previousBrokerEpoch = previous
		n.parts.scheduleCheckpoints(0)
		n.parts.scheduleProducerExpiry()
		n.parts.scheduleCleaner(logCleanerBackoffMs)
		n.meta.startBroker()
	}
	return n, nil
}

// checkStartable refuses what New cannot start a node with.
func checkStartable(b config.Broker, disks []env.Disk, ids IDSource) error {
	switch {
	case !b.Roles.Broker && !b.Roles.Controller:
		return errors.New("broker: process.roles is empty")
	case len(disks) == 0:
		return errors.New("broker: no log directory (log.dirs)")
	case len(b.QuorumVoters) == 0:
		return errors.New("broker: controller.quorum.voters is empty")
	case ids == nil:
		return errors.New("broker: no id source")
	}
	return nil
}

// InitialCatchUpDone reports whether this broker has completed its initial
// catch-up with the metadata log. It stays true once set, whatever later
// registrations do.
func (n *Node) InitialCatchUpDone() bool { return n.meta.initialCatchUpDone }

// InitialUnfenceDone reports whether this broker has become ready for
// clients (Config.OnInitialUnfence). It stays true once set.
func (n *Node) InitialUnfenceDone() bool { return n.meta.initialUnfenceDone }

// ID is the node's node.id.
func (n *Node) ID() int32 { return n.id }

// Image is the metadata this node has applied. Callers must not modify it.
func (n *Node) Image() *metadata.Image { return n.meta.image }

// HandleRequest dispatches one request from the API table (api_table.go,
// SPEC.md §10). A request on a listener this node does not have, or for
// an API its listener does not serve, or in a version the listener does
// not serve, closes the connection, as Kafka's SocketServer does for an API
// its listener does not enable; an unsupported ApiVersions gets KIP-511's
// v0 answer with the listener's table instead, so the client can retry. A
// request whose principal may not make it is answered with the API's
// authorization error before its handler runs (authorize.go).
func (n *Node) HandleRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	if req == nil || req.Key() != hdr.APIKey || req.GetVersion() != hdr.APIVersion {
		n.net.Close(conn, hdr.CorrelationID)
		return
	}
	kind, ok := n.listenerKind(hdr.Listener)
	if !ok {
		n.net.Close(conn, hdr.CorrelationID)
		return
	}
	api := n.apiFor(kind, hdr.APIKey)
	if api == nil {
		n.net.Close(conn, hdr.CorrelationID)
		return
	}
	if hdr.APIVersion < api.versionMin || hdr.APIVersion > api.versionMax {
		if hdr.APIKey == kmsg.ApiVersions.Int16() {
			n.net.Reply(conn, hdr.CorrelationID, wire.APIVersionsUnsupported(n.advertised[kind]))
			return
		}
		n.net.Close(conn, hdr.CorrelationID)
		return
	}
	g := n.acls.grantsFor(kind, hdr)
	if !n.acls.authorize(conn, g, api, req) {
		return
	}
	n.acls.current = g
	api.handle(n, conn, hdr, req)
	n.acls.current = grants{}
}

// HandleClosed forgets the requests parked for conn. Replies to it would be
// dropped by the Network anyway; parked fetches would only hold memory.
func (n *Node) HandleClosed(conn env.ConnID) {
	n.controllerRole.handleClosed(conn)
	n.parts.handleClosed(conn)
}

// nowMs is monotonic time in milliseconds: what timeouts, lag and
// deadlines are measured in.
func (e *nodeEnv) nowMs() int64 { return e.clock.MonotonicNs() / 1e6 }

// wallMs is the wall clock: what record timestamps and retention use.
func (e *nodeEnv) wallMs() int64 { return e.clock.WallMs() }

// after runs fire once delayMs of monotonic time has passed.
func (e *nodeEnv) after(delayMs int64, fire func()) env.Timer {
	return e.clock.SetTimer(delayMs*1e6, fire)
}

func lowestVoter(voters []config.Voter) int32 {
	lowest := int32(voters[0].ID)
	for _, v := range voters[1:] {
		lowest = min(lowest, int32(v.ID))
	}
	return lowest
}
