package realnet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// The tests in this file drive Strand with segmentio/kafka-go, unchanged:
// its own protocol code, its Writer, its Reader alone and in a group, and
// its Client's admin and group requests.

// kafkaGoCodecs are the codecs kafka-go's Writer produces with.
var kafkaGoCodecs = []struct {
	name  string
	codec kafka.Compression
}{
	{"gzip", kafka.Gzip},
	{"snappy", kafka.Snappy},
	{"lz4", kafka.Lz4},
	{"zstd", kafka.Zstd},
}

// kafkaGoClient is a kafka-go Client for the cluster.
func kafkaGoClient(c interopCluster) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(c.bootstrap()...), Timeout: 20 * time.Second}
}

// TestKafkaGoEachCodec drives both clientClusters with kafka-go: its
// Client's Metadata lists every broker, the topics, their partitions and
// leaders; CreateTopics and DeleteTopics work; then per codec a Writer
// (RequiredAcks RequireAll, Hash balancer) produces clientRecords keyed
// records and a Reader per partition reads them back identical, each at
// the offset the Writer's Completion reported, in produce order.
func TestKafkaGoEachCodec(t *testing.T) {
	for _, cluster := range clientClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			var topics []string
			for _, codec := range kafkaGoCodecs {
				topic := "kafkago-" + codec.name
				c.createTopic(topic, 3, int16(cluster.size))
				topics = append(topics, topic)
			}
			checkKafkaGoMetadata(t, c, topics, 3)
			checkKafkaGoCreateDelete(t, c, int16(cluster.size))
			for i, codec := range kafkaGoCodecs {
				t.Run(codec.name, func(t *testing.T) {
					acked := kafkaGoProduce(t, c, topics[i], codec.codec, 0, clientRecords)
					checkProduceOrder(t, acked)
					kafkaGoConsumeAll(t, c, topics[i], acked)
				})
			}
		})
	}
}

// checkKafkaGoMetadata checks kafka-go's Metadata answer: every broker at
// its address, a controller among them, each topic with its partitions,
// each partition's leader a listed broker with every replica in sync.
func checkKafkaGoMetadata(t *testing.T, c interopCluster, topics []string, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	md, err := kafkaGoClient(c).Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	got := map[int32]string{}
	for _, b := range md.Brokers {
		got[int32(b.ID)] = fmt.Sprintf("%s:%d", b.Host, b.Port)
	}
	want := c.brokerAddrs()
	if !maps.Equal(got, want) {
		t.Fatalf("metadata lists brokers %v; want %v", got, want)
	}
	if _, ok := want[int32(md.Controller.ID)]; !ok {
		t.Fatalf("metadata names controller %+v; brokers are %v", md.Controller, want)
	}
	if md.ClusterID == "" {
		t.Fatalf("metadata has no cluster id")
	}
	var names []string
	for _, topic := range md.Topics {
		names = append(names, topic.Name)
		if topic.Error != nil || len(topic.Partitions) != partitions {
			t.Fatalf("topic %s: error %v, %d partitions; want %d", topic.Name, topic.Error, len(topic.Partitions), partitions)
		}
		for _, p := range topic.Partitions {
			leader := fmt.Sprintf("%s:%d", p.Leader.Host, p.Leader.Port)
			if p.Error != nil || want[int32(p.Leader.ID)] != leader || len(p.Replicas) != len(want) || len(p.Isr) != len(want) {
				t.Fatalf("topic %s partition %d: %+v; brokers are %v", topic.Name, p.ID, p, want)
			}
		}
	}
	if slices.Sort(names); !slices.Equal(names, slices.Sorted(slices.Values(topics))) {
		t.Fatalf("metadata lists topics %v; want %v", names, topics)
	}
}

// checkKafkaGoCreateDelete creates a topic through kafka-go's Client,
// sees it fail a second time with TopicAlreadyExists, and deletes it.
func checkKafkaGoCreateDelete(t *testing.T, c interopCluster, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaGoClient(c)
	const topic = "kafkago-created"
	create := func() error {
		resp, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 2, ReplicationFactor: int(rf)}}})
		if err != nil {
			return err
		}
		return resp.Errors[topic]
	}
	if err := create(); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := create(); !errors.Is(err, kafka.TopicAlreadyExists) {
		t.Fatalf("create topic again: %v; want %v", err, kafka.TopicAlreadyExists)
	}
	resp, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil || resp.Errors[topic] != nil {
		t.Fatalf("delete topic: %v, %v", err, resp)
	}
}

