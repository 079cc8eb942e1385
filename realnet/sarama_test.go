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

	"github.com/IBM/sarama"
)

// The tests in this file drive Strand with IBM/sarama, unchanged, at the
// protocol levels sarama picks from its configured Version: its default
// (2.8.0) and the newest Version it knows (its newest request versions);
// the codec and group tests also run at 0.11.0, the oldest Version whose
// requests Strand (as Kafka 4, KIP-896) still serves: Produce v3, Fetch
// v5, Metadata v4, JoinGroup v2.

// saramaVersions are the Versions every sarama test runs with.
var saramaVersions = []struct {
	name    string
	version sarama.KafkaVersion
}{
	{"default", sarama.DefaultVersion},
	{"newest", sarama.MaxVersion},
}

// saramaOldest is the oldest Version the codec and group tests run at; it
// has no zstd (sarama refuses zstd below 2.1.0, as Kafka does below
// Produce v7).
var saramaOldest = struct {
	name    string
	version sarama.KafkaVersion
}{"v0.11", sarama.V0_11_0_0}

// saramaCodecs are the codecs sarama produces with.
var saramaCodecs = []struct {
	name  string
	codec sarama.CompressionCodec
}{
	{"gzip", sarama.CompressionGZIP},
	{"snappy", sarama.CompressionSnappy},
	{"lz4", sarama.CompressionLZ4},
	{"zstd", sarama.CompressionZSTD},
}

// saramaConfig is the configuration every sarama client here starts from:
// acks=all, successes returned, consumers from the oldest offset.
func saramaConfig(version sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "strand-sarama-test"
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	return cfg
}

// TestSaramaEachCodec drives both clientClusters with sarama at each
// saramaVersions: the client's metadata lists every broker, each topic's
// partitions and their leaders; then per codec clientRecords keyed records
// go through an AsyncProducer with acks=all and come back identical through
// PartitionConsumers from the oldest offset, each at the offset its
// acknowledgement gave, in produce order per partition.
func TestSaramaEachCodec(t *testing.T) {
	for _, cluster := range clientClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			for _, v := range append(saramaVersions, saramaOldest) {
				t.Run(v.name, func(t *testing.T) {
					var topics []string
					for _, codec := range saramaCodecs {
						topic := fmt.Sprintf("sarama-%s-%s", v.name, codec.name)
						c.createTopic(topic, 3, int16(cluster.size))
						topics = append(topics, topic)
					}
					checkSaramaMetadata(t, c, v.version, topics, 3)
					for i, codec := range saramaCodecs {
						t.Run(codec.name, func(t *testing.T) {
							if codec.codec == sarama.CompressionZSTD && !v.version.IsAtLeast(sarama.V2_1_0_0) {
								t.Skipf("sarama produces zstd only from Version 2.1.0")
							}
							cfg := saramaConfig(v.version)
							cfg.Producer.Compression = codec.codec
							acked := saramaProduceAsync(t, c.bootstrap(), cfg, topics[i], clientRecords)
							checkProduceOrder(t, acked)
							saramaConsumeAll(t, c.bootstrap(), saramaConfig(v.version), topics[i], acked)
						})
					}
				})
			}
		})
	}
}

// checkSaramaMetadata checks what a sarama Client learns from Metadata:
// every broker at its address, each topic with its partitions, each
// partition's leader among the brokers and rf replicas in sync.
func checkSaramaMetadata(t *testing.T, c interopCluster, version sarama.KafkaVersion, topics []string, partitions int) {
	t.Helper()
	cl, err := sarama.NewClient(c.bootstrap(), saramaConfig(version))
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer cl.Close()
	got := map[int32]string{}
	for _, b := range cl.Brokers() {
		got[b.ID()] = b.Addr()
	}
	want := c.brokerAddrs()
	if !maps.Equal(got, want) {
		t.Fatalf("sarama's metadata lists brokers %v; want %v", got, want)
	}
	all, err := cl.Topics()
	if err != nil {
		t.Fatalf("topics: %v", err)
	}
	for _, topic := range topics {
		if !slices.Contains(all, topic) {
			t.Fatalf("topics %v lack %s", all, topic)
		}
		ps, err := cl.Partitions(topic)
		if err != nil || len(ps) != partitions {
			t.Fatalf("partitions of %s: %v, %v; want %d", topic, ps, err, partitions)
		}
		for _, p := range ps {
			leader, err := cl.Leader(topic, p)
			if err != nil {
				t.Fatalf("leader of %s/%d: %v", topic, p, err)
			}
			if want[leader.ID()] != leader.Addr() {
				t.Fatalf("leader of %s/%d is %d at %s; brokers are %v", topic, p, leader.ID(), leader.Addr(), want)
			}
			isr, err := cl.InSyncReplicas(topic, p)
			if err != nil || len(isr) != len(want) {
				t.Fatalf("in-sync replicas of %s/%d: %v, %v; want %d", topic, p, isr, err, len(want))
			}
		}
	}
}

