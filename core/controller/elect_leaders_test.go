package controller

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
	"strand/sim/memdisk"
)

// electLeaders sends ElectLeaders v2; topics nil asks for every partition.
func (h *harness) electLeaders(electionType int8, topics map[string][]int32, order ...string) *kmsg.ElectLeadersResponse {
	h.t.Helper()
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = 2, electionType, 30_000
	if topics != nil {
		req.Topics = []kmsg.ElectLeadersRequestTopic{}
		for _, name := range order {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = name, topics[name]
			req.Topics = append(req.Topics, rt)
		}
	}
	resp := h.send(req).(*kmsg.ElectLeadersResponse)
	if resp.ErrorCode != 0 {
		h.t.Fatalf("ElectLeaders: top-level error %d", resp.ErrorCode)
	}
	return resp
}

// electionResults flattens a response to "topic-partition" -> error code.
func electionResults(resp *kmsg.ElectLeadersResponse) map[string]int16 {
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			out[fmt.Sprintf("%s-%d", rt.Topic, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

// TestElectPreferredLeaders: a preferred replica that lost leadership while
// fenced cannot be elected until it is back in the ISR; then a PREFERRED
// election moves leadership to it (one leader epoch later) and answers
// ELECTION_NOT_NEEDED where the preferred replica leads and
// UNKNOWN_TOPIC_OR_PARTITION for what does not exist. With every preferred
// replica leading, an election over every partition answers nothing.
func TestElectPreferredLeaders(t *testing.T) {
	cfg := DefaultConfig(100)
	cfg.LeaderImbalanceCheckIntervalMs = 0 // only the request moves leaders
	h := newHarness(t, cfg)
	epochs := h.startBrokers(3)
	h.createTopic("a", 3, 3, nil)
	mine, other := int32(-1), int32(-1)
	for p := int32(0); p < 3; p++ {
		if h.partition("a", p).Replicas[0] == 0 {
			mine = p
		} else {
			other = p
		}
	}
	if mine < 0 || other < 0 {
		t.Fatal("placement gave broker 0 no preferred partition, or every one")
	}
	if s := h.partition("a", other); s.Leader != s.Replicas[0] {
		t.Fatalf("partition %d starts led by %d, not its preferred replica %d", other, s.Leader, s.Replicas[0])
	}
	// Broker 0 goes silent and is fenced: leadership of its partition moves.
	for elapsed := int64(0); elapsed < 10000; elapsed += 2000 {
		h.advance(2000)
		h.heartbeat(1, epochs[1], false)
		h.heartbeat(2, epochs[2], false)
	}
	moved := h.partition("a", mine)
	if moved.Leader == 0 || moved.Leader == metadata.NoLeader {
		t.Fatalf("partition %d after fencing broker 0: %+v, want another leader", mine, moved)
	}
	got := electionResults(h.electLeaders(electionPreferred, map[string][]int32{"a": {mine}}, "a"))
	if code := got["a-"+itoa(mine)]; code != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred election with broker 0 fenced: %v, want PREFERRED_LEADER_NOT_AVAILABLE", got)
	}
	if now := h.partition("a", mine); now.Leader != moved.Leader || now.LeaderEpoch != moved.LeaderEpoch {
		t.Fatalf("a refused election changed the partition: %+v -> %+v", moved, now)
	}

	// Broker 0 restarts cleanly and rejoins the ISR.
	epochs[0] = h.registerRaw(0, 2, -1).BrokerEpoch
	h.heartbeat(0, epochs[0], false)
	h.alterISR("a", mine, moved.Leader, epochs[moved.Leader], moved.LeaderEpoch, moved.PartitionEpoch, []int32{0, 1, 2})
	rejoined := h.partition("a", mine)
	if rejoined.Leader == 0 {
		t.Fatal("leadership moved back before the election was asked for")
	}

	resp := h.electLeaders(electionPreferred, map[string][]int32{"a": {mine, other, 7}, "nope": {0}}, "a", "nope")
	want := map[string]int16{
		"a-" + itoa(mine):  0,
		"a-" + itoa(other): kerr.ElectionNotNeeded.Code,
		"a-7":              kerr.UnknownTopicOrPartition.Code,
		"nope-0":           kerr.UnknownTopicOrPartition.Code,
	}
	if got := electionResults(resp); !maps.Equal(got, want) {
		t.Fatalf("preferred election results %v, want %v", got, want)
	}
	now := h.partition("a", mine)
	if now.Leader != 0 || now.LeaderEpoch != rejoined.LeaderEpoch+1 || !sameIDs(now.ISR, []int32{0, 1, 2}) {
		t.Fatalf("after the preferred election: %+v, want broker 0 leading in epoch %d with the ISR kept", now, rejoined.LeaderEpoch+1)
	}
	// The answer came after the commit: the committed image has it.
	if s, _ := h.c.Image().PartitionByName("a", mine); s.Leader != 0 {
		t.Fatal("answered before the leader change committed")
	}
	if resp := h.electLeaders(electionPreferred, nil); len(resp.Topics) != 0 {
		t.Fatalf("every-partition election with every preferred replica leading answered %v, want nothing", electionResults(resp))
	}
}

// TestElectUncleanLeader: UNCLEAN elects a live out-of-sync replica for a
// partition left leaderless (unclean election disabled in its config),
// answers ELECTION_NOT_NEEDED for a partition with a leader, and, over
// every partition, names only the partitions it elected.
func TestElectUncleanLeader(t *testing.T) {
	cfg := DefaultConfig(100)
	cfg.LeaderImbalanceCheckIntervalMs = 0
	h := newHarness(t, cfg)
	epochs := h.startBrokers(2)
	h.createTopic("u", 1, 2, map[string]string{"min.insync.replicas": "2"})
	h.createTopic("led", 1, 2, nil)
	s := h.partition("u", 0)
	leader, follower := s.Leader, without(s.Replicas, s.Leader)[0]
	got := electionResults(h.electLeaders(electionUnclean, map[string][]int32{"u": {0}}, "u"))
	if got["u-0"] != kerr.ElectionNotNeeded.Code {
		t.Fatalf("unclean election on a led partition: %v, want ELECTION_NOT_NEEDED", got)
	}
	// The follower leaves the ISR, restarts uncleanly (leaving the ELR),
	// and then the leader goes silent: nobody may lead cleanly.
	h.alterISR("u", 0, leader, epochs[leader], s.LeaderEpoch, s.PartitionEpoch, []int32{leader})
	h.advance(9500)
	h.heartbeat(leader, epochs[leader], false)
	newEpoch := h.registerRaw(follower, 2, -1).BrokerEpoch
	h.heartbeat(follower, newEpoch, false)
	for elapsed := int64(0); elapsed < 10000; elapsed += 2000 {
		h.advance(2000)
		h.heartbeat(follower, newEpoch, false)
	}
	stuck := h.partition("u", 0)
	if stuck.Leader != metadata.NoLeader {
		t.Fatalf("partition u-0: %+v, want it leaderless before the unclean election", stuck)
	}
	if led := h.partition("led", 0); led.Leader != follower {
		t.Fatalf("partition led-0: %+v, want led by live broker %d", led, follower)
	}

	// With the follower fenced too, no replica may lead at all: the
	// partition stays leaderless.
	h.advance(10000) // no heartbeats: its session expires
	if got := electionResults(h.electLeaders(electionUnclean, map[string][]int32{"u": {0}}, "u")); got["u-0"] != kerr.EligibleLeadersNotAvailable.Code {
		t.Fatalf("unclean election with every replica fenced: %v, want ELIGIBLE_LEADERS_NOT_AVAILABLE", got)
	}
	if p := h.partition("u", 0); p.Leader != metadata.NoLeader || p.LeaderEpoch != stuck.LeaderEpoch {
		t.Fatalf("partition u-0 after a refused election: %+v, want it unchanged and leaderless", p)
	}
	h.heartbeat(follower, newEpoch, false) // back, and unfenced
	if led := h.partition("led", 0); led.Leader != follower {
		t.Fatalf("partition led-0 after broker %d came back: %+v, want led by it", follower, led)
	}

	resp := h.electLeaders(electionUnclean, nil)
	if got, want := electionResults(resp), map[string]int16{"u-0": 0}; !maps.Equal(got, want) {
		t.Fatalf("unclean election over every partition: %v, want %v", got, want)
	}
	now := h.partition("u", 0)
	if now.Leader != follower || now.LeaderEpoch != stuck.LeaderEpoch+1 || !sameIDs(now.ISR, []int32{follower}) || len(now.ELR) != 0 {
		t.Fatalf("after the unclean election: %+v, want broker %d alone in the ISR in epoch %d, empty ELR", now, follower, stuck.LeaderEpoch+1)
	}
}

// TestElectLeadersRefusals: an unknown election type is INVALID_REQUEST for
// the whole request and every partition; a controller that is not active
// answers NOT_CONTROLLER, top-level and per partition, so a forwarding
// broker looks for the active one.
func TestElectLeadersRefusals(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(1)
	h.createTopic("a", 1, 1, nil)
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType = 2, 5
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "a", Partitions: []int32{0}}}
	resp := h.send(req).(*kmsg.ElectLeadersResponse)
	if resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("election type 5: %+v, want INVALID_REQUEST", resp)
	}

	cfg := DefaultConfig(101)
	cfg.Voters = []int32{100, 101}
	standby := &harness{t: t, clock: &manualClock{}, disk: memdisk.New(memdisk.Options{}), cfg: cfg}
	c, _ := standby.startController() // voter 100 is unreachable: 101 never leads
	standby.advance(10_000)
	req.ElectionType = electionPreferred
	var got kmsg.Response
	c.HandleRequest(req, func(r kmsg.Response) { got = r })
	r := got.(*kmsg.ElectLeadersResponse)
	if r.ErrorCode != kerr.NotController.Code || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.NotController.Code {
		t.Fatalf("standby controller answered %+v, want NOT_CONTROLLER", r)
	}
}

