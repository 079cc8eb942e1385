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

// groupMember is one kgo group member polling in its own goroutine: it
// processes each poll (records it in the ledger), commits what it polled
// synchronously, and only then lets a rebalance proceed
// (BlockRebalanceOnPoll). A rebalance or a clean leave therefore never
// hands on a partition past records this member processed but did not
// commit.
type groupMember struct {
	id   int
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
}

// startGroupMember joins group as member id.
func startGroupMember(t *testing.T, c *procCluster, group, topic string, id int, want map[position]producedRecord, ledger *groupLedger) *groupMember {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.bootstrap()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxBytes(256<<10), // small polls: members overlap in time and each rebalance has something in flight
	)
	if err != nil {
		t.Fatal(err)
	}
	m := &groupMember{id: id, cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
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
			m.cl.AllowRebalance()
			return
		}
		ledger.mu.Lock()
		for _, fe := range fetches.Errors() {
			if ledger.bad == nil && !errors.Is(fe.Err, context.Canceled) {
				ledger.bad = fmt.Errorf("member %d: fetch partition %d: %w", m.id, fe.Partition, fe.Err)
			}
		}
		fetches.EachRecord(func(r *kgo.Record) {
			p := position{r.Partition, r.Offset}
			w, ok := want[p]
			if (!ok || !bytes.Equal(w.key, r.Key) || !bytes.Equal(w.value, r.Value)) && ledger.bad == nil {
				ledger.bad = fmt.Errorf("member %d: partition %d offset %d: read %q, produced %q", m.id, r.Partition, r.Offset, r.Key, w.key)
			}
			if ledger.copies[p] > 0 {
				ledger.duplicates++
			}
			ledger.copies[p]++
			ledger.byMember[m.id]++
		})
		ledger.mu.Unlock()
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
// produced; no record is delivered twice, except possibly after a commit
// that failed (reported); every member got records; at the end the
// committed offset of every partition is its end offset.
func TestKgoConsumerGroupExactlyOnce(t *testing.T) {
	start := time.Now()
	c := startProcCluster(t, 3, separateController, nil)
	const topic, group, partitions = "group-exactly-once", "strand-group", 12
	c.createTopic(topic, partitions, 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	want := produceKeyed(t, producer, topic, interopRecords)
	t.Logf("produced %d records with the idempotent producer in %s", len(want), time.Since(start).Round(time.Millisecond))

	ledger := &groupLedger{copies: map[position]int{}, byMember: map[int]int{}}
	var members []*groupMember
	for id := 1; id <= 3; id++ {
		members = append(members, startGroupMember(t, c, group, topic, id, want, ledger))
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
	}
	waitUntil(t, "every member to get records", 60*time.Second, func() bool {
		ledger.mu.Lock()
		defer ledger.mu.Unlock()
		return len(ledger.byMember) == 3
	})
	progress("a quarter of the records", interopRecords/4)

	members[2].leave()
	afterLeave := ledger.distinct()
	t.Logf("member 3 left cleanly after %d distinct records", afterLeave)
	progress("half of the records", interopRecords/2)
	duplicatesBeforeKill, commitErrorsBeforeKill := ledger.snapshot()
	if duplicatesBeforeKill > 0 && commitErrorsBeforeKill == 0 {
		t.Errorf("%d records delivered twice through a clean leave, with every commit acknowledged", duplicatesBeforeKill)
	}

	coordinator := c.coordinator(group)
	c.kill(int(coordinator))
	t.Logf("killed node %d, the coordinator, after %d distinct records", coordinator, ledger.distinct())
	progress("three quarters of the records", 3*interopRecords/4)
	c.start(int(coordinator))
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
