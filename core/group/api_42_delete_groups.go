package group

// DeleteGroups (key 42), versions 0..3.
//
// Deletes groups with no members: the group turns Dead at once (joins and
// commits are refused meanwhile), tombstones for its offsets (committed or
// in flight) and its metadata are appended, and the answer waits for them.
// If the append fails the deletion is rolled back: the group is Empty
// again. That rollback undoes the Empty -> Dead transition rather than
// taking an edge of Kafka's table, which has no way out of Dead.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

func (c *Coordinator) handleDeleteGroups(r *kmsg.DeleteGroupsRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var records []batch.Record
	var deleting []*group
	var slots []int
	for _, id := range r.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		g := c.groups[id]
		code := c.availability(id)
		switch {
		case code != 0:
		case g == nil || g.state == Dead:
			code = kerr.GroupIDNotFound.Code
		case g.state != Empty:
			code = kerr.NonEmptyGroup.Code
		default:
			keys := map[topicPartition]bool{}
			for tp := range g.offsets { // order-independent: sorted below
				keys[tp] = true
			}
			for tp := range g.offsetsInFlight { // order-independent: sorted below
				keys[tp] = true
			}
			for _, tp := range sortedOffsetKeys(keys) {
				records = append(records, batch.Record{Key: offsetKeyBytes(id, tp)})
			}
			records = append(records, batch.Record{Key: groupKeyBytes(id)})
			g.transition(Dead, c.wallMs())
			deleting = append(deleting, g)
			slots = append(slots, len(resp.Groups))
		}
		rg.ErrorCode = code
		resp.Groups = append(resp.Groups, rg)
	}
	if len(records) == 0 {
		reply(resp)
		return
	}
	c.append(records, func(err error) {
		for i, g := range deleting {
			if err != nil {
				resp.Groups[slots[i]].ErrorCode = appendErrorCode(err, false)
				if c.liveGroup(g) && g.state == Dead {
					g.state, g.prevState = Empty, Dead
				}
				continue
			}
			if c.liveGroup(g) {
				stopTimer(&g.joinTimer)
				stopTimer(&g.syncTimer)
				for _, id := range sortedKeys(g.pending) {
					g.stopPending(id)
				}
				delete(c.groups, g.id)
			}
		}
		reply(resp)
	}, func() {
		for _, s := range slots {
			resp.Groups[s].ErrorCode = kerr.NotCoordinator.Code
		}
		reply(resp)
	})
}