func itoa(p int32) string { return fmt.Sprint(p) }

// TestPreferredElectionOfALeaderlessPartitionElectsAnotherISRMember: as
// Kafka's PartitionChangeBuilder.electPreferredLeader, a PREFERRED election
// of a partition without a leader whose preferred replica may not lead
// elects the first other replica (assignment order) that may: in the ISR
// and registered, unfenced, not shutting down. Strand's controller itself
// never leaves such a partition leaderless (every change that lets a
// replica lead elects one), so the test writes that state directly.
func TestPreferredElectionOfALeaderlessPartitionElectsAnotherISRMember(t *testing.T) {
	cfg := DefaultConfig(100)
	cfg.LeaderImbalanceCheckIntervalMs = 0
	h := newHarness(t, cfg)
	epochs := h.startBrokers(3)
	h.createTopic("a", 1, 3, nil)
	s := h.partition("a", 0)
	preferred := s.Replicas[0]
	// The preferred replica goes silent and is fenced: it leaves the ISR.
	for elapsed := int64(0); elapsed < 10000; elapsed += 2000 {
		h.advance(2000)
		for _, id := range s.Replicas[1:] {
			h.heartbeat(id, epochs[id], false)
		}
	}
	moved := h.partition("a", 0)
	if moved.Leader == preferred || moved.Leader == metadata.NoLeader || slices.Contains(moved.ISR, preferred) {
		t.Fatalf("after fencing broker %d: %+v, want another leader and it out of the ISR", preferred, moved)
	}
	tx := h.c.begin()
	topic, _ := h.c.latest.TopicByName("a")
	tx.add(&metadata.PartitionChangeRecord{TopicID: topic.ID, PartitionID: 0, Leader: metadata.NoLeader})
	tx.commit(func() {}, nil)
	h.settle()
	leaderless := h.partition("a", 0)
	if leaderless.Leader != metadata.NoLeader {
		t.Fatalf("written state: %+v, want no leader", leaderless)
	}

	got := electionResults(h.electLeaders(electionPreferred, map[string][]int32{"a": {0}}, "a"))
	if got["a-0"] != 0 {
		t.Fatalf("preferred election of a leaderless partition with ISR %v: %v, want an election", leaderless.ISR, got)
	}
	want := s.Replicas[1] // the first after the preferred one; both others are in the ISR
	if now := h.partition("a", 0); now.Leader != want || now.LeaderEpoch != leaderless.LeaderEpoch+1 || !sameIDs(now.ISR, leaderless.ISR) {
		t.Fatalf("after the election: %+v, want broker %d leading in epoch %d with ISR %v", now, want, leaderless.LeaderEpoch+1, leaderless.ISR)
	}
	// Now led by an ISR member that may lead: the fenced preferred replica
	// is PREFERRED_LEADER_NOT_AVAILABLE again.
	got = electionResults(h.electLeaders(electionPreferred, map[string][]int32{"a": {0}}, "a"))
	if got["a-0"] != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred election with a valid leader and the preferred replica fenced: %v, want PREFERRED_LEADER_NOT_AVAILABLE", got)
	}
}

