package broker

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/controller"
	"strand/core/env"
	"strand/core/quorum"
	"strand/sim/simnet"
)

// forger is a client host of its own, with its own principal, that sends
// each request on a fresh connection to the listener it names: a host
// outside the cluster trying the control plane (SPEC.md §10).
type forger struct {
	c      *cluster
	client *simnet.Client
}

var forgerTraceID int32 = 900

// newForger adds a client that authenticates as principal on secured
// listeners.
func (c *cluster) newForger(principal string) *forger {
	forgerTraceID++
	client := c.net.AddClient("forger", c.s.NewNode(forgerTraceID))
	client.SetPrincipal(principal)
	return &forger{c: c, client: client}
}

// send sends req to node's listener and runs the simulation until the
// answer, or the connection's end, comes back.
func (f *forger) send(node int32, listener string, req kmsg.Request) (kmsg.Response, error) {
	f.c.t.Helper()
	cc, err := f.client.DialListener(env.NodeID(node), listener, nil)
	if err != nil {
		f.c.t.Fatalf("dial node %d's %s listener: %v", node, listener, err)
	}
	var resp kmsg.Response
	done := false
	cc.Send(req, func(r kmsg.Response, e error) { resp, err, done = r, e, true })
	f.c.waitFor(fmt.Sprintf("an answer to %s on %s", kmsg.NameForKey(req.Key()), listener), 10000, func() bool { return done })
	return resp, err
}

// mustClose sends req and fails unless the node closed the connection
// without answering.
func (f *forger) mustClose(node int32, listener string, req kmsg.Request) {
	f.c.t.Helper()
	resp, err := f.send(node, listener, req)
	if !errors.Is(err, simnet.ErrConnClosed) {
		f.c.t.Errorf("%s v%d on node %d's %s listener: answered %+v (err %v), want the connection closed",
			kmsg.NameForKey(req.Key()), req.GetVersion(), node, listener, resp, err)
	}
}

// fakeRegistration is node's own registration under a broker id no broker
// has and another incarnation: what an outsider would send to register a
// fake broker.
func (c *cluster) fakeRegistration(fakeID int32) *kmsg.BrokerRegistrationRequest {
	req := c.nodes[1].node.meta.registrationRequest()
	req.BrokerID, req.IncarnationID = fakeID, [16]byte{0xfa, 0x4e, byte(fakeID)}
	return req
}

// forgedShutdown is a heartbeat in broker id's name, with its real epoch,
// asking for a controlled shutdown.
func (c *cluster) forgedShutdown(id int32) *kmsg.BrokerHeartbeatRequest {
	b, ok := c.nodes[1].node.controllerRole.ctrl.Image().Broker(id)
	if !ok {
		c.t.Fatalf("broker %d not registered", id)
	}
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(1)
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset, req.WantShutdown = id, b.Epoch, 1<<40, true
	return req
}

