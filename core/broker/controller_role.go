package broker

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"path"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/controller"
	"strand/core/env"
	"strand/core/metadata"
	"strand/core/quorum"
)

// metadataLogDir is where the quorum keeps the metadata log in the first
// log directory: metadata/__cluster_metadata-0, as if Kafka's
// metadata.log.dir were set to <first log dir>/metadata. Not at the root,
// because log.Manager opens every <topic>-<partition> directory there, and
// the log must have one owner.
const metadataLogDir = "metadata"

// controllerRequestTimeoutMs bounds a request to the active controller
// (controller.quorum.request.timeout.ms plus the metadata fetch's long
// poll): a controller that crashed or lost its place is given up on
// quickly, so brokers find the new one well within their session.
const controllerRequestTimeoutMs = quorum.DefaultRequestTimeoutMs + replicaFetchMaxWaitMs

// controllerRole is the node's controller side: with process.roles
// including controller it hosts the metadata quorum's voter (core/quorum)
// and core/controller; on every node it finds the active controller for
// the requests the node sends it (toController).
type controllerRole struct {
	*nodeEnv
	// ctrl is the controller (core/controller) and quorumNode its Raft
	// voter (core/quorum), both nil without the controller role.
	ctrl       *controller.Controller
	quorumNode *quorum.Node
	// controllerID is the voter this node believes is the active
	// controller, starting at the lowest (toController).
	controllerID int32
	// acls authorizes the admin requests a broker forwards, which meta's
	// image helps answer without leaking what the principal may not see
	// (authorize_admin.go).
	acls *aclState
	meta *metadataFollower
}

// newControllerRole starts the controller role when process.roles
// includes controller, with the metadata log in disk (the first log
// directory); otherwise it only finds the active controller.
func newControllerRole(e *nodeEnv, disk env.Disk) (*controllerRole, error) {
	cr := &controllerRole{nodeEnv: e, controllerID: lowestVoter(e.cfg.Broker.QuorumVoters)}
	if !e.cfg.Broker.Roles.Controller {
		return cr, nil
	}
	if err := cr.start(disk); err != nil {
		return nil, err
	}
	return cr, nil
}

// start hosts core/controller: a Raft voter (core/quorum) over the
// metadata log in the first log directory, and the controller following
// it. The controller is active while this voter leads.
func (cr *controllerRole) start(disk env.Disk) error {
	b := cr.cfg.Broker
	cfg := controllerConfigOf(b)
	if cr.cfg.ControllerSnapshotIntervalRecords > 0 {
		cfg.SnapshotIntervalRecords = cr.cfg.ControllerSnapshotIntervalRecords
	}
	cfg.Log = cr.cfg.Log.With(slog.String("component", "controller"))
	boot, err := readBootstrap(disk)
	if err != nil {
		return err
	}
	cfg.BootstrapRecords = boot
	q := quorum.NewMetadataQuorum()
	qcfg := quorum.DefaultConfig(cfg.NodeID, cfg.Voters, cr.randInt63n)
	qcfg.Bugs, qcfg.Observer = cr.cfg.Bugs.Quorum, cr.cfg.QuorumObserver
	node, err := quorum.StartNode(qcfg, cr.clock, cr.net, disk, path.Join(metadataLogDir, controller.MetadataTopic+"-0"), q)
	if err != nil {
		return fmt.Errorf("broker: start metadata quorum: %w", err)
	}
	q.Attach(node)
	ctrl, err := controller.New(cfg, cr.clock, q, cr.newID)
	if err != nil {
		node.Stop()
		return fmt.Errorf("broker: start controller: %w", err)
	}
	cr.ctrl, cr.quorumNode = ctrl, node
	return nil
}

// randInt63n draws the quorum's election jitter from the node's id source,
// the environment's seeded randomness (core/ has no other).
func (e *nodeEnv) randInt63n(limit int64) int64 {
	id := e.newID()
	x := binary.BigEndian.Uint64(id[:8]) ^ binary.BigEndian.Uint64(id[8:])
	// splitmix64's finalizer: ids that differ in a few bits spread out.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int64(x>>1) % limit
}

