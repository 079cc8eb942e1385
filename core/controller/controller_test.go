package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
	"strand/sim/memdisk"
)

func TestRegistrationFencedUntilCaughtUp(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epoch := h.register(1, 1)
	if b, _ := h.c.Image().Broker(1); !b.Fenced || b.Epoch != epoch {
		t.Fatalf("new registration: %+v, want fenced with epoch %d", b, epoch)
	}
	resp := h.heartbeatAt(1, epoch, epoch-1, false)
	if resp.IsCaughtUp || !resp.IsFenced {
		t.Fatalf("heartbeat behind the registration: %+v, want fenced, not caught up", resp)
	}
	resp = h.heartbeatAt(1, epoch, epoch, false)
	if !resp.IsCaughtUp || resp.IsFenced {
		t.Fatalf("heartbeat caught up: %+v, want unfenced", resp)
	}
	if b, _ := h.c.Image().Broker(1); b.Fenced {
		t.Fatal("unfence not committed when the heartbeat was answered")
	}
	if resp := h.heartbeatAt(1, epoch+100, epoch, false); resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("heartbeat with a wrong epoch: error %d, want STALE_BROKER_EPOCH", resp.ErrorCode)
	}
	if resp := h.heartbeatAt(7, 0, 0, false); resp.ErrorCode != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("heartbeat from an unknown broker: error %d", resp.ErrorCode)
	}
	// A retried registration (same incarnation) gets the same epoch.
	if again := h.register(1, 1); again != epoch {
		t.Fatalf("retried registration got epoch %d, want %d", again, epoch)
	}
	// Another incarnation while the session is alive is a duplicate.
	if resp := h.registerRaw(1, 2, epoch); resp.ErrorCode != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("second incarnation during a live session: error %d", resp.ErrorCode)
	}
}

func TestCreateTopicsBalancesReplicasAndLeaders(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(3)
	for _, topic := range []struct {
		name       string
		partitions int32
		rf         int16
	}{{"a", 4, 2}, {"b", 3, 2}, {"c", 5, 2}, {"d", 1, 2}} {
		if rt := h.createTopic(topic.name, topic.partitions, topic.rf, nil); rt.ErrorCode != 0 {
			t.Fatalf("create %s: error %d %v", topic.name, rt.ErrorCode, rt.ErrorMessage)
		}
	}
	replicas, leaders := map[int32]int{}, map[int32]int{}
	total := 0
	h.c.Image().EachPartition(func(tp metadata.TopicPartition, s metadata.PartitionState) {
		total++
		if len(s.Replicas) != 2 || s.Leader != s.Replicas[0] || !sameIDs(s.ISR, s.Replicas) {
			t.Fatalf("%s-%d: %+v, want 2 replicas, all in ISR, the first leading", tp.Topic, tp.Partition, s)
		}
		for _, id := range s.Replicas {
			replicas[id]++
		}
		leaders[s.Leader]++
	})
	if total != 13 {
		t.Fatalf("%d partitions, want 13", total)
	}
	spread := func(counts map[int32]int) int {
		var all []int
		for id := int32(0); id < 3; id++ {
			all = append(all, counts[id])
		}
		return slices.Max(all) - slices.Min(all)
	}
	if spread(replicas) > 1 || spread(leaders) > 1 {
		t.Fatalf("replicas per broker %v, leaders per broker %v: want each within one", replicas, leaders)
	}
	if rt := h.createTopic("a", 1, 1, nil); rt.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("creating an existing topic: error %d", rt.ErrorCode)
	}
	if rt := h.createTopic("e", 1, 4, nil); rt.ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("rf 4 on 3 brokers: error %d", rt.ErrorCode)
	}
	if rt := h.createTopic("bad/name", 1, 1, nil); rt.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("bad topic name: error %d", rt.ErrorCode)
	}
	if rt := h.createTopic("f", 0, 1, nil); rt.ErrorCode != kerr.InvalidPartitions.Code {
		t.Fatalf("zero partitions: error %d", rt.ErrorCode)
	}
	if rt := h.createTopic("g", 1, 1, map[string]string{"min.insync.replicas": "zero"}); rt.ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("bad min.insync.replicas: error %d", rt.ErrorCode)
	}
}