// saramaProduceAsync produces count keyed records through an AsyncProducer
// and returns them by the position each success reported.
func saramaProduceAsync(t *testing.T, addrs []string, cfg *sarama.Config, topic string, count int) map[position]producedRecord {
	t.Helper()
	p, err := sarama.NewAsyncProducer(addrs, cfg)
	if err != nil {
		t.Fatalf("async producer: %v", err)
	}
	acked := make(map[position]producedRecord, count)
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range count {
			select {
			case m := <-p.Successes():
				pos := position{m.Partition, m.Offset}
				if _, dup := acked[pos]; dup && firstErr == nil {
					firstErr = fmt.Errorf("two records acknowledged at partition %d offset %d", m.Partition, m.Offset)
				}
				acked[pos] = producedRecord{key: clientKey(m.Metadata.(int)), value: clientValue(m.Metadata.(int)), seq: m.Metadata.(int)}
			case pe := <-p.Errors():
				if firstErr == nil {
					firstErr = pe
				}
			case <-time.After(60 * time.Second):
				firstErr = errors.New("no acknowledgement for 60 s")
				return
			}
		}
	}()
	for i := range count {
		p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(clientKey(i)), Value: sarama.ByteEncoder(clientValue(i)), Metadata: i}
	}
	<-done
	if err := p.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		t.Fatalf("produce to %s: %v", topic, firstErr)
	}
	if len(acked) != count {
		t.Fatalf("produce to %s: %d acknowledged, want %d", topic, len(acked), count)
	}
	return acked
}

// saramaConsumeAll reads every partition of topic from the oldest offset
// through PartitionConsumers until it holds what want has there, checking
// each record (consumeChecker).
func saramaConsumeAll(t *testing.T, addrs []string, cfg *sarama.Config, topic string, want map[position]producedRecord) {
	t.Helper()
	consumer, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer consumer.Close()
	checker := newConsumeChecker(want)
	counts := perPartition(want)
	for _, partition := range slices.Sorted(maps.Keys(counts)) {
		pc, err := consumer.ConsumePartition(topic, partition, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume %s/%d: %v", topic, partition, err)
		}
		deadline := time.After(60 * time.Second)
		for got := 0; got < counts[partition]; {
			select {
			case m := <-pc.Messages():
				if err := checker.check(m.Partition, m.Offset, m.Key, m.Value); err != nil {
					t.Fatal(err)
				}
				got++
			case err := <-pc.Errors():
				t.Fatalf("consume %s/%d: %v", topic, partition, err)
			case <-deadline:
				t.Fatalf("consume %s/%d: %d of %d records after 60 s", topic, partition, got, counts[partition])
			}
		}
		pc.Close()
	}
}

