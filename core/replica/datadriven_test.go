package replica

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"

	"strand/internal/transcript"
)

// TestTranscripts plays the replication scenarios in testdata/, one story
// per file, each command followed by what it must print. To regenerate the
// expected output after a deliberate change:
//
//	go test ./core/replica -run TestTranscripts -rewrite
//
// The commands, in the order a story usually uses them (ids are replica
// ids; now= is the time in ms and, when left out, stays what it was):
//
//	new-replica id=N [hw=H] [log=(e0: a b, e1: c, e0: old*10)] [log-start=S]
//	            [min-isr=2] [lag-max-ms=10000] [ack-waiters-max=16]
//	            [broker-epoch=E] [bugs=(hw-truncation, early-ack, no-fencing,
//	            isr-min-ignored)]
//	    A replica over a log holding the given records (epoch: values;
//	    tag*N is N records named tag@offset), restarted with HW checkpoint H.
//	restart id=N hw=H [log-end=O]
//	    The broker restarts: the log keeps its records below O (a power loss
//	    drops the unflushed tail) and a new state machine starts from HW
//	    checkpoint H.
//	apply id=N[,M…] leader=L epoch=E partition-epoch=P replicas=… isr=…
//	      [elr=…] [now=T]
//	    The controller pushes a partition state; the broker performs the
//	    truncation the transition asks for.
//	produce id=N acks=all|1|0|2 values=a,b request=R [deadline=D] [now=T]
//	    AdmitProduce, the append as one batch, OnLeaderAppend.
//	leader-append id=N last-offset=O request=R [acks=all] [deadline=D]
//	    OnLeaderAppend alone: a batch the log already holds (an idempotent
//	    producer's retry), reported at its original offsets.
//	fetch follower=F leader=L [now=T] [lose-answer]
//	    One fetch round: NextFetch on F, OnFollowerFetch on L, L's records
//	    read, OnFetchResponse on F and the action performed; with
//	    lose-answer the answer never reaches F.
//	next-fetch id=N
//	    The request F would send; fetch-response answers it.
//	fetch-response id=N [error=NAME] [diverging=EPOCH@END] [read=FROM..TO]
//	               [hw=H] [log-start=S] [leo=E]
//	    Hands a leader's decision to OnFetchResponse and prints the action,
//	    without performing it.
//	follower-append id=N leader-hw=H
//	    OnFollowerAppend: the follower appended records and learned H.
//	receive-fetch id=N replica=F offset=O epoch=E last-epoch=L
//	              [replica-epoch=B] [log-start=S] [now=T]
//	    A raw follower Fetch arriving at N (epochs may be "none").
//	consumer-fetch id=N offset=O [epoch=E] [any-replica]
//	shrink-isr id=N [now=T]
//	send-alter-partition id=N
//	    PendingAlterPartition: what the broker would send now.
//	answer-alter-partition id=N [error=NAME] [isr=…] [leader-epoch=E]
//	                       [partition-epoch=P] [proposal=ID] [now=T]
//	    The controller's answer to the request sent last; by default it
//	    commits the proposed ISR at the next partition epoch.
//	alter-partition id=N [error=NAME] [controller] [now=T]
//	    send-alter-partition then answer-alter-partition; with controller,
//	    the controller below decides the answer (HandleAlterPartition).
//	expire id=N now=T
//	set-ineligible id=N replicas=… [now=T]
//	set-log-start id=N offset=O        (DeleteRecords moved the log start)
//	truncate-log id=N to=O             (the log shrank under the replica)
//	append-log id=N epoch=E values=…   (records the replica is not told of)
//	low-watermark id=N alive=…
//	compare-logs id=N,M                (identical, or where they differ)
//	status [id=N]
//	reset
//
// The controller's side (elr.go, controller.go), over one partition state:
//
//	controller replicas=… isr=… [leader=L] [epoch=E] [partition-epoch=P]
//	           [elr=…] [last-known-elr=…] [min-isr=2] [elr-enabled=true]
//	           [unclean-enabled=false] [fenced=…]
//	change-isr isr=… [unclean-shutdown=…]
//	elect alive=…
//	unclean-shutdown id=N
//	push id=N[,M…] [now=T]             (apply the controller's state)
//
// After every command the driver prints the acks=all results the replicas
// completed and, for each replica, what changed: role, epochs, ISR, ELR,
// HW, LEO, log start, proposal and waiting acks.
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		d := newReplicaDriver()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return d.run(t, td)
		})
	})
}