func TestDeleteTopicsAndCreatePartitions(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(3)
	h.createTopic("a", 2, 3, nil)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "a", Count: 5}, {Topic: "nope", Count: 2}}
	resp := h.send(cp).(*kmsg.CreatePartitionsResponse)
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("CreatePartitions errors %d, %d", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
	}
	if tp, _ := h.c.Image().TopicByName("a"); tp.Partitions != 5 {
		t.Fatalf("topic a has %d partitions, want 5", tp.Partitions)
	}
	if s := h.partition("a", 4); len(s.Replicas) != 3 {
		t.Fatalf("new partition has replicas %v, want rf 3", s.Replicas)
	}
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "a", Count: 5}}
	if resp := h.send(cp).(*kmsg.CreatePartitionsResponse); resp.Topics[0].ErrorCode != kerr.InvalidPartitions.Code {
		t.Fatalf("shrinking partition count: error %d", resp.Topics[0].ErrorCode)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	name, missing := "a", "missing"
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &name}, {Topic: &missing}}
	dresp := h.send(del).(*kmsg.DeleteTopicsResponse)
	if dresp.Topics[0].ErrorCode != 0 || dresp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DeleteTopics errors %d, %d", dresp.Topics[0].ErrorCode, dresp.Topics[1].ErrorCode)
	}
	if _, ok := h.c.Image().TopicByName("a"); ok {
		t.Fatal("deleted topic still in the image")
	}
}

func TestHeartbeatExpiryFencesBrokerAndMovesLeadership(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(3)
	h.createTopic("a", 6, 3, nil)
	before := map[int32]metadata.PartitionState{}
	for p := int32(0); p < 6; p++ {
		before[p] = h.partition("a", p)
	}
	// Brokers 1 and 2 keep heartbeating; broker 0 goes silent.
	for elapsed := int64(0); elapsed < 10000; elapsed += 2000 {
		h.advance(2000)
		h.heartbeat(1, epochs[1], false)
		h.heartbeat(2, epochs[2], false)
	}
	if b, _ := h.c.Image().Broker(0); !b.Fenced {
		t.Fatal("broker 0 not fenced after its session expired")
	}
	for _, id := range []int32{1, 2} {
		if b, _ := h.c.Image().Broker(id); b.Fenced {
			t.Fatalf("heartbeating broker %d was fenced", id)
		}
	}
	for p := int32(0); p < 6; p++ {
		old, now := before[p], h.partition("a", p)
		if slices.Contains(now.ISR, 0) || now.Leader == 0 {
			t.Fatalf("partition %d still has fenced broker 0: %+v", p, now)
		}
		if old.Leader == 0 {
			if now.Leader == metadata.NoLeader || now.LeaderEpoch != old.LeaderEpoch+1 {
				t.Fatalf("partition %d led by 0: now %+v, want a new leader in epoch %d", p, now, old.LeaderEpoch+1)
			}
		} else if now.Leader != old.Leader || now.LeaderEpoch != old.LeaderEpoch {
			t.Fatalf("partition %d not led by 0 changed leader: %+v -> %+v", p, old, now)
		}
		if now.PartitionEpoch != old.PartitionEpoch+1 {
			t.Fatalf("partition %d: partition epoch %d, want %d", p, now.PartitionEpoch, old.PartitionEpoch+1)
		}
	}
}

