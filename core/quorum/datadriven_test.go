package quorum

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"strand/internal/transcript"
)

// TestTranscripts plays the Raft scenarios in testdata/, one story per
// file, each command followed by what it must print. To regenerate the
// expected output after a deliberate change:
//
//	go test ./core/quorum -run TestTranscripts -rewrite
//
// The voters run with Kafka's default timeouts (election 1000 ms, fetch
// 2000 ms, fetch max wait 500 ms) and no random jitter (every draw is 0).
// Time moves only when a command says so (now=T, run until=T). The
// commands:
//
//	new-voter id=N[,M…] voters=… [epoch=E] [voted-for=V] [log=(1, 1, 2)]
//	          [bugs=(vote-twice, commit-early)]
//	    Voters started from a durable state: hard state and the epochs of
//	    the log's entries (offsets from 0, no data).
//	tick [id=N,…] [now=T]        Tick the voters (all that are up) at T.
//	step id=N type=TYPE from=F epoch=E [now=T] [leader=L] [pre-vote]
//	     [last-epoch=] [last-offset=] [granted] [fetch-offset=]
//	     [last-fetched-epoch=] [hw=] [diverging=EPOCH@END]
//	     [entries=(e3@2:x, …)] [successors=…] [error=CODE]
//	    A message arrives at N from F. TYPE is Vote, VoteResp, BeginEpoch,
//	    BeginEpochResp, Fetch, FetchResp, EndEpoch or EndEpochResp; a
//	    response answers the last request N sent to F.
//	process-ready id=N[,…]
//	    One Ready: what it asks to persist, send and apply is printed and
//	    done (the messages join the network), then Advance.
//	deliver [from=F] [to=T] [type=TYPE] [drop]
//	    Delivers (or drops) the messages in flight that match, in order.
//	stabilize
//	    Process readies and deliver messages until nothing is left to do,
//	    at the current time, printing every step.
//	run until=T
//	    Moves time to T from deadline to deadline, ticking the voters whose
//	    deadline has come and stabilizing after each, printing only what
//	    changed (role, epoch, leader, vote, commit, end) with its time.
//	propose id=N data=X
//	resign id=N
//	crash id=N                   Everything not persisted is lost.
//	restart id=N [now=T]         From the durable state.
//	cut a=N b=M | isolate id=N | heal
//	    Messages between a and b (or between N and everyone) are dropped,
//	    both ways, until heal.
//	status [id=N,…]
//	reset
//
// After every command the driver prints, for each voter, what changed,
// and any breach of election safety (two leaders in one epoch).
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		d := newQuorumDriver()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return d.run(t, td)
		})
	})
}

// voter is one node of a transcript: its Raft while it is up, and what a
// crash keeps (the hard state and entries of every processed Ready).
type voter struct {
	id      int32
	voters  []int32
	bugs    Bugs
	raft    *Raft // nil while down
	hard    HardState
	durable []Entry
	applied []Entry
	// sent is the last request of each type this voter sent to each peer,
	// which a stepped response answers.
	sent map[sentKey]Message
}

type sentKey struct {
	to  int32
	typ MsgType
}

type quorumDriver struct {
	voters map[int32]*voter
	nowMs  int64
	// inFlight are the messages sent and not yet delivered, in send order.
	inFlight []Message
	cut      map[[2]int32]bool
	// leaderOfEpoch is the election-safety checker's record.
	leaderOfEpoch map[int32]int32
	violations    []string
	out           strings.Builder
}

func newQuorumDriver() *quorumDriver {
	return &quorumDriver{voters: map[int32]*voter{}, cut: map[[2]int32]bool{}, leaderOfEpoch: map[int32]int32{}}
}

func (d *quorumDriver) printf(format string, args ...any) {
	fmt.Fprintf(&d.out, format, args...)
	d.out.WriteByte('\n')
}