// forgedShrink is an AlterPartition in the name of topic's leader,
// with its epochs, shrinking the ISR to the leader alone.
func (c *cluster) forgedShrink(topic string) *kmsg.AlterPartitionRequest {
	im := c.nodes[1].node.controllerRole.ctrl.Image()
	s, ok := im.PartitionByName(topic, 0)
	if !ok {
		c.t.Fatalf("no partition %s-0", topic)
	}
	leader, _ := im.Broker(s.Leader)
	tp, _ := im.TopicByName(topic)
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(2)
	req.BrokerID, req.BrokerEpoch = s.Leader, leader.Epoch
	t := kmsg.NewAlterPartitionRequestTopic()
	t.TopicID = tp.ID
	p := kmsg.NewAlterPartitionRequestTopicPartition()
	p.Partition, p.LeaderEpoch, p.PartitionEpoch, p.NewISR = 0, s.LeaderEpoch, s.PartitionEpoch, []int32{s.Leader}
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// forgedVote asks node 1's voter for its vote in an epoch far ahead, for a
// candidate whose log is longer than any.
func (c *cluster) forgedVote() kmsg.Request {
	raft := c.nodes[1].node.QuorumRaft()
	req, err := quorum.EncodeRequest(quorum.Message{Type: quorum.MsgVote, From: 99, To: 1, Epoch: raft.Epoch() + 5,
		LastEpoch: raft.Epoch() + 4, LastOffset: 1 << 40})
	if err != nil {
		c.t.Fatal(err)
	}
	return req
}

// forgedBeginEpoch tells node 1's voter that a node 99 leads a later epoch.
func (c *cluster) forgedBeginEpoch() kmsg.Request {
	req, err := quorum.EncodeRequest(quorum.Message{Type: quorum.MsgBeginEpoch, From: 99, To: 1,
		Epoch: c.nodes[1].node.QuorumRaft().Epoch() + 5, LeaderID: 99})
	if err != nil {
		c.t.Fatal(err)
	}
	return req
}

// metadataFetch is the metadata-log Fetch broker id follows the log with.
func metadataFetch(id int32) *kmsg.FetchRequest {
	req := fetchReq(controller.MetadataTopic, 0, 0, 0)
	req.ReplicaID = id
	return req
}

// controlPlaneState is what the forged requests must not change.
type controlPlaneState struct {
	brokers   []int32
	shutdown  []int32
	isr       []int32
	raftEpoch int32
}

func (c *cluster) controlPlaneState(topic string) controlPlaneState {
	im := c.nodes[1].node.controllerRole.ctrl.Image()
	st := controlPlaneState{brokers: im.BrokerIDs(), raftEpoch: c.nodes[1].node.QuorumRaft().Epoch()}
	for _, id := range st.brokers {
		if b, _ := im.Broker(id); b.InControlledShutdown {
			st.shutdown = append(st.shutdown, id)
		}
	}
	s, _ := im.PartitionByName(topic, 0)
	st.isr = s.ISR
	return st
}

func (st controlPlaneState) equal(other controlPlaneState) bool {
	return slices.Equal(st.brokers, other.brokers) && slices.Equal(st.shutdown, other.shutdown) &&
		slices.Equal(st.isr, other.isr) && st.raftEpoch == other.raftEpoch
}

// TestControlPlaneRequestsOnBrokerListenerCloseTheConnection: each
// control-plane request an outsider could send to the client port (a fake
// broker's registration, a forged WantShutdown heartbeat, a forged ISR
// shrink, Raft votes) closes the connection unanswered and changes
// nothing: served, the registration would register a fake broker and the
// heartbeat would shut a real one down for good.
func TestControlPlaneRequestsOnBrokerListenerCloseTheConnection(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"default.replication.factor": "3"})
	c.waitRegistered()
	c.createTopic(1, "t", 1, 3)
	before := c.controlPlaneState("t")
	f := c.newForger(env.AnonymousPrincipal)
	for _, req := range []kmsg.Request{c.fakeRegistration(100), c.forgedShutdown(2), c.forgedShrink("t"), c.forgedVote(), c.forgedBeginEpoch()} {
		f.mustClose(1, "PLAINTEXT", req)
	}
	c.run(2000)
	if after := c.controlPlaneState("t"); !after.equal(before) {
		t.Errorf("the control plane changed: %+v, was %+v", after, before)
	}
}

// TestProduceOnControllerListenerClosesTheConnection: a Produce sent to the
// controller listener closes the connection and appends nothing, and the
// pre-check does not decompress it first.
func TestProduceOnControllerListenerClosesTheConnection(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	f := c.newForger(env.AnonymousPrincipal)
	req := produceReq("t", 0, 1, recordBatch("forged"))
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), Listener: "CONTROLLER"}
	if _, prechecked := precheckOn(c.nodes[1].node, hdr, req).(*PrecheckedProduce); prechecked {
		t.Error("the pre-check decompressed a Produce its listener refuses")
	}
	hdr.Listener = "PLAINTEXT"
	if _, prechecked := precheckOn(c.nodes[1].node, hdr, req).(*PrecheckedProduce); !prechecked {
		t.Error("the pre-check did not check the same Produce on the client listener")
	}
	f.mustClose(1, "CONTROLLER", req)
	f.mustClose(1, "CONTROLLER", kmsg.NewPtrMetadataRequest())
	// Fetch is a controller API, of the metadata log only.
	resp, err := f.send(1, "CONTROLLER", fetchReq("t", 0, 0, 0))
	if err != nil || resp.(*kmsg.FetchResponse).ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("a partition Fetch on the controller listener: %+v, %v; want INVALID_REQUEST", resp, err)
	}
	if leo := c.nodes[1].node.parts.partitions[partitionKey{"t", 0}].log.LogEndOffset(); leo != 0 {
		t.Errorf("the partition's log ends at %d, want 0: the Produce was appended", leo)
	}
}

