package broker

import (
	"fmt"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/group"
	"strand/core/log"
)

// groupCluster is a 3-node cluster whose __consumer_offsets has partitions
// partitions with RF 3. group.initial.rebalance.delay.ms keeps Kafka's
// default, so members joining together form one generation.
func groupCluster(t *testing.T, partitions int) *cluster {
	t.Helper()
	c := newCluster(t, 3, map[string]string{
		"offsets.topic.num.partitions":     fmt.Sprint(partitions),
		"offsets.topic.replication.factor": "3",
	})
	c.waitRegistered()
	return c
}

// findCoordinator sends FindCoordinator v3 for a group to node via.
func (c *cluster) findCoordinator(via int32, groupID string) *kmsg.FindCoordinatorResponse {
	c.t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(3)
	req.CoordinatorKey = groupID
	return c.request(via, req).(*kmsg.FindCoordinatorResponse)
}

// waitCoordinator asks node via until it names a coordinator for groupID.
func (c *cluster) waitCoordinator(via int32, groupID string) int32 {
	c.t.Helper()
	var id int32
	c.waitFor("a coordinator for "+groupID, 30000, func() bool {
		r := c.findCoordinator(via, groupID)
		if r.ErrorCode != 0 && r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			c.t.Fatalf("FindCoordinator %s: %v", groupID, kerr.ErrorForCode(r.ErrorCode))
		}
		id = r.NodeID
		return r.ErrorCode == 0
	})
	return id
}

// waitServing waits until node coord serves groupID: it has applied its
// leadership of the group's partition and loaded it. (FindCoordinator
// answers from the metadata, which may reach the asked node first; clients
// retry NOT_COORDINATOR.)
func (c *cluster) waitServing(coord int32, groupID string) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("node %d serving %s", coord, groupID), 10000, func() bool {
		code := c.request(coord, offsetFetchReq(groupID)).(*kmsg.OffsetFetchResponse).ErrorCode
		return code != kerr.NotCoordinator.Code && code != kerr.CoordinatorLoadInProgress.Code
	})
}

func TestFindCoordinatorAnswersTheOffsetsPartitionLeader(t *testing.T) {
	c := groupCluster(t, 5)
	// The first FindCoordinator creates the topic and cannot name anyone yet.
	if r := c.findCoordinator(2, "first"); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("before __consumer_offsets exists: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(r.ErrorCode))
	}
	c.waitCoordinator(2, "first")
	for _, tn := range c.nodes {
		if cfg := tn.node.parts.topicConfig(offsetsTopic); !cfg.CleanupPolicy.Compact || cfg.CleanupPolicy.Delete {
			t.Fatalf("node %d: __consumer_offsets cleanup.policy %s, want compact", tn.id, cfg.CleanupPolicy)
		}
	}
	c.waitFor("every offsets partition led", 10000, func() bool {
		for p := range int32(5) {
			if c.leaderOf(offsetsTopic, p) < 0 {
				return false
			}
		}
		return true
	})
	groups := []string{"first", "orders", "billing", "g-3", "audit", "x", ""}
	seen := map[int32]bool{}
	for _, g := range groups {
		want := c.leaderOf(offsetsTopic, group.PartitionFor(g, 5))
		seen[want] = true
		for via := int32(1); via <= 3; via++ {
			r := c.findCoordinator(via, g)
			if r.ErrorCode != 0 || r.NodeID != want || r.Port != 9000+2*want || r.Host != "127.0.0.1" {
				t.Fatalf("group %q via %d: node %d %s:%d (%v), want node %d port %d", g, via, r.NodeID, r.Host, r.Port, kerr.ErrorForCode(r.ErrorCode), want, 9000+2*want)
			}
		}
	}
	if len(seen) < 2 {
		t.Fatalf("every group hashed to partitions led by one node (%v): the test does not tell leaders apart", seen)
	}
	// v4 batches keys; transaction coordinators are not served.
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(4)
	req.CoordinatorKeys = groups
	resp := c.request(3, req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != len(groups) {
		t.Fatalf("v4: %d answers for %d keys", len(resp.Coordinators), len(groups))
	}
	for i, co := range resp.Coordinators {
		want := c.leaderOf(offsetsTopic, group.PartitionFor(groups[i], 5))
		if co.Key != groups[i] || co.ErrorCode != 0 || co.NodeID != want {
			t.Fatalf("v4 key %d: %q node %d (%v), want %q node %d", i, co.Key, co.NodeID, kerr.ErrorForCode(co.ErrorCode), groups[i], want)
		}
	}
	req.CoordinatorType = 1
	resp = c.request(3, req).(*kmsg.FindCoordinatorResponse)
	for _, co := range resp.Coordinators {
		if co.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("transaction key %q: %v, want INVALID_REQUEST (no transactions)", co.Key, kerr.ErrorForCode(co.ErrorCode))
		}
	}
	// Clients cannot write to it.
	if r := c.produce(1, offsetsTopic, 0, -1, recordBatch("forged")); r.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(r.ErrorCode))
	}
	// Metadata marks the topic internal.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(12)
	internal := false
	for _, mt := range c.request(1, mreq).(*kmsg.MetadataResponse).Topics {
		if mt.Topic != nil && *mt.Topic == offsetsTopic {
			internal = mt.IsInternal
		}
	}
	if !internal {
		t.Fatal("Metadata: __consumer_offsets not marked internal")
	}
}

