package group

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// protocol is one assignment protocol a member offered, with its metadata,
// carried through unchanged: the broker never interprets either.
type protocol struct {
	name     string
	metadata []byte
}

// parkedReply is a request whose answer waits (a JoinGroup until the join
// phase ends, a SyncGroup until the assignment is persisted). send answers
// it exactly once.
type parkedReply struct {
	version int16
	send    func(kmsg.Response)
}

// member is one member of a classic group.
type member struct {
	id string
	// instanceID is group.instance.id for a static member (KIP-345), "" for
	// a dynamic one.
	instanceID         string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	protocolType       string
	// protocols are in the member's order of preference, names unique.
	protocols  []protocol
	assignment []byte

	// awaitingJoin and awaitingSync are parked requests, nil if none.
	awaitingJoin *parkedReply
	awaitingSync *parkedReply
	// isNew: joined in the current join phase and not yet through it; its
	// heartbeat deadline is the new-member join timeout and waiting does
	// not satisfy it.
	isNew          bool
	heartbeatTimer env.Timer
}

func (m *member) isStatic() bool { return m.instanceID != "" }

// hasSatisfiedHeartbeat: a member parked in JoinGroup or SyncGroup is alive
// by definition, unless it is new (Kafka's ClassicGroupMember).
func (m *member) hasSatisfiedHeartbeat() bool {
	return !m.isNew && (m.awaitingJoin != nil || m.awaitingSync != nil)
}

// metadataFor is the member's metadata for protocol name.
func (m *member) metadataFor(name string) ([]byte, bool) {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata, true
		}
	}
	return nil, false
}