// TestApiVersionsPerListener: a broker listener advertises no controller
// API, a controller listener no client API, and KIP-511's answer to an
// unsupported ApiVersions lists the listener's own table.
func TestApiVersionsPerListener(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	f := c.newForger(env.AnonymousPrincipal)
	controllerOnly := []kmsg.Key{kmsg.BrokerRegistration, kmsg.BrokerHeartbeat, kmsg.AlterPartition, kmsg.AllocateProducerIDs,
		kmsg.Vote, kmsg.BeginQuorumEpoch, kmsg.EndQuorumEpoch, kmsg.FetchSnapshot}
	brokerOnly := []kmsg.Key{kmsg.Produce, kmsg.Metadata, kmsg.ListOffsets, kmsg.FindCoordinator, kmsg.JoinGroup,
		kmsg.OffsetCommit, kmsg.InitProducerID, kmsg.DescribeConfigs, kmsg.DescribeCluster}
	for _, tc := range []struct {
		listener      string
		absent, shown []kmsg.Key
	}{
		{"PLAINTEXT", controllerOnly, brokerOnly},
		{"CONTROLLER", brokerOnly, controllerOnly},
	} {
		for _, version := range []int16{3, 5} { // v5: KIP-511's answer
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(min(version, 4))
			if version == 5 {
				req.Version = 5 // kmsg encodes v5 as v4's body; the node does not serve it
			}
			resp, err := f.send(1, tc.listener, req)
			if err != nil {
				t.Fatalf("%s ApiVersions v%d: %v", tc.listener, version, err)
			}
			keys := map[int16]bool{}
			for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
				keys[k.ApiKey] = true
			}
			for _, k := range tc.absent {
				if keys[k.Int16()] {
					t.Errorf("%s listener, ApiVersions v%d advertises %v", tc.listener, version, k)
				}
			}
			for _, k := range tc.shown {
				if !keys[k.Int16()] {
					t.Errorf("%s listener, ApiVersions v%d does not advertise %v", tc.listener, version, k)
				}
			}
		}
	}
}

// TestEveryAPIOutsideTheTableClosesTheConnection sends every request kmsg
// knows, in its newest version, to each listener of a combined node: one
// the table does not register for that listener closes the connection,
// so no API is served without an entry.
func TestEveryAPIOutsideTheTableClosesTheConnection(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	n := c.nodes[1].node
	f := c.newForger(env.AnonymousPrincipal)
	for _, listener := range []string{"PLAINTEXT", "CONTROLLER"} {
		kind, _ := n.listenerKind(listener)
		for key := int16(0); key <= kmsg.MaxKey; key++ {
			req := kmsg.RequestForKey(key)
			if req == nil || n.apiFor(kind, key) != nil {
				continue
			}
			req.SetVersion(req.MaxVersion())
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				p.Acks = 1 // acks=0 would not wait for the close
			}
			f.mustClose(1, listener, req)
		}
	}
}

// TestUnknownListenerClosesTheConnection: a request that names a listener
// the node does not have (or none) closes the connection: the listener
// decides what a request may do, so an unknown one may do nothing.
func TestUnknownListenerClosesTheConnection(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	n := c.nodes[1].node
	rec := &closeRecorder{Network: n.net}
	n.net = rec
	for i, listener := range []string{"", "EXTERNAL", "plaintext"} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		n.HandleRequest(1, env.RequestHeader{APIKey: req.Key(), APIVersion: 12, CorrelationID: int32(i), Listener: listener}, req)
	}
	if !slices.Equal(rec.closed, []int32{0, 1, 2}) || rec.replies != 0 {
		t.Errorf("closed on %v with %d replies, want every request closed and none answered", rec.closed, rec.replies)
	}
}

// closeRecorder counts what the node answers.
type closeRecorder struct {
	env.Network
	closed  []int32
	replies int
}

func (r *closeRecorder) Close(_ env.ConnID, correlationID int32) {
	r.closed = append(r.closed, correlationID)
}
func (r *closeRecorder) Reply(env.ConnID, int32, kmsg.Response) { r.replies++ }