// TestSaramaSyncProducerIdempotent produces with sarama's SyncProducer and
// its idempotent producer (Idempotent, MaxOpenRequests 1, which sarama
// requires, acks=all, zstd) at each saramaVersions: SendMessage one record
// at a time, then SendMessages for the rest in one call; both report each
// record's partition and offset, and a PartitionConsumer reads them all
// back identical.
func TestSaramaSyncProducerIdempotent(t *testing.T) {
	for _, cluster := range clientClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			for _, v := range saramaVersions {
				t.Run(v.name, func(t *testing.T) {
					topic := "sarama-sync-" + v.name
					c.createTopic(topic, 3, int16(cluster.size))
					cfg := saramaConfig(v.version)
					cfg.Producer.Idempotent = true
					cfg.Net.MaxOpenRequests = 1
					cfg.Producer.Compression = sarama.CompressionZSTD
					p, err := sarama.NewSyncProducer(c.bootstrap(), cfg)
					if err != nil {
						t.Fatalf("sync producer: %v", err)
					}
					defer p.Close()
					const single = 100
					acked := make(map[position]producedRecord, clientRecords)
					ack := func(partition int32, offset int64, i int) {
						pos := position{partition, offset}
						if _, dup := acked[pos]; dup {
							t.Fatalf("two records acknowledged at partition %d offset %d", partition, offset)
						}
						acked[pos] = producedRecord{key: clientKey(i), value: clientValue(i), seq: i}
					}
					for i := range single {
						partition, offset, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(clientKey(i)), Value: sarama.ByteEncoder(clientValue(i))})
						if err != nil {
							t.Fatalf("send record %d: %v", i, err)
						}
						ack(partition, offset, i)
					}
					var msgs []*sarama.ProducerMessage
					for i := single; i < clientRecords; i++ {
						msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(clientKey(i)), Value: sarama.ByteEncoder(clientValue(i)), Metadata: i})
					}
					if err := p.SendMessages(msgs); err != nil {
						t.Fatalf("send %d records: %v", len(msgs), err)
					}
					for _, m := range msgs {
						ack(m.Partition, m.Offset, m.Metadata.(int))
					}
					checkProduceOrder(t, acked)
					saramaConsumeAll(t, c.bootstrap(), saramaConfig(v.version), topic, acked)
				})
			}
		})
	}
}

// TestSaramaClusterAdmin drives sarama's ClusterAdmin at each
// saramaVersions: DescribeCluster lists every broker; CreateTopic with a
// config override; ListTopics and DescribeTopics show its partitions,
// replication factor and leaders; DescribeConfig reports the override as a
// topic config and a default as a default; DeleteRecords moves the
// partition's oldest offset; DeleteTopic removes it from ListTopics.
func TestSaramaClusterAdmin(t *testing.T) {
	for _, cluster := range clientClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			for _, v := range saramaVersions {
				t.Run(v.name, func(t *testing.T) {
					saramaAdmin(t, c, v.version, int16(cluster.size), "sarama-admin-"+v.name)
				})
			}
		})
	}
}