// sameProtocols: same names, same order, same metadata.
func (m *member) sameProtocols(ps []protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].name != m.protocols[i].name || !bytes.Equal(ps[i].metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// vote is the member's most preferred protocol among candidates.
func (m *member) vote(candidates map[string]bool) string {
	for _, p := range m.protocols {
		if candidates[p.name] {
			return p.name
		}
	}
	panic(fmt.Sprintf("group: member %s supports none of the candidate protocols", m.id))
}

// group is one classic group and its committed offsets.
type group struct {
	id         string
	state      State
	prevState  State
	generation int32
	// protocolType is "" for a group that has never had members (a simple
	// group, used only to commit offsets).
	protocolType string
	// protocol is the selected protocol, "" when none.
	protocol string
	leader   string
	// members by id, and order: their ids in the order they joined, which
	// decides leader succession deterministically.
	members map[string]*member
	order   []string
	// static maps group.instance.id to the member id that holds it.
	static map[string]string
	// pending are KIP-394 member ids handed out with MEMBER_ID_REQUIRED and
	// not yet used to join, each with its expiry timer.
	pending map[string]env.Timer
	// pendingSync are the members of a fresh generation that have not yet
	// sent SyncGroup.
	pendingSync       map[string]bool
	awaitingJoinCount int
	// newMemberAdded extends the initial rebalance delay.
	newMemberAdded   bool
	joinTimer        env.Timer
	syncTimer        env.Timer
	stateTimestampMs int64

	// offsets are the committed offsets: their records are persisted.
	offsets map[topicPartition]offsetValue
	// offsetWriteSeq is, per key, the newest append that wrote it and has
	// completed; an older append completing later must not overwrite it.
	offsetWriteSeq map[topicPartition]uint64
	// offsetsInFlight counts appends in flight per key, for DeleteGroups'
	// tombstones.
	offsetsInFlight map[topicPartition]int
	// tombstoneInFlight is set while expiry's GroupMetadata tombstone is
	// being appended: a second one would, on completing, see a group reset
	// by the first and re-formed to the same generation as unchanged.
	tombstoneInFlight bool
	// inLog is set while the log holds a committed offset of the group
	// not since followed by its GroupMetadata tombstone: a reload then
	// rebuilds the group, even with no offsets left (an OffsetDelete or a
	// topic deletion removed them), so it is kept until the expiry check
	// deletes it, as Kafka keeps it. A group the log holds nothing of is
	// forgotten as soon as it is unused.
	inLog bool
}

func newGroup(id string) *group {
	return &group{
		id:               id,
		state:            Empty,
		prevState:        Empty,
		members:          map[string]*member{},
		static:           map[string]string{},
		pending:          map[string]env.Timer{},
		pendingSync:      map[string]bool{},
		offsets:          map[topicPartition]offsetValue{},
		offsetWriteSeq:   map[topicPartition]uint64{},
		offsetsInFlight:  map[topicPartition]int{},
		stateTimestampMs: -1,
	}
}

// transition moves the group to state to, asserting Kafka's edge table.
func (g *group) transition(to State, wallMs int64) {
	if !CanTransition(g.state, to) {
		panic(fmt.Sprintf("group %q: illegal state transition %v -> %v", g.id, g.state, to))
	}
	g.prevState, g.state = g.state, to
	g.stateTimestampMs = wallMs
}

// canRebalance: the states PreparingRebalance may be entered from.
func (g *group) canRebalance() bool { return CanTransition(g.state, PreparingRebalance) }

func (g *group) isLeader(id string) bool { return g.leader != "" && g.leader == id }

// membersInOrder returns the members in join order.
func (g *group) membersInOrder() []*member {
	out := make([]*member, 0, len(g.order))
	for _, id := range g.order {
		out = append(out, g.members[id])
	}
	return out
}

// add adds m; the first member sets the protocol type and leads.
func (g *group) add(m *member, join *parkedReply) {
	if _, dup := g.members[m.id]; dup {
		panic(fmt.Sprintf("group %q: member id %s added twice", g.id, m.id))
	}
	if m.isStatic() {
		if _, dup := g.static[m.instanceID]; dup {
			panic(fmt.Sprintf("group %q: instance id %s added twice", g.id, m.instanceID))
		}
		g.static[m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	m.awaitingJoin = join
	if join != nil {
		g.awaitingJoinCount++
	}
	g.stopPending(m.id)
}

// remove drops member id (no reply is sent: callers answer parked requests
// first), and passes leadership to the earliest remaining member.
func (g *group) remove(id string) {
	if m, ok := g.members[id]; ok {
		if m.awaitingJoin != nil {
			g.awaitingJoinCount--
		}
		if m.isStatic() {
			delete(g.static, m.instanceID)
		}
		if m.heartbeatTimer != nil {
			m.heartbeatTimer.Stop()
		}
		delete(g.members, id)
		for i, o := range g.order {
			if o == id {
				g.order = append(g.order[:i:i], g.order[i+1:]...)
				break
			}
		}
	}
	if g.isLeader(id) {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	g.stopPending(id)
	delete(g.pendingSync, id)
}

func (g *group) stopPending(id string) {
	if t, ok := g.pending[id]; ok {
		t.Stop()
		delete(g.pending, id)
	}
}

// hasAllMembersJoined: every member is parked in JoinGroup and no KIP-394
// member id is still to come back.
func (g *group) hasAllMembersJoined() bool {
	return len(g.members) == g.awaitingJoinCount && len(g.pending) == 0
}

// rebalanceTimeoutMs is the largest of the members' rebalance timeouts.
func (g *group) rebalanceTimeoutMs() int32 {
	var most int32
	for _, m := range g.members { // order-independent: a maximum
		most = max(most, m.rebalanceTimeoutMs)
	}
	return most
}

// supportsProtocols: can a member offering protocolType and names join?
// An empty group takes any non-empty offer; otherwise the type must match
// and at least one name must be supported by every member.
func (g *group) supportsProtocols(protocolType string, ps []protocol) bool {
	if g.state == Empty {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		if g.supportCount(p.name) == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) supportCount(name string) int {
	n := 0
	for _, m := range g.members { // order-independent: a count
		if _, ok := m.metadataFor(name); ok {
			n++
		}
	}
	return n
}

// selectProtocol is Kafka's rule: among the protocols every member
// supports, each member votes for its most preferred; the most votes win.
// Kafka breaks a tie by hash-map order; Strand breaks it by the leader's
// preference, so the choice is deterministic.
func (g *group) selectProtocol() string {
	if len(g.members) == 0 {
		panic(fmt.Sprintf("group %q: selecting a protocol with no members", g.id))
	}
	candidates := map[string]bool{}
	for _, p := range g.members[g.order[0]].protocols {
		if g.supportCount(p.name) == len(g.members) {
			candidates[p.name] = true
		}
	}
	votes := map[string]int{}
	for _, m := range g.membersInOrder() {
		votes[m.vote(candidates)]++
	}
	tieBreaker := g.members[g.order[0]]
	if l, ok := g.members[g.leader]; ok {
		tieBreaker = l
	}
	best, bestVotes := "", -1
	for _, p := range tieBreaker.protocols {
		if v, ok := votes[p.name]; ok && v > bestVotes {
			best, bestVotes = p.name, v
		}
	}
	return best
}

// notYetRejoined are the members not parked in JoinGroup, in join order.
func (g *group) notYetRejoined() []*member {
	var out []*member
	for _, m := range g.membersInOrder() {
		if m.awaitingJoin == nil {
			out = append(out, m)
		}
	}
	return out
}

// maybeElectJoinedLeader makes sure the leader is a member that rejoined;
// false if no member rejoined.
func (g *group) maybeElectJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].awaitingJoin != nil {
		return true
	}
	for _, m := range g.membersInOrder() {
		if m.awaitingJoin != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// sortedGroupIDs returns the ids of groups in byte order.
func sortedGroupIDs(groups map[string]*group) []string {
	ids := make([]string, 0, len(groups))
	for id := range groups { // order-independent: sorted below
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// sortedOffsetKeys returns keys sorted by topic, then partition.
func sortedOffsetKeys[V any](m map[topicPartition]V) []topicPartition {
	keys := make([]topicPartition, 0, len(m))
	for k := range m { // order-independent: sorted below
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].partition < keys[j].partition
	})
	return keys
}