// handleQuorumRequest hands a peer voter's Raft RPC to this node's voter,
// in the versions core/quorum's codec speaks (the API table's). Only a
// node without the controller role has no voter, and it has no controller
// listener either: only the planted bug OpenControlPlane gets here then.
func (cr *controllerRole) handleQuorumRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	if cr.quorumNode == nil {
		cr.net.Close(conn, hdr.CorrelationID)
		return
	}
	cr.quorumNode.HandleRequest(conn, hdr, req, env.NodeID(cr.id))
}

// handleControllerFetch serves a Fetch on a controller listener, where
// only the metadata log is fetched: a voter's (v15+, with ReplicaState,
// quorum.IsVoterRequest) goes to the quorum, a broker's (v12) to the
// controller, which serves committed decisions. A Fetch of anything else
// is INVALID_REQUEST, as KafkaRaftClient answers a fetch of another
// partition.
func (cr *controllerRole) handleControllerFetch(conn env.ConnID, hdr env.RequestHeader, req *kmsg.FetchRequest) {
	switch {
	case quorum.IsVoterRequest(req):
		cr.handleQuorumRequest(conn, hdr, req)
	case controller.Handles(req):
		cr.handleControllerRequest(conn, hdr, req)
	default:
		resp := fetchError(req, kerr.InvalidRequest.Code)
		resp.ErrorCode = kerr.InvalidRequest.Code
		cr.net.Reply(conn, hdr.CorrelationID, resp)
	}
}

// controllerConfigOf maps server.properties onto the controller's settings.
func controllerConfigOf(b config.Broker) controller.Config {
	c := controller.DefaultConfig(int32(b.NodeID))
	c.Voters = nil
	for _, v := range b.QuorumVoters {
		c.Voters = append(c.Voters, int32(v.ID))
		c.VoterEndpoints = append(c.VoterEndpoints, controller.VoterEndpoint{ID: int32(v.ID),
			Listener: b.ControllerListenerNames[0], Host: v.Host, Port: v.Port})
	}
	c.BrokerSessionTimeoutMs = int64(b.BrokerSessionTimeoutMs)
	c.DefaultPartitions = b.NumPartitions
	c.DefaultReplicationFactor = b.DefaultReplicationFactor
	c.MinInsyncReplicas = int(b.MinInsyncReplicas)
	c.UncleanLeaderElectionEnable = b.UncleanLeaderElectionEnable
	c.DescribeTopicConfig = b.DescribeTopicConfig
	return c
}

// handleControllerRequest routes a controller request (controller.Handles)
// arriving from a connection. Admin requests a client sent to a node with
// the broker role are forwarded to the active controller (the local one if
// active) and the answer relayed (Kafka wraps them in Envelope; Strand
// forwards them plainly). Everything else goes to the local controller
// role if there is one, which answers NOT_CONTROLLER unless active.
func (cr *controllerRole) handleControllerRequest(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
	reply := func(resp kmsg.Response) { cr.net.Reply(conn, hdr.CorrelationID, resp) }
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest, *kmsg.DeleteTopicsRequest, *kmsg.CreatePartitionsRequest,
		*kmsg.AlterConfigsRequest, *kmsg.IncrementalAlterConfigsRequest, *kmsg.ElectLeadersRequest,
		*kmsg.AlterUserSCRAMCredentialsRequest:
		if cr.cfg.Broker.Roles.Broker {
			cr.toController(req, func(resp kmsg.Response, err error) {
				if err != nil {
					resp = timedOut(r)
				}
				reply(resp)
			})
			return
		}
	}
	if cr.ctrl != nil {
		cr.ctrl.HandleRequest(req, reply)
		return
	}
	if r, ok := req.(*kmsg.FetchRequest); ok {
		reply(fetchError(r, kerr.NotLeaderForPartition.Code))
		return
	}
	// Controller RPCs are advertised only by controllers: a broker that
	// gets one was sent it against the table.
	cr.net.Close(conn, hdr.CorrelationID)
}