// securedCluster is three nodes whose controller listener (and, with
// interBroker, the inter-broker listener) is SASL_PLAINTEXT: the harness's
// nodes authenticate as User:broker-N, the super users.
func securedCluster(t *testing.T, interBroker bool) *cluster {
	protocols := "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
	if interBroker {
		protocols = "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
	}
	c := newCluster(t, 3, map[string]string{"default.replication.factor": "3", "listener.security.protocol.map": protocols,
		"super.users": "User:broker-1;User:broker-2;User:broker-3"})
	c.waitRegistered()
	c.createTopic(2, "t", 1, 3)
	return c
}

// TestSecuredControlPlaneRefusesNonMembers: on a secured controller
// listener each forged control-plane request from a principal that is not a
// member (anonymous, or authenticated but not a super user) is answered
// CLUSTER_AUTHORIZATION_FAILED and changes nothing, while the cluster's own
// brokers (super users) register, heartbeat and replicate through it.
func TestSecuredControlPlaneRefusesNonMembers(t *testing.T) {
	c := securedCluster(t, false)
	before := c.controlPlaneState("t")
	for _, principal := range []string{env.AnonymousPrincipal, "User:mallory", "User:broker"} {
		f := c.newForger(principal)
		forged := []kmsg.Request{c.fakeRegistration(100), c.forgedShutdown(2), c.forgedShrink("t"), c.forgedVote(), c.forgedBeginEpoch(),
			metadataFetch(2)}
		for _, req := range forged {
			resp, err := f.send(1, "CONTROLLER", req)
			if err != nil {
				t.Fatalf("%s as %s: %v", kmsg.NameForKey(req.Key()), principal, err)
			}
			if code := topLevelError(t, resp); code != kerr.ClusterAuthorizationFailed.Code {
				t.Errorf("%s as %s: error %v, want CLUSTER_AUTHORIZATION_FAILED", kmsg.NameForKey(req.Key()), principal, kerr.ErrorForCode(code))
			}
		}
	}
	c.run(2000)
	if after := c.controlPlaneState("t"); !after.equal(before) {
		t.Errorf("the control plane changed: %+v, was %+v", after, before)
	}
	// A member's heartbeat is served.
	member := c.newForger("User:broker-3")
	heartbeat := c.forgedShutdown(3)
	heartbeat.WantShutdown = false
	resp, err := member.send(1, "CONTROLLER", heartbeat)
	if err != nil || resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode != 0 {
		t.Errorf("a super user's heartbeat: %+v, %v", resp, err)
	}
}

// TestSecuredInterBrokerPlaneRefusesForgedReplicaFetches: with the
// inter-broker listener secured, a Fetch in a replica's name from a
// non-member is answered CLUSTER_AUTHORIZATION_FAILED and does not move
// the leader's view of that replica, while consumers still fetch.
func TestSecuredInterBrokerPlaneRefusesForgedReplicaFetches(t *testing.T) {
	c := securedCluster(t, true)
	leader := c.leaderOf("t", 0)
	if r := c.produce(leader, "t", 0, -1, recordBatch("a")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	f := c.newForger("User:mallory")
	follower := int32(1 + leader%3)
	forged := fetchReq("t", 0, 1, 0)
	forged.ReplicaID = follower
	resp, err := f.send(leader, "PLAINTEXT", forged)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != kerr.ClusterAuthorizationFailed.Code || fr.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("forged replica fetch: errors %d / %d, want CLUSTER_AUTHORIZATION_FAILED", fr.ErrorCode, fr.Topics[0].Partitions[0].ErrorCode)
	}
	resp, err = f.send(leader, "PLAINTEXT", fetchReq("t", 0, 0, 0))
	if err != nil || resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("a consumer's fetch: %+v, %v", resp, err)
	}
}

// topLevelError is the error code of a control-plane answer.
func topLevelError(t *testing.T, resp kmsg.Response) int16 {
	t.Helper()
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode
	case *kmsg.VoteResponse:
		return r.ErrorCode
	case *kmsg.BeginQuorumEpochResponse:
		return r.ErrorCode
	case *kmsg.FetchResponse:
		return r.ErrorCode
	}
	t.Fatalf("no error code for %T", resp)
	return 0
}
