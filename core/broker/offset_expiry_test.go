package broker

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/group"
)

// offsetsTombstones lists the tombstones in the first records of
// __consumer_offsets partition index on node id, each as "offset
// group/topic/partition" or "group group".
func (c *cluster) offsetsTombstones(id, index int32) []string {
	c.t.Helper()
	var out []string
	for next := int64(0); ; {
		fp := c.fetch(id, offsetsTopic, index, next)
		if fp.ErrorCode != 0 {
			c.t.Fatalf("fetch of %s-%d: %v", offsetsTopic, index, kerr.ErrorForCode(fp.ErrorCode))
		}
		batches := splitBatches(fp.RecordBatches)
		if len(batches) == 0 {
			return out
		}
		for _, b := range batches {
			recs, err := group.DecodeBatch(b)
			if err != nil {
				c.t.Fatal(err)
			}
			for _, r := range recs {
				if r.Value == nil {
					out = append(out, describeOffsetsKey(c.t, r.Key))
				}
			}
			h, err := batch.Verify(b)
			if err != nil {
				c.t.Fatal(err)
			}
			next = h.NextOffset()
		}
	}
}

// describeOffsetsKey names an OffsetCommitKey or GroupMetadataKey.
func describeOffsetsKey(t *testing.T, key []byte) string {
	t.Helper()
	str := func(b []byte) (string, []byte) {
		n := int(binary.BigEndian.Uint16(b))
		return string(b[2 : 2+n]), b[2+n:]
	}
	version := binary.BigEndian.Uint16(key)
	g, rest := str(key[2:])
	switch version {
	case 0, 1:
		topic, rest := str(rest)
		return fmt.Sprintf("offset %s/%s/%d", g, topic, binary.BigEndian.Uint32(rest))
	case 2:
		return "group " + g
	}
	t.Fatalf("__consumer_offsets key version %d", version)
	return ""
}

