package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// roundTrip encodes resp as a broker would and decodes it as a client
// would; it fails if the response does not survive at its version.
func roundTrip(t tb, resp kmsg.Response) {
	t.Helper()
	b := resp.AppendTo(nil)
	back := kmsg.ResponseForKey(resp.Key())
	back.SetVersion(resp.GetVersion())
	if err := back.ReadFrom(b); err != nil {
		t.Fatalf("api key %d v%d: response does not decode: %v", resp.Key(), resp.GetVersion(), err)
	}
}

func TestVersionsAreWithinKmsg(t *testing.T) {
	for _, v := range Versions() {
		req := kmsg.RequestForKey(v.Key)
		if req == nil || !Handles(req) {
			t.Errorf("key %d advertised but not handled", v.Key)
			continue
		}
		if v.Min < 0 || v.Max > req.MaxVersion() || v.Min > v.Max {
			t.Errorf("key %d: versions %d..%d outside kmsg's 0..%d", v.Key, v.Min, v.Max, req.MaxVersion())
		}
	}
}

// TestHostileRequestsAreAnsweredOnce sends every served API at every
// served version with random fields, against a coordinator with some
// state, while time passes and appends complete or fail: nothing panics,
// every answer encodes at its version, and every request is answered once.
func TestHostileRequestsAreAnsweredOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt, testConfig())
		var all []*pendingReply
		groupGen := rapid.SampledFrom([]string{"g", "h", ""})
		memberGen := rapid.OneOf(rapid.Just(""), rapid.StringMatching(`client-[0-9a-f-]{0,40}`), rapid.Just("x"))
		rt.Repeat(map[string]func(*rapid.T){
			"request": func(rt *rapid.T) {
				v := rapid.SampledFrom(Versions()).Draw(rt, "api")
				req := kmsg.RequestForKey(v.Key)
				req.SetVersion(int16(rapid.IntRange(int(v.Min), int(v.Max)).Draw(rt, "version")))
				fillRandom(rt, req, groupGen, memberGen)
				p := h.send(req)
				all = append(all, p)
			},
			"joinFlow": func(rt *rapid.T) {
				g := groupGen.Draw(rt, "group")
				first := h.join(g, joinOpts{})
				all = append(all, first)
				if r := first.one(rt).(*kmsg.JoinGroupResponse); r.ErrorCode == kerr.MemberIDRequired.Code {
					all = append(all, h.join(g, joinOpts{memberID: r.MemberID}))
				}
			},
			"advance":       func(rt *rapid.T) { h.clock.advance(int64(rapid.IntRange(0, 20000).Draw(rt, "ms"))) },
			"commitAppends": func(rt *rapid.T) { h.store.commitAll() },
			"failAppends": func(rt *rapid.T) {
				h.store.failAll(fmt.Errorf("x: %w", rapid.SampledFrom([]*kerr.Error{kerr.NotEnoughReplicas, kerr.MessageTooLarge, kerr.NotLeaderForPartition}).Draw(rt, "err")))
			},
		})
		h.c.Unload()
		h.store.commitAll()
		for i, p := range all {
			if len(p.resps) != 1 {
				rt.Fatalf("request %d answered %d times", i, len(p.resps))
			}
			roundTrip(rt, p.resps[0])
		}
	})
}

