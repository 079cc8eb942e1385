package models

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// GroupHistory is what the simulated consumer-group members did: every
// assignment they were given, every offset commit and every offset fetch,
// with call and return times in virtual nanoseconds.
type GroupHistory struct {
	Ops         []GroupOp
	Assignments []Assignment
	Commits     []OffsetCommit
	Fetches     []OffsetFetch
}

// Assignment is one successful SyncGroup answer: member Member of Group
// was given Partitions in Generation at AtNs.
type Assignment struct {
	Client int
	Group  string
	Member string
	// Instance is a static member's group.instance.id, or "".
	Instance   string
	Generation int32
	Partitions []TopicPartition
	AtNs       int64
}

// CommitOutcome is what a member knows of one partition's offset commit.
type CommitOutcome int8

// The outcomes of a commit.
const (
	// CommitUnknown: no answer, or an error that may come after the
	// commit's record was appended (it may still become durable).
	CommitUnknown CommitOutcome = iota
	// CommitAccepted: the coordinator answered without an error.
	CommitAccepted
	// CommitRejected: an error the coordinator gives before appending
	// anything (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, ...): no effect.
	CommitRejected
)

// OffsetCommit is one partition of one OffsetCommit request.
type OffsetCommit struct {
	Client   int
	Group    string
	Member   string
	Instance string
	// Generation is the generation the commit was sent with.
	Generation int32
	TP         TopicPartition
	Offset     int64
	// CallNs is when the request was sent; ReturnNs when its answer came
	// (NeverReturnedNs if none did).
	CallNs, ReturnNs int64
	Outcome          CommitOutcome
	// ErrorCode is the partition's error code in the answer (0 if none).
	ErrorCode int16
}

// OffsetFetch is one partition of one successful OffsetFetch: the
// committed offset it returned (-1 for none).
type OffsetFetch struct {
	Client           int
	Group            string
	TP               TopicPartition
	Offset           int64
	CallNs, ReturnNs int64
}

// groupTP names one group's committed offset of one partition: one
// register.
type groupTP struct {
	group string
	tp    TopicPartition
}

// memberIdentity is who a member is across member ids: a static member
// (KIP-345) is its instance id, whose new member id takes over the old
// one's assignment in the same generation when it restarts; a dynamic
// member is its member id.
func memberIdentity(member, instance string) string {
	if instance != "" {
		return "instance " + instance
	}
	return member
}

// CheckAssignments checks that within one generation of a group no
// partition was given to two members: every member's SyncGroup answers for
// generation g agree with every other member's. A static member's
// replacement (the same instance id under a new member id) is the same
// member.
func CheckAssignments(h GroupHistory) []Violation {
	type owner struct {
		member string
		atNs   int64
	}
	type key struct {
		group      string
		generation int32
		tp         TopicPartition
	}
	owners := map[key]owner{}
	reported := map[key]bool{}
	var out []Violation
	for _, a := range h.Assignments {
		for _, tp := range a.Partitions {
			k := key{a.Group, a.Generation, tp}
			prev, seen := owners[k]
			switch {
			case !seen:
				owners[k] = owner{memberIdentity(a.Member, a.Instance), a.AtNs}
			case prev.member != memberIdentity(a.Member, a.Instance) && !reported[k]:
				reported[k] = true
				out = append(out, Violation{Check: "group-assignment", TP: tp, Detail: fmt.Sprintf(
					"group %s generation %d: assigned to member %s at t=%dns and to member %s at t=%dns",
					a.Group, a.Generation, prev.member, prev.atNs, memberIdentity(a.Member, a.Instance), a.AtNs)})
			}
		}
	}
	return out
}

// CheckCommitGenerations checks the commits the coordinators accepted:
//   - a member commits with generation g only partitions it was assigned
//     in g;
//   - no commit with generation g is accepted once some member was given
//     its assignment in a later generation before the commit was sent: a
//     SyncGroup answer for g' > g means g' is committed to the offsets
//     partition, so every later coordinator is at g' or beyond and must
//     answer ILLEGAL_GENERATION.
func CheckCommitGenerations(h GroupHistory) []Violation {
	type memberGen struct {
		group, member string
		generation    int32
	}
	assigned := map[memberGen]map[TopicPartition]bool{}
	// newest lists, per group, the assignments sorted by time, to find
	// the highest generation assigned before an instant.
	byGroup := map[string][]Assignment{}
	for _, a := range h.Assignments {
		k := memberGen{a.Group, a.Member, a.Generation}
		if assigned[k] == nil {
			assigned[k] = map[TopicPartition]bool{}
		}
		for _, tp := range a.Partitions {
			assigned[k][tp] = true
		}
		byGroup[a.Group] = append(byGroup[a.Group], a)
	}
	for _, as := range byGroup { // order-independent: each slice sorted on its own
		sort.SliceStable(as, func(i, j int) bool { return as[i].AtNs < as[j].AtNs })
	}
	var out []Violation
	for _, c := range h.Commits {
		if c.Outcome != CommitAccepted {
			continue
		}
		if !assigned[memberGen{c.Group, c.Member, c.Generation}][c.TP] {
			out = append(out, Violation{Check: "commit-generation", TP: c.TP, Detail: fmt.Sprintf(
				"group %s: member %s committed offset %d with generation %d at t=%dns without being assigned the partition in it",
				c.Group, c.Member, c.Offset, c.Generation, c.CallNs)})
			continue
		}
		for _, a := range byGroup[c.Group] {
			if a.AtNs >= c.CallNs {
				break
			}
			if a.Generation > c.Generation {
				out = append(out, Violation{Check: "commit-generation", TP: c.TP, Detail: fmt.Sprintf(
					"group %s: a commit of offset %d with generation %d sent at t=%dns was accepted, but member %s had its generation %d assignment at t=%dns",
					c.Group, c.Offset, c.Generation, c.CallNs, a.Member, a.Generation, a.AtNs)})
				break
			}
		}
	}
	return out
}

