package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/controller"
	"strand/core/env"
	"strand/core/group"
	"strand/core/log"
	"strand/core/metadata"
	"strand/core/producer"
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

// Node is one Strand process: broker, controller, or both.
// All methods run on the node's event loop (core/env's contract).
type Node struct {
	cfg         Config
	id          int32
	clock       env.Clock
	net         env.Network
	disks       []env.Disk
	newID       IDSource
	incarnation [16]byte
	// listenerKinds gives each of the node's listeners its kind, and
	// advertised each kind its ApiVersions table (api_table.go). Fixed at
	// New: PrecheckRequest reads listenerKinds on connection goroutines.
	listenerKinds map[string]listenerKind
	advertised    map[listenerKind][]kmsg.ApiVersionsResponseApiKey
	logConfig     log.Config
	// initialCatchUpDone latches the first caughtUpWithRegistration
	// (noticeInitialCatchUp).
	initialCatchUpDone bool
	// initialUnfenceDone latches Config.OnInitialUnfence (noticeReady).
	initialUnfenceDone bool
	// registerBackoffMs is the wait before the next BrokerRegistration
	// retry (register); 0 after a success.
	registerBackoffMs int64
	// precheckView is the PrecheckView last handed to the environment
	// (publishPrecheckView), kept to publish a new one only on a change.
	precheckView *PrecheckView
	// scramPublished is the SCRAM credential set last handed to the
	// environment (publishScramCredentials).
	scramPublished *metadata.ScramCredentials
	// loopRecompressions counts the batches produceOne recompressed on the
	// loop (storedForm): in realnet only those whose pre-check missed the
	// topic's codec, as each holds every partition of the broker for the
	// time it takes. Tests read it.
	loopRecompressions int64

	// controllerID is the voter this node believes is the active
	// controller, starting at the lowest (controller_role.go, toController).
	controllerID int32
	// ctrl is the controller role (core/controller) when process.roles
	// includes controller; quorumNode is its Raft voter (core/quorum).
	ctrl       *controller.Controller
	quorumNode *quorum.Node

	// image is the committed metadata this node has applied.
	image *metadata.Image
	// brokerEpoch is the epoch the controller gave our registration, -1
	// until registered.
	brokerEpoch   int64
	metadataFetch *metadataFollower
	// heartbeatSeq numbers heartbeats, so that only the newest one's answer
	// schedules the next (BeginShutdown sends one out of turn).
	heartbeatSeq uint64
	// shutdownDone is set during a controlled shutdown; shutdownClean once
	// the controller has allowed it.
	shutdownDone  func()
	shutdownClean bool
	// previousBrokerEpoch is the epoch of the last clean shutdown, -1 if
	// the last process did not shut down cleanly.
	previousBrokerEpoch int64

	// managers are the log directories, in log.dirs order.
	managers   []*log.Manager
	partitions map[partitionKey]*partition
	// offlinePartitions are the partitions assigned here whose log could
	// not be opened (storage_failure.go markPartitionOffline).
	offlinePartitions map[partitionKey]bool
	// topicConfigs caches resolved topic configurations for the image at
	// offset topicConfigsAt (topic_config.go).
	topicConfigs   map[string]config.TopicConfig
	topicConfigsAt int64
	fetchers       map[int32]*fetcher

	// producerIDs are the producer ids the controller allocated to this
	// broker (AllocateProducerIds), for InitProducerId; initProducerWaits
	// are the InitProducerId requests waiting for a block.
	producerIDs               producer.IDBlock
	producerIDRequestInFlight bool
	initProducerWaits         []initProducerWait

	nextRequestID uint64
	produceWaits  map[uint64]*produceSlot
	// fetchWaiters are the parked fetches, oldest first; each partition
	// also lists those waiting on it.
	fetchWaiters []*fetchWaiter
	// wakeQueue are the partitions whose parked fetches are to be
	// re-checked, and wakeAll asks for every parked fetch; waking guards
	// drainWakes against re-entry.
	wakeQueue       []*partition
	wakeAll, waking bool
	// fetchSessions are the consumers' and followers' fetch sessions
	// (KIP-227, fetch_session.go).
	fetchSessions *fetchSessionCache

	// coordinators are the group coordinators of the __consumer_offsets
	// partitions this broker leads, by partition (coordinators.go).
	coordinators map[int32]*coordinatorSlot
	// unloadedCoordinator answers NOT_COORDINATOR for the others.
	unloadedCoordinator *group.Coordinator
	// offsetsTopicCreating is set while a creation of __consumer_offsets
	// is in flight.
	offsetsTopicCreating bool
}

