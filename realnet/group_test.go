package realnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	// byMember counts each member's deliveries.
	byMember map[int]int
	// duplicates counts deliveries of a position already delivered.
	duplicates int
	// commitErrors are the commits that failed; a record whose commit
	// failed may be delivered again.
	commitErrors []error
	// bad is the first delivery that does not match what was produced.
	bad error
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

// startGroupMember joins group as member id.
func startGroupMember(t *testing.T, c *procCluster, group, topic string, id int, mode commitMode, want map[position]producedRecord, ledger *groupLedger) *groupMember {
	t.Helper()
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.bootstrap()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(256 << 10), // small polls: members overlap in time and each rebalance has something in flight
	}
	if mode == commitEachPoll {
		opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m := &groupMember{id: id, mode: mode, cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	go m.run(topic, want, ledger)
	t.Cleanup(func() { m.leave() })
	return m
}

func (m *groupMember) run(topic string, want map[position]producedRecord, ledger *groupLedger) {
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
			// Records of this poll are not processed; with autocommit
			// kgo would commit them on leave, so they are recorded.
			if m.mode == kgoAutocommit {
				ledger.record(m.id, fetches, want)
			}
			m.cl.AllowRebalance()
			return
		}
		ledger.record(m.id, fetches, want)
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

// record notes one poll's records, delivered to member id, checking each
// against what was produced at its position.
func (l *groupLedger) record(id int, fetches kgo.Fetches, want map[position]producedRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fe := range fetches.Errors() {
		if l.bad == nil && !errors.Is(fe.Err, context.Canceled) {
			l.bad = fmt.Errorf("member %d: fetch partition %d: %w", id, fe.Partition, fe.Err)
		}
	}
	fetches.EachRecord(func(r *kgo.Record) {
		p := position{r.Partition, r.Offset}
		w, ok := want[p]
		if (!ok || !bytes.Equal(w.key, r.Key) || !bytes.Equal(w.value, r.Value)) && l.bad == nil {
			l.bad = fmt.Errorf("member %d: partition %d offset %d: read %q, produced %q", id, r.Partition, r.Offset, r.Key, w.key)
		}
		if l.copies[p] > 0 {
			l.duplicates++
		}
		l.copies[p]++
		l.byMember[id]++
	})
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
// over a 12-partition RF-3 topic on a 3-broker cluster of real processes,
// holding 100,000 records written by kgo's idempotent producer. Members
// commit each poll before letting a rebalance proceed. Midway one member
// leaves cleanly, later the group coordinator's broker is killed -9 (and
// restarted). Asserted: every record is delivered, each exactly as
// produced; no record is delivered twice, except after a commit that
// failed (then the count is reported); every member got records; at the
// end the committed offset of every partition is its end offset.
func TestKgoConsumerGroupExactlyOnce(t *testing.T) {
	groupExactlyOnce(t, commitEachPoll, true)
}

// TestKgoConsumerGroupAutocommitLeave is the same group with kgo's default
// autocommit (polled offsets committed every 5 s, before a revoke and on
// Close) through a member's clean leave: kgo commits what the leaver
// polled before its partitions move, so nothing is delivered twice.
func TestKgoConsumerGroupAutocommitLeave(t *testing.T) {
	groupExactlyOnce(t, kgoAutocommit, false)
}

func groupExactlyOnce(t *testing.T, mode commitMode, killCoordinator bool) {
	start := time.Now()
	c := startProcCluster(t, 3, separateController, nil)
	const topic, group, partitions = "group-topic", "strand-group", 12
	c.createTopic(topic, partitions, 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	want := produceKeyed(t, producer, topic, interopRecords)
	t.Logf("produced %d records with the idempotent producer in %s", len(want), time.Since(start).Round(time.Millisecond))

	ledger := &groupLedger{copies: map[position]int{}, byMember: map[int]int{}}
	var members []*groupMember
	for id := 1; id <= 3; id++ {
		members = append(members, startGroupMember(t, c, group, topic, id, mode, want, ledger))
	}
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
		t.Logf("%s read at %s", what, time.Since(start).Round(time.Millisecond))
	}
	waitUntil(t, "every member to get records", 60*time.Second, func() bool {
		ledger.mu.Lock()
		defer ledger.mu.Unlock()
		return len(ledger.byMember) == 3
	})
	progress("a quarter of the records", interopRecords/4)

	members[2].leave()
	t.Logf("member 3 left cleanly after %d distinct records", ledger.distinct())
	progress("half of the records", interopRecords/2)
	duplicatesAfterLeave, commitErrorsAfterLeave := ledger.snapshot()
	if duplicatesAfterLeave > 0 && commitErrorsAfterLeave == 0 {
		t.Errorf("%d records delivered twice through a clean leave, with every commit acknowledged", duplicatesAfterLeave)
	}

	if killCoordinator {
		coordinator := c.coordinator(group)
		c.kill(int(coordinator))
		t.Logf("killed node %d, the coordinator, after %d distinct records", coordinator, ledger.distinct())
		progress("three quarters of the records", 3*interopRecords/4)
		c.start(int(coordinator))
	}
	progress("every record", interopRecords)
	for _, m := range members[:2] {
		m.leave()
	}

	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	if ledger.bad != nil {
		t.Fatal(ledger.bad)
	}
	for p := range want { // order-independent: a check per position
		if ledger.copies[p] == 0 {
			t.Fatalf("partition %d offset %d never delivered", p.partition, p.offset)
		}
	}
	t.Logf("deliveries per member %v; %d duplicates; %d failed commits; %s in all",
		ledger.byMember, ledger.duplicates, len(ledger.commitErrors), time.Since(start).Round(time.Millisecond))
	if len(ledger.commitErrors) > 0 {
		t.Logf("first failed commit: %v", ledger.commitErrors[0])
	} else if ledger.duplicates > 0 {
		t.Errorf("%d records delivered twice although every commit was acknowledged", ledger.duplicates)
	}
	checkCommittedAtEnd(t, c, group, topic, partitions)
}

// checkCommittedAtEnd checks the group's committed offset of every
// partition is the partition's end offset (OffsetFetch, routed by kgo to
// the coordinator).
func checkCommittedAtEnd(t *testing.T, c *procCluster, group, topic string, partitions int32) {
	t.Helper()
	ends := endOffsets(t, c, topic, partitions)
	var committed map[int32]int64
	waitUntil(t, "the group's committed offsets", 30*time.Second, func() bool {
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
		if err != nil || kerr.ErrorForCode(resp.ErrorCode) != nil {
			return false
		}
		committed = map[int32]int64{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					return false
				}
				committed[rp.Partition] = rp.Offset
			}
		}
		return true
	})
	for p := range partitions {
		if committed[p] != ends[p] {
			t.Fatalf("committed offsets %v; end offsets %v: partition %d differs", committed, ends, p)
		}
	}
}