// replicaDriver holds the replicas of one transcript, and a controller.
type replicaDriver struct {
	nodes map[int32]*node
	nowMs int64
	// fetches are the requests next-fetch remembered, by replica.
	fetches map[int32]FetchRequest
	// sent are the AlterPartition requests sent last, by leader.
	sent map[int32]*AlterPartitionRequest
	ctrl *controllerView
	out  strings.Builder
}

// controllerView is the controller's state of the one partition.
type controllerView struct {
	state  PartitionState
	pol    ELRPolicy
	fenced []int32
}

func newReplicaDriver() *replicaDriver {
	return &replicaDriver{nodes: map[int32]*node{}, fetches: map[int32]FetchRequest{}, sent: map[int32]*AlterPartitionRequest{}}
}

func (d *replicaDriver) printf(format string, args ...any) {
	fmt.Fprintf(&d.out, format, args...)
	d.out.WriteByte('\n')
}

func (d *replicaDriver) run(t *testing.T, td *datadriven.TestData) string {
	d.out.Reset()
	a := &args{transcript.New(t, td)}
	before := d.views()
	switch td.Cmd {
	case "new-replica":
		d.newReplica(a)
	case "restart":
		d.restart(a)
	case "apply":
		d.apply(a, a.IDs("id"), a.state())
	case "produce":
		d.produce(a)
	case "leader-append":
		d.leaderAppend(a)
	case "fetch":
		d.fetch(d.node(t, a.Int32("follower")), d.node(t, a.Int32("leader")), a.now(d), a.Has("lose-answer"))
	case "next-fetch":
		d.nextFetch(a)
	case "fetch-response":
		d.fetchResponse(a)
	case "follower-append":
		n := d.node(t, a.Int32("id"))
		n.p.OnFollowerAppend(a.Int64("leader-hw"))
		d.printf("%d's hw: %d", n.id, n.p.HighWatermark())
	case "receive-fetch":
		d.receiveFetch(a)
	case "consumer-fetch":
		d.consumerFetch(a)
	case "shrink-isr":
		n := d.node(t, a.Int32("id"))
		if n.p.MaybeShrinkISR(a.now(d)) {
			d.printf("%d proposes a shrink", n.id)
		} else {
			d.printf("%d proposes no shrink", n.id)
		}
	case "send-alter-partition":
		d.sendAlterPartition(d.node(t, a.Int32("id")))
	case "answer-alter-partition":
		d.answerAlterPartition(a, d.node(t, a.Int32("id")))
	case "alter-partition":
		d.alterPartition(a)
	case "expire":
		d.node(t, a.Int32("id")).p.ExpireAcks(a.now(d))
	case "set-ineligible":
		n := d.node(t, a.Int32("id"))
		n.p.SetIneligibleReplicas(a.IDs("replicas"), a.now(d))
	case "set-log-start":
		n := d.node(t, a.Int32("id"))
		offset := a.Int64("offset")
		n.log.entries = n.log.entries[offset-n.log.start:]
		n.log.start = offset
		d.printf("%d: %s", n.id, formatLog(n.log))
	case "truncate-log":
		n := d.node(t, a.Int32("id"))
		n.log.truncateTo(a.Int64("to"))
	case "append-log":
		n := d.node(t, a.Int32("id"))
		n.log.append(a.Int32("epoch"), a.Strs("values")...)
	case "low-watermark":
		d.lowWatermark(a)
	case "compare-logs":
		d.compareLogs(a)
	case "status":
		d.status(a)
	case "reset":
		*d = *newReplicaDriver()
	case "controller":
		d.setController(a)
	case "change-isr":
		c := d.controller(t)
		c.state = ChangeISR(c.state, a.IDs("isr"), a.IDs("unclean-shutdown"), c.pol)
		d.printf("controller: %s", formatState(c.state))
	case "elect":
		d.elect(a)
	case "unclean-shutdown":
		c := d.controller(t)
		var changed bool
		c.state, changed = RecordUncleanShutdown(c.state, a.Int32("id"))
		d.printf("controller: %s (changed: %v)", formatState(c.state), changed)
	case "push":
		d.apply(a, a.IDs("id"), d.controller(t).state)
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	a.Done()
	d.reportAcks()
	d.reportChanges(before)
	return d.out.String()
}

func (d *replicaDriver) node(t *testing.T, id int32) *node {
	n, ok := d.nodes[id]
	if !ok {
		t.Fatalf("no replica %d", id)
	}
	return n
}

func (d *replicaDriver) sortedIDs() []int32 {
	ids := make([]int32, 0, len(d.nodes))
	for id := range d.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (d *replicaDriver) controller(t *testing.T) *controllerView {
	if d.ctrl == nil {
		t.Fatalf("no controller: use the controller command first")
	}
	return d.ctrl
}

// --- Replicas -------------------------------------------------------------

func (d *replicaDriver) newReplica(a *args) {
	id := a.Int32("id")
	cfg := testConfig(id)
	cfg.MinInsyncReplicas = int(a.Int64Or("min-isr", int64(cfg.MinInsyncReplicas)))
	cfg.ReplicaLagTimeMaxMs = a.Int64Or("lag-max-ms", cfg.ReplicaLagTimeMaxMs)
	cfg.AckWaitersMax = int(a.Int64Or("ack-waiters-max", int64(cfg.AckWaitersMax)))
	cfg.BrokerEpoch = a.Int64Or("broker-epoch", cfg.BrokerEpoch)
	cfg.Bugs = a.bugs()
	log := &fakeLog{start: a.Int64Or("log-start", 0)}
	a.fillLog(log)
	n := newNode(id, log, a.Int64Or("hw", 0), cfg)
	d.nodes[id] = n
	d.printf("%d: %s, hw %d", id, formatLog(log), n.p.HighWatermark())
}

func (d *replicaDriver) restart(a *args) {
	old := d.node(a.T, a.Int32("id"))
	if end, ok := a.lookupInt64("log-end"); ok {
		old.log.truncateTo(end)
	}
	n := newNode(old.id, old.log, a.Int64("hw"), old.p.cfg)
	d.nodes[old.id] = n
	delete(d.fetches, old.id)
	delete(d.sent, old.id)
	d.printf("%d restarts: %s, hw %d", n.id, formatLog(n.log), n.p.HighWatermark())
}

func (d *replicaDriver) apply(a *args, ids []int32, s PartitionState) {
	now := a.now(d)
	for _, id := range ids {
		n := d.node(a.T, id)
		tr, err := n.p.ApplyState(s, now)
		if err != nil {
			d.printf("%d rejects the state: %v", id, err)
			continue
		}
		// What the replica took from the state: a planted bug may keep it
		// from taking all of it.
		var b strings.Builder
		applied := n.p.State()
		switch {
		case tr.Role == RoleLeader:
			fmt.Fprintf(&b, "%d leads epoch %d", id, applied.LeaderEpoch)
		case applied.LeaderID == NoLeader:
			fmt.Fprintf(&b, "%d has no leader in epoch %d", id, applied.LeaderEpoch)
		default:
			fmt.Fprintf(&b, "%d follows %d in epoch %d", id, applied.LeaderID, applied.LeaderEpoch)
		}
		if !tr.NewLeaderEpoch {
			b.WriteString(" (same epoch)")
		}
		if tr.TruncateToOffset != NoOffset {
			fmt.Fprintf(&b, ", truncates its log to %d", tr.TruncateToOffset)
			n.log.truncateTo(tr.TruncateToOffset)
		}
		d.printf("%s", b.String())
	}
}

func (d *replicaDriver) produce(a *args) {
	n := d.node(a.T, a.Int32("id"))
	acks := a.acks()
	values := a.Strs("values")
	request := uint64(a.Int64("request"))
	deadline := a.Int64Or("deadline", 0)
	now := a.now(d)
	epoch, err := n.p.AdmitProduce(acks)
	if err != nil {
		d.printf("%d refuses request %d: %s", n.id, request, formatError(err))
		return
	}
	first := n.log.LogEndOffset()
	n.log.append(epoch, values...)
	last := n.log.LogEndOffset() - 1
	d.printf("%d appends %s at %d..%d in epoch %d (request %d)", n.id, strings.Join(values, " "), first, last, epoch, request)
	err = n.p.OnLeaderAppend(LeaderAppend{LastOffset: last, Acks: acks, RequestID: request, DeadlineMs: deadline}, now)
	if err != nil {
		d.printf("%d: OnLeaderAppend: %s", n.id, formatError(err))
	}
}

func (d *replicaDriver) leaderAppend(a *args) {
	n := d.node(a.T, a.Int32("id"))
	acks := AcksAll
	if a.Has("acks") {
		acks = a.acks()
	}
	err := n.p.OnLeaderAppend(LeaderAppend{LastOffset: a.Int64("last-offset"), Acks: acks, RequestID: uint64(a.Int64("request")), DeadlineMs: a.Int64Or("deadline", 0)}, a.now(d))
	if err != nil {
		d.printf("%d: OnLeaderAppend: %s", n.id, formatError(err))
	}
}

// fetch is one fetch round from follower f to leader l, as the broker runs
// it: the request, the leader's decision, the records read, the
// follower's action performed. With loseAnswer the answer never arrives
// (the follower crashed, or the network dropped it).
func (d *replicaDriver) fetch(f, l *node, nowMs int64, loseAnswer bool) {
	leaderID, req, ok := f.p.NextFetch()
	switch {
	case !ok:
		d.printf("%d does not fetch", f.id)
		return
	case leaderID != l.id:
		d.printf("%d fetches from %d, not %d", f.id, leaderID, l.id)
		return
	}
	d.printf("%d fetches from %d: offset %d, epoch %s, last fetched epoch %s",
		f.id, l.id, req.FetchOffset, formatEpoch(req.CurrentLeaderEpoch), formatEpoch(req.LastFetchedEpoch))
	dec := l.p.OnFollowerFetch(req, nowMs)
	d.printf("%d answers %s", l.id, formatDecision(dec))
	if loseAnswer {
		d.printf("the answer is lost")
		return
	}
	var records []entry
	if dec.ShouldRead() {
		records = l.log.slice(dec.ReadFromOffset, dec.ReadToOffset)
	}
	act := f.p.OnFetchResponse(req, dec)
	switch act.Kind {
	case ActionAppend:
		f.log.entries = append(f.log.entries, records...)
		f.p.OnFollowerAppend(dec.HighWatermark)
		if len(records) > 0 {
			d.printf("%d appends %s", f.id, formatEntries(records))
		} else {
			d.printf("%d has nothing new", f.id)
		}
		return
	case ActionTruncate:
		f.log.truncateTo(act.Offset)
	case ActionTruncateFullyAndStartAt:
		f.log.truncateFullyAndStartAt(act.Offset)
	}
	d.printf("%d %s", f.id, formatAction(act))
}

func (d *replicaDriver) nextFetch(a *args) {
	n := d.node(a.T, a.Int32("id"))
	leaderID, req, ok := n.p.NextFetch()
	if !ok {
		d.printf("%d does not fetch", n.id)
		delete(d.fetches, n.id)
		return
	}
	d.fetches[n.id] = req
	d.printf("%d would fetch from %d: offset %d, epoch %s, last fetched epoch %s, log start %d, broker epoch %d",
		n.id, leaderID, req.FetchOffset, formatEpoch(req.CurrentLeaderEpoch), formatEpoch(req.LastFetchedEpoch), req.LogStartOffset, req.ReplicaEpoch)
}

func (d *replicaDriver) fetchResponse(a *args) {
	n := d.node(a.T, a.Int32("id"))
	req, ok := d.fetches[n.id]
	if !ok {
		a.T.Fatalf("%d has no request to answer: use next-fetch first", n.id)
	}
	dec := FetchDecision{Error: a.errorCode("error"), HighWatermark: a.Int64Or("hw", 0), LogStartOffset: a.Int64Or("log-start", 0), LogEndOffset: a.Int64Or("leo", 0)}
	if s, ok := a.LookupStr("diverging"); ok {
		epoch, end, found := strings.Cut(s, "@")
		if !found {
			a.T.Fatalf("diverging=%q: want EPOCH@END", s)
		}
		dec.Diverging = true
		dec.DivergingEpoch = EpochEndOffset{Epoch: int32(transcript.ParseInt(a.T, epoch)), EndOffset: transcript.ParseInt(a.T, end)}
	}
	if s, ok := a.LookupStr("read"); ok {
		from, to, found := strings.Cut(s, "..")
		if !found {
			a.T.Fatalf("read=%q: want FROM..TO", s)
		}
		dec.ReadFromOffset, dec.ReadToOffset = transcript.ParseInt(a.T, from), transcript.ParseInt(a.T, to)
	}
	act := n.p.OnFetchResponse(req, dec)
	d.printf("%d %s", n.id, formatAction(act))
}

func (d *replicaDriver) receiveFetch(a *args) {
	n := d.node(a.T, a.Int32("id"))
	req := FetchRequest{
		ReplicaID:          a.Int32("replica"),
		ReplicaEpoch:       a.Int64Or("replica-epoch", -1),
		FetchOffset:        a.Int64("offset"),
		CurrentLeaderEpoch: a.epoch("epoch"),
		LastFetchedEpoch:   a.epoch("last-epoch"),
		LogStartOffset:     a.Int64Or("log-start", 0),
	}
	dec := n.p.OnFollowerFetch(req, a.now(d))
	d.printf("%d answers %s", n.id, formatDecision(dec))
}

func (d *replicaDriver) consumerFetch(a *args) {
	n := d.node(a.T, a.Int32("id"))
	offset := a.Int64("offset")
	epoch := NoEpoch
	if a.Has("epoch") {
		epoch = a.epoch("epoch")
	}
	var dec FetchDecision
	if a.Has("any-replica") {
		dec = n.p.OnConsumerFetchAnyReplica(offset, epoch)
	} else {
		dec = n.p.OnConsumerFetch(offset, epoch)
	}
	d.printf("%d answers the consumer %s", n.id, formatDecision(dec))
}

func (d *replicaDriver) sendAlterPartition(n *node) *AlterPartitionRequest {
	req, ok := n.p.PendingAlterPartition()
	if !ok {
		d.printf("%d has no AlterPartition to send", n.id)
		return nil
	}
	d.sent[n.id] = req
	d.printf("%d sends AlterPartition #%d: isr %v, leader epoch %d, partition epoch %d, broker epochs %v",
		n.id, req.ProposalID, req.NewISR, req.LeaderEpoch, req.PartitionEpoch, req.BrokerEpochs)
	return req
}

func (d *replicaDriver) answerAlterPartition(a *args, n *node) {
	req, ok := d.sent[n.id]
	if !ok {
		a.T.Fatalf("%d sent no AlterPartition to answer", n.id)
	}
	resp := AlterPartitionResponse{ProposalID: req.ProposalID, Error: a.errorCode("error")}
	if resp.Error == codeNone {
		resp.LeaderEpoch, resp.PartitionEpoch, resp.ISR = req.LeaderEpoch, req.PartitionEpoch+1, req.NewISR
	}
	resp.ProposalID = uint64(a.Int64Or("proposal", int64(resp.ProposalID)))
	resp.LeaderEpoch = a.Int32Or("leader-epoch", resp.LeaderEpoch)
	resp.PartitionEpoch = a.Int32Or("partition-epoch", resp.PartitionEpoch)
	if a.Has("isr") {
		resp.ISR = a.IDs("isr")
	}
	d.deliverAlterPartition(n, resp, a.now(d))
}

func (d *replicaDriver) deliverAlterPartition(n *node, resp AlterPartitionResponse, nowMs int64) {
	if resp.Error != codeNone {
		d.printf("the controller answers #%d: %s", resp.ProposalID, codeName(resp.Error))
	} else {
		d.printf("the controller answers #%d: isr %v, leader epoch %d, partition epoch %d", resp.ProposalID, resp.ISR, resp.LeaderEpoch, resp.PartitionEpoch)
	}
	if err := n.p.OnAlterPartitionResponse(resp, nowMs); err != nil {
		d.printf("%d refuses the answer: %s", n.id, formatError(err))
	}
}

func (d *replicaDriver) alterPartition(a *args) {
	n := d.node(a.T, a.Int32("id"))
	if !a.Has("controller") {
		if d.sendAlterPartition(n) != nil {
			d.answerAlterPartition(a, n)
		}
		return
	}
	c := d.controller(a.T)
	req := d.sendAlterPartition(n)
	if req == nil {
		return
	}
	next, resp := HandleAlterPartition(c.state, *req, c.pol, func(id int32) BrokerStatus {
		status := BrokerStatus{Registered: true, Epoch: -1, Fenced: slices.Contains(c.fenced, id)}
		if r, ok := d.nodes[id]; ok {
			status.Epoch = r.p.cfg.BrokerEpoch
		}
		return status
	})
	c.state = next
	d.printf("controller: %s", formatState(c.state))
	d.deliverAlterPartition(n, resp, a.now(d))
}

func (d *replicaDriver) lowWatermark(a *args) {
	n := d.node(a.T, a.Int32("id"))
	alive := a.IDs("alive")
	lw, ok := n.p.LowWatermark(func(id int32) bool { return slices.Contains(alive, id) })
	if !ok {
		d.printf("%d does not lead: no low watermark", n.id)
		return
	}
	d.printf("%d's low watermark: %d", n.id, lw)
}

func (d *replicaDriver) compareLogs(a *args) {
	ids := a.IDs("id")
	if len(ids) != 2 {
		a.T.Fatalf("%s: compare-logs needs two ids", a.Data.Pos)
	}
	x, y := d.node(a.T, ids[0]).log, d.node(a.T, ids[1]).log
	for o := max(x.start, y.start); o < min(x.LogEndOffset(), y.LogEndOffset()); o++ {
		if ex, ey := x.entries[o-x.start], y.entries[o-y.start]; ex != ey {
			d.printf("the logs differ at offset %d: %d holds e%d[%s], %d holds e%d[%s]", o, ids[0], ex.epoch, ex.value, ids[1], ey.epoch, ey.value)
			return
		}
	}
	if x.start != y.start || x.LogEndOffset() != y.LogEndOffset() {
		d.printf("the logs agree where both hold records, but %d holds %d..%d and %d holds %d..%d",
			ids[0], x.start, x.LogEndOffset(), ids[1], y.start, y.LogEndOffset())
		return
	}
	d.printf("the logs of %d and %d are identical: %s", ids[0], ids[1], formatLog(x))
}

func (d *replicaDriver) status(a *args) {
	ids := d.sortedIDs()
	if a.Has("id") {
		ids = a.IDs("id")
	}
	for _, id := range ids {
		n := d.node(a.T, id)
		p := n.p
		d.printf("%d: %s", id, formatRole(p))
		d.printf("   %s", formatState(p.state))
		d.printf("   hw %d, %s", p.hw, formatLog(n.log))
		if p.role == RoleLeader {
			d.printf("   epoch start %d; followers: %s", p.leader.epochStartOffset, formatFollowers(p.leader.followers))
			if pr := p.leader.proposal; pr != nil {
				d.printf("   proposal #%d: isr %v (sent: %v)", pr.request.ProposalID, pr.request.NewISR, pr.handedOut)
			}
			for _, r := range p.leader.refused {
				d.printf("   refused %d until %d ms", r.replicaID, r.untilMs)
			}
		}
		for _, w := range p.acks.waiters {
			d.printf("   request %d waits for hw %d until %d ms", w.requestID, w.requiredOffset, w.deadlineMs)
		}
		if deadline, ok := p.NextAckDeadlineMs(); ok {
			d.printf("   next acks deadline %d ms", deadline)
		}
		if p.follower.awaitingState {
			d.printf("   awaits a new state")
		}
	}
	if d.ctrl != nil && !a.Has("id") {
		d.printf("controller: %s", formatState(d.ctrl.state))
	}
}

// --- Controller -------------------------------------------------------------

func (d *replicaDriver) setController(a *args) {
	c := &controllerView{
		state: a.state(),
		pol: ELRPolicy{
			MinInsyncReplicas: int(a.Int64Or("min-isr", 2)),
			ELREnabled:        a.BoolOr("elr-enabled", true),
			UncleanEnabled:    a.BoolOr("unclean-enabled", false),
		},
		fenced: a.IDs("fenced"),
	}
	d.ctrl = c
	d.printf("controller: %s", formatState(c.state))
}

func (d *replicaDriver) elect(a *args) {
	c := d.controller(a.T)
	alive := a.IDs("alive")
	var kind ElectionKind
	c.state, kind = Elect(c.state, c.pol, func(id int32) bool { return slices.Contains(alive, id) })
	d.printf("election: %s", electionKindName(kind))
	d.printf("controller: %s", formatState(c.state))
}

func electionKindName(k ElectionKind) string {
	switch k {
	case ElectionNoLeader:
		return "no leader"
	case ElectionKept:
		return "leader kept"
	case ElectionClean:
		return "clean, from the ISR"
	case ElectionFromELR:
		return "from the ELR"
	case ElectionLastKnownELR:
		return "from the last known ELR"
	case ElectionUnclean:
		return "unclean"
	}
	return fmt.Sprintf("kind %d", k)
}

// --- What changed -----------------------------------------------------------

// replicaView is the part of a replica every command reports changes of.
type replicaView struct {
	fields [][2]string // name, value
}

func (d *replicaDriver) views() map[int32]replicaView {
	out := map[int32]replicaView{}
	for id, n := range d.nodes {
		out[id] = viewOf(n)
	}
	return out
}

func viewOf(n *node) replicaView {
	p := n.p
	proposal := "none"
	if pr := p.leader.proposal; p.role == RoleLeader && pr != nil {
		proposal = fmt.Sprintf("#%d isr %v", pr.request.ProposalID, pr.request.NewISR)
	}
	var waiting []uint64
	for _, w := range p.acks.waiters {
		waiting = append(waiting, w.requestID)
	}
	return replicaView{fields: [][2]string{
		{"role", formatRole(p)},
		{"leader epoch", strconv.Itoa(int(p.state.LeaderEpoch))},
		{"partition epoch", strconv.Itoa(int(p.state.PartitionEpoch))},
		{"isr", fmt.Sprint(p.state.ISR)},
		{"elr", fmt.Sprint(p.state.ELR)},
		{"hw", strconv.FormatInt(p.hw, 10)},
		{"leo", strconv.FormatInt(n.log.LogEndOffset(), 10)},
		{"log start", strconv.FormatInt(n.log.LogStartOffset(), 10)},
		{"proposal", proposal},
		{"acks waiting", fmt.Sprint(waiting)},
	}}
}

// reportChanges prints, per replica, every field that the command changed.
func (d *replicaDriver) reportChanges(before map[int32]replicaView) {
	for _, id := range d.sortedIDs() {
		old, existed := before[id]
		if !existed {
			continue
		}
		cur := viewOf(d.nodes[id])
		var changes []string
		for i, f := range cur.fields {
			if was := old.fields[i][1]; was != f[1] {
				changes = append(changes, fmt.Sprintf("%s %s → %s", f[0], was, f[1]))
			}
		}
		if len(changes) > 0 {
			d.printf("  %d: %s", id, strings.Join(changes, ", "))
		}
	}
}

// reportAcks prints the acks=all produces the command completed.
func (d *replicaDriver) reportAcks() {
	for _, id := range d.sortedIDs() {
		for _, r := range d.nodes[id].p.TakeAckResults() {
			result := "ok"
			if r.Error != codeNone {
				result = codeName(r.Error)
			}
			d.printf("%d answers request %d: %s", id, r.RequestID, result)
		}
	}
}

// --- Formatting ---------------------------------------------------------------

func formatRole(p *Partition) string {
	switch {
	case p.role == RoleLeader:
		return "leader"
	case p.role == RoleFollower && p.state.LeaderID == NoLeader:
		return "follower, no leader"
	case p.role == RoleFollower:
		return fmt.Sprintf("follower of %d", p.state.LeaderID)
	}
	return "no state"
}

func formatState(s PartitionState) string {
	leader := strconv.Itoa(int(s.LeaderID))
	if s.LeaderID == NoLeader {
		leader = "none"
	}
	out := fmt.Sprintf("leader %s, epoch %d, partition epoch %d, replicas %v, isr %v, elr %v",
		leader, s.LeaderEpoch, s.PartitionEpoch, s.Replicas, s.ISR, s.ELR)
	if len(s.LastKnownELR) > 0 {
		out += fmt.Sprintf(", last known elr %v", s.LastKnownELR)
	}
	return out
}

// formatLog prints the log as its offset range and its records grouped by
// epoch: "log 0..3: e0[m1 m2] e1[m3]".
func formatLog(l *fakeLog) string {
	return fmt.Sprintf("log %d..%d: %s", l.start, l.LogEndOffset(), formatEntries(l.entries))
}

func formatEntries(entries []entry) string {
	if len(entries) == 0 {
		return "empty"
	}
	var b strings.Builder
	for i, e := range entries {
		switch {
		case i == 0:
			fmt.Fprintf(&b, "e%d[%s", e.epoch, e.value)
		case entries[i-1].epoch != e.epoch:
			fmt.Fprintf(&b, "] e%d[%s", e.epoch, e.value)
		default:
			fmt.Fprintf(&b, " %s", e.value)
		}
	}
	b.WriteString("]")
	return b.String()
}

func formatEpoch(e int32) string {
	if e == NoEpoch {
		return "none"
	}
	return strconv.Itoa(int(e))
}

func formatDecision(dec FetchDecision) string {
	leader := fmt.Sprintf("(hw %d, log %d..%d)", dec.HighWatermark, dec.LogStartOffset, dec.LogEndOffset)
	switch {
	case dec.Error != codeNone:
		return fmt.Sprintf("%s %s", codeName(dec.Error), leader)
	case dec.Diverging:
		return fmt.Sprintf("diverging: epoch %s ends at %d %s", formatEpoch(dec.DivergingEpoch.Epoch), dec.DivergingEpoch.EndOffset, leader)
	case dec.ReadFromOffset == dec.ReadToOffset:
		return fmt.Sprintf("nothing to read at %d %s", dec.ReadFromOffset, leader)
	}
	return fmt.Sprintf("records %d..%d %s", dec.ReadFromOffset, dec.ReadToOffset, leader)
}

func formatAction(act FollowerAction) string {
	switch act.Kind {
	case ActionIgnore:
		return "ignores the answer"
	case ActionAppend:
		return fmt.Sprintf("appends what it got (leader's log start %d)", act.LogStartOffset)
	case ActionTruncate:
		return fmt.Sprintf("truncates to %d", act.Offset)
	case ActionTruncateFullyAndStartAt:
		return fmt.Sprintf("empties its log and restarts it at %d", act.Offset)
	case ActionBackoff:
		return "backs off"
	case ActionAwaitState:
		return "stops fetching until a new state"
	}
	return fmt.Sprintf("action %d", act.Kind)
}

func formatFollowers(fs []followerProgress) string {
	var parts []string
	for _, f := range fs {
		leo := "?"
		if f.logEndOffset != NoOffset {
			leo = strconv.FormatInt(f.logEndOffset, 10)
		}
		caught := "never caught up"
		if f.lastCaughtUpTimeMs != neverCaughtUpMs {
			caught = fmt.Sprintf("caught up at %d ms", f.lastCaughtUpTimeMs)
		}
		parts = append(parts, fmt.Sprintf("%d at %s (%s)", f.replicaID, leo, caught))
	}
	return strings.Join(parts, ", ")
}

// codeName is a Kafka error code's name as Kafka 2.6+ spells it (kerr
// still calls code 6 NOT_LEADER_FOR_PARTITION).
func codeName(code int16) string {
	if code == codeNotLeaderOrFollower {
		return "NOT_LEADER_OR_FOLLOWER"
	}
	return errorName(code)
}

func formatError(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return codeName(e.Code) + ": " + e.Reason
	}
	return err.Error()
}

// --- Arguments ------------------------------------------------------------------

// args reads one command's arguments (transcript.Args), with the readers
// only this package's commands need.
type args struct{ *transcript.Args }

func (a *args) lookupInt64(key string) (int64, bool) {
	s, ok := a.LookupStr(key)
	if !ok {
		return 0, false
	}
	return transcript.ParseInt(a.T, s), true
}

// now is the command's now=, which becomes the driver's time.
func (a *args) now(d *replicaDriver) int64 {
	d.nowMs = a.Int64Or("now", d.nowMs)
	return d.nowMs
}

// epoch reads a leader epoch, "none" being NoEpoch.
func (a *args) epoch(key string) int32 {
	s, ok := a.LookupStr(key)
	if !ok {
		a.T.Fatalf("%s: %s needs %s=", a.Data.Pos, a.Data.Cmd, key)
	}
	if s == "none" {
		return NoEpoch
	}
	return int32(transcript.ParseInt(a.T, s))
}

func (a *args) state() PartitionState {
	leader := NoLeader
	if s, ok := a.LookupStr("leader"); ok && s != "none" {
		leader = int32(transcript.ParseInt(a.T, s))
	}
	return PartitionState{
		LeaderID: leader, LeaderEpoch: a.Int32Or("epoch", 0), PartitionEpoch: a.Int32Or("partition-epoch", 0),
		Replicas: a.IDs("replicas"), ISR: a.IDs("isr"), ELR: a.IDs("elr"), LastKnownELR: a.IDs("last-known-elr"),
	}
}

func (a *args) acks() int16 {
	s, _ := a.LookupStr("acks")
	if s == "all" {
		return AcksAll
	}
	return int16(transcript.ParseInt(a.T, s))
}

// errorCode reads a Kafka error name (NOT_LEADER_OR_FOLLOWER); absent is 0.
func (a *args) errorCode(key string) int16 {
	s, ok := a.LookupStr(key)
	if !ok {
		return codeNone
	}
	for code := int16(1); code < 200; code++ {
		if kerr.ErrorForCode(code) != nil && codeName(code) == s {
			return code
		}
	}
	a.T.Fatalf("%s: unknown Kafka error %q", a.Data.Pos, s)
	return 0
}

func (a *args) bugs() Bugs {
	var b Bugs
	for _, name := range a.Strs("bugs") {
		switch name {
		case "hw-truncation":
			b.HWTruncation = true
		case "early-ack":
			b.EarlyAck = true
		case "no-fencing":
			b.NoFencing = true
		case "isr-min-ignored":
			b.ISRMinIgnored = true
		case "follower-past-hw":
			b.FollowerPastHW = true
		default:
			a.T.Fatalf("%s: unknown planted bug %q", a.Data.Pos, name)
		}
	}
	return b
}

// fillLog appends log=(e0: a b, e1: c, e0: old*10) to l: each value is an
// epoch and its records; tag*N stands for N records named tag@offset.
func (a *args) fillLog(l *fakeLog) {
	vals, _ := a.Lookup("log")
	for _, v := range vals {
		epoch, records, ok := strings.Cut(v, ":")
		if !ok || !strings.HasPrefix(epoch, "e") {
			a.T.Fatalf("%s: log value %q: want eEPOCH: records", a.Data.Pos, v)
		}
		e := int32(transcript.ParseInt(a.T, strings.TrimPrefix(epoch, "e")))
		for _, r := range strings.Fields(records) {
			if tag, count, many := strings.Cut(r, "*"); many {
				l.appendN(e, int(transcript.ParseInt(a.T, count)), tag)
			} else {
				l.append(e, r)
			}
		}
	}
}
