package realnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupLedger is what a consumer group's members read, shared by them.
type groupLedger struct {
	mu sync.Mutex
	// copies counts each position's deliveries.
	copies map[position]int
	// got is each position's first delivery.
	got map[position]producedRecord
	// byMember counts each member's deliveries.
	byMember map[int]int
	// duplicates counts deliveries of a position already delivered.
	duplicates int
	// commitErrors are the commits that failed; a record whose commit
	// failed may be delivered again.
	commitErrors []error
	// fetchErrors are errors kgo put in polls (it injects group errors
	// such as a failed join and keeps retrying): reported, not failures.
	fetchErrors []error
	// bad is the first second delivery that differs from the first.
	bad error
	// next is, per member and partition, the offset after the highest one
	// the member read.
	next map[int]map[int32]int64
	// assigned counts the partitions each member was ever assigned.
	assigned map[int]int
	// unprocessed counts, per member, the records of the poll that
	// returned as it stopped, which it left for the next owner.
	unprocessed map[int]int
}

// newGroupLedger returns an empty ledger.
func newGroupLedger() *groupLedger {
	return &groupLedger{copies: map[position]int{}, got: map[position]producedRecord{}, byMember: map[int]int{},
		next: map[int]map[int32]int64{}, assigned: map[int]int{}, unprocessed: map[int]int{}}
}

// distinct is how many positions were delivered at least once.
func (l *groupLedger) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.copies)
}

// snapshot returns the duplicate count and the number of failed commits.
func (l *groupLedger) snapshot() (duplicates, commitErrors int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.duplicates, len(l.commitErrors)
}

// commitMode is how a group member commits.
type commitMode int

const (
	// commitEachPoll: the member commits what each poll returned,
	// synchronously, after processing it, and only then lets a rebalance
	// proceed (BlockRebalanceOnPoll). A rebalance or a clean leave
	// therefore never hands on a partition past records this member
	// processed but did not commit.
	commitEachPoll commitMode = iota
	// kgoAutocommit: kgo's defaults, which commit polled offsets every 5
	// s, before a revoke, and on a clean leave (Close).
	kgoAutocommit
)

// groupMember is one kgo group member polling in its own goroutine,
// recording each record it processes in the ledger.
type groupMember struct {
	id   int
	mode commitMode
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
}

// startGroupMember joins group as member id, static (KIP-345) with
// group.instance.id instance when that is not empty.
func startGroupMember(t *testing.T, c *procCluster, group, topic string, id int, instance string, mode commitMode, ledger *groupLedger) *groupMember {
	t.Helper()
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.bootstrap()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(256 << 10), // small polls: members overlap in time and each rebalance has something in flight
		// Only assignments are watched: setting OnPartitionsRevoked would
		// replace kgo's commit before a revoke.
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { ledger.assign(id, ps) }),
	}
	if mode == commitEachPoll {
		opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	} else {
		// Autocommit as kgo does it, with its failures recorded (kgo's
		// default callback only logs them).
		opts = append(opts, kgo.AutoCommitCallback(func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err == nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if err == nil {
							err = kerr.ErrorForCode(rp.ErrorCode)
						}
					}
				}
			}
			if err != nil {
				ledger.mu.Lock()
				ledger.commitErrors = append(ledger.commitErrors, fmt.Errorf("member %d autocommit: %w", id, err))
				ledger.mu.Unlock()
			}
		}))
	}
	if instance != "" {
		opts = append(opts, kgo.InstanceID(instance))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m := &groupMember{id: id, mode: mode, cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	go m.run(ledger)
	t.Cleanup(func() { m.leave() })
	return m
}

func (m *groupMember) run(ledger *groupLedger) {
	defer close(m.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-m.done:
		}
	}()
	for {
		fetches := m.cl.PollRecords(ctx, 500)
		if ctx.Err() != nil {
			// The member is stopping: records of this poll (one that
			// returned as the stop came) are not processed, and not
			// committed either way. commitEachPoll commits only after
			// processing. kgo's autocommit commits only what was
			// polled before the latest poll (kgo.ConsumerGroup's doc:
			// "autocommitting only commits what is *previously*
			// polled"), and its revoke on leave commits just that, so
			// the partition's next owner delivers these records again.
			// Recording them would count that delivery as a duplicate
			// (the 18 to 437 "duplicates" this test once reported).
			ledger.unprocess(m.id, fetches)
			m.cl.AllowRebalance()
			return
		}
		ledger.record(m.id, fetches)
		if m.mode == kgoAutocommit {
			continue
		}
		// Commit what this poll returned before any rebalance: a commit
		// the coordinator acknowledged is replicated (acks=all).
		commitCtx, cancelCommit := context.WithTimeout(context.Background(), 20*time.Second)
		if err := m.cl.CommitUncommittedOffsets(commitCtx); err != nil {
			ledger.mu.Lock()
			ledger.commitErrors = append(ledger.commitErrors, fmt.Errorf("member %d: %w", m.id, err))
			ledger.mu.Unlock()
		}
		cancelCommit()
		m.cl.AllowRebalance()
	}
}