func (d *quorumDriver) run(t *testing.T, td *datadriven.TestData) string {
	d.out.Reset()
	a := &args{transcript.New(t, td)}
	before := d.views()
	switch td.Cmd {
	case "new-voter":
		d.newVoters(a)
	case "tick":
		now := d.now(a)
		for _, v := range d.pick(a) {
			v.raft.Tick(now)
		}
	case "step":
		d.step(a)
	case "process-ready":
		for _, v := range d.pick(a) {
			d.processReady(v, true)
		}
	case "deliver":
		d.deliver(a)
	case "stabilize":
		d.stabilize(true)
	case "run":
		d.runUntil(a.Int64("until"))
		before = d.views() // runUntil reported each change with its time
	case "propose":
		v := d.voter(t, a.Int32("id"))
		if offset, err := v.raft.Propose(d.now(a), []byte(a.Str("data"))); err != nil {
			d.printf("%d refuses: %v", v.id, err)
		} else {
			d.printf("%d appends %s at %d", v.id, a.Str("data"), offset)
		}
	case "resign":
		d.voter(t, a.Int32("id")).raft.Resign(d.now(a))
	case "crash":
		v := d.voter(t, a.Int32("id"))
		v.raft, v.applied = nil, nil
		d.printf("%d crashes: it keeps epoch %d, voted for %d, log %s", v.id, v.hard.Epoch, v.hard.VotedFor, formatRaftEntries(v.durable))
	case "restart":
		v, ok := d.voters[a.Int32("id")]
		if !ok || v.raft != nil {
			t.Fatalf("%s: restart: no voter %d is down", td.Pos, a.Int32("id"))
		}
		d.start(v, d.now(a))
	case "cut":
		x, y := a.Int32("a"), a.Int32("b")
		d.cut[[2]int32{x, y}], d.cut[[2]int32{y, x}] = true, true
	case "isolate":
		id := a.Int32("id")
		for other := range d.voters {
			if other != id {
				d.cut[[2]int32{id, other}], d.cut[[2]int32{other, id}] = true, true
			}
		}
	case "heal":
		clear(d.cut)
	case "status":
		d.status(a)
	case "reset":
		*d = *newQuorumDriver()
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	a.Done()
	d.reportChanges("", before)
	d.reportViolations()
	return d.out.String()
}

func (d *quorumDriver) now(a *args) int64 {
	d.nowMs = a.Int64Or("now", d.nowMs)
	return d.nowMs
}

func (d *quorumDriver) voter(t *testing.T, id int32) *voter {
	v, ok := d.voters[id]
	if !ok {
		t.Fatalf("no voter %d", id)
	}
	if v.raft == nil {
		t.Fatalf("voter %d is down", id)
	}
	return v
}

func (d *quorumDriver) sortedIDs() []int32 {
	ids := make([]int32, 0, len(d.voters))
	for id := range d.voters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// pick is the voters id= names, or every voter that is up.
func (d *quorumDriver) pick(a *args) []*voter {
	var out []*voter
	if a.Has("id") {
		for _, id := range a.IDs("id") {
			out = append(out, d.voter(a.T, id))
		}
		return out
	}
	for _, id := range d.sortedIDs() {
		if v := d.voters[id]; v.raft != nil {
			out = append(out, v)
		}
	}
	return out
}

// --- Voters -----------------------------------------------------------------

func (d *quorumDriver) newVoters(a *args) {
	hard := HardState{Epoch: a.Int32Or("epoch", 0), VotedFor: a.Int32Or("voted-for", -1)}
	var entries []Entry
	for i, e := range a.IDs("log") {
		entries = append(entries, Entry{Offset: int64(i), Epoch: e})
	}
	var bugs Bugs
	for _, name := range a.Strs("bugs") {
		switch name {
		case "vote-twice":
			bugs.VoteTwice = true
		case "commit-early":
			bugs.CommitEarly = true
		default:
			a.T.Fatalf("%s: unknown planted bug %q", a.Data.Pos, name)
		}
	}
	voters := a.IDs("voters")
	now := d.now(a)
	for _, id := range a.IDs("id") {
		v := &voter{id: id, voters: voters, bugs: bugs, hard: hard, durable: slices.Clone(entries)}
		d.voters[id] = v
		d.start(v, now)
	}
}

func (d *quorumDriver) start(v *voter, nowMs int64) {
	cfg := DefaultConfig(v.id, v.voters, func(int64) int64 { return 0 })
	cfg.Bugs = v.bugs
	cfg.Observer = d
	r, err := New(cfg, v.hard, nil, slices.Clone(v.durable), nowMs)
	if err != nil {
		d.printf("%d does not start: %v", v.id, err)
		return
	}
	v.raft, v.applied, v.sent = r, nil, map[sentKey]Message{}
	d.printf("%d starts: %s", v.id, formatRaft(r))
}

// step delivers a message made from the command's arguments.
func (d *quorumDriver) step(a *args) {
	v := d.voter(a.T, a.Int32("id"))
	m := Message{
		Type: parseMsgType(a), From: a.Int32("from"), To: v.id, Epoch: a.Int32("epoch"),
		LeaderID: a.Int32Or("leader", -1), ErrorCode: int16(a.Int64Or("error", 0)),
		PreVote: a.Has("pre-vote"), LastEpoch: a.Int32Or("last-epoch", 0), LastOffset: a.Int64Or("last-offset", 0),
		Granted:     a.Has("granted"),
		FetchOffset: a.Int64Or("fetch-offset", 0), LastFetchedEpoch: a.Int32Or("last-fetched-epoch", 0),
		HighWatermark: a.Int64Or("hw", 0), DivergingEpoch: -1, DivergingEndOffset: -1,
		SnapshotEndOffset: -1, SnapshotEpoch: -1, PreferredSuccessors: a.IDs("successors"),
	}
	if s, ok := a.LookupStr("diverging"); ok {
		epoch, end, found := strings.Cut(s, "@")
		if !found {
			a.T.Fatalf("%s: diverging=%q: want EPOCH@END", a.Data.Pos, s)
		}
		m.DivergingEpoch, m.DivergingEndOffset = int32(transcript.ParseInt(a.T, epoch)), transcript.ParseInt(a.T, end)
	}
	for _, s := range a.Strs("entries") {
		m.Entries = append(m.Entries, parseEntry(a, s))
	}
	if m.Type.IsResponse() {
		m.Ref = v.sent[sentKey{to: m.From, typ: requestOf(m.Type)}].Ref
	}
	d.printf("%s arrives", formatMsg(m))
	v.raft.Step(d.now(a), m)
}

// processReady handles one Ready of v, as the driver does: persist, then
// send, apply, Advance. It reports whether there was one.
func (d *quorumDriver) processReady(v *voter, verbose bool) bool {
	if !v.raft.HasReady() {
		if verbose {
			d.printf("%d has nothing to do", v.id)
		}
		return false
	}
	rd := v.raft.Ready()
	show := func(format string, args ...any) {
		if verbose {
			d.printf("%d: "+format, append([]any{v.id}, args...)...)
		}
	}
	if rd.HardState != nil {
		v.hard = *rd.HardState
		show("persist epoch %d, voted for %d", v.hard.Epoch, v.hard.VotedFor)
	}
	if rd.TruncateTo >= 0 {
		if rd.TruncateTo < int64(len(v.durable)) {
			v.durable = v.durable[:rd.TruncateTo:rd.TruncateTo]
		}
		show("truncate the log to %d", rd.TruncateTo)
	}
	if len(rd.Entries) > 0 {
		v.durable = append(v.durable, rd.Entries...)
		show("append %s", formatRaftEntries(rd.Entries))
	}
	for _, m := range rd.Messages {
		if !m.Type.IsResponse() {
			v.sent[sentKey{to: m.To, typ: m.Type}] = m
		}
		d.inFlight = append(d.inFlight, m)
		show("send %s", formatMsg(m))
	}
	if len(rd.Committed) > 0 {
		v.applied = append(v.applied, rd.Committed...)
		show("apply %s", formatRaftEntries(rd.Committed))
	}
	v.raft.Advance(d.nowMs, rd)
	return true
}

// deliver steps the messages in flight that match the filter into their
// receivers (or drops them), in the order they were sent.
func (d *quorumDriver) deliver(a *args) {
	from, to := a.Int32Or("from", -1), a.Int32Or("to", -1)
	typ, byType := MsgType(0), a.Has("type")
	if byType {
		typ = parseMsgType(a)
	}
	drop := a.Has("drop")
	var kept, matched []Message
	for _, m := range d.inFlight {
		if (from < 0 || m.From == from) && (to < 0 || m.To == to) && (!byType || m.Type == typ) {
			matched = append(matched, m)
		} else {
			kept = append(kept, m)
		}
	}
	d.inFlight = kept
	for _, m := range matched {
		if drop {
			d.printf("%s dropped", formatMsg(m))
			continue
		}
		d.deliverOne(m, true)
	}
}

func (d *quorumDriver) deliverOne(m Message, verbose bool) {
	v, ok := d.voters[m.To]
	var lost string
	switch {
	case d.cut[[2]int32{m.From, m.To}]:
		lost = "the link is cut"
	case !ok:
		lost = "no such voter"
	case v.raft == nil:
		lost = "the voter is down"
	}
	if lost != "" {
		if verbose {
			d.printf("%s lost: %s", formatMsg(m), lost)
		}
		return
	}
	if verbose {
		d.printf("%s delivered", formatMsg(m))
	}
	v.raft.Step(d.nowMs, m)
}

// stabilize processes readies and delivers messages until neither is left.
func (d *quorumDriver) stabilize(verbose bool) {
	for round := 0; ; round++ {
		if round == 10_000 {
			panic("quorum transcript: the voters never settle")
		}
		busy := false
		for _, id := range d.sortedIDs() {
			if v := d.voters[id]; v.raft != nil {
				for d.processReady(v, verbose) {
					busy = true
				}
			}
		}
		msgs := d.inFlight
		d.inFlight = nil
		for _, m := range msgs {
			d.deliverOne(m, verbose)
			busy = true
		}
		if !busy {
			return
		}
	}
}

// runUntil moves time to untilMs from deadline to deadline, and reports
// only what changed, with the time it changed at.
func (d *quorumDriver) runUntil(untilMs int64) {
	for step := 0; ; step++ {
		if step == 100_000 {
			panic("quorum transcript: run never reaches its end")
		}
		before := d.views()
		d.stabilize(false)
		d.reportChanges(fmt.Sprintf("%d ms: ", d.nowMs), before)
		next := int64(NoDeadlineMs)
		for _, id := range d.sortedIDs() {
			if v := d.voters[id]; v.raft != nil {
				next = min(next, v.raft.NextDeadlineMs())
			}
		}
		if next > untilMs {
			break
		}
		d.nowMs = max(d.nowMs, next)
		before = d.views()
		for _, id := range d.sortedIDs() {
			if v := d.voters[id]; v.raft != nil && v.raft.NextDeadlineMs() <= d.nowMs {
				v.raft.Tick(d.nowMs)
			}
		}
		d.reportChanges(fmt.Sprintf("%d ms: ", d.nowMs), before)
	}
	d.nowMs = untilMs
}

func (d *quorumDriver) status(a *args) {
	ids := d.sortedIDs()
	if a.Has("id") {
		ids = a.IDs("id")
	}
	for _, id := range ids {
		v, ok := d.voters[id]
		if !ok {
			a.T.Fatalf("no voter %d", id)
		}
		if v.raft == nil {
			d.printf("%d: down; durable epoch %d, voted for %d, log %s", id, v.hard.Epoch, v.hard.VotedFor, formatRaftEntries(v.durable))
			continue
		}
		r := v.raft
		d.printf("%d: %s", id, formatRaft(r))
		d.printf("   log %s; applied %d", formatRaftEntries(r.Entries(r.LogStartOffset(), r.EndOffset())), len(v.applied))
	}
	if !a.Has("id") && len(d.inFlight) > 0 {
		d.printf("in flight: %d messages", len(d.inFlight))
	}
}

// --- Observer: the election-safety checker -----------------------------------

func (d *quorumDriver) BecameLeader(id, epoch int32) {
	if prev, ok := d.leaderOfEpoch[epoch]; ok && prev != id {
		d.violations = append(d.violations, fmt.Sprintf("election safety: %d and %d both lead epoch %d", prev, id, epoch))
	}
	d.leaderOfEpoch[epoch] = id
}

func (d *quorumDriver) VotePersisted(int32, int32, int32)    {}
func (d *quorumDriver) Committed(int32, int32, int64, int64) {}
func (d *quorumDriver) Applied(int32, []Entry)               {}

func (d *quorumDriver) reportViolations() {
	for _, v := range d.violations {
		d.printf("VIOLATION: %s", v)
	}
	d.violations = nil
}

// --- What changed ---------------------------------------------------------------

type voterView [][2]string

func (d *quorumDriver) views() map[int32]voterView {
	out := map[int32]voterView{}
	for id, v := range d.voters {
		if v.raft == nil {
			out[id] = voterView{{"role", "down"}}
			continue
		}
		r := v.raft
		out[id] = voterView{
			{"role", r.Role().String()},
			{"epoch", strconv.Itoa(int(r.Epoch()))},
			{"leader", strconv.Itoa(int(r.LeaderID()))},
			{"voted for", strconv.Itoa(int(r.hard.VotedFor))},
			{"commit", strconv.FormatInt(r.CommittedOffset(), 10)},
			{"end", strconv.FormatInt(r.EndOffset(), 10)},
		}
	}
	return out
}

// reportChanges prints, per voter, the fields that changed since before.
func (d *quorumDriver) reportChanges(prefix string, before map[int32]voterView) {
	after := d.views()
	for _, id := range d.sortedIDs() {
		old, existed := before[id]
		cur := after[id]
		if !existed {
			continue
		}
		var changes []string
		if len(old) != len(cur) { // went down or came up
			changes = append(changes, fmt.Sprintf("role %s → %s", old[0][1], cur[0][1]))
		} else {
			for i, f := range cur {
				if old[i][1] != f[1] {
					changes = append(changes, fmt.Sprintf("%s %s → %s", f[0], old[i][1], f[1]))
				}
			}
		}
		if len(changes) > 0 {
			d.printf("  %s%d: %s", prefix, id, strings.Join(changes, ", "))
		}
	}
}

// --- Formatting -------------------------------------------------------------------

func formatRaft(r *Raft) string {
	return fmt.Sprintf("%s, epoch %d, leader %d, voted for %d, commit %d, end %d",
		r.Role(), r.Epoch(), r.LeaderID(), r.hard.VotedFor, r.CommittedOffset(), r.EndOffset())
}

// formatRaftEntries prints entries as e<epoch>@<offset>, with :data when
// there is any (the leader-change entry has none).
func formatRaftEntries(entries []Entry) string {
	if len(entries) == 0 {
		return "[]"
	}
	parts := make([]string, 0, len(entries))
	for _, e := range entries {
		s := fmt.Sprintf("e%d@%d", e.Epoch, e.Offset)
		if e.Data != nil {
			s += ":" + string(e.Data)
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func formatMsg(m Message) string {
	name := m.Type.String()
	if m.PreVote {
		name = strings.Replace(name, "Vote", "PreVote", 1)
	}
	s := fmt.Sprintf("%s %d→%d epoch %d", name, m.From, m.To, m.Epoch)
	if m.LeaderID >= 0 {
		s += fmt.Sprintf(" leader %d", m.LeaderID)
	}
	if m.ErrorCode != errNone {
		return s + " error " + quorumErrorName(m.ErrorCode)
	}
	switch m.Type {
	case MsgVote:
		s += fmt.Sprintf(" last e%d@%d", m.LastEpoch, m.LastOffset)
	case MsgVoteResp:
		s += map[bool]string{true: " granted", false: " refused"}[m.Granted]
	case MsgFetch:
		s += fmt.Sprintf(" offset %d last epoch %d", m.FetchOffset, m.LastFetchedEpoch)
	case MsgFetchResp:
		switch {
		case m.DivergingEpoch >= 0 || m.DivergingEndOffset >= 0:
			s += fmt.Sprintf(" diverging e%d ends at %d", m.DivergingEpoch, m.DivergingEndOffset)
		case m.SnapshotEndOffset >= 0:
			s += fmt.Sprintf(" snapshot %d-%d", m.SnapshotEndOffset, m.SnapshotEpoch)
		default:
			s += " " + formatRaftEntries(m.Entries)
		}
		s += fmt.Sprintf(" hw %d", m.HighWatermark)
	case MsgEndEpoch:
		s += fmt.Sprintf(" successors %v", m.PreferredSuccessors)
	}
	return s
}

func quorumErrorName(code int16) string {
	switch code {
	case errNotLeaderOrFollower:
		return "NOT_LEADER_OR_FOLLOWER"
	case errFencedLeaderEpoch:
		return "FENCED_LEADER_EPOCH"
	case errUnknownLeaderEpoch:
		return "UNKNOWN_LEADER_EPOCH"
	case errInconsistentVoterSet:
		return "INCONSISTENT_VOTER_SET"
	case errSnapshotNotFound:
		return "SNAPSHOT_NOT_FOUND"
	case errPositionOutOfRange:
		return "POSITION_OUT_OF_RANGE"
	}
	return fmt.Sprintf("error %d", code)
}

func parseMsgType(a *args) MsgType {
	s := a.Str("type")
	for t := MsgVote; t <= MsgEndEpochResp; t++ {
		if t.String() == s {
			return t
		}
	}
	a.T.Fatalf("%s: unknown message type %q", a.Data.Pos, s)
	return 0
}

// parseEntry reads e<epoch>@<offset>[:data].
func parseEntry(a *args, s string) Entry {
	head, data, hasData := strings.Cut(s, ":")
	epoch, offset, ok := strings.Cut(strings.TrimPrefix(head, "e"), "@")
	if !ok || !strings.HasPrefix(head, "e") {
		a.T.Fatalf("%s: entry %q: want e<epoch>@<offset>[:data]", a.Data.Pos, s)
	}
	e := Entry{Offset: transcript.ParseInt(a.T, offset), Epoch: int32(transcript.ParseInt(a.T, epoch))}
	if hasData {
		e.Data = []byte(data)
	}
	return e
}

// --- Arguments ----------------------------------------------------------------------

// args reads one command's arguments (transcript.Args), with the readers
// only this package's commands need.
type args struct{ *transcript.Args }