func TestOffsetsTopicNeedsItsReplicationFactor(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"offsets.topic.num.partitions": "2"})
	c.waitRegistered()
	for range 5 {
		if r := c.findCoordinator(1, "g"); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("one broker, offsets.topic.replication.factor 3: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(r.ErrorCode))
		}
		c.run(1000)
	}
	if _, ok := c.nodes[1].node.meta.image.TopicByName(offsetsTopic); ok {
		t.Fatal("__consumer_offsets created with fewer brokers than its replication factor")
	}
}

// member is one simulated consumer-group member.
type member struct {
	id         string
	generation int32
	assigned   []int32
}

func joinReq(groupID, memberID string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(9)
	req.Group, req.MemberID, req.ProtocolType = groupID, memberID, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 60000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"events"}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	return req
}

// rangeAssign is the range assignor over one topic: members sorted by id,
// consecutive partitions each, the first ones one more.
func rangeAssign(memberIDs []string, partitions int32) map[string][]int32 {
	sorted := append([]string{}, memberIDs...)
	sort.Strings(sorted)
	out := map[string][]int32{}
	per, extra := partitions/int32(len(sorted)), partitions%int32(len(sorted))
	next := int32(0)
	for i, id := range sorted {
		n := per
		if int32(i) < extra {
			n++
		}
		for range n {
			out[id] = append(out[id], next)
			next++
		}
	}
	return out
}