// record notes one poll's records, delivered to member id; a second
// delivery of a position must carry the same record.
func (l *groupLedger) record(id int, fetches kgo.Fetches) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fe := range fetches.Errors() {
		if !errors.Is(fe.Err, context.Canceled) {
			l.fetchErrors = append(l.fetchErrors, fmt.Errorf("member %d: partition %d: %w", id, fe.Partition, fe.Err))
		}
	}
	fetches.EachRecord(func(r *kgo.Record) {
		p := position{r.Partition, r.Offset}
		if first, ok := l.got[p]; ok {
			l.duplicates++
			if (!bytes.Equal(first.key, r.Key) || !bytes.Equal(first.value, r.Value)) && l.bad == nil {
				l.bad = fmt.Errorf("member %d: partition %d offset %d: read %q, earlier %q", id, r.Partition, r.Offset, r.Key, first.key)
			}
		} else {
			l.got[p] = producedRecord{key: r.Key, value: r.Value}
		}
		l.copies[p]++
		l.byMember[id]++
		if l.next[id] == nil {
			l.next[id] = map[int32]int64{}
		}
		l.next[id][p.partition] = max(l.next[id][p.partition], p.offset+1)
	})
}

// unprocess notes records a stopping member got and did not process.
func (l *groupLedger) unprocess(id int, fetches kgo.Fetches) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unprocessed[id] += fetches.NumRecords()
}

// assign counts partitions assigned to member id.
func (l *groupLedger) assign(id int, ps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, partitions := range ps { // order-independent: a sum
		l.assigned[id] += len(partitions)
	}
}

// leave stops polling after the poll in hand is committed and leaves the
// group cleanly (kgo's Close sends LeaveGroup).
func (m *groupMember) leave() {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	<-m.done
	m.cl.Close()
}

// TestKgoConsumerGroupExactlyOnce runs a kgo consumer group of 3 members
// over a 12-partition RF-3 topic on a 3-broker cluster of real processes.
// Once each member has partitions, kgo's idempotent producer writes
// 100,000 records while they read. Members commit each poll before letting
// a rebalance proceed. After a quarter is read one member leaves cleanly,
// after half the group coordinator's broker is killed -9, after three
// quarters it is restarted. Asserted: every record is delivered, each
// exactly as produced; no record is delivered twice, except after a commit
// that failed (then the count is reported); every member got records; at
// the end the committed offset of every partition is its end offset.
func TestKgoConsumerGroupExactlyOnce(t *testing.T) {
	groupExactlyOnce(t, commitEachPoll, true)
}

// TestKgoConsumerGroupAutocommitLeave is the same group with kgo's default
// autocommit (polled offsets committed every 5 s, before a revoke and on
// Close) through a member's clean leave. kgo commits a poll's records once
// the next poll starts, and its revoke on leave commits those before the
// partitions move; every poll a member processes is followed by another
// (the one its stop interrupts), so nothing processed is delivered twice.
// Records of a poll that returns as the member stops are left unprocessed
// (kgo does not commit them; their next owner delivers them).
func TestKgoConsumerGroupAutocommitLeave(t *testing.T) {
	groupExactlyOnce(t, kgoAutocommit, false)
}