func TestAlterPartitionChecksEpochsAndEligibility(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(3)
	h.createTopic("a", 1, 3, nil)
	s := h.partition("a", 0)
	leader := s.Leader
	others := without(s.Replicas, leader)

	shrunk := h.alterISR("a", 0, leader, epochs[leader], s.LeaderEpoch, s.PartitionEpoch, []int32{leader, others[0]})
	if shrunk.ErrorCode != 0 || shrunk.PartitionEpoch != s.PartitionEpoch+1 || shrunk.LeaderEpoch != s.LeaderEpoch {
		t.Fatalf("ISR shrink: %+v, want partition epoch %d, same leader epoch", shrunk, s.PartitionEpoch+1)
	}
	if got := h.partition("a", 0).ISR; !sameIDs(got, []int32{leader, others[0]}) {
		t.Fatalf("ISR after shrink %v", got)
	}
	cases := []struct {
		name                string
		from                int32
		leaderEpoch, pEpoch int32
		isr                 []int32
		want                int16
	}{
		{"stale partition epoch", leader, s.LeaderEpoch, s.PartitionEpoch, s.Replicas, kerr.InvalidUpdateVersion.Code},
		{"stale leader epoch", leader, s.LeaderEpoch - 1, s.PartitionEpoch + 1, s.Replicas, kerr.FencedLeaderEpoch.Code},
		{"newer epochs than the controller", leader, s.LeaderEpoch + 1, s.PartitionEpoch + 1, s.Replicas, kerr.NotController.Code},
		{"not the leader", others[0], s.LeaderEpoch, s.PartitionEpoch + 1, s.Replicas, kerr.InvalidRequest.Code},
		{"ISR without the leader", leader, s.LeaderEpoch, s.PartitionEpoch + 1, others, kerr.InvalidRequest.Code},
		{"ISR with a non-replica", leader, s.LeaderEpoch, s.PartitionEpoch + 1, []int32{leader, 9}, kerr.InvalidRequest.Code},
	}
	for _, tc := range cases {
		got := h.alterISR("a", 0, tc.from, epochs[tc.from], tc.leaderEpoch, tc.pEpoch, tc.isr)
		if got.ErrorCode != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, got.ErrorCode, tc.want)
		}
	}
	// A fenced broker may not join the ISR (KIP-841).
	fenced := others[1]
	h.send(&kmsg.BrokerHeartbeatRequest{Version: 1, BrokerID: fenced, BrokerEpoch: epochs[fenced], CurrentMetadataOffset: h.c.Image().Offset(), WantFence: true})
	if b, _ := h.c.Image().Broker(fenced); !b.Fenced {
		t.Fatal("WantFence did not fence")
	}
	got := h.alterISR("a", 0, leader, epochs[leader], s.LeaderEpoch, s.PartitionEpoch+1, s.Replicas)
	if got.ErrorCode != kerr.IneligibleReplica.Code {
		t.Fatalf("fenced broker joining the ISR: error %d, want INELIGIBLE_REPLICA", got.ErrorCode)
	}
	// The leader's own broker epoch must match.
	req := &kmsg.AlterPartitionRequest{Version: 3, BrokerID: leader, BrokerEpoch: epochs[leader] + 1000}
	if resp := h.send(req).(*kmsg.AlterPartitionResponse); resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale broker epoch: error %d", resp.ErrorCode)
	}
}

// TestELR walks KIP-966: an ISR shrinking below min.insync.replicas keeps
// the leavers eligible; with an empty ISR the leader comes from the ELR; a
// replica that shut down uncleanly leaves the ELR; unclean election is off
// unless the topic turns it on.
func TestELR(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(3)
	h.createTopic("a", 1, 3, map[string]string{"min.insync.replicas": "2"})
	s := h.partition("a", 0)
	leader := s.Leader
	others := without(s.Replicas, leader)

	// The leader shrinks the ISR to itself: below min ISR, so the two
	// leavers enter the ELR.
	h.alterISR("a", 0, leader, epochs[leader], s.LeaderEpoch, s.PartitionEpoch, []int32{leader})
	s = h.partition("a", 0)
	if !sameIDs(s.ISR, []int32{leader}) || !sameIDs(s.ELR, others) {
		t.Fatalf("after shrinking below min ISR: ISR %v ELR %v, want ISR [%d] ELR %v", s.ISR, s.ELR, leader, others)
	}
	// The leader stops heartbeating: the ISR empties, the leader joins the
	// ELR, and a live ELR member is elected with ISR = {itself}.
	for elapsed := int64(0); elapsed < 10000; elapsed += 2000 {
		h.advance(2000)
		for _, id := range others {
			h.heartbeat(id, epochs[id], false)
		}
	}
	next := h.partition("a", 0)
	if !slices.Contains(others, next.Leader) || !sameIDs(next.ISR, []int32{next.Leader}) {
		t.Fatalf("election from ELR: %+v, want a leader from %v with ISR = {leader}", next, others)
	}
	if next.LeaderEpoch != s.LeaderEpoch+1 {
		t.Fatalf("leader epoch %d, want %d", next.LeaderEpoch, s.LeaderEpoch+1)
	}
	if slices.Contains(next.ELR, next.Leader) || !slices.Contains(next.ELR, leader) {
		t.Fatalf("ELR %v after election: want the old leader %d in, the new leader %d out", next.ELR, leader, next.Leader)
	}
}

