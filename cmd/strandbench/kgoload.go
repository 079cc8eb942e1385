package main

// The kgo workload of the broker section: produce as fast as one client can
// for a while, consume it all back, produce at a fixed rate for latency, and
// the consumer-group and idempotence measurements (consumer groups issue §6).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceSettings is how one produce run configures its client.
type produceSettings struct {
	// acksAll is acks=all; otherwise acks=1.
	acksAll bool
	// idempotent asks for an idempotent producer (which needs acks=all).
	idempotent bool
	// lingerZero sets linger 0; otherwise kgo's default 10 ms.
	lingerZero bool
	// bootstrap, when set, replaces the cluster's bootstrap addresses (a
	// secured listener's); extra are more client options (TLS, SASL).
	bootstrap []string
	extra     []kgo.Opt
}

// producerOpts are the kgo options for settings. A non-idempotent producer
// is allowed kgo's idempotent maximum of 5 produce requests in flight per
// broker, so that idempotence is the only difference between the two.
func producerOpts(bootstrap []string, topic string, s produceSettings) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(produceDeliveryTimeout)}
	if s.acksAll {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	} else {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	}
	if !s.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
	}
	if s.lingerZero {
		opts = append(opts, kgo.ProducerLinger(0))
	}
	if s.bootstrap != nil {
		opts = append(opts, kgo.SeedBrokers(s.bootstrap...))
	}
	return append(opts, s.extra...)
}

// produceDeliveryTimeout fails a record kgo could not deliver in that time:
// without it kgo retries forever, and a broker that died mid-benchmark
// would hang the run instead of failing it.
const produceDeliveryTimeout = 30 * time.Second

// produceResult is one produce run.
type produceResult struct {
	records    int64
	valueBytes int64
	elapsed    time.Duration
	// brokerCPU is the CPU time of every broker process during the run.
	brokerCPU time.Duration
	// clientCPU is this process's CPU time during the run (kgo).
	clientCPU time.Duration
}

func (r produceResult) recordsPerSec() float64 { return float64(r.records) / r.elapsed.Seconds() }
func (r produceResult) mbPerSec() float64      { return float64(r.valueBytes) / 1e6 / r.elapsed.Seconds() }

// cpuSecPerMillion is the brokers' CPU seconds per million records.
func (r produceResult) cpuSecPerMillion() float64 {
	return r.brokerCPU.Seconds() / float64(r.records) * 1e6
}

// recordValue is a value of n bytes with a non-zero pattern.
func recordValue(n int) []byte {
	value := make([]byte, n)
	for i := range value {
		value[i] = byte(i*7 + 1)
	}
	return value
}

// ackCounter counts the acknowledgements of one run's records and keeps the
// first error.
type ackCounter struct {
	acked    atomic.Int64
	mu       sync.Mutex
	firstErr error
}

func (a *ackCounter) promise(_ *kgo.Record, err error) {
	if err != nil {
		a.mu.Lock()
		if a.firstErr == nil {
			a.firstErr = err
		}
		a.mu.Unlock()
		return
	}
	a.acked.Add(1)
}

func (a *ackCounter) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.firstErr
}

// produceFor produces records of valueBytes to topic for duration, as fast
// as kgo takes them (Produce blocks when its buffer is full), then waits for
// every acknowledgement. The time includes that wait.
func produceFor(c *cluster, topic string, valueBytes int, duration time.Duration, s produceSettings) (produceResult, error) {
	cl, err := kgo.NewClient(producerOpts(c.bootstrap, topic, s)...)
	if err != nil {
		return produceResult{}, err
	}
	defer cl.Close()
	// A first record outside the timing: metadata, connection, producer id.
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: recordValue(valueBytes)}).FirstErr(); err != nil {
		return produceResult{}, fmt.Errorf("produce to %s on %s: %w", topic, c.name, errors.Join(err, c.exitedErr()))
	}
	value := recordValue(valueBytes)
	acks := &ackCounter{}
	var produced int64
	brokerCPUStart, err := c.cpu()
	if err != nil {
		return produceResult{}, err
	}
	start, clientCPUStart := time.Now(), processCPU()
	deadline := start.Add(duration)
	ctx := context.Background()
	for time.Now().Before(deadline) {
		for range 256 {
			cl.Produce(ctx, &kgo.Record{Value: value}, acks.promise)
		}
		produced += 256
	}
	if err := cl.Flush(ctx); err != nil {
		return produceResult{}, err
	}
	elapsed, clientCPU := time.Since(start), processCPU()-clientCPUStart
	brokerCPUEnd, err := c.cpu()
	if err != nil {
		return produceResult{}, err
	}
	if err := acks.err(); err != nil {
		return produceResult{}, fmt.Errorf("produce to %s on %s: %w", topic, c.name, errors.Join(err, c.exitedErr()))
	}
	if acks.acked.Load() != produced {
		return produceResult{}, fmt.Errorf("produce to %s on %s: %d acknowledged of %d", topic, c.name, acks.acked.Load(), produced)
	}
	return produceResult{records: produced, valueBytes: produced * int64(valueBytes), elapsed: elapsed,
		brokerCPU: brokerCPUEnd - brokerCPUStart, clientCPU: clientCPU}, nil
}