func saramaAdmin(t *testing.T, c interopCluster, version sarama.KafkaVersion, rf int16, topic string) {
	cfg := saramaConfig(version)
	admin, err := sarama.NewClusterAdmin(c.bootstrap(), cfg)
	if err != nil {
		t.Fatalf("cluster admin: %v", err)
	}
	defer admin.Close()

	brokers, controller, err := admin.DescribeCluster()
	if err != nil {
		t.Fatalf("describe cluster: %v", err)
	}
	got := map[int32]string{}
	for _, b := range brokers {
		got[b.ID()] = b.Addr()
	}
	if want := c.brokerAddrs(); !maps.Equal(got, want) || want[controller] == "" {
		t.Fatalf("describe cluster: brokers %v, controller %d; want brokers %v", got, controller, want)
	}

	retention := "3600000"
	detail := &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: rf, ConfigEntries: map[string]*string{"retention.ms": &retention}}
	if err := admin.CreateTopic(topic, detail, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := admin.CreateTopic(topic, detail, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("create topic again: %v; want %v", err, sarama.ErrTopicAlreadyExists)
	}
	waitUntil(t, "DescribeTopics shows "+topic+" with leaders and full ISR", 20*time.Second, func() bool {
		md, err := admin.DescribeTopics([]string{topic})
		if err != nil || len(md) != 1 || md[0].Err != sarama.ErrNoError || len(md[0].Partitions) != 3 {
			return false
		}
		for _, p := range md[0].Partitions {
			if p.Err != sarama.ErrNoError || p.Leader < 0 || len(p.Replicas) != int(rf) || len(p.Isr) != int(rf) || !slices.Contains(p.Replicas, p.Leader) {
				return false
			}
		}
		return true
	})
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	if d, ok := topics[topic]; !ok || d.NumPartitions != 3 || d.ReplicationFactor != rf {
		t.Fatalf("list topics: %s is %+v (listed %t); want 3 partitions, replication factor %d", topic, d, ok, rf)
	} else if r := d.ConfigEntries["retention.ms"]; r == nil || *r != retention {
		t.Fatalf("list topics: %s's retention.ms is %v; want %s", topic, r, retention)
	}

	results, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic}}, sarama.DescribeConfigsOptions{})
	if err != nil || len(results) != 1 || results[0].ErrorCode != sarama.ErrNoError {
		t.Fatalf("describe configs: %v, %+v", err, results)
	}
	byName := map[string]sarama.ConfigEntry{}
	for _, e := range results[0].Configs {
		byName[e.Name] = e
	}
	if e, ok := byName["retention.ms"]; !ok || e.Value != retention || e.Default {
		t.Fatalf("describe config: retention.ms is %+v (present %t); want %s, not default", e, ok, retention)
	}
	if e, ok := byName["cleanup.policy"]; !ok || e.Value != "delete" {
		t.Fatalf("describe config: cleanup.policy is %+v (present %t); want delete", e, ok)
	}

	// DeleteRecords: produce to partition 0, cut its first 40 records.
	pcfg := saramaConfig(version)
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(c.bootstrap(), pcfg)
	if err != nil {
		t.Fatalf("sync producer: %v", err)
	}
	var msgs []*sarama.ProducerMessage
	for i := range 100 {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.ByteEncoder(clientKey(i)), Value: sarama.ByteEncoder(clientValue(i))})
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatalf("produce: %v", err)
	}
	p.Close()
	if err := admin.DeleteRecords(topic, map[int32]int64{0: 40}); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	cl, err := sarama.NewClient(c.bootstrap(), saramaConfig(version))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	if oldest, err := cl.GetOffset(topic, 0, sarama.OffsetOldest); err != nil || oldest != 40 {
		t.Fatalf("oldest offset after DeleteRecords(40): %d, %v", oldest, err)
	}
	if newest, err := cl.GetOffset(topic, 0, sarama.OffsetNewest); err != nil || newest != 100 {
		t.Fatalf("newest offset: %d, %v; want 100", newest, err)
	}

	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	waitUntil(t, topic+" gone from ListTopics", 20*time.Second, func() bool {
		topics, err := admin.ListTopics()
		_, listed := topics[topic]
		return err == nil && !listed
	})
	if err := admin.DeleteTopic(topic); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Fatalf("delete topic again: %v; want %v", err, sarama.ErrUnknownTopicOrPartition)
	}
}

// saramaMember is one member of a sarama ConsumerGroup: it records what it
// consumes in a memberLedger, marks each record and commits the marks
// every 100 records and at the end of each session (Cleanup).
type saramaMember struct {
	id     int
	group  sarama.ConsumerGroup
	ledger *memberLedger
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// claims is the assignment of the member's newest session.
	claims []int32
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = nil
	for _, ps := range s.Claims() { // order-independent: one topic
		m.claims = append(m.claims, ps...)
	}
	slices.Sort(m.claims)
	return nil
}

func (m *saramaMember) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = nil
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	n := 0
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			m.ledger.record(m.id, msg.Partition, msg.Offset)
			s.MarkMessage(msg, "")
			if n++; n%100 == 0 {
				s.Commit()
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// assigned returns the partitions of the member's current session.
func (m *saramaMember) assigned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.claims)
}