// kafkaGoProduce writes count keyed records, record first..first+count-1,
// with a kafka-go Writer and returns them by the position its Completion
// reported.
func kafkaGoProduce(t *testing.T, c interopCluster, topic string, codec kafka.Compression, first, count int) map[position]producedRecord {
	t.Helper()
	var mu sync.Mutex
	acked := make(map[position]producedRecord, count)
	var firstErr error
	w := &kafka.Writer{
		Addr:         kafka.TCP(c.bootstrap()...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		Compression:  codec,
		BatchSize:    500,
		BatchTimeout: 5 * time.Millisecond,
		ErrorLogger:  kafkaGoLogger(),
		Completion: func(msgs []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			for _, m := range msgs {
				pos := position{int32(m.Partition), m.Offset}
				if _, dup := acked[pos]; dup && firstErr == nil {
					firstErr = fmt.Errorf("two records acknowledged at partition %d offset %d", m.Partition, m.Offset)
				}
				i := m.WriterData.(int)
				acked[pos] = producedRecord{key: clientKey(i), value: clientValue(i), seq: i}
			}
		},
	}
	msgs := make([]kafka.Message, count)
	for i := range count {
		msgs[i] = kafka.Message{Key: clientKey(first + i), Value: clientValue(first + i), WriterData: first + i}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write to %s: %v", topic, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close writer: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		t.Fatalf("write to %s: %v", topic, firstErr)
	}
	if len(acked) != count {
		t.Fatalf("write to %s: %d acknowledged, want %d", topic, len(acked), count)
	}
	return acked
}

// kafkaGoConsumeAll reads each partition of topic with its own Reader
// from the first offset until it holds what want has there.
func kafkaGoConsumeAll(t *testing.T, c interopCluster, topic string, want map[position]producedRecord) {
	t.Helper()
	checker := newConsumeChecker(want)
	counts := perPartition(want)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, partition := range slices.Sorted(maps.Keys(counts)) {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:     c.bootstrap(),
			Topic:       topic,
			Partition:   int(partition),
			MinBytes:    1,
			MaxBytes:    4 << 20,
			MaxWait:     200 * time.Millisecond,
			ErrorLogger: kafkaGoLogger(),
		})
		for got := 0; got < counts[partition]; got++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read %s/%d after %d of %d records: %v", topic, partition, got, counts[partition], err)
			}
			if err := checker.check(int32(m.Partition), m.Offset, m.Key, m.Value); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
	}
}

// kafkaGoMember is a kafka-go Reader in a group: it fetches, records in a
// memberLedger, and commits each record before fetching the next
// (CommitInterval 0: CommitMessages waits for the commit).
type kafkaGoMember struct {
	reader *kafka.Reader
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startKafkaGoMember(t *testing.T, c interopCluster, group, topic string, id int, ledger *memberLedger) *kafkaGoMember {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           c.bootstrap(),
		GroupID:           group,
		Topic:             topic,
		MinBytes:          1,
		MaxBytes:          4 << 20,
		MaxWait:           200 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		CommitInterval:    0,
		StartOffset:       kafka.FirstOffset,
		ErrorLogger:       kafkaGoLogger(),
		Logger:            kafkaGoLogger(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	m := &kafkaGoMember{reader: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			msg, err := r.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("member %d: fetch: %v", id, err)
				}
				return
			}
			ledger.record(id, int32(msg.Partition), msg.Offset)
			if err := r.CommitMessages(ctx, msg); err != nil {
				if ctx.Err() == nil {
					t.Errorf("member %d: commit: %v", id, err)
				}
				return
			}
		}
	}()
	t.Cleanup(m.stop)
	return m
}

// stop ends the member's fetch loop and closes its Reader, which leaves
// the group.
func (m *kafkaGoMember) stop() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.reader.Close()
	})
}