// TestELRUncleanShutdownAndUncleanElection: the last ISR member is fenced
// while the only other replica had restarted uncleanly (so it left the ELR):
// with unclean election off the partition stays leaderless; turning it on
// for the topic elects the out-of-sync replica.
func TestELRUncleanShutdownAndUncleanElection(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		h := newHarness(t, DefaultConfig(100))
		epochs := h.startBrokers(2)
		h.createTopic("a", 1, 2, map[string]string{
			"min.insync.replicas": "2", "unclean.leader.election.enable": map[bool]string{false: "false", true: "true"}[unclean],
		})
		s := h.partition("a", 0)
		leader, follower := s.Leader, without(s.Replicas, s.Leader)[0]
		h.alterISR("a", 0, leader, epochs[leader], s.LeaderEpoch, s.PartitionEpoch, []int32{leader})
		if got := h.partition("a", 0).ELR; !sameIDs(got, []int32{follower}) {
			t.Fatalf("ELR %v, want [%d]", got, follower)
		}
		// The follower's process dies and comes back without a clean
		// shutdown: it names no previous epoch, so it leaves the ELR.
		h.advance(9500)
		h.heartbeat(leader, epochs[leader], false)
		if b, _ := h.c.Image().Broker(follower); !b.Fenced {
			t.Fatal("silent follower not fenced")
		}
		newEpoch := h.registerRaw(follower, 2, -1).BrokerEpoch
		h.heartbeat(follower, newEpoch, false)
		if got := h.partition("a", 0).ELR; len(got) != 0 {
			t.Fatalf("ELR %v after an unclean restart, want empty", got)
		}
		// Now the leader goes silent.
		for elapsed := int64(0); elapsed < 10000; elapsed += 2000 {
			h.advance(2000)
			h.heartbeat(follower, newEpoch, false)
		}
		got := h.partition("a", 0)
		if !unclean && got.Leader != metadata.NoLeader {
			t.Fatalf("unclean election off: leader %d, want none (ISR %v ELR %v)", got.Leader, got.ISR, got.ELR)
		}
		if unclean && (got.Leader != follower || !sameIDs(got.ISR, []int32{follower}) || len(got.ELR) != 0) {
			t.Fatalf("unclean election on: %+v, want leader %d alone in ISR, empty ELR", got, follower)
		}
	}
}

func TestControlledShutdownMovesLeadershipFirst(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(3)
	h.createTopic("a", 6, 2, nil)
	h.createTopic("solo", 1, 1, nil)
	soloLeader := h.partition("solo", 0).Leader
	id := soloLeader
	offsetBefore := h.c.Image().Offset()
	resp := h.heartbeatAt(id, epochs[id], offsetBefore, true)
	if resp.ShouldShutdown {
		t.Fatal("told to shut down before applying the records that moved its leadership")
	}
	if b, _ := h.c.Image().Broker(id); !b.InControlledShutdown || b.Fenced {
		t.Fatalf("broker %d after asking to shut down: %+v, want in controlled shutdown, unfenced", id, b)
	}
	h.c.Image().EachPartition(func(tp metadata.TopicPartition, s metadata.PartitionState) {
		if s.Leader == id || slices.Contains(s.ISR, id) {
			t.Fatalf("%s-%d still led by or in sync with the shutting-down broker: %+v", tp.Topic, tp.Partition, s)
		}
	})
	if got := h.partition("solo", 0); got.Leader != metadata.NoLeader {
		t.Fatalf("single-replica partition of the shutting-down broker: leader %d, want none", got.Leader)
	}
	resp = h.heartbeat(id, epochs[id], true)
	if !resp.ShouldShutdown || !resp.IsFenced {
		t.Fatalf("caught-up heartbeat during controlled shutdown: %+v, want shut down now, fenced", resp)
	}
	// It restarts cleanly, naming its previous epoch, and catches up: it
	// leads its single-replica partition again (from the ELR).
	newEpoch := h.registerRaw(id, 2, epochs[id]).BrokerEpoch
	h.heartbeat(id, newEpoch, false)
	if got := h.partition("solo", 0); got.Leader != id {
		t.Fatalf("after a clean restart the only replica should lead again: %+v", got)
	}
}