// consumeResult is one run reading a partition from its start to an end.
type consumeResult struct {
	records int64
	// bytes is the record values' bytes for kgo, the record batches' bytes
	// for the raw consumer.
	bytes   int64
	elapsed time.Duration
}

func (r consumeResult) recordsPerSec() float64 { return float64(r.records) / r.elapsed.Seconds() }
func (r consumeResult) mbPerSec() float64      { return float64(r.bytes) / 1e6 / r.elapsed.Seconds() }

// consumeKgo reads records from partition 0 of topic from the start with
// kgo, decoding them, until it has endOffset of them.
func consumeKgo(c *cluster, topic string, endOffset int64) (consumeResult, error) {
	return consumeKgoWith(c, topic, endOffset)
}

// consumeKgoWith is consumeKgo with more client options (TLS, SASL).
func consumeKgoWith(c *cluster, topic string, endOffset int64, extra ...kgo.Opt) (consumeResult, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(8 << 20), kgo.FetchMaxBytes(64 << 20)}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return consumeResult{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var r consumeResult
	start := time.Now()
	for r.records < endOffset {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			return consumeResult{}, fmt.Errorf("consume %s on %s after %d records: %w", topic, c.name, r.records, err)
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			r.records++
			r.bytes += int64(len(rec.Value))
		})
	}
	r.elapsed = time.Since(start)
	return r, nil
}

// latencyResult is a fixed-rate produce run's per-record latencies.
type latencyResult struct {
	ratePerSec     float64
	records        int64
	p50, p99, pMax time.Duration
	achievedPerSec float64
	// clientCPU is this process's CPU time (kgo's) and brokerCPU every
	// broker process's, over elapsed, from the first timed record to the
	// flush's end.
	clientCPU, brokerCPU, elapsed time.Duration
}

// cores is d as a share of the run's elapsed time: CPU seconds per second.
func (r latencyResult) cores(d time.Duration) float64 { return d.Seconds() / r.elapsed.Seconds() }

// latencyTicksPerSec is how often the fixed-rate producer releases records:
// each tick produces rate/latencyTicksPerSec of them, and a record's latency
// runs from its own Produce call.
const latencyTicksPerSec = 1000

// latencyWarmup is the unmeasured start of every fixed-rate run.
const latencyWarmup = time.Second