// TestElectLeadersDeadline: Kafka's controller runs ElectLeaders as an
// event whose deadline is TimeoutMillis after the request arrived, and an
// event still queued at its deadline fails with REQUEST_TIMED_OUT,
// top-level and for every partition, electing nothing. Strand's
// controller runs a request as it arrives, so only a TimeoutMillis of 0 or
// less is past due; an empty (not null) topic list is answered empty at
// once, before that or any other check, as Kafka's QuorumController does.
func TestElectLeadersDeadline(t *testing.T) {
	cfg := DefaultConfig(100)
	cfg.LeaderImbalanceCheckIntervalMs = 0
	h := newHarness(t, cfg)
	h.startBrokers(3)
	h.createTopic("a", 1, 3, nil)
	s := h.partition("a", 0)
	// Leadership moves off the preferred replica (still in the ISR), so
	// that a PREFERRED election has something to do.
	other := s.Replicas[1]
	tx := h.c.begin()
	topic, _ := h.c.latest.TopicByName("a")
	tx.add(&metadata.PartitionChangeRecord{TopicID: topic.ID, PartitionID: 0, Leader: other})
	tx.commit(func() {}, nil)
	h.settle()
	before := h.partition("a", 0)
	if before.Leader != other {
		t.Fatalf("written state: %+v, want broker %d leading", before, other)
	}

	for _, timeoutMs := range []int32{0, -1} {
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version, req.ElectionType, req.TimeoutMillis = 2, electionPreferred, timeoutMs
		req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "a", Partitions: []int32{0}}}
		resp := h.send(req).(*kmsg.ElectLeadersResponse)
		if resp.ErrorCode != kerr.RequestTimedOut.Code || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
			resp.Topics[0].Partitions[0].ErrorCode != kerr.RequestTimedOut.Code {
			t.Fatalf("TimeoutMillis %d: %+v, want REQUEST_TIMED_OUT top-level and for a-0", timeoutMs, resp)
		}
		if now := h.partition("a", 0); now.Leader != before.Leader || now.LeaderEpoch != before.LeaderEpoch {
			t.Fatalf("TimeoutMillis %d changed the partition: %+v -> %+v", timeoutMs, before, now)
		}
	}

	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = 2, 7, 0
	req.Topics = []kmsg.ElectLeadersRequestTopic{}
	if resp := h.send(req).(*kmsg.ElectLeadersResponse); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("empty topic list: %+v, want an empty answer", resp)
	}

	got := electionResults(h.electLeaders(electionPreferred, map[string][]int32{"a": {0}}, "a"))
	if got["a-0"] != 0 || h.partition("a", 0).Leader != s.Replicas[0] {
		t.Fatalf("with a deadline ahead: %v, leader %d; want broker %d elected", got, h.partition("a", 0).Leader, s.Replicas[0])
	}
}