// toController hands a request to the active controller: the local one if
// it is active, otherwise over the network to the voter this node believes
// active (controllerTarget). done runs at most once.
//
// How a broker finds the active controller (Strand's choice; KRaft brokers
// follow the quorum as observers and learn the leader from its Fetch
// responses): a node with the controller role asks its own voter, which
// knows the leader; otherwise it keeps a guess, starting at the lowest
// voter. A metadata fetch refused with NOT_LEADER_OR_FOLLOWER names the
// leader in CurrentLeader when that voter knows it; any other refusal
// (NOT_CONTROLLER), a network error or a timeout moves the guess to the
// next voter. The caller retries as it always does.
func (cr *controllerRole) toController(req kmsg.Request, done func(kmsg.Response, error)) {
	target := cr.controllerTarget()
	if cr.ctrl != nil && (cr.ctrl.Active() || target == cr.id) {
		cr.ctrl.HandleRequest(req, func(resp kmsg.Response) { done(resp, nil) })
		return
	}
	cr.sendWithin(target, req, controllerRequestTimeoutMs, func(resp kmsg.Response, err error) {
		if leader, moved := controllerMoved(resp, err); moved && cr.controllerID == target {
			cr.controllerID = leader
			if leader < 0 || leader == target {
				cr.controllerID = cr.nextVoter(target)
			}
		}
		done(resp, err)
	})
}

// controllerTarget is the voter this node believes is the active
// controller.
func (cr *controllerRole) controllerTarget() int32 {
	if cr.ctrl != nil {
		if leader := cr.ctrl.LeaderID(); leader >= 0 {
			return leader
		}
	}
	return cr.controllerID
}

// nextVoter is the voter after id in id order, wrapping around.
func (cr *controllerRole) nextVoter(id int32) int32 {
	var voters []int32
	for _, v := range cr.cfg.Broker.QuorumVoters {
		voters = append(voters, int32(v.ID))
	}
	slices.Sort(voters)
	for _, v := range voters {
		if v > id {
			return v
		}
	}
	return voters[0]
}

// controllerMoved reports whether an answer from the supposed active
// controller says it is not (or did not answer), with the leader it named
// (-1 if none).
func controllerMoved(resp kmsg.Response, err error) (leader int32, moved bool) {
	if err != nil {
		return -1, true
	}
	notController := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			if p := r.Topics[0].Partitions[0]; p.ErrorCode == kerr.NotLeaderForPartition.Code {
				return p.CurrentLeader.LeaderID, true
			}
		}
	case *kmsg.FetchSnapshotResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			if p := r.Topics[0].Partitions[0]; p.ErrorCode == kerr.NotLeaderForPartition.Code {
				return p.CurrentLeader.LeaderID, true
			}
		}
	case *kmsg.DescribeQuorumResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			if p := r.Topics[0].Partitions[0]; p.ErrorCode == kerr.NotLeaderForPartition.Code {
				return p.LeaderID, true
			}
		}
	case *kmsg.BrokerRegistrationResponse:
		return -1, r.ErrorCode == notController
	case *kmsg.BrokerHeartbeatResponse:
		return -1, r.ErrorCode == notController
	case *kmsg.AlterPartitionResponse:
		return -1, r.ErrorCode == notController
	case *kmsg.AllocateProducerIDsResponse:
		return -1, r.ErrorCode == notController
	case *kmsg.CreateTopicsResponse:
		return -1, len(r.Topics) > 0 && r.Topics[0].ErrorCode == notController
	case *kmsg.DeleteTopicsResponse:
		return -1, len(r.Topics) > 0 && r.Topics[0].ErrorCode == notController
	case *kmsg.CreatePartitionsResponse:
		return -1, len(r.Topics) > 0 && r.Topics[0].ErrorCode == notController
	case *kmsg.AlterConfigsResponse:
		return -1, len(r.Resources) > 0 && r.Resources[0].ErrorCode == notController
	case *kmsg.IncrementalAlterConfigsResponse:
		return -1, len(r.Resources) > 0 && r.Resources[0].ErrorCode == notController
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return -1, len(r.Results) > 0 && r.Results[0].ErrorCode == notController
	case *kmsg.ElectLeadersResponse:
		// v0 has no top-level code: its first partition says it.
		return -1, r.ErrorCode == notController ||
			(len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 && r.Topics[0].Partitions[0].ErrorCode == notController)
	}
	return -1, false
}