func groupExactlyOnce(t *testing.T, mode commitMode, killCoordinator bool) {
	start := time.Now()
	c := startProcCluster(t, 3, separateController, nil)
	const topic, group, partitions = "group-topic", "strand-group", 12
	c.createTopic(topic, partitions, 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))

	ledger := newGroupLedger()
	var members []*groupMember
	for id := 1; id <= 3; id++ {
		members = append(members, startGroupMember(t, c, group, topic, id, "", mode, ledger))
	}
	waitUntil(t, "every member assigned partitions", 60*time.Second, func() bool {
		ledger.mu.Lock()
		defer ledger.mu.Unlock()
		return ledger.assigned[1] > 0 && ledger.assigned[2] > 0 && ledger.assigned[3] > 0
	})
	t.Logf("group formed at %s", time.Since(start).Round(time.Millisecond))

	// The producer writes while the members read, so each step below
	// meets records in flight.
	type produced struct {
		want map[position]producedRecord
		err  error
	}
	producing := make(chan produced, 1)
	go func() {
		want, err := produceKeyedErr(producer, topic, interopRecords)
		producing <- produced{want, err}
	}()
	progress := func(what string, n int) {
		t.Helper()
		waitUntil(t, what, 120*time.Second, func() bool {
			ledger.mu.Lock()
			bad := ledger.bad
			ledger.mu.Unlock()
			if bad != nil {
				t.Fatal(bad)
			}
			return ledger.distinct() >= n
		})
		t.Logf("%d distinct records read at %s", n, time.Since(start).Round(time.Millisecond))
	}

	progress("records read by every member", interopRecords/4)
	ledger.mu.Lock()
	t.Logf("deliveries per member before the leave: %v", ledger.byMember)
	if len(ledger.byMember) != 3 {
		t.Errorf("only members %v got records", ledger.byMember)
	}
	ledger.mu.Unlock()
	members[2].leave()
	ledger.mu.Lock()
	leftUnprocessed := ledger.unprocessed[3]
	ledger.mu.Unlock()
	t.Logf("member 3 left cleanly after %d distinct records; its last poll, as it stopped, returned %d it left unprocessed",
		ledger.distinct(), leftUnprocessed)
	// What member 3 read against what the group has committed now: a
	// duplicate below tells whether its last commit was missing (commit
	// below what it read) or was there but not used.
	committedAtLeave, _ := fetchCommitted(c, group, topic, partitions)
	ledger.mu.Lock()
	readByLeaver := maps.Clone(ledger.next[3])
	ledger.mu.Unlock()
	progress("records read after the leave", interopRecords/2)
	duplicatesAfterLeave, commitErrorsAfterLeave := ledger.snapshot()
	if duplicatesAfterLeave > 0 && commitErrorsAfterLeave == 0 {
		t.Errorf("%d records delivered twice through a clean leave, with every commit acknowledged; "+
			"member 3 read up to (next offset by partition) %v, committed right after its leave %v",
			duplicatesAfterLeave, readByLeaver, committedAtLeave)
	}
	if killCoordinator {
		coordinator := c.coordinator(group)
		c.kill(int(coordinator))
		t.Logf("killed node %d, the coordinator, after %d distinct records", coordinator, ledger.distinct())
		progress("records read after the kill", interopRecords*3/4)
		c.start(int(coordinator))
	}
	result := <-producing
	if result.err != nil {
		t.Fatal(result.err)
	}
	want := result.want
	progress("every record", len(want))
	for _, m := range members[:2] {
		m.leave()
	}

	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	ledger.checkDelivered(t, want)
	ledger.report(t, start)
	checkCommittedAtEnd(t, c, group, topic, partitions)
}

// checkDelivered checks every produced record was delivered as produced,
// and nothing else; the ledger's lock is held.
func (l *groupLedger) checkDelivered(t *testing.T, want map[position]producedRecord) {
	t.Helper()
	if l.bad != nil {
		t.Fatal(l.bad)
	}
	for p, w := range want { // order-independent: a check per position
		got, ok := l.got[p]
		switch {
		case !ok:
			t.Fatalf("partition %d offset %d never delivered", p.partition, p.offset)
		case !bytes.Equal(got.key, w.key) || !bytes.Equal(got.value, w.value):
			t.Fatalf("partition %d offset %d: delivered %q=%q, produced %q=%q", p.partition, p.offset, got.key, got.value, w.key, w.value)
		}
	}
	if len(l.got) != len(want) {
		t.Fatalf("%d positions delivered, %d produced", len(l.got), len(want))
	}
}