// produceAtRate produces 100-byte records at ratePerSec with linger 0 and
// acks=all: first for latencyWarmup, unmeasured, then for duration, and
// measures each record's latency from Produce to acknowledgement, and the
// client's and the brokers' CPU time, over the second part only. The
// warm-up is the OpenMessaging Benchmark's: the first second at a new rate
// on a new topic pays one-off costs (the producer's and the followers'
// first requests, the segment's first pages, heaps growing to the load)
// that a steady state's tail does not have, and that would otherwise
// dominate a 2 s run's p99 (docs/benchmarks.md).
func produceAtRate(c *cluster, topic string, valueBytes int, ratePerSec float64, duration time.Duration, idempotent bool) (latencyResult, error) {
	cl, err := kgo.NewClient(producerOpts(c.bootstrap, topic, produceSettings{acksAll: true, idempotent: idempotent, lingerZero: true})...)
	if err != nil {
		return latencyResult{}, err
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: recordValue(valueBytes)}).FirstErr(); err != nil {
		return latencyResult{}, fmt.Errorf("produce to %s on %s: %w", topic, c.name, err)
	}
	value := recordValue(valueBytes)
	warm := int64(ratePerSec * latencyWarmup.Seconds())
	total := int64(ratePerSec * duration.Seconds())
	latencies := make([]time.Duration, total)
	acks := &ackCounter{}
	ctx := context.Background()
	var (
		brokerCPUStart, clientCPUStart time.Duration
		measuredStart                  time.Time
	)
	start := time.Now()
	var produced int64
	for tick := int64(1); produced < warm+total; tick++ {
		due := min(warm+total, int64(ratePerSec*float64(tick)/latencyTicksPerSec))
		for ; produced < due; produced++ {
			if produced == warm {
				if brokerCPUStart, err = c.cpu(); err != nil {
					return latencyResult{}, err
				}
				measuredStart, clientCPUStart = time.Now(), processCPU()
			}
			i := produced - warm
			sent := time.Now()
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if i >= 0 {
					latencies[i] = time.Since(sent)
				}
				acks.promise(r, err)
			})
		}
		if wait := time.Until(start.Add(time.Duration(tick) * time.Second / latencyTicksPerSec)); wait > 0 {
			time.Sleep(wait)
		}
	}
	elapsed := time.Since(measuredStart)
	if err := cl.Flush(ctx); err != nil {
		return latencyResult{}, err
	}
	flushed, clientCPU := time.Since(measuredStart), processCPU()-clientCPUStart
	brokerCPUEnd, err := c.cpu()
	if err != nil {
		return latencyResult{}, err
	}
	if err := acks.err(); err != nil {
		return latencyResult{}, fmt.Errorf("produce to %s on %s: %w", topic, c.name, err)
	}
	slices.Sort(latencies)
	return latencyResult{
		ratePerSec: ratePerSec, records: total, achievedPerSec: float64(total) / elapsed.Seconds(),
		p50: percentile(latencies, 0.50), p99: percentile(latencies, 0.99), pMax: latencies[len(latencies)-1],
		clientCPU: clientCPU, brokerCPU: brokerCPUEnd - brokerCPUStart, elapsed: flushed,
	}, nil
}

// percentile is the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		panic("strandbench: percentile of nothing")
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// groupMember is one consumer of the rebalance measurement, timing its
// first Fetch after an assignment of exactly one partition.
type groupMember struct {
	mu sync.Mutex
	// assigned is the number of partitions the member owns.
	assigned int
	// firstFetch is when the first Fetch request after the latest
	// assignment was written; zero until then.
	firstFetch time.Time
}

// OnBrokerWrite is kgo's HookBrokerWrite: it notes the first Fetch (key 1).
func (m *groupMember) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != 1 || err != nil {
		return
	}
	m.mu.Lock()
	if m.assigned == 1 && m.firstFetch.IsZero() {
		m.firstFetch = time.Now()
	}
	m.mu.Unlock()
}

func (m *groupMember) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	m.mu.Lock()
	for _, partitions := range assigned {
		m.assigned += len(partitions)
	}
	m.firstFetch = time.Time{}
	m.mu.Unlock()
}

func (m *groupMember) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	m.mu.Lock()
	for _, partitions := range revoked {
		m.assigned -= len(partitions)
	}
	m.firstFetch = time.Time{}
	m.mu.Unlock()
}

// settled is the time of the member's first fetch with one partition.
func (m *groupMember) settled() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.firstFetch, m.assigned == 1 && !m.firstFetch.IsZero()
}

// groupMembers is the number of consumers in the rebalance measurement, and
// the number of partitions of its topic.
const groupMembers = 3

// rebalanceOnce starts three kgo consumers of topic (three partitions) in a
// new group at once and returns the time from their start until each owns
// one partition and has sent its first Fetch for it. kgo's default
// cooperative-sticky balancer is used, as a kgo user would.
func rebalanceOnce(c *cluster, topic, group string) (time.Duration, error) {
	members := make([]*groupMember, groupMembers)
	clients := make([]*kgo.Client, groupMembers)
	defer func() {
		var wg sync.WaitGroup
		for _, cl := range clients {
			if cl != nil {
				wg.Go(cl.Close)
			}
		}
		wg.Wait()
	}()
	start := time.Now()
	for i := range members {
		m := &groupMember{}
		members[i] = m
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.WithHooks(m), kgo.OnPartitionsAssigned(m.onAssigned), kgo.OnPartitionsRevoked(m.onRevoked),
			kgo.OnPartitionsLost(m.onRevoked))
		if err != nil {
			return 0, err
		}
		clients[i] = cl
	}
	deadline := start.Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var last time.Time
		all := true
		for _, m := range members {
			at, ok := m.settled()
			all = all && ok
			if at.After(last) {
				last = at
			}
		}
		if all {
			return last.Sub(start), nil
		}
		time.Sleep(time.Millisecond)
	}
	return 0, errors.New("three consumers did not each own one partition within 30 s")
}