// joinAndSync forms a generation of three members through coordinator
// coord: KIP-394 member ids, one join phase, the leader's range
// assignment through SyncGroup.
func (c *cluster) joinAndSync(coord int32, groupID string) []*member {
	c.t.Helper()
	members := make([]*member, 3)
	for i := range members {
		r := c.request(coord, joinReq(groupID, "")).(*kmsg.JoinGroupResponse)
		if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
			c.t.Fatalf("first join: %v, want MEMBER_ID_REQUIRED with an id", kerr.ErrorForCode(r.ErrorCode))
		}
		members[i] = &member{id: r.MemberID}
	}
	var waits []func() (kmsg.Response, error)
	for _, m := range members {
		waits = append(waits, c.send(coord, joinReq(groupID, m.id)))
	}
	var leader *kmsg.JoinGroupResponse
	for i, w := range waits {
		resp, err := w()
		if err != nil {
			c.t.Fatal(err)
		}
		r := resp.(*kmsg.JoinGroupResponse)
		if r.ErrorCode != 0 || r.MemberID != members[i].id || r.Protocol == nil || *r.Protocol != "range" {
			c.t.Fatalf("join of %s: %v member %s", members[i].id, kerr.ErrorForCode(r.ErrorCode), r.MemberID)
		}
		members[i].generation = r.Generation
		if r.LeaderID == r.MemberID {
			leader = r
		}
	}
	if leader == nil || len(leader.Members) != 3 {
		c.t.Fatalf("no leader with the three members: %+v", leader)
	}
	var ids []string
	for _, m := range leader.Members {
		ids = append(ids, m.MemberID)
	}
	plan := rangeAssign(ids, 6)
	waits = waits[:0]
	for _, m := range members {
		req := kmsg.NewPtrSyncGroupRequest()
		req.SetVersion(5)
		req.Group, req.Generation, req.MemberID = groupID, m.generation, m.id
		pt, pn := "consumer", "range"
		req.ProtocolType, req.Protocol = &pt, &pn
		if m.id == leader.LeaderID {
			for _, id := range ids {
				a := kmsg.NewConsumerMemberAssignment()
				at := kmsg.NewConsumerMemberAssignmentTopic()
				at.Topic, at.Partitions = "events", plan[id]
				a.Topics = append(a.Topics, at)
				ga := kmsg.NewSyncGroupRequestGroupAssignment()
				ga.MemberID, ga.MemberAssignment = id, a.AppendTo(nil)
				req.GroupAssignment = append(req.GroupAssignment, ga)
			}
		}
		waits = append(waits, c.send(coord, req))
	}
	for i, w := range waits {
		resp, err := w()
		if err != nil {
			c.t.Fatal(err)
		}
		r := resp.(*kmsg.SyncGroupResponse)
		if r.ErrorCode != 0 {
			c.t.Fatalf("sync of %s: %v", members[i].id, kerr.ErrorForCode(r.ErrorCode))
		}
		a := kmsg.NewConsumerMemberAssignment()
		if err := a.ReadFrom(r.MemberAssignment); err != nil || len(a.Topics) != 1 || a.Topics[0].Topic != "events" {
			c.t.Fatalf("assignment of %s: %v %+v", members[i].id, err, a)
		}
		members[i].assigned = a.Topics[0].Partitions
	}
	return members
}

func heartbeatReq(groupID string, m *member) *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(4)
	req.Group, req.Generation, req.MemberID = groupID, m.generation, m.id
	return req
}