func TestAllocateProducerIDs(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(2)
	var starts []int64
	for i := range 3 {
		id := int32(i % 2)
		resp := h.send(&kmsg.AllocateProducerIDsRequest{BrokerID: id, BrokerEpoch: epochs[id]}).(*kmsg.AllocateProducerIDsResponse)
		if resp.ErrorCode != 0 || resp.ProducerIDLen != 1000 {
			t.Fatalf("allocate: %+v", resp)
		}
		starts = append(starts, resp.ProducerIDStart)
	}
	if !slices.Equal(starts, []int64{0, 1000, 2000}) {
		t.Fatalf("blocks start at %v, want 0, 1000, 2000", starts)
	}
	if resp := h.send(&kmsg.AllocateProducerIDsRequest{BrokerID: 0, BrokerEpoch: 12345}).(*kmsg.AllocateProducerIDsResponse); resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale epoch: error %d", resp.ErrorCode)
	}
	h.restart()
	resp := h.send(&kmsg.AllocateProducerIDsRequest{BrokerID: 0, BrokerEpoch: epochs[0]}).(*kmsg.AllocateProducerIDsResponse)
	if resp.ProducerIDStart != 3000 {
		t.Fatalf("after a restart the next block starts at %d, want 3000", resp.ProducerIDStart)
	}
}

func TestRestartReplaysLogToTheSameImage(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(3)
	h.createTopic("a", 3, 3, map[string]string{"min.insync.replicas": "2"})
	h.createTopic("b", 2, 2, nil)
	s := h.partition("a", 0)
	h.alterISR("a", 0, s.Leader, epochs[s.Leader], s.LeaderEpoch, s.PartitionEpoch, []int32{s.Leader})
	h.send(&kmsg.AllocateProducerIDsRequest{BrokerID: 1, BrokerEpoch: epochs[1]})
	before := h.c.Image().Clone()
	h.restart()
	// The restarted voter's epoch begins with its leader-change entry.
	if err := before.Apply(before.Offset()+1, &metadata.NoOpRecord{}); err != nil {
		t.Fatal(err)
	}
	if diff := imageDiff(before, h.c.Image()); diff != "" {
		t.Fatalf("image after replay differs (-before +after):\n%s", diff)
	}
	// The restarted controller keeps deciding from the replayed state.
	if rt := h.createTopic("a", 1, 1, nil); rt.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("topic a forgotten after restart: error %d", rt.ErrorCode)
	}
	if rt := h.createTopic("c", 1, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create after restart: error %d", rt.ErrorCode)
	}
}

func TestNotActiveControllerAnswersNotController(t *testing.T) {
	cfg := DefaultConfig(101)
	cfg.Voters = []int32{100, 101}
	h := &harness{t: t, clock: &manualClock{}, disk: memdisk.New(memdisk.Options{}), cfg: cfg}
	c, _ := h.startController() // voter 100 is unreachable: 101 never leads
	h.advance(10_000)
	if c.Active() {
		t.Fatal("a voter without a majority became active")
	}
	var got kmsg.Response
	c.HandleRequest(&kmsg.BrokerHeartbeatRequest{Version: 1}, func(r kmsg.Response) { got = r })
	if got.(*kmsg.BrokerHeartbeatResponse).ErrorCode != kerr.NotController.Code {
		t.Fatal("standby controller did not answer NOT_CONTROLLER")
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "x", NumPartitions: 1, ReplicationFactor: 1}}
	c.HandleRequest(req, func(r kmsg.Response) { got = r })
	if got.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != kerr.NotController.Code {
		t.Fatal("standby controller did not refuse CreateTopics")
	}
}