// New starts a node: it starts the metadata quorum's voter and the
// controller when it has the controller role, registers with the controller when it has the broker
// role, and arms the periodic timers. disks are the log directories, in
// log.dirs order; partition logs are opened as metadata assigns them.
func New(cfg Config, clock env.Clock, net env.Network, disks []env.Disk, ids IDSource) (*Node, error) {
	b := cfg.Broker
	if !b.Roles.Broker && !b.Roles.Controller {
		return nil, errors.New("broker: process.roles is empty")
	}
	if len(disks) == 0 {
		return nil, errors.New("broker: no log directory (log.dirs)")
	}
	if len(b.QuorumVoters) == 0 {
		return nil, errors.New("broker: controller.quorum.voters is empty")
	}
	if ids == nil {
		return nil, errors.New("broker: no id source")
	}
	n := &Node{
		cfg:           cfg,
		id:            int32(b.NodeID),
		clock:         clock,
		net:           net,
		disks:         disks,
		newID:         ids,
		incarnation:   ids(),
		listenerKinds: listenerKindsByName(b),
		advertised:    map[listenerKind][]kmsg.ApiVersionsResponseApiKey{},
		logConfig:     logConfigOf(b.TopicDefaults()),
		controllerID:  lowestVoter(b.QuorumVoters),
		image:         metadata.NewImage(),
		brokerEpoch:   -1,
		partitions:    map[partitionKey]*partition{},
		fetchers:      map[int32]*fetcher{},
		produceWaits:  map[uint64]*produceSlot{},
		coordinators:  map[int32]*coordinatorSlot{},
	}
	for _, kind := range listenerKindsOf(b.Roles.Broker, b.Roles.Controller) {
		n.advertised[kind] = versionsTable(kind)
	}
	n.fetchSessions = fetchSessionCacheOf(b.Limits.FetchSessionCacheSlots, n.incarnation)
	n.fetchSessions.logStartUntold = cfg.Bugs.SessionLogStartUntold
	if err := n.logConfig.Validate(); err != nil {
		return nil, fmt.Errorf("broker: log settings: %w", err)
	}
	if err := n.groupConfig(0, 1).Validate(); err != nil {
		return nil, fmt.Errorf("broker: group coordinator settings: %w", err)
	}
	if b.Roles.Controller {
		if err := n.startController(disks[0]); err != nil {
			return nil, err
		}
	}
	if b.Roles.Broker {
		previous, err := takeCleanShutdown(disks[0])
		if err != nil {
			return nil, err
		}
		n.previousBrokerEpoch = previous
		if err := n.openManagers(); err != nil {
			return nil, err
		}
		n.scheduleCheckpoints(0)
		n.scheduleProducerExpiry()
		n.scheduleCleaner(logCleanerBackoffMs)
		n.metadataFetch = &metadataFollower{}
		n.startBroker()
	}
	return n, nil
}

// InitialCatchUpDone reports whether this broker has completed its initial
// catch-up with the metadata log. It stays true once set, whatever later
// registrations do.
func (n *Node) InitialCatchUpDone() bool { return n.initialCatchUpDone }

// InitialUnfenceDone reports whether this broker has become ready for
// clients (Config.OnInitialUnfence). It stays true once set.
func (n *Node) InitialUnfenceDone() bool { return n.initialUnfenceDone }

// noticeInitialCatchUp runs where the image has caught up with this
// incarnation's registration.
func (n *Node) noticeInitialCatchUp() {
	n.initialCatchUpDone = true
	n.noticeReady()
}

// noticeReady reports the broker ready for clients (Config.OnInitialUnfence)
// the first time its image, which Metadata answers from, has caught up and
// shows this incarnation unfenced.
func (n *Node) noticeReady() {
	if n.initialUnfenceDone || !n.initialCatchUpDone || !n.caughtUpWithRegistration() {
		return
	}
	if b, _ := n.image.Broker(n.id); b.Fenced {
		return
	}
	n.initialUnfenceDone = true
	if n.cfg.OnInitialUnfence != nil {
		n.cfg.OnInitialUnfence()
	}
}

// ID is the node's node.id.
func (n *Node) ID() int32 { return n.id }

// Image is the metadata this node has applied. Callers must not modify it.
func (n *Node) Image() *metadata.Image { return n.image }

// HandleRequest dispatches one request from the API table (api_table.go,
// SPEC.md §10). A request on a listener this node does not have, or for
// an API its listener does not serve, or in a version the listener does
// not serve, closes the connection, as Kafka's SocketServer does for an API
// its listener does not enable; an unsupported ApiVersions gets KIP-511's
// v0 answer with the listener's table instead, so the client can retry. A
// request whose principal may not make it is answered
// CLUSTER_AUTHORIZATION_FAILED before its handler runs (authorize.go).
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
	if !n.authorized(kind, hdr, api, req) {
		n.net.Reply(conn, hdr.CorrelationID, clusterAuthorizationFailed(req))
		return
	}
	api.handle(n, conn, hdr, req)
}

// HandleClosed forgets the requests parked for conn. Replies to it would be
// dropped by the Network anyway; parked fetches would only hold memory.
func (n *Node) HandleClosed(conn env.ConnID) {
	if n.quorumNode != nil {
		n.quorumNode.HandleClosed(conn)
	}
	var closed []*fetchWaiter
	for _, w := range n.fetchWaiters {
		if w.conn == conn {
			closed = append(closed, w)
		}
	}
	for _, w := range closed {
		w.timer.Stop()
		n.removeFetchWaiter(w)
	}
}

// nowMs is monotonic time in milliseconds: what timeouts, lag and
// deadlines are measured in.
func (n *Node) nowMs() int64 { return n.clock.MonotonicNs() / 1e6 }

// wallMs is the wall clock: what record timestamps and retention use.
func (n *Node) wallMs() int64 { return n.clock.WallMs() }

// after runs fire once delayMs of monotonic time has passed.
func (n *Node) after(delayMs int64, fire func()) env.Timer {
	return n.clock.SetTimer(delayMs*1e6, fire)
}

func lowestVoter(voters []config.Voter) int32 {
	lowest := int32(voters[0].ID)
	for _, v := range voters[1:] {
		lowest = min(lowest, int32(v.ID))
	}
	return lowest
}