func commitReq(groupID string, m *member, offsetOf func(int32) int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation, req.MemberID = groupID, m.generation, m.id
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "events"
	for _, p := range m.assigned {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offsetOf(p)
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

func offsetFetchReq(groupID string) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group = groupID
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic, t.Partitions = "events", []int32{0, 1, 2, 3, 4, 5}
	req.Topics = append(req.Topics, t)
	return req
}

// fetchedOffsets returns partition → committed offset from an OffsetFetch
// v7 answer, failing on any error.
func fetchedOffsets(t *testing.T, r *kmsg.OffsetFetchResponse) map[int32]int64 {
	t.Helper()
	if r.ErrorCode != 0 {
		t.Fatalf("OffsetFetch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	out := map[int32]int64{}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("OffsetFetch %s-%d: %v", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

func TestConsumerGroupCommitsSurviveCoordinatorFailover(t *testing.T) {
	const offsetsPartitions = 3
	c := groupCluster(t, offsetsPartitions)
	c.createTopic(1, "events", 6, 3)
	c.waitCoordinator(1, "probe")
	// A group whose coordinator is not node 1, so that crashing the
	// coordinator leaves the controller running.
	groupID := ""
	for i := 0; groupID == ""; i++ {
		g := fmt.Sprint("group-", i)
		if c.waitCoordinator(1, g) != 1 {
			groupID = g
		}
	}
	coord := c.waitCoordinator(2, groupID)
	index := group.PartitionFor(groupID, offsetsPartitions)
	if leader := c.leaderOf(offsetsTopic, index); leader != coord {
		t.Fatalf("coordinator %d, but __consumer_offsets-%d is led by %d", coord, index, leader)
	}

	c.waitServing(coord, groupID)
	members := c.joinAndSync(coord, groupID)
	owner := map[int32]string{}
	for _, m := range members {
		if len(m.assigned) != 2 {
			t.Fatalf("member %s assigned %v, want 2 partitions", m.id, m.assigned)
		}
		for _, p := range m.assigned {
			if prev, dup := owner[p]; dup {
				t.Fatalf("partition %d assigned to %s and %s", p, prev, m.id)
			}
			owner[p] = m.id
		}
	}
	if len(owner) != 6 {
		t.Fatalf("assigned partitions %v, want all 6", owner)
	}
	for _, m := range members {
		if r := c.request(coord, heartbeatReq(groupID, m)).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	committed := func(p int32) int64 { return 1000 + 10*int64(p) }
	for _, m := range members {
		r := c.request(coord, commitReq(groupID, m, committed)).(*kmsg.OffsetCommitResponse)
		for _, p := range r.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("commit %d by %s: %v", p.Partition, m.id, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	// A commit with a stale generation is refused and changes nothing.
	stale := *members[0]
	stale.generation--
	r := c.request(coord, commitReq(groupID, &stale, func(int32) int64 { return 1 })).(*kmsg.OffsetCommitResponse)
	if code := r.Topics[0].Partitions[0].ErrorCode; code != kerr.IllegalGeneration.Code {
		t.Fatalf("commit with generation %d: %v, want ILLEGAL_GENERATION", stale.generation, kerr.ErrorForCode(code))
	}
	got := fetchedOffsets(t, c.request(coord, offsetFetchReq(groupID)).(*kmsg.OffsetFetchResponse))
	for p := range int32(6) {
		if got[p] != committed(p) {
			t.Fatalf("offset of partition %d: %d, want %d", p, got[p], committed(p))
		}
	}
	// A node that is not the coordinator refuses the group.
	other := coord%3 + 1
	if r := c.request(other, heartbeatReq(groupID, members[0])).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat on node %d: %v, want NOT_COORDINATOR", other, kerr.ErrorForCode(r.ErrorCode))
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(5)
	describe.Groups = []string{groupID}
	d := c.request(coord, describe).(*kmsg.DescribeGroupsResponse)
	if len(d.Groups) != 1 || d.Groups[0].ErrorCode != 0 || d.Groups[0].State != "Stable" || len(d.Groups[0].Members) != 3 {
		t.Fatalf("DescribeGroups: %+v", d.Groups)
	}

	// Crash the coordinator's broker. Another replica of the partition
	// takes over and loads the group from the log: meanwhile it answers
	// COORDINATOR_LOAD_IN_PROGRESS.
	c.nodes[coord].proc.Crash()
	var successor int32
	var loading *coordinatorSlot
	deadline := c.s.NowNs() + 30e9
	for loading == nil && c.s.NowNs() < deadline && c.s.Step() {
		for id, tn := range c.nodes {
			if id == coord {
				continue
			}
			if s := tn.node.groups.coordinators[index]; s != nil {
				successor, loading = id, s
			}
		}
	}
	if loading == nil {
		t.Fatalf("no broker took over __consumer_offsets-%d", index)
	}
	var during kmsg.Response
	loading.c.Handle(offsetFetchReq(groupID), group.Client{}, func(r kmsg.Response) { during = r })
	if during == nil || during.(*kmsg.OffsetFetchResponse).ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("OffsetFetch while node %d loads: %+v, want COORDINATOR_LOAD_IN_PROGRESS", successor, during)
	}
	if got := c.waitCoordinator(successor, groupID); got != successor {
		t.Fatalf("after the crash FindCoordinator names %d, want %d", got, successor)
	}
	var after map[int32]int64
	c.waitFor("the new coordinator answers", 10000, func() bool {
		r := c.request(successor, offsetFetchReq(groupID)).(*kmsg.OffsetFetchResponse)
		if r.ErrorCode == kerr.CoordinatorLoadInProgress.Code {
			return false
		}
		after = fetchedOffsets(t, r)
		return true
	})
	for p := range int32(6) {
		if after[p] != committed(p) {
			t.Fatalf("after failover, offset of partition %d: %d, want %d", p, after[p], committed(p))
		}
	}
	// The group's membership was loaded too: its members keep heartbeating
	// in their generation.
	for _, m := range members {
		if r := c.request(successor, heartbeatReq(groupID, m)).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s after failover: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// ListGroups on the new coordinator lists it; OffsetFetch v8 answers
	// several groups, each from its own coordinator.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(4)
	lr := c.request(successor, lg).(*kmsg.ListGroupsResponse)
	listed := false
	for _, g := range lr.Groups {
		listed = listed || g.Group == groupID
	}
	if lr.ErrorCode != 0 || !listed {
		t.Fatalf("ListGroups on %d: %v %+v", successor, kerr.ErrorForCode(lr.ErrorCode), lr.Groups)
	}
	elsewhere := ""
	for i := 0; elsewhere == ""; i++ {
		if g := fmt.Sprint("other-", i); group.PartitionFor(g, offsetsPartitions) != index && c.leaderOf(offsetsTopic, group.PartitionFor(g, offsetsPartitions)) != successor {
			elsewhere = g
		}
	}
	f8 := kmsg.NewPtrOffsetFetchRequest()
	f8.SetVersion(8)
	for _, g := range []string{elsewhere, groupID} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		f8.Groups = append(f8.Groups, rg)
	}
	fr := c.request(successor, f8).(*kmsg.OffsetFetchResponse)
	if len(fr.Groups) != 2 || fr.Groups[0].Group != elsewhere || fr.Groups[0].ErrorCode != kerr.NotCoordinator.Code ||
		fr.Groups[1].Group != groupID || fr.Groups[1].ErrorCode != 0 || len(fr.Groups[1].Topics) != 1 || len(fr.Groups[1].Topics[0].Partitions) != 6 {
		t.Fatalf("OffsetFetch v8 of %q and %q: %+v", elsewhere, groupID, fr.Groups)
	}
}

func TestOffsetsReloadAfterRestartWithOneReplica(t *testing.T) {
	c := newCluster(t, 3, map[string]string{
		"offsets.topic.num.partitions":     "3",
		"offsets.topic.replication.factor": "1",
	})
	c.waitRegistered()
	c.createTopic(1, "events", 6, 1)
	// A group on a broker other than the controller's node, so that the
	// restart leaves the controller running.
	groupID := ""
	for i := 0; groupID == ""; i++ {
		if g := fmt.Sprint("simple-", i); c.waitCoordinator(1, g) != 1 {
			groupID = g
		}
	}
	coord := c.waitCoordinator(1, groupID)
	// A simple consumer commits without joining: generation -1, no member.
	simple := &member{generation: -1, assigned: []int32{0, 3, 5}}
	r := c.request(coord, commitReq(groupID, simple, func(p int32) int64 { return 7 * int64(p+1) })).(*kmsg.OffsetCommitResponse)
	for _, p := range r.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit of %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	tn := c.nodes[coord]
	tn.proc.Crash()
	c.run(1000)
	tn.proc.Restart()
	c.start(tn)
	// The only replica comes back and leads again (last known ELR): it
	// loads the partition, with nobody else to wait for.
	var got map[int32]int64
	c.waitFor("the restarted coordinator answers", 60000, func() bool {
		fc := c.findCoordinator(1, groupID)
		if fc.ErrorCode != 0 || fc.NodeID != coord {
			return false
		}
		r := c.request(coord, offsetFetchReq(groupID)).(*kmsg.OffsetFetchResponse)
		if r.ErrorCode == kerr.CoordinatorLoadInProgress.Code || r.ErrorCode == kerr.NotCoordinator.Code {
			return false
		}
		got = fetchedOffsets(t, r)
		return true
	})
	want := map[int32]int64{0: 7, 1: -1, 2: -1, 3: 28, 4: -1, 5: 42}
	for p, o := range want {
		if got[p] != o {
			t.Fatalf("after restart, partition %d at %d, want %d (all: %v)", p, got[p], o, got)
		}
	}
}

func TestCompactedTopicIsCleanedOnTheCleanerTimer(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "kv", 1, 1
	for _, kv := range [][2]string{{"cleanup.policy", "compact"}, {"segment.ms", "100"}} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		v := kv[1]
		cfg.Name, cfg.Value = kv[0], &v
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	if code := c.request(1, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create kv: %v", kerr.ErrorForCode(code))
	}
	c.waitFor("kv hosted", 10000, func() bool { return c.nodes[1].node.parts.partitions[partitionKey{"kv", 0}] != nil })
	// 30 batches over 3 keys, each batch in its own segment (segment.ms).
	const rounds = 30
	for i := range rounds {
		key := fmt.Sprint("key-", i%3)
		b := batch.Build(batch.BuildSpec{FirstTimestamp: c.nodes[1].clock.WallMs(), Records: []batch.Record{{Key: []byte(key), Value: []byte(fmt.Sprint(i))}}})
		if r := c.produce(1, "kv", 0, -1, b); r.ErrorCode != 0 {
			t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
		c.run(150)
	}
	p := c.nodes[1].node.parts.partitions[partitionKey{"kv", 0}]
	if p.log.CleanerPoint() != 0 {
		t.Fatalf("cleaner point %d before the cleaner ran", p.log.CleanerPoint())
	}
	c.waitFor("the cleaner", 3*logCleanerBackoffMs, func() bool { return p.log.CleanerPoint() > 0 && !p.log.Cleaning() })
	res, err := p.log.Read(p.log.LogStartOffset(), 1<<20, p.log.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := log.CopyRegions(res.Regions)
	if err != nil {
		t.Fatal(err)
	}
	latest := map[string]string{}
	count := 0
	for _, b := range splitBatches(data) {
		recs, err := group.DecodeBatch(b) // any uncompressed v2 batch
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			latest[string(r.Key)] = string(r.Value)
			count++
		}
	}
	if count >= rounds {
		t.Fatalf("after cleaning, %d records of %d remain", count, rounds)
	}
	for k := range 3 {
		want := fmt.Sprint(rounds - 3 + k)
		if got := latest[fmt.Sprint("key-", k)]; got != want {
			t.Fatalf("key-%d reads %q after cleaning, want %q", k, got, want)
		}
	}
}

func TestCommitNeedsAcksAllReplication(t *testing.T) {
	c := newCluster(t, 3, map[string]string{
		"offsets.topic.num.partitions":     "3",
		"offsets.topic.replication.factor": "3",
		"min.insync.replicas":              "3",
	})
	c.waitRegistered()
	c.createTopic(1, "events", 6, 3)
	groupID := ""
	for i := 0; groupID == ""; i++ {
		if g := fmt.Sprint("acks-", i); c.waitCoordinator(1, g) != 1 {
			groupID = g
		}
	}
	coord := c.waitCoordinator(1, groupID)
	c.waitServing(coord, groupID)
	simple := &member{generation: -1, assigned: []int32{2}}
	commit := func(offset int64) int16 {
		r := c.request(coord, commitReq(groupID, simple, func(int32) int64 { return offset })).(*kmsg.OffsetCommitResponse)
		return r.Topics[0].Partitions[0].ErrorCode
	}
	fetched := func() int64 {
		return fetchedOffsets(t, c.request(coord, offsetFetchReq(groupID)).(*kmsg.OffsetFetchResponse))[2]
	}
	if code := commit(10); code != 0 {
		t.Fatalf("commit with the full ISR: %v", kerr.ErrorForCode(code))
	}
	// With a follower of the offsets partition down, acks=all cannot be
	// met (min.insync.replicas 3): the commit fails and is not visible.
	victim := 6 - 1 - coord
	c.nodes[victim].proc.Crash()
	c.waitFor("commit refused", 40000, func() bool {
		code := commit(20)
		if code != 0 && code != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("commit below min.insync.replicas: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
		}
		return code == kerr.CoordinatorNotAvailable.Code
	})
	if got := fetched(); got != 10 {
		t.Fatalf("after refused commits, offset %d, want 10", got)
	}
	tn := c.nodes[victim]
	tn.proc.Restart()
	c.start(tn)
	c.waitFor("commit accepted again", 60000, func() bool { return commit(30) == 0 })
	if got := fetched(); got != 30 {
		t.Fatalf("after the follower's return, offset %d, want 30", got)
	}
}

func TestRequestsNamingManyGroupsAreMergedAcrossCoordinators(t *testing.T) {
	const offsetsPartitions = 6
	c := groupCluster(t, offsetsPartitions)
	c.createTopic(1, "events", 6, 3)
	c.waitCoordinator(1, "probe")
	c.waitFor("every offsets partition led", 10000, func() bool {
		for p := range int32(offsetsPartitions) {
			if c.leaderOf(offsetsTopic, p) < 0 {
				return false
			}
		}
		return true
	})
	// Two groups in different partitions led by the same node, and one
	// led elsewhere.
	var a, b, elsewhere string
	var host int32
	for i := 0; a == "" || b == "" || elsewhere == ""; i++ {
		g := fmt.Sprint("many-", i)
		p := group.PartitionFor(g, offsetsPartitions)
		leader := c.leaderOf(offsetsTopic, p)
		switch {
		case a == "":
			a, host = g, leader
		case b == "" && leader == host && p != group.PartitionFor(a, offsetsPartitions):
			b = g
		case elsewhere == "" && leader != host:
			elsewhere = g
		}
	}
	for _, g := range []string{a, b} {
		c.waitServing(host, g)
		simple := &member{generation: -1, assigned: []int32{1}}
		r := c.request(host, commitReq(g, simple, func(int32) int64 { return 5 })).(*kmsg.OffsetCommitResponse)
		if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit for %s: %v", g, kerr.ErrorForCode(code))
		}
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(4)
	lr := c.request(host, lg).(*kmsg.ListGroupsResponse)
	listed := map[string]string{}
	for _, g := range lr.Groups {
		listed[g.Group] = g.GroupState
	}
	if lr.ErrorCode != 0 || len(listed) != 2 || listed[a] != "Empty" || listed[b] != "Empty" {
		t.Fatalf("ListGroups on node %d: %v %v, want %s and %s Empty", host, kerr.ErrorForCode(lr.ErrorCode), listed, a, b)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(5)
	dg.Groups = []string{a, elsewhere, b}
	dr := c.request(host, dg).(*kmsg.DescribeGroupsResponse)
	if len(dr.Groups) != 3 {
		t.Fatalf("DescribeGroups of 3: %d answers", len(dr.Groups))
	}
	wantCodes := []int16{0, kerr.NotCoordinator.Code, 0}
	for i, g := range dr.Groups {
		if g.Group != dg.Groups[i] || g.ErrorCode != wantCodes[i] || (g.ErrorCode == 0 && g.State != "Empty") {
			t.Fatalf("DescribeGroups answer %d: %q %v %q, want %q %v", i, g.Group, kerr.ErrorForCode(g.ErrorCode), g.State, dg.Groups[i], kerr.ErrorForCode(wantCodes[i]))
		}
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.SetVersion(2)
	del.Groups = []string{elsewhere, b}
	delr := c.request(host, del).(*kmsg.DeleteGroupsResponse)
	if len(delr.Groups) != 2 || delr.Groups[0].Group != elsewhere || delr.Groups[0].ErrorCode != kerr.NotCoordinator.Code ||
		delr.Groups[1].Group != b || delr.Groups[1].ErrorCode != 0 {
		t.Fatalf("DeleteGroups of %q and %q: %+v", elsewhere, b, delr.Groups)
	}
	if got := fetchedOffsets(t, c.request(host, offsetFetchReq(b)).(*kmsg.OffsetFetchResponse))[1]; got != -1 {
		t.Fatalf("deleted group %s still has offset %d", b, got)
	}
	if got := fetchedOffsets(t, c.request(host, offsetFetchReq(a)).(*kmsg.OffsetFetchResponse))[1]; got != 5 {
		t.Fatalf("group %s offset %d after deleting %s, want 5", a, got, b)
	}
}

func TestControlledShutdownMovesTheCoordinator(t *testing.T) {
	const offsetsPartitions = 3
	c := groupCluster(t, offsetsPartitions)
	c.createTopic(1, "events", 6, 3)
	groupID := ""
	for i := 0; groupID == ""; i++ {
		if g := fmt.Sprint("moving-", i); c.waitCoordinator(1, g) != 1 {
			groupID = g
		}
	}
	coord := c.waitCoordinator(1, groupID)
	c.waitServing(coord, groupID)
	simple := &member{generation: -1, assigned: []int32{4}}
	r := c.request(coord, commitReq(groupID, simple, func(int32) int64 { return 77 })).(*kmsg.OffsetCommitResponse)
	if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	stopped := false
	c.nodes[coord].node.BeginShutdown(func() { stopped = true })
	c.waitFor("controlled shutdown", 30000, func() bool { return stopped })
	// Leadership moved while the process still runs: its coordinator is
	// unloaded and answers NOT_COORDINATOR; the new leader has the offset.
	index := group.PartitionFor(groupID, offsetsPartitions)
	if s := c.nodes[coord].node.groups.coordinators[index]; s != nil {
		t.Fatalf("node %d still hosts the coordinator of partition %d after shutting down", coord, index)
	}
	if code := c.request(coord, offsetFetchReq(groupID)).(*kmsg.OffsetFetchResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("OffsetFetch on the shut-down node: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	next := c.leaderOf(offsetsTopic, index)
	if next == coord || next < 0 {
		t.Fatalf("offsets partition %d led by %d after %d shut down", index, next, coord)
	}
	c.waitServing(next, groupID)
	if got := fetchedOffsets(t, c.request(next, offsetFetchReq(groupID)).(*kmsg.OffsetFetchResponse))[4]; got != 77 {
		t.Fatalf("offset on the new coordinator %d: %d, want 77", next, got)
	}
}

// TestPlantedGroupDoubleAssignReachesTheCoordinator checks that the
// planted bug travels from the node's Config to its coordinators: with
// acks=all impossible, SyncGroup must fail (the assignment is not
// persisted), and with group-double-assign it answers anyway.
func TestPlantedGroupDoubleAssignReachesTheCoordinator(t *testing.T) {
	for _, planted := range []bool{false, true} {
		t.Run(fmt.Sprint("planted=", planted), func(t *testing.T) {
			c := newCluster(t, 3, map[string]string{
				"offsets.topic.num.partitions":     "3",
				"offsets.topic.replication.factor": "3",
				"min.insync.replicas":              "3",
			})
			// Planted before any coordinator exists (they are created on
			// the first FindCoordinator), and kept for restarts.
			for _, tn := range c.nodes {
				tn.cfg.Bugs.Group.GroupDoubleAssign = planted
				tn.node.cfg.Bugs.Group.GroupDoubleAssign = planted
			}
			c.waitRegistered()
			c.createTopic(1, "events", 6, 3)
			groupID := ""
			for i := 0; groupID == ""; i++ {
				if g := fmt.Sprint("bug-", i); c.waitCoordinator(1, g) != 1 {
					groupID = g
				}
			}
			coord := c.waitCoordinator(1, groupID)
			c.waitServing(coord, groupID)
			c.nodes[6-1-coord].proc.Crash()
			simple := &member{generation: -1, assigned: []int32{0}}
			c.waitFor("appends refused", 40000, func() bool {
				r := c.request(coord, commitReq(groupID, simple, func(int32) int64 { return 1 })).(*kmsg.OffsetCommitResponse)
				return r.Topics[0].Partitions[0].ErrorCode == kerr.CoordinatorNotAvailable.Code
			})
			first := c.request(coord, joinReq(groupID, "")).(*kmsg.JoinGroupResponse)
			join := c.request(coord, joinReq(groupID, first.MemberID)).(*kmsg.JoinGroupResponse)
			if join.ErrorCode != 0 || join.LeaderID != join.MemberID {
				t.Fatalf("join: %v, leader %q member %q", kerr.ErrorForCode(join.ErrorCode), join.LeaderID, join.MemberID)
			}
			sync := kmsg.NewPtrSyncGroupRequest()
			sync.SetVersion(5)
			sync.Group, sync.Generation, sync.MemberID = groupID, join.Generation, join.MemberID
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = join.MemberID, []byte("all of it")
			sync.GroupAssignment = append(sync.GroupAssignment, ga)
			code := c.request(coord, sync).(*kmsg.SyncGroupResponse).ErrorCode
			if planted && code != 0 {
				t.Fatalf("SyncGroup with group-double-assign planted: %v, want an answer before persisting", kerr.ErrorForCode(code))
			}
			if !planted && code == 0 {
				t.Fatal("SyncGroup answered although its assignment could not be persisted")
			}
		})
	}
}