// report logs the deliveries, and fails on a duplicate unless a commit
// failed; the ledger's lock is held.
func (l *groupLedger) report(t *testing.T, start time.Time) {
	t.Helper()
	t.Logf("deliveries per member %v; %d duplicates; %d failed commits; %d errors in polls; %s in all",
		l.byMember, l.duplicates, len(l.commitErrors), len(l.fetchErrors), time.Since(start).Round(time.Millisecond))
	if len(l.fetchErrors) > 0 {
		t.Logf("first error in a poll: %v", l.fetchErrors[0])
	}
	if len(l.commitErrors) > 0 {
		t.Logf("first failed commit: %v", l.commitErrors[0])
	} else if l.duplicates > 0 {
		t.Errorf("%d records delivered twice although every commit was acknowledged", l.duplicates)
	}
}

// checkCommittedAtEnd checks the group's committed offset of every
// partition is the partition's end offset.
func checkCommittedAtEnd(t *testing.T, c *procCluster, group, topic string, partitions int32) {
	t.Helper()
	ends := endOffsets(t, c, topic, partitions)
	if !committedAtEnd(c, group, topic, partitions, ends) {
		waitUntil(t, fmt.Sprintf("committed offsets of %s at the end offsets %v", group, ends), 10*time.Second, func() bool {
			return committedAtEnd(c, group, topic, partitions, ends)
		})
	}
}

// committedAtEnd reports whether group's committed offsets equal ends for
// every partition.
func committedAtEnd(c *procCluster, group, topic string, partitions int32, ends map[int32]int64) bool {
	committed, err := fetchCommitted(c, group, topic, partitions)
	return err == nil && maps.Equal(committed, ends)
}

// fetchCommitted returns group's committed offset of each partition of
// topic that has one (OffsetFetch, routed by kgo to the coordinator).
func fetchCommitted(c *procCluster, group, topic string, partitions int32) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.admin)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	committed := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", rp.Partition, err)
			}
			if rp.Offset >= 0 {
				committed[rp.Partition] = rp.Offset
			}
		}
	}
	return committed, nil
}

// TestKgoConsumerGroupStaticMemberRestart runs 3 static members
// (group.instance.id, KIP-345) committing each poll while 30,000 records
// are produced. A third of the way, member 3 closes (a static member does
// not leave) and a new client with its instance id joins at once: it must
// take member 3's place without a rebalance (member 1's generation is
// unchanged) and read on from member 3's commits, nothing lost or
// delivered twice.
func TestKgoConsumerGroupStaticMemberRestart(t *testing.T) {
	start := time.Now()
	c := startProcCluster(t, 3, separateController, nil)
	const topic, group, partitions, records = "static-topic", "static-group", 12, 30000
	c.createTopic(topic, partitions, 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	ledger := newGroupLedger()
	var members []*groupMember
	for id := 1; id <= 3; id++ {
		members = append(members, startGroupMember(t, c, group, topic, id, fmt.Sprintf("instance-%d", id), commitEachPoll, ledger))
	}
	waitUntil(t, "every member assigned partitions", 60*time.Second, func() bool {
		ledger.mu.Lock()
		defer ledger.mu.Unlock()
		return ledger.assigned[1] > 0 && ledger.assigned[2] > 0 && ledger.assigned[3] > 0
	})
	// Let a rebalance still settling (cooperative-sticky takes two rounds)
	// finish before the generation is read.
	waitUntil(t, "member 1's generation to settle", 30*time.Second, func() bool {
		_, g1 := members[0].cl.GroupMetadata()
		time.Sleep(3 * time.Second)
		_, g2 := members[0].cl.GroupMetadata()
		return g1 == g2
	})
	want := produceKeyed(t, producer, topic, records/3)
	waitUntil(t, "the first third read", 60*time.Second, func() bool { return ledger.distinct() >= records/3 })
	_, generation := members[0].cl.GroupMetadata()
	members[2].leave() // a static member's Close does not leave
	startGroupMember(t, c, group, topic, 4, "instance-3", commitEachPoll, ledger)
	for p, r := range produceKeyed(t, producer, topic, 2*records/3) { // order-independent: a union
		want[p] = r
	}
	waitUntil(t, "every record read", 60*time.Second, func() bool { return ledger.distinct() >= len(want) })
	if _, now := members[0].cl.GroupMetadata(); now != generation {
		t.Errorf("member 1's generation went from %d to %d: the static member's restart caused a rebalance", generation, now)
	}
	ledger.mu.Lock()
	if ledger.byMember[4] == 0 {
		t.Errorf("the restarted static member read nothing: deliveries %v", ledger.byMember)
	}
	ledger.mu.Unlock()
	for _, m := range members[:2] {
		m.leave()
	}
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	ledger.checkDelivered(t, want)
	ledger.report(t, start)
}