// TestPreferredLeaderElection: a broker that lost leadership while fenced
// leads its preferred partitions again once it is back in their ISR and the
// imbalance check runs.
func TestPreferredLeaderElection(t *testing.T) {
	cfg := DefaultConfig(100)
	cfg.LeaderImbalanceCheckIntervalMs = 30_000
	h := newHarness(t, cfg)
	epochs := h.startBrokers(3)
	h.createTopic("a", 3, 3, nil)
	var mine int32 = -1
	for p := int32(0); p < 3; p++ {
		if h.partition("a", p).Replicas[0] == 0 {
			mine = p
		}
	}
	if mine < 0 {
		t.Fatal("broker 0 is preferred leader of no partition")
	}
	for elapsed := int64(0); elapsed < 10000; elapsed += 2000 {
		h.advance(2000)
		h.heartbeat(1, epochs[1], false)
		h.heartbeat(2, epochs[2], false)
	}
	moved := h.partition("a", mine)
	if moved.Leader == 0 {
		t.Fatal("fenced broker still leads")
	}
	// Broker 0 restarts cleanly, catches up, and its leader adds it back.
	epochs[0] = h.registerRaw(0, 2, -1).BrokerEpoch
	h.heartbeat(0, epochs[0], false)
	if got := h.partition("a", mine); got.Leader == 0 {
		t.Fatal("leadership moved back before broker 0 rejoined the ISR")
	}
	h.alterISR("a", mine, moved.Leader, epochs[moved.Leader], moved.LeaderEpoch, moved.PartitionEpoch, []int32{0, 1, 2})
	for elapsed := int64(0); elapsed < 30000; elapsed += 2000 {
		h.advance(2000)
		for id := int32(0); id < 3; id++ {
			h.heartbeat(id, epochs[id], false)
		}
	}
	got := h.partition("a", mine)
	if got.Leader != 0 || got.LeaderEpoch != moved.LeaderEpoch+1 {
		t.Fatalf("after the imbalance check: %+v, want broker 0 leading in epoch %d", got, moved.LeaderEpoch+1)
	}
}

// TestLastReplicaStandingAfterUncleanRestart is KIP-966's scenario: with RF
// 3 and min.insync.replicas 2 every replica goes down; the one that comes
// back after an unclean shutdown (it may have lost acknowledged records) is
// not elected, the one that shut down cleanly is.
func TestLastReplicaStandingAfterUncleanRestart(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(3)
	h.createTopic("a", 1, 3, map[string]string{"min.insync.replicas": "2"})
	s := h.partition("a", 0)
	last := s.Leader
	// The ISR shrinks to the leader alone: the HW stops (strict min ISR),
	// the others keep every committed record and enter the ELR.
	h.alterISR("a", 0, last, epochs[last], s.LeaderEpoch, s.PartitionEpoch, []int32{last})
	// Every broker goes silent and is fenced.
	h.advance(10_000)
	got := h.partition("a", 0)
	if got.Leader != metadata.NoLeader || len(got.ISR) != 0 || !sameIDs(got.ELR, []int32{0, 1, 2}) {
		t.Fatalf("all fenced: %+v, want no leader, empty ISR, ELR of all three", got)
	}
	// The last leader comes back after an unclean shutdown: it leaves the
	// ELR and must not lead, although it is the only live replica.
	unclean := h.registerRaw(last, 2, -1).BrokerEpoch
	h.heartbeat(last, unclean, false)
	got = h.partition("a", 0)
	if got.Leader != metadata.NoLeader || slices.Contains(got.ELR, last) {
		t.Fatalf("after the unclean restart of %d: %+v, want no leader and %d out of the ELR", last, got, last)
	}
	// A replica that shut down cleanly comes back: it leads from the ELR.
	clean := without(s.Replicas, last)[0]
	cleanEpoch := h.registerRaw(clean, 2, epochs[clean]).BrokerEpoch
	h.heartbeat(clean, cleanEpoch, false)
	got = h.partition("a", 0)
	if got.Leader != clean || !sameIDs(got.ISR, []int32{clean}) {
		t.Fatalf("after the clean restart of %d: %+v, want it leading with ISR = {%d}", clean, got, clean)
	}
}

