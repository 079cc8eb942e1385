package realnet

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strand/core/broker"
)

// sessionStats reads node's fetch session counters on its loop.
func sessionStats(t *testing.T, n *Node) broker.FetchSessionStats {
	t.Helper()
	var stats broker.FetchSessionStats
	if !n.Call(func(b *broker.Node) { stats = b.FetchSessionStats() }) {
		t.Fatal("the node's loop has stopped")
	}
	return stats
}

// consumeExactly polls cl until it has read every record of want (per
// topic, by position), failing on a record not in want, read twice, out of
// order within its partition, or with other bytes than produced.
func consumeExactly(t *testing.T, cl *kgo.Client, want map[string]map[position]producedRecord) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	total := 0
	for _, w := range want { // order-independent: a sum
		total += len(w)
	}
	seen := map[string]map[position]bool{}
	last := map[string]map[int32]int64{}
	for topic := range want { // order-independent: fills maps
		seen[topic], last[topic] = map[position]bool{}, map[int32]int64{}
	}
	read := 0
	for read < total {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records before the deadline", read, total)
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("consume %s partition %d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			p := position{r.Partition, r.Offset}
			w, ok := want[r.Topic][p]
			switch {
			case !ok:
				t.Fatalf("%s: read partition %d offset %d, not produced in this round", r.Topic, p.partition, p.offset)
			case seen[r.Topic][p]:
				t.Fatalf("%s: read partition %d offset %d twice", r.Topic, p.partition, p.offset)
			case hasLast(last[r.Topic], p):
				t.Fatalf("%s partition %d: offset %d after %d", r.Topic, p.partition, p.offset, last[r.Topic][p.partition])
			case !bytes.Equal(r.Key, w.key) || !bytes.Equal(r.Value, w.value):
				t.Fatalf("%s partition %d offset %d: read %q=%q, produced %q=%q", r.Topic, p.partition, p.offset, r.Key, r.Value, w.key, w.value)
			}
			seen[r.Topic][p] = true
			last[r.Topic][p.partition] = p.offset
			read++
		})
	}
}

// TestKgoFetchSession: kgo consumes 3 topics × 4 partitions from one broker
// through a fetch session (KIP-227) with Fetch v13+ (topics by id): first a
// backlog of 3 × 2,000 records, then 24 small rounds produced into one
// topic at a time while the consumer long-polls. Every record is read once,
// in order, with its bytes; the broker created a session and answered the
// rounds with incremental fetches by topic id (its FetchSessionStats), and
// closing the client closes the session. kcat (librdkafka 2.0: Fetch v11,
// no sessions) then still consumes a topic whole and makes no session.
func TestKgoFetchSession(t *testing.T) {
	c := startCluster(t, 1, nil)
	topics := []string{"session-a", "session-b", "session-c"}
	for _, topic := range topics {
		c.createTopic(topic, 4, 1)
	}
	producer := c.client()
	backlog := map[string]map[position]producedRecord{}
	for _, topic := range topics {
		backlog[topic] = produceKeyed(t, producer, topic, 2000)
	}
	consumer := c.client(kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	consumeExactly(t, consumer, backlog)
	before := sessionStats(t, c.nodes[0])
	if before.Created == 0 || before.Cached == 0 {
		t.Fatalf("after the backlog: %+v; want a session created and cached", before)
	}

	const rounds = 24
	produced := map[string]int{}
	for topic, records := range backlog { // order-independent: counts
		produced[topic] = len(records)
	}
	for round := range rounds {
		topic := topics[round%len(topics)]
		more := produceKeyed(t, producer, topic, 5+round)
		produced[topic] += len(more)
		consumeExactly(t, consumer, map[string]map[position]producedRecord{topic: more})
	}
	after := sessionStats(t, c.nodes[0])
	t.Logf("fetch sessions: before the rounds %+v, after %+v", before, after)
	served := after.IncrementalFetches - before.IncrementalFetches
	if served < rounds {
		t.Fatalf("%d incremental fetches answered over %d rounds (stats before %+v, after %+v)", served, rounds, before, after)
	}
	if after.IncrementalByTopicID-before.IncrementalByTopicID != served {
		t.Fatalf("of %d incremental fetches, %d named topics by id; kgo should use Fetch v13+", served, after.IncrementalByTopicID-before.IncrementalByTopicID)
	}
	if after.Cached != 1 {
		t.Fatalf("%d sessions cached; one consumer of one broker holds one", after.Cached)
	}
	// Closing kgo sends a final-epoch fetch, which closes the session.
	consumer.Close()
	c.waitFor("the session closed", 10*time.Second, func() bool { return sessionStats(t, c.nodes[0]).Cached == 0 })

	t.Run("kcat", func(t *testing.T) {
		kcatPath(t)
		out := string(kcatAt(t, c.bootstrap(), nil, "-C", "-t", topics[0], "-e", "-o", "beginning", "-f", "%p %o\n"))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != produced[topics[0]] {
			t.Fatalf("kcat read %d records of %s, %d were produced", len(lines), topics[0], produced[topics[0]])
		}
		positions := map[string]bool{}
		for _, line := range lines {
			positions[line] = true
		}
		if len(positions) != len(lines) {
			t.Fatalf("kcat read %d distinct positions in %d records", len(positions), len(lines))
		}
		if stats := sessionStats(t, c.nodes[0]); stats.Created != after.Created || stats.Cached != 0 {
			t.Fatalf("kcat made %d fetch sessions (%d cached); librdkafka sends none", stats.Created-after.Created, stats.Cached)
		}
	})
}