// timedOut answers a forwarded admin request whose forwarding failed.
func timedOut(req kmsg.Request) kmsg.Response {
	return controller.ErrorResponse(req, kerr.RequestTimedOut.Code)
}

// QuorumRaft is this node's metadata quorum voter's Raft, for reading its
// state (the simulator's checkers); nil without the controller role.
func (n *Node) QuorumRaft() *quorum.Raft {
	if q := n.controllerRole.quorumNode; q != nil {
		return q.Raft()
	}
	return nil
}

// ControllerActive reports whether this node hosts the active controller:
// its voter leads and its epoch's first entry has committed.
func (n *Node) ControllerActive() bool {
	c := n.controllerRole.ctrl
	return c != nil && c.Active()
}

// ControllerImage is this node's controller's committed image, for the
// simulator's checkers; nil without the controller role. Callers must not
// modify it.
func (n *Node) ControllerImage() *metadata.Image {
	if n.controllerRole.ctrl == nil {
		return nil
	}
	return n.controllerRole.ctrl.Image()
}

// resignWaitMs bounds how long a resigning leader waits for a successor
// before closing anyway: two election timeouts, ample for the best-placed
// voter, which stands at once, to win.
const resignWaitMs = 2 * quorum.DefaultElectionTimeoutMs

// resignPollMs is how often a resigning leader looks for its successor.
const resignPollMs = 10

// resignQuorum hands the metadata quorum's leadership on before the node
// stops: if this voter leads, it resigns (EndQuorumEpoch to the others,
// best placed first) and then runs done once it follows another voter's
// leadership, or after resignWaitMs. It keeps serving Raft
// meanwhile, so it can vote for its successor. Otherwise (and for the only
// voter, which has no successor) done runs at once.
func (cr *controllerRole) resignQuorum(done func()) {
	q := cr.quorumNode
	if q == nil || q.Stopped() || q.Raft().Role() != quorum.Leader || len(cr.cfg.Broker.QuorumVoters) < 2 {
		done()
		return
	}
	startNs := cr.clock.MonotonicNs()
	q.Resign()
	var poll func()
	poll = func() {
		leader := q.Raft().LeaderID()
		if (leader >= 0 && leader != cr.id) || q.Stopped() || cr.clock.MonotonicNs()-startNs >= resignWaitMs*1e6 {
			done()
			return
		}
		cr.clock.SetTimer(resignPollMs*1e6, poll)
	}
	poll()
}

// handleClosed forgets the voter's requests parked for conn.
func (cr *controllerRole) handleClosed(conn env.ConnID) {
	if cr.quorumNode != nil {
		cr.quorumNode.HandleClosed(conn)
	}
}

// close stops the controller and its voter, if this node has them.
func (cr *controllerRole) close() {
	if cr.ctrl != nil {
		cr.ctrl.Close()
	}
	if cr.quorumNode != nil {
		cr.quorumNode.Stop()
	}
}

// Incarnation is the incarnation id this process registers with; the
// controller's image names it once the registration has committed (the
// simulator's fault budget waits for that).
func (n *Node) Incarnation() [16]byte { return n.incarnation }