// startSaramaMember starts member id of group on topic.
func startSaramaMember(t *testing.T, addrs []string, version sarama.KafkaVersion, group, topic string, id int, ledger *memberLedger) *saramaMember {
	t.Helper()
	cfg := saramaConfig(version)
	cfg.ClientID = fmt.Sprintf("strand-sarama-member-%d", id)
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	g, err := sarama.NewConsumerGroup(addrs, group, cfg)
	if err != nil {
		t.Fatalf("member %d: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{id: id, group: g, ledger: ledger, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				t.Logf("member %d: consume: %v", id, err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(m.stop)
	return m
}

// stop ends the member's session (committing its marks) and closes it,
// which leaves the group.
func (m *saramaMember) stop() {
	m.cancel()
	<-m.done
	m.group.Close()
}

// TestSaramaConsumerGroup runs a sarama ConsumerGroup at each
// saramaVersions on a 4-partition topic: two members join and split the
// partitions, consume what is produced and commit; one leaves and the other
// takes every partition and consumes what follows, none of it consumed
// twice; then the last leaves, more is produced, and a restarted member
// consumes exactly that, from the committed offsets; the committed offsets
// end at each partition's end.
func TestSaramaConsumerGroup(t *testing.T) {
	for _, cluster := range clientClusters {
		t.Run(cluster.name, func(t *testing.T) {
			c := cluster.start(t)
			for _, v := range append(saramaVersions, saramaOldest) {
				t.Run(v.name, func(t *testing.T) {
					saramaGroup(t, c, v.version, int16(cluster.size), "sarama-group-"+v.name)
				})
			}
		})
	}
}

func saramaGroup(t *testing.T, c interopCluster, version sarama.KafkaVersion, rf int16, topic string) {
	start := time.Now()
	const partitions, batch = 4, 2000
	group := topic + "-g"
	c.createTopic(topic, partitions, rf)
	all := map[position]producedRecord{}
	produce := func() {
		cfg := saramaConfig(version)
		acked := saramaProduceAsync(t, c.bootstrap(), cfg, topic, batch)
		maps.Copy(all, acked)
	}
	ledger := newMemberLedger()
	a := startSaramaMember(t, c.bootstrap(), version, group, topic, 1, ledger)
	b := startSaramaMember(t, c.bootstrap(), version, group, topic, 2, ledger)
	waitUntil(t, "two members sharing the partitions", 30*time.Second, func() bool {
		ca, cb := a.assigned(), b.assigned()
		return len(ca) > 0 && len(cb) > 0 && len(ca)+len(cb) == partitions && !slices.ContainsFunc(ca, func(p int32) bool { return slices.Contains(cb, p) })
	})
	ca, cb := a.assigned(), b.assigned()
	produce()
	ledger.checkPhase(t, "two members", batch)
	if got := ledger.consumedFrom(1); !slices.Equal(got, ca) {
		t.Fatalf("member 1 consumed from %v; assigned %v", got, ca)
	}
	if got := ledger.consumedFrom(2); !slices.Equal(got, cb) {
		t.Fatalf("member 2 consumed from %v; assigned %v", got, cb)
	}

	b.stop()
	waitUntil(t, "member 1 holding every partition", 30*time.Second, func() bool { return len(a.assigned()) == partitions })
	produce()
	ledger.checkPhase(t, "after member 2 left", 2*batch)

	a.stop()
	produce()
	restarted := startSaramaMember(t, c.bootstrap(), version, group, topic, 1, ledger)
	ledger.checkPhase(t, "restarted member", 3*batch)
	restarted.stop()
	ledger.checkAll(t, all)

	admin, err := sarama.NewClusterAdmin(c.bootstrap(), saramaConfig(version))
	if err != nil {
		t.Fatalf("cluster admin: %v", err)
	}
	defer admin.Close()
	committed, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2, 3}})
	if err != nil {
		t.Fatalf("committed offsets: %v", err)
	}
	ends := map[int32]int64{}
	for p := range all { // order-independent: maximum
		ends[p.partition] = max(ends[p.partition], p.offset+1)
	}
	for p := range int32(partitions) {
		blk := committed.GetBlock(topic, p)
		if blk == nil || blk.Err != sarama.ErrNoError || blk.Offset != ends[p] {
			t.Fatalf("partition %d: committed %+v; want offset %d", p, blk, ends[p])
		}
	}
	t.Logf("group case took %s", time.Since(start).Round(time.Millisecond))
}