// fillRandom sets the fields the coordinator reads to random values.
func fillRandom(rt *rapid.T, req kmsg.Request, groups, members *rapid.Generator[string]) {
	gen := rapid.Int32Range(-2, 3)
	inst := rapid.OneOf(rapid.Just(""), rapid.Just("i1"), rapid.Just("i2"))
	instPtr := func(label string) *string {
		if s := inst.Draw(rt, label); s != "" {
			return &s
		}
		return nil
	}
	protocols := func() []kmsg.JoinGroupRequestProtocol {
		var ps []kmsg.JoinGroupRequestProtocol
		for _, n := range rapid.SliceOfN(rapid.SampledFrom([]string{"range", "rr", "sticky"}), 0, 3).Draw(rt, "protocols") {
			ps = append(ps, proto(n, rapid.StringN(0, 4, -1).Draw(rt, "metadata")))
		}
		return ps
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		r.Group, r.MemberID, r.InstanceID = groups.Draw(rt, "group"), members.Draw(rt, "member"), instPtr("instance")
		r.SessionTimeoutMillis = rapid.SampledFrom([]int32{-1, 50, 10000}).Draw(rt, "session")
		r.RebalanceTimeoutMillis = rapid.SampledFrom([]int32{-1, 0, 3000}).Draw(rt, "rebalance")
		r.ProtocolType = rapid.SampledFrom([]string{"consumer", "", "connect"}).Draw(rt, "type")
		r.Protocols = protocols()
	case *kmsg.SyncGroupRequest:
		r.Group, r.MemberID, r.Generation, r.InstanceID = groups.Draw(rt, "group"), members.Draw(rt, "member"), gen.Draw(rt, "generation"), instPtr("instance")
		for _, id := range rapid.SliceOfN(members, 0, 3).Draw(rt, "assigned") {
			r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(id)})
		}
	case *kmsg.HeartbeatRequest:
		r.Group, r.MemberID, r.Generation, r.InstanceID = groups.Draw(rt, "group"), members.Draw(rt, "member"), gen.Draw(rt, "generation"), instPtr("instance")
	case *kmsg.LeaveGroupRequest:
		r.Group, r.MemberID = groups.Draw(rt, "group"), members.Draw(rt, "member")
		for i := rapid.IntRange(0, 3).Draw(rt, "leavers"); i > 0; i-- {
			r.Members = append(r.Members, kmsg.LeaveGroupRequestMember{MemberID: members.Draw(rt, "member"), InstanceID: instPtr("instance")})
		}
	case *kmsg.OffsetCommitRequest:
		r.Group, r.MemberID, r.Generation, r.InstanceID = groups.Draw(rt, "group"), members.Draw(rt, "member"), gen.Draw(rt, "generation"), instPtr("instance")
		for i := rapid.IntRange(0, 2).Draw(rt, "topics"); i > 0; i-- {
			t := kmsg.OffsetCommitRequestTopic{Topic: rapid.SampledFrom([]string{"t", "u"}).Draw(rt, "topic")}
			for j := rapid.IntRange(0, 3).Draw(rt, "partitions"); j > 0; j-- {
				p := kmsg.NewOffsetCommitRequestTopicPartition()
				p.Partition, p.Offset = rapid.Int32Range(0, 3).Draw(rt, "partition"), rapid.Int64Range(-1, 100).Draw(rt, "offset")
				t.Partitions = append(t.Partitions, p)
			}
			r.Topics = append(r.Topics, t)
		}
	case *kmsg.OffsetFetchRequest:
		r.Group = groups.Draw(rt, "group")
		if rapid.Bool().Draw(rt, "someTopics") {
			r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		}
		for i := rapid.IntRange(0, 2).Draw(rt, "groups"); i > 0; i-- {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = groups.Draw(rt, "group")
			if rapid.Bool().Draw(rt, "someTopics") {
				g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 2}}}
			}
			r.Groups = append(r.Groups, g)
		}
	case *kmsg.OffsetDeleteRequest:
		r.Group = groups.Draw(rt, "group")
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.DescribeGroupsRequest:
		r.Groups = rapid.SliceOfN(groups, 0, 3).Draw(rt, "groups")
	case *kmsg.ListGroupsRequest:
		r.StatesFilter = rapid.SliceOfN(rapid.SampledFrom([]string{"Stable", "empty", "bogus"}), 0, 2).Draw(rt, "states")
		r.TypesFilter = rapid.SliceOfN(rapid.SampledFrom([]string{"classic", "consumer"}), 0, 2).Draw(rt, "types")
	case *kmsg.DeleteGroupsRequest:
		r.Groups = rapid.SliceOfN(groups, 0, 3).Draw(rt, "groups")
	}
}