// TestOnlyReplicaKilledLeadsAgainAfterRestart: a single-node cluster (the
// controller and the only replica of every partition in one process, as
// `make run`) is killed and restarted. Over the fault budget, but the
// partition must get its leader back (CLARIFICATIONS.md, the fault budget):
// the restarted broker registers as soon as the old session has expired
// (Kafka refuses a new incarnation until then: DUPLICATE_BROKER_REGISTRATION),
// and once it has caught up and is unfenced it leads again, elected from the
// last known ELR although its unclean restart took it out of the ELR.
func TestOnlyReplicaKilledLeadsAgainAfterRestart(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(1)
	h.createTopic("a", 2, 1, nil)
	before := h.partition("a", 0)
	if before.Leader != 0 {
		t.Fatalf("leader %d, want 0", before.Leader)
	}
	h.restart() // kill -9 of the whole process; the broker is gone too
	// The new controller gives every unfenced broker a fresh session, so
	// the new incarnation is refused until it expires.
	if resp := h.registerRaw(0, 2, -1); resp.ErrorCode != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("registration during the old session: error %d, want DUPLICATE_BROKER_REGISTRATION", resp.ErrorCode)
	}
	h.advance(9_500)
	if b, _ := h.c.Image().Broker(0); !b.Fenced {
		t.Fatal("old incarnation not fenced after its session expired")
	}
	resp := h.registerRaw(0, 2, -1) // kill -9: no clean shutdown to name
	if resp.ErrorCode != 0 {
		t.Fatalf("registration after the session expired: error %d", resp.ErrorCode)
	}
	if resp.BrokerEpoch == epochs[0] {
		t.Fatalf("new incarnation kept broker epoch %d", resp.BrokerEpoch)
	}
	got := h.partition("a", 0)
	if got.Leader != metadata.NoLeader || len(got.ISR) != 0 || len(got.ELR) != 0 || !sameIDs(got.LastKnownELR, []int32{0}) {
		t.Fatalf("registered, still fenced: %+v, want no leader, empty ISR and ELR, last known ELR [0]", got)
	}
	if hb := h.heartbeat(0, resp.BrokerEpoch, false); hb.ErrorCode != 0 || hb.IsFenced {
		t.Fatalf("caught-up heartbeat: %+v, want unfenced", hb)
	}
	for p := int32(0); p < 2; p++ {
		got = h.partition("a", p)
		if got.Leader != 0 || !sameIDs(got.ISR, []int32{0}) || len(got.LastKnownELR) != 0 || got.LeaderEpoch <= before.LeaderEpoch {
			t.Fatalf("partition %d after the broker is back: %+v, want leader 0 in a new epoch, ISR [0], last known ELR cleared", p, got)
		}
	}
}

// TestEveryISRMemberKilledLeadsAgain: RF 3, min.insync.replicas 2; every
// replica is killed (kill -9: unclean) and restarted. With ISR and ELR
// empty, the last leader (the last known ELR) leads once it is back; the
// other ELR member does not, nor a replica that fell out of sync before
// (never in the ELR), nor a broker that is not a replica.
func TestEveryISRMemberKilledLeadsAgain(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	epochs := h.startBrokers(4)
	h.createTopic("a", 1, 3, map[string]string{"min.insync.replicas": "2"})
	s := h.partition("a", 0)
	h.advance(10_000) // all four silent: fenced, lowest id first
	got := h.partition("a", 0)
	eligible := got.ELR
	if got.Leader != metadata.NoLeader || len(got.ISR) != 0 || len(eligible) != 2 {
		t.Fatalf("all fenced: %+v, want no leader and the last two ISR members in the ELR", got)
	}
	outOfSync := without(without(s.Replicas, eligible[0]), eligible[1])[0]
	outsider := int32(-1)
	for id := int32(0); id < 4; id++ {
		if !slices.Contains(s.Replicas, id) {
			outsider = id
		}
	}
	newEpochs := map[int32]int64{}
	for _, id := range s.Replicas {
		newEpochs[id] = h.registerRaw(id, 2, -1).BrokerEpoch
	}
	got = h.partition("a", 0)
	if got.Leader != metadata.NoLeader || len(got.ELR) != 0 || len(got.LastKnownELR) != 1 || !slices.Contains(eligible, got.LastKnownELR[0]) {
		t.Fatalf("all restarted uncleanly, fenced: %+v, want no leader, empty ELR, last known ELR one of %v (the last leader)", got, eligible)
	}
	last := got.LastKnownELR[0]
	other := without(eligible, last)[0]
	outsiderEpoch := h.registerRaw(outsider, 2, epochs[outsider]).BrokerEpoch
	h.heartbeat(outsider, outsiderEpoch, false)
	h.heartbeat(outOfSync, newEpochs[outOfSync], false)
	h.heartbeat(other, newEpochs[other], false)
	if got = h.partition("a", 0); got.Leader != metadata.NoLeader {
		t.Fatalf("brokers %d (not a replica), %d (out of sync) and %d (not the last leader) unfenced: leader %d, want none",
			outsider, outOfSync, other, got.Leader)
	}
	h.heartbeat(last, newEpochs[last], false)
	got = h.partition("a", 0)
	if got.Leader != last || !sameIDs(got.ISR, []int32{last}) || len(got.LastKnownELR) != 0 {
		t.Fatalf("replica %d back: %+v, want it leading alone in the ISR, last known ELR cleared", last, got)
	}
}