// offsetInput is one operation on a committed-offset register: a commit
// (write) or an OffsetFetch (read) of offset.
type offsetInput struct {
	write  bool
	offset int64
}

// offsetModel is a read/write register holding a group's committed offset
// of one partition, -1 before any commit.
var offsetModel = porcupine.Model{
	Init: func() interface{} { return int64(-1) },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		in := input.(offsetInput)
		if in.write {
			return true, in.offset
		}
		return state.(int64) == in.offset, state
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(offsetInput)
		if in.write {
			return fmt.Sprintf("commit %d", in.offset)
		}
		return fmt.Sprintf("fetch %d", in.offset)
	},
}

// OffsetOptions bound CheckOffsets.
type OffsetOptions struct {
	// Timeout bounds Porcupine per register; a timeout is a violation.
	// Zero means 10 s.
	Timeout time.Duration
}

// CheckOffsets checks that OffsetFetch is linearizable per (group,
// partition) against a register: an accepted commit writes its offset
// between its call and return, a commit of unknown outcome writes it at
// some time after its call (return time infinity), a rejected commit
// writes nothing, and an OffsetFetch reads. The harness ends each run with
// an OffsetFetch of every group after healing, so an accepted commit lost
// in a coordinator failover is a violation here.
//
// A commit of unknown outcome whose offset no fetch of that register
// returned is left out: linearized after every other operation it changes
// nothing any read saw, so dropping it keeps the verdict and keeps
// Porcupine's search small.
func CheckOffsets(h GroupHistory, opts OffsetOptions) []Violation {
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	read := map[groupTP]map[int64]bool{}
	for _, f := range h.Fetches {
		k := groupTP{f.Group, f.TP}
		if read[k] == nil {
			read[k] = map[int64]bool{}
		}
		read[k][f.Offset] = true
	}
	ops := map[groupTP][]porcupine.Operation{}
	var keys []groupTP
	add := func(k groupTP, op porcupine.Operation) {
		if _, seen := ops[k]; !seen {
			keys = append(keys, k)
		}
		ops[k] = append(ops[k], op)
	}
	for _, c := range h.Commits {
		k := groupTP{c.Group, c.TP}
		switch {
		case c.Outcome == CommitRejected:
			continue
		case c.Outcome == CommitUnknown && !read[k][c.Offset]:
			continue
		}
		ret := c.ReturnNs
		if c.Outcome == CommitUnknown {
			ret = NeverReturnedNs
		}
		add(k, porcupine.Operation{ClientId: c.Client, Input: offsetInput{write: true, offset: c.Offset}, Call: c.CallNs, Return: ret})
	}
	for _, f := range h.Fetches {
		add(groupTP{f.Group, f.TP}, porcupine.Operation{ClientId: f.Client, Input: offsetInput{offset: f.Offset}, Call: f.CallNs, Return: f.ReturnNs})
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		return lessTP(keys[i].tp, keys[j].tp)
	})
	var out []Violation
	for _, k := range keys {
		switch porcupine.CheckOperationsTimeout(offsetModel, ops[k], opts.Timeout) {
		case porcupine.Ok:
		case porcupine.Unknown:
			out = append(out, Violation{Check: "offset-linearizability", TP: k.tp, Detail: fmt.Sprintf(
				"group %s: Porcupine timed out after %v (counted as a failure)", k.group, opts.Timeout)})
		default:
			// Accepted commits lost or gone back: a loss, which the fault
			// budget of the group's coordinator partition may excuse.
			out = append(out, Violation{Check: "offset-linearizability", TP: k.tp, Group: k.group, Loss: true, Detail: fmt.Sprintf(
				"group %s: no linearization of commits and offset fetches: %s", k.group, describeOffsetOps(ops[k]))})
		}
	}
	return out
}

func lessTP(a, b TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// describeOffsetOps lists a register's operations by call time (the last
// few, where a lost commit shows), for the violation's detail.
func describeOffsetOps(ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	const shown = 12
	if len(sorted) > shown {
		sorted = sorted[len(sorted)-shown:]
	}
	s := ""
	for _, op := range sorted {
		in := op.Input.(offsetInput)
		kind := "fetch"
		if in.write {
			kind = "commit"
		}
		ret := "∞"
		if op.Return != NeverReturnedNs {
			ret = fmt.Sprint(op.Return)
		}
		s += fmt.Sprintf("[client %d %s %d call=%d return=%s] ", op.ClientId, kind, in.offset, op.Call, ret)
	}
	return s
}

// GroupOp is one group request a member made (FindCoordinator, JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch) and how it
// ended, for the trace of a failing run; the checkers read Assignments,
// Commits and Fetches.
type GroupOp struct {
	Client int
	Group  string
	// Kind is the request's name.
	Kind string
	// Member and Generation are the member's after the answer.
	Member     string
	Generation int32
	// ReturnNs is NeverReturnedNs for a request that timed out.
	CallNs, ReturnNs int64
	ErrorCode        int16
	// Error is the connection error, if the request got no answer.
	Error string
}
