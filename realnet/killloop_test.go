package realnet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// killLoopKills is how many times the kill -9 loop kills a leader:
// STRAND_SOAK_KILLS (set by `make soak`) or a short default for `make test`.
func killLoopKills(t *testing.T) int {
	t.Helper()
	if s := os.Getenv("STRAND_SOAK_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("STRAND_SOAK_KILLS=%q: want a positive count", s)
		}
		return n
	}
	return 3
}

// TestKillLoopAcksAll runs a real 3-process cluster (every node broker and
// controller), produces with
// acks=all, and repeatedly kills -9 the leader of partition 0 of an RF-3
// topic, restarting it each time once it is gone. Afterwards every
// acknowledged record must be read back at the position its acknowledgement
// gave, with its key and value. Idempotence off: duplicates (client
// retries) are allowed and reported. Idempotence on: none allowed, and each
// partition keeps the produce order.
func TestKillLoopAcksAll(t *testing.T) {
	kills := killLoopKills(t)
	for _, idempotent := range []bool{false, true} {
		name := "idempotence-off"
		if idempotent {
			name = "idempotence-on"
		}
		t.Run(name, func(t *testing.T) { killLoop(t, kills, idempotent) })
	}
}

// loggedRecord is one acknowledged record: what was sent, and its produce
// sequence number (the key's suffix).
type loggedRecord struct {
	key, value []byte
	seq        int
}

func killLoop(t *testing.T, kills int, idempotent bool) {
	start := time.Now()
	// Every node votes, as in the three-nodes example: kills take the
	// active controller down too.
	c := startProcCluster(t, 3, everyNodeVotes, nil)
	const topic, partitions = "killloop", 3
	c.createTopic(topic, partitions, 3)

	opts := []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(60 * time.Second),
		kgo.ProducerLinger(2 * time.Millisecond),
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	producer := c.client(opts...)

	var mu sync.Mutex
	acked := map[position]loggedRecord{}
	var failures []error
	stop := make(chan struct{})
	produced := make(chan int)
	go func() {
		// At most 2,000 records in flight, so a kill finds batches on the
		// wire and in the producer's buffer.
		inFlight := make(chan struct{}, 2000)
		i := 0
		for {
			select {
			case <-stop:
				produced <- i
				return
			case inFlight <- struct{}{}:
			}
			r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "value-%d-%s", i, bytes.Repeat([]byte("x"), i%50))}
			seq := i
			producer.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				defer func() { <-inFlight }()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, err)
					return
				}
				p := position{r.Partition, r.Offset}
				if prev, dup := acked[p]; dup {
					t.Errorf("partition %d offset %d acknowledged twice: record %d and record %d", p.partition, p.offset, prev.seq, seq)
				}
				acked[p] = loggedRecord{key: r.Key, value: r.Value, seq: seq}
			})
			i++
		}
	}()
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}

	for k := range kills {
		before := ackedCount()
		waitUntil(t, "1,000 more acknowledgements before the next kill", 60*time.Second, func() bool { return ackedCount() >= before+1000 })
		leader := c.partitions(topic)[0].leader
		if leader <= 0 {
			t.Fatalf("kill %d: partition 0 of %s has no leader in metadata", k+1, topic)
		}
		c.kill(int(leader))
		killedAt := ackedCount()
		// Keep producing on the others while the leader is dead: the
		// controller fences it after broker.session.timeout.ms.
		time.Sleep(2 * time.Second)
		t.Logf("kill %d: node %d (leader of partition 0) killed at %d acknowledged; %d acknowledged while it was down", k+1, leader, killedAt, ackedCount()-killedAt)
		c.start(int(leader))
		c.waitFullISR(topic, partitions, 3, 60*time.Second)
	}
	waitUntil(t, "1,000 acknowledgements after the last restart", 60*time.Second, func() bool { return ackedCount() >= 1000*(kills+1) })
	close(stop)
	total := <-produced
	flushCtx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := producer.Flush(flushCtx); err != nil {
		t.Fatalf("flush after the kills: %v", err)
	}
	mu.Lock()
	t.Logf("%d produced, %d acknowledged, %d failed after the client's retries", total, len(acked), len(failures))
	if len(failures) > 0 {
		t.Logf("first failure: %v", failures[0])
	}
	mu.Unlock()

	// Read every partition to its end with a fresh client.
	copies := map[string]int{}
	lastSeq := map[int32]int{}
	found := 0
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ends := endOffsets(t, c, topic, partitions)
	readCtx, cancelRead := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancelRead()
	next := map[int32]int64{}
	for p := range int32(partitions) {
		next[p] = 0
	}
	for !allAt(next, ends) {
		fetches := consumer.PollFetches(readCtx)
		if readCtx.Err() != nil {
			t.Fatalf("read %v of end offsets %v before the deadline", next, ends)
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("consume: partition %d: %v", fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			copies[string(r.Key)]++
			seq, err := strconv.Atoi(string(bytes.TrimPrefix(r.Key, []byte("key-"))))
			if err != nil {
				t.Fatalf("partition %d offset %d: key %q is not one this test wrote", r.Partition, r.Offset, r.Key)
			}
			if idempotent {
				if last, ok := lastSeq[r.Partition]; ok && seq <= last {
					t.Errorf("partition %d offset %d: record %d after record %d: the idempotent producer's order was not kept", r.Partition, r.Offset, seq, last)
				}
			}
			lastSeq[r.Partition] = seq
			w, ok := acked[position{r.Partition, r.Offset}]
			if !ok {
				return // written but not acknowledged, or a retried copy
			}
			if !bytes.Equal(w.key, r.Key) || !bytes.Equal(w.value, r.Value) {
				t.Fatalf("partition %d offset %d: read %q=%q, acknowledged %q=%q", r.Partition, r.Offset, r.Key, r.Value, w.key, w.value)
			}
			found++
		})
	}
	if found != len(acked) {
		missing := 0
		for p := range acked { // order-independent: a count and one example
			if p.offset >= ends[p.partition] {
				missing++
			}
		}
		t.Fatalf("read %d of %d acknowledged records; %d lie at or past their partition's end offset %v: acknowledged writes were lost", found, len(acked), missing, ends)
	}
	duplicates := 0
	for _, n := range copies { // order-independent: a sum
		duplicates += n - 1
	}
	if idempotent && duplicates > 0 {
		t.Errorf("%d duplicate copies with the idempotent producer; there must be none", duplicates)
	}
	t.Logf("every acknowledged record read back; %d duplicate copies; %d kills in %s", duplicates, kills, time.Since(start).Round(time.Millisecond))
}

// endOffsets lists each partition's high watermark with a ListOffsets
// (latest) request through kgo's sharded request path.
func endOffsets(t *testing.T, c *procCluster, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	ends := map[int32]int64{}
	waitUntil(t, "end offsets of "+topic, 30*time.Second, func() bool {
		got, err := listEnds(c.admin, topic, partitions)
		if err != nil {
			return false
		}
		ends = got
		return true
	})
	return ends
}

// allAt reports whether every partition's next offset reached its end.
func allAt(next, ends map[int32]int64) bool {
	for p, end := range ends { // order-independent: all must hold
		if next[p] < end {
			return false
		}
	}
	return true
}

// listEnds asks each partition's leader for its high watermark
// (ListOffsets, latest); kgo sends each partition to its leader.
func listEnds(cl *kgo.Client, topic string, partitions int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	if len(ends) != int(partitions) {
		return nil, fmt.Errorf("%d of %d partitions answered", len(ends), partitions)
	}
	return ends, nil
}