// kafkaGoAssignments returns each member's assigned partitions of group,
// by client-side member id, from DescribeGroups, when the group is
// Stable.
func kafkaGoAssignments(c interopCluster, group string) (map[string][]int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kafkaGoClient(c).DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].Error != nil || resp.Groups[0].GroupState != "Stable" {
		return nil, false
	}
	out := map[string][]int{}
	for _, m := range resp.Groups[0].Members {
		var ps []int
		for _, topic := range m.MemberAssignments.Topics {
			ps = append(ps, topic.Partitions...)
		}
		slices.Sort(ps)
		out[m.MemberID] = ps
	}
	return out, true
}

// TestKafkaGoConsumerGroup runs kafka-go Readers with a GroupID on a
// 4-partition topic: two members join and DescribeGroups shows them
// sharing the partitions; they consume what is produced, committing each
// record; one leaves and the other takes every partition and consumes what
// follows, none of it twice; then the last leaves, more is produced, and a
// restarted member consumes exactly that from the committed offsets, which
// OffsetFetch then shows at each partition's end.
func TestKafkaGoConsumerGroup(t *testing.T) {
	for _, cluster := range clientClusters {
		t.Run(cluster.name, func(t *testing.T) {
			start := time.Now()
			c := cluster.start(t)
			const topic, group, partitions, batch = "kafkago-group", "kafkago-group-g", 4, 2000
			c.createTopic(topic, partitions, int16(cluster.size))
			all := map[position]producedRecord{}
			next := 0
			produce := func() {
				maps.Copy(all, kafkaGoProduce(t, c, topic, kafka.Snappy, next, batch))
				next += batch
			}
			ledger := newMemberLedger()
			a := startKafkaGoMember(t, c, group, topic, 1, ledger)
			b := startKafkaGoMember(t, c, group, topic, 2, ledger)
			waitUntil(t, "two members sharing the partitions", 30*time.Second, func() bool {
				as, ok := kafkaGoAssignments(c, group)
				if !ok || len(as) != 2 {
					return false
				}
				var union []int
				for _, ps := range as { // order-independent: sorted below
					if len(ps) == 0 {
						return false
					}
					union = append(union, ps...)
				}
				slices.Sort(union)
				return slices.Equal(union, []int{0, 1, 2, 3})
			})
			produce()
			ledger.checkPhase(t, "two members", batch)
			fromA, fromB := ledger.consumedFrom(1), ledger.consumedFrom(2)
			if len(fromA) == 0 || len(fromB) == 0 || len(fromA)+len(fromB) != partitions || slices.ContainsFunc(fromA, func(p int32) bool { return slices.Contains(fromB, p) }) {
				t.Fatalf("members consumed from %v and %v; want the 4 partitions split", fromA, fromB)
			}

			b.stop()
			waitUntil(t, "member 1 holding every partition", 30*time.Second, func() bool {
				as, ok := kafkaGoAssignments(c, group)
				if !ok || len(as) != 1 {
					return false
				}
				for _, ps := range as { // order-independent: one member
					return slices.Equal(ps, []int{0, 1, 2, 3})
				}
				return false
			})
			produce()
			ledger.checkPhase(t, "after member 2 left", 2*batch)

			a.stop()
			produce()
			restarted := startKafkaGoMember(t, c, group, topic, 1, ledger)
			ledger.checkPhase(t, "restarted member", 3*batch)
			restarted.stop()
			ledger.checkAll(t, all)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := kafkaGoClient(c).OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1, 2, 3}}})
			if err != nil || resp.Error != nil {
				t.Fatalf("offset fetch: %v, %v", err, resp)
			}
			ends := map[int]int64{}
			for p := range all { // order-independent: maximum
				ends[int(p.partition)] = max(ends[int(p.partition)], p.offset+1)
			}
			got := map[int]int64{}
			for _, p := range resp.Topics[topic] {
				if p.Error != nil {
					t.Fatalf("offset fetch partition %d: %v", p.Partition, p.Error)
				}
				got[p.Partition] = p.CommittedOffset
			}
			if !maps.Equal(got, ends) {
				t.Fatalf("committed offsets %v; want the partitions' ends %v", got, ends)
			}
			t.Logf("group case took %s", time.Since(start).Round(time.Millisecond))
		})
	}
}