func listedGroups(t *testing.T, r *kmsg.ListGroupsResponse) []string {
	t.Helper()
	if r.ErrorCode != 0 {
		t.Fatalf("ListGroups: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	var out []string
	for _, g := range r.Groups {
		out = append(out, g.Group)
	}
	slices.Sort(out)
	return out
}

// TestCommittedOffsetsExpireAfterTheGroupEmpties runs KIP-211's expiry on
// a 3-node cluster with offsets.retention.minutes=1: a group whose members
// all left loses its offsets (and itself) a minute later, written as
// tombstones, so the next coordinator after a crash agrees; a group whose
// members stay keeps its offsets.
func TestCommittedOffsetsExpireAfterTheGroupEmpties(t *testing.T) {
	const offsetsPartitions = 3
	const retentionMs = 60000
	c := newCluster(t, 3, map[string]string{
		"offsets.topic.num.partitions":        fmt.Sprint(offsetsPartitions),
		"offsets.topic.replication.factor":    "3",
		"offsets.retention.minutes":           "1",
		"offsets.retention.check.interval.ms": "1000",
	})
	c.waitRegistered()
	c.createTopic(1, "events", 6, 3)
	c.waitCoordinator(1, "probe")
	// Two groups on one coordinator that is not node 1, so that crashing
	// it leaves the controller running.
	leaving := ""
	for i := 0; leaving == ""; i++ {
		if g := fmt.Sprint("leaving-", i); c.waitCoordinator(1, g) != 1 {
			leaving = g
		}
	}
	index := group.PartitionFor(leaving, offsetsPartitions)
	staying := ""
	for i := 0; staying == ""; i++ {
		if g := fmt.Sprint("staying-", i); group.PartitionFor(g, offsetsPartitions) == index {
			staying = g
		}
	}
	coord := c.waitCoordinator(1, leaving)
	c.waitServing(coord, leaving)

	committed := func(p int32) int64 { return 500 + int64(p) }
	commitAll := func(groupID string, members []*member) {
		for _, m := range members {
			r := c.request(coord, commitReq(groupID, m, committed)).(*kmsg.OffsetCommitResponse)
			for _, p := range r.Topics[0].Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("commit %s %d: %v", groupID, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	}
	gone := c.joinAndSync(coord, leaving)
	commitAll(leaving, gone)
	kept := c.joinAndSync(coord, staying)
	commitAll(staying, kept)

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.SetVersion(3)
	leave.Group = leaving
	for _, m := range gone {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.id
		leave.Members = append(leave.Members, lm)
	}
	if r := c.request(coord, leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	leftNs := c.s.NowNs()

	offsetsOf := func(node int32, groupID string) map[int32]int64 {
		return fetchedOffsets(t, c.request(node, offsetFetchReq(groupID)).(*kmsg.OffsetFetchResponse))
	}
	// The staying members heartbeat (every 3 s, sessions of 30 s) while
	// simulated time passes the retention.
	heartbeatUntil := func(node int32, untilNs int64) {
		for c.s.NowNs() < untilNs {
			c.run(min(3000, (untilNs-c.s.NowNs())/1e6+1))
			for _, m := range kept {
				if r := c.request(node, heartbeatReq(staying, m)).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
					t.Fatalf("heartbeat of %s: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
				}
			}
		}
	}
	heartbeatUntil(coord, leftNs+(retentionMs-2000)*1e6)
	if got := offsetsOf(coord, leaving); got[0] != committed(0) || got[5] != committed(5) {
		t.Fatalf("2 s before the retention since the group emptied: %v", got)
	}
	heartbeatUntil(coord, leftNs+(retentionMs+3000)*1e6)
	for _, groupID := range []string{leaving, staying} {
		want := committed
		if groupID == leaving {
			want = func(int32) int64 { return -1 }
		}
		got := offsetsOf(coord, groupID)
		for p := range int32(6) {
			if got[p] != want(p) {
				t.Fatalf("after the retention, %s partition %d at %d, want %d", groupID, p, got[p], want(p))
			}
		}
	}
	if got := listedGroups(t, c.request(coord, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)); !slices.Equal(got, []string{staying}) {
		t.Fatalf("groups after expiry: %v, want only %s", got, staying)
	}

	// Tombstones for the six offsets and the group.
	var want []string
	for p := range 6 {
		want = append(want, fmt.Sprintf("offset %s/events/%d", leaving, p))
	}
	want = append(want, "group "+leaving)
	if got := c.offsetsTombstones(coord, index); !slices.Equal(got, want) {
		t.Fatalf("tombstones in %s-%d: %v, want %v", offsetsTopic, index, got, want)
	}

	// The coordinator crashes; the next one loads the log and agrees.
	c.nodes[coord].proc.Crash()
	successor := int32(-1)
	c.waitFor("a new leader of the offsets partition", 30000, func() bool {
		successor = c.leaderOf(offsetsTopic, index)
		return successor >= 0 && successor != coord
	})
	c.waitServing(successor, leaving)
	if got := c.offsetsTombstones(successor, index); !slices.Equal(got, want) {
		t.Fatalf("tombstones in %s-%d on the new leader %d: %v, want %v", offsetsTopic, index, successor, got, want)
	}
	if got := offsetsOf(successor, leaving); got[0] != -1 || got[3] != -1 {
		t.Fatalf("after failover, the expired group's offsets: %v", got)
	}
	if got := offsetsOf(successor, staying); got[0] != committed(0) || got[5] != committed(5) {
		t.Fatalf("after failover, the staying group's offsets: %v", got)
	}
	if got := listedGroups(t, c.request(successor, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)); !slices.Equal(got, []string{staying}) {
		t.Fatalf("groups after failover: %v, want only %s", got, staying)
	}
	// The staying group keeps its offsets on the new coordinator too.
	heartbeatUntil(successor, c.s.NowNs()+(retentionMs+3000)*1e6)
	if got := offsetsOf(successor, staying); got[0] != committed(0) || got[5] != committed(5) {
		t.Fatalf("a retention after failover, the staying group's offsets: %v", got)
	}
}
