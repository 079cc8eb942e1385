package realnet

// Hostile requests against a real node (SPEC.md §7.3, §7.4):
// each test sends what a hostile client would, and asserts both halves of
// the proof: the attack is contained (the request refused with a clear
// answer, the broker's memory and time bounded) and another client, on
// another connection, is answered within probeLatencyMax throughout.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/broker"
	"strand/core/env"
	"strand/core/wire"
)

// probeLatencyMax is how long another client's ApiVersions or Produce may
// wait for its answer while an attack runs.
const probeLatencyMax = time.Second

// heapSampler samples the process's live heap every 2 ms, and counts the
// bytes allocated meanwhile; the broker runs in this process, so both
// include it. The attack's frames are built before sampling starts.
type heapSampler struct {
	// cpuBase is the process's CPU time (user and system) at the start.
	cpuBase   time.Duration
	stop      chan struct{}
	done      chan struct{}
	baseHeap  uint64
	baseAlloc uint64
	peakHeap  uint64
}

var heapMetrics = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/allocs:bytes"}

func readHeap() (live, allocated uint64) {
	samples := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	return samples[0].Value.Uint64(), samples[1].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.baseHeap, s.baseAlloc = readHeap()
	s.peakHeap = s.baseHeap
	s.cpuBase = processCPU()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			live, _ := readHeap()
			s.peakHeap = max(s.peakHeap, live)
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the peak growth of the live heap and
// the bytes allocated since the start, in MiB, and logs them with the
// process's CPU time meanwhile.
func (s *heapSampler) finish(t *testing.T) (peakGrowthMiB, allocatedMiB float64) {
	close(s.stop)
	<-s.done
	_, alloc := readHeap()
	peakGrowthMiB, allocatedMiB = float64(s.peakHeap-s.baseHeap)/(1<<20), float64(alloc-s.baseAlloc)/(1<<20)
	t.Logf("during the attack: heap peak +%.0f MiB, %.0f MiB allocated, %v of CPU", peakGrowthMiB, allocatedMiB, (processCPU() - s.cpuBase).Round(time.Millisecond))
	return peakGrowthMiB, allocatedMiB
}

// processCPU is the CPU time this process (broker and test alike) has used.
func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// prober sends ApiVersions on a connection of its own, one at a time, and
// records the slowest answer, until stopped.
type prober struct {
	stop    chan struct{}
	done    chan struct{}
	slowest time.Duration
	answers int
	err     error
}

func startProber(t *testing.T, c *testCluster) *prober {
	r := dialRaw(t, c.nodes[0].Addr("PLAINTEXT"))
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for corr := int32(1); ; corr++ {
			select {
			case <-p.stop:
				return
			default:
			}
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(3)
			req.ClientSoftwareName, req.ClientSoftwareVersion = "probe", "1"
			start := time.Now()
			if _, err := r.c.Write(frameOfRequest(corr, req)); err != nil {
				p.err = err
				return
			}
			if _, err := r.readFrame(10 * time.Second); err != nil {
				p.err = fmt.Errorf("ApiVersions %d: %w", corr, err)
				return
			}
			p.slowest = max(p.slowest, time.Since(start))
			p.answers++
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return p
}

// finish stops the prober and fails the test if another client was not
// answered within probeLatencyMax.
func (p *prober) finish(t *testing.T) {
	t.Helper()
	close(p.stop)
	<-p.done
	if p.err != nil {
		t.Errorf("the probing client, after %d answers: %v", p.answers, p.err)
		return
	}
	if p.answers == 0 || p.slowest > probeLatencyMax {
		t.Errorf("another client's ApiVersions: %d answers, slowest %v; want every one within %v", p.answers, p.slowest, probeLatencyMax)
	}
	t.Logf("another client's ApiVersions: %d answers, slowest %v", p.answers, p.slowest)
}

// outcome waits up to timeout for the broker's reaction to a request on r
// and describes it: "closed", "answered (N bytes)" or "no answer".
func (r *rawConn) outcome(timeout time.Duration) string {
	frame, err := r.readFrame(timeout)
	var netErr net.Error
	switch {
	case err == nil:
		return fmt.Sprintf("answered (%d bytes)", len(frame)+4)
	case errors.As(err, &netErr) && netErr.Timeout():
		return "no answer"
	}
	return "closed"
}

// frameOfRequest encodes req as a client would, size prefix included.
func frameOfRequest(correlationID int32, req kmsg.Request) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile")).AppendRequest(nil, req, correlationID)
}

// rawRequestFrame is a frame of a request header (v1, or v2 when flexible)
// followed by body, for bodies no encoder writes.
func rawRequestFrame(key, version int16, flexible bool, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = append(b, 0, 7, 'h', 'o', 's', 't', 'i', 'l', 'e')
	if flexible {
		b = append(b, 0)
	}
	return frameOf(append(b, body...))
}

// TestHostileMetadataManyTopicsRefused: a 10 MiB Metadata v1 naming 5.2
// million empty topic names. Decoded and answered, it would grow the
// broker's heap by about 1.7 GB, take a 47 MB answer and stall the event
// loop for seconds. It is refused before it is decoded (more topics than
// strand.request.topics.max: the connection closes), costing little more
// than its frame, and another client is answered throughout.
func TestHostileMetadataManyTopicsRefused(t *testing.T) {
	c := startCluster(t, 1, nil)
	const names = 5_200_000
	body := binary.BigEndian.AppendUint32(nil, names)
	body = append(body, make([]byte, 2*names)...) // each name: int16 length 0
	frame := rawRequestFrame(kmsg.Metadata.Int16(), 1, false, body)

	probe := startProber(t, c)
	heap := startHeapSampler()
	start := time.Now()
	r := dialRaw(t, c.nodes[0].Addr("PLAINTEXT"))
	r.write(frame)
	got := r.outcome(30 * time.Second)
	elapsed := time.Since(start)
	peak, allocated := heap.finish(t)
	probe.finish(t)
	t.Logf("Metadata of %d names (%.1f MiB): %s after %v; heap peak +%.0f MiB, %.0f MiB allocated", names, float64(len(frame))/(1<<20), got, elapsed, peak, allocated)
	if got != "closed" {
		t.Errorf("Metadata v1 naming %d topics: %s, want the connection closed", names, got)
	}
	if peak > 64 || allocated > 96 {
		t.Errorf("heap peak +%.0f MiB, %.0f MiB allocated for a %.0f MiB request; want at most 64 and 96", peak, allocated, float64(len(frame))/(1<<20))
	}
}

// TestHostileTaggedFieldBombRefused: an 11 MB ApiVersions v3 whose tag
// section holds 2.6 million unknown tagged fields, which kmsg would decode
// into about 200 MB of heap over a second of the reader's CPU. The
// section's count is checked against
// strand.request.tagged.fields.max before anything is decoded: the
// connection closes, and another client is answered throughout.
func TestHostileTaggedFieldBombRefused(t *testing.T) {
	c := startCluster(t, 1, nil)
	const tags = 2_600_000
	body := []byte{6, 'b', 'o', 'm', 'b', 's', 2, '1'} // compact ClientSoftwareName, ClientSoftwareVersion
	body = binary.AppendUvarint(body, tags)
	for tag := uint64(0); tag < tags; tag++ {
		body = binary.AppendUvarint(body, tag)
		body = append(body, 0) // size 0
	}
	frame := rawRequestFrame(kmsg.ApiVersions.Int16(), 3, true, body)

	probe := startProber(t, c)
	heap := startHeapSampler()
	start := time.Now()
	r := dialRaw(t, c.nodes[0].Addr("PLAINTEXT"))
	r.write(frame)
	got := r.outcome(30 * time.Second)
	elapsed := time.Since(start)
	peak, allocated := heap.finish(t)
	probe.finish(t)
	t.Logf("ApiVersions with %d tagged fields (%.1f MiB): %s after %v; heap peak +%.0f MiB, %.0f MiB allocated", tags, float64(len(frame))/(1<<20), got, elapsed, peak, allocated)
	if got != "closed" {
		t.Errorf("ApiVersions v3 with %d tagged fields: %s, want the connection closed", tags, got)
	}
	if peak > 48 || allocated > 64 {
		t.Errorf("heap peak +%.0f MiB, %.0f MiB allocated for a %.0f MiB request; want at most 48 and 64", peak, allocated, float64(len(frame))/(1<<20))
	}
}

// zstdBombRequest is a Produce v9 of batches partitions, each one zstd
// batch whose single record's value inflates to valueBytes, for topic.
func zstdBombRequest(topic string, partitions int32, valueBytes int) *kmsg.ProduceRequest {
	b := batch.Build(batch.BuildSpec{Codec: batch.CodecZstd, FirstTimestamp: time.Now().UnixMilli(),
		Records: []batch.Record{{Value: make([]byte, valueBytes)}}})
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, b
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// bombValueBytes inflates a batch to just under the pre-check's bound for
// the default message.max.bytes (16 MiB), so each batch is decompressed in
// full and accepted.
const bombValueBytes = 16<<20 - 1024

// TestHostileDecompressionUnknownTopicCostsNothing: a Produce of 100 zstd
// batches to a topic that does not exist (1.6 GB of output, were they
// decompressed) is answered UNKNOWN_TOPIC_OR_PARTITION by the cheap checks
// that come first: nothing is decompressed.
func TestHostileDecompressionUnknownTopicCostsNothing(t *testing.T) {
	c := startCluster(t, 1, nil)
	req := zstdBombRequest("no-such-topic", 100, bombValueBytes)
	frame := frameOfRequest(1, req)

	probe := startProber(t, c)
	heap := startHeapSampler()
	start := time.Now()
	r := dialRaw(t, c.nodes[0].Addr("PLAINTEXT"))
	r.write(frame)
	resp := r.receive(1, req).(*kmsg.ProduceResponse)
	elapsed := time.Since(start)
	peak, allocated := heap.finish(t)
	probe.finish(t)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("partition %d: error %d, want UNKNOWN_TOPIC_OR_PARTITION", p.Partition, p.ErrorCode)
		}
	}
	t.Logf("100 zstd bombs (%.0f KiB) to an unknown topic: answered in %v; heap peak +%.0f MiB, %.0f MiB allocated", float64(len(frame))/1024, elapsed, peak, allocated)
	if elapsed > time.Second || allocated > 16 {
		t.Errorf("answered in %v with %.0f MiB allocated; want within 1s and 16 MiB (no decompression)", elapsed, allocated)
	}
}

// TestHostileDecompressionBoundedPerRequest: one Produce of 100 zstd
// batches, each inflating to almost 16 MiB, would cost seconds of CPU, and
// eight such connections at once would take the heap to gigabytes. A
// request decompresses at most strand.produce.request.decompressed.bytes.max (here
// 48 MiB): the batch that crosses it and every compressed batch after it
// are MESSAGE_TOO_LARGE with a message naming the limit, and decompression
// buffers in use at once, over all connections, are bounded by
// strand.produce.decompression.buffer.bytes.max (here 32 MiB). Another
// client's ApiVersions and Produce are answered throughout.
func TestHostileDecompressionBoundedPerRequest(t *testing.T) {
	c := startCluster(t, 1, map[string]string{
		"strand.produce.request.decompressed.bytes.max": fmt.Sprint(48 << 20),
		"strand.produce.decompression.buffer.bytes.max": fmt.Sprint(32 << 20),
	})
	c.createTopic("bombs", 100, 1)
	c.createTopic("honest", 1, 1)
	const attackers = 8
	req := zstdBombRequest("bombs", 100, bombValueBytes)
	frame := frameOfRequest(1, req)
	honest := c.client(kgo.DefaultProduceTopic("honest"), kgo.ProducerLinger(0))

	probe := startProber(t, c)
	heap := startHeapSampler()
	start := time.Now()
	var wg sync.WaitGroup
	responses := make([]*kmsg.ProduceResponse, attackers)
	for i := range attackers {
		r := dialRaw(t, c.nodes[0].Addr("PLAINTEXT"))
		wg.Go(func() {
			r.write(frame)
			responses[i] = r.receive(1, req).(*kmsg.ProduceResponse)
		})
	}
	attacked := make(chan struct{})
	go func() { wg.Wait(); close(attacked) }()
	var slowestProduce time.Duration
	produced := 0
	for attacking := true; attacking; {
		select {
		case <-attacked:
			attacking = false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		began := time.Now()
		err := honest.ProduceSync(ctx, kgo.StringRecord("honest")).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("an honest produce during the attack: %v", err)
		}
		slowestProduce = max(slowestProduce, time.Since(began))
		produced++
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	peak, allocated := heap.finish(t)
	probe.finish(t)

	for i, resp := range responses {
		accepted, refused := 0, 0
		for _, p := range resp.Topics[0].Partitions {
			switch p.ErrorCode {
			case 0:
				accepted++
			case kerr.MessageTooLarge.Code:
				refused++
				if p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "strand.produce.request.decompressed.bytes.max") {
					t.Errorf("attacker %d partition %d: MESSAGE_TOO_LARGE without a message naming the limit: %v", i, p.Partition, p.ErrorMessage)
				}
			default:
				t.Errorf("attacker %d partition %d: error %d", i, p.Partition, p.ErrorCode)
			}
		}
		// 48 MiB holds three batches of just under 16 MiB; the fourth
		// crosses it.
		if accepted != 3 || refused != 97 {
			t.Errorf("attacker %d: %d batches accepted, %d refused; want 3 and 97", i, accepted, refused)
		}
	}
	t.Logf("%d connections × 100 zstd bombs (%.0f KiB each): answered in %v; heap peak +%.0f MiB, %.0f MiB allocated; %d honest produces, slowest %v",
		attackers, float64(len(frame))/1024, elapsed, peak, allocated, produced, slowestProduce)
	if slowestProduce > probeLatencyMax {
		t.Errorf("an honest produce took %v during the attack; want within %v", slowestProduce, probeLatencyMax)
	}
	// The buffers the pre-checks held at once: two batches' bounds of
	// 16 MiB; eight without the bound.
	if held := c.nodes[0].net.checks.buffers.peak(); held > 32<<20 {
		t.Errorf("the pre-checks held %d MiB of decompression buffers at once; want at most 32", held>>20)
	}
	if peak > 256 {
		t.Errorf("heap peak +%.0f MiB; want at most 256", peak)
	}
}

// TestDecodedStructuresAreCountedWithTheFrame: a request's decoded
// structures count, beside its frame, in its connection's buffered bytes
// until it is answered: a long-polling Fetch of one partition waits in the
// core while the connection holds its frame and
// wire.ScannedRequest.DecodedBytesBound, no less.
func TestDecodedStructuresAreCountedWithTheFrame(t *testing.T) {
	c := startCluster(t, 1, nil)
	c.createTopic("polled", 1, 1)
	node := c.nodes[0]
	var topicID [16]byte
	node.Call(func(b *broker.Node) {
		topic, ok := b.Image().TopicByName("polled")
		if !ok {
			t.Fatal("no topic polled in the image")
		}
		topicID = topic.ID
	})
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(13)
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = -1, 10_000, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	hdr := env.RequestHeader{APIKey: fetch.Key(), APIVersion: fetch.GetVersion(), CorrelationID: 1, ClientID: "poller"}
	frame := wire.AppendRequest(nil, hdr, fetch)
	scanned, err := wire.ScanRequest(frame[4:], nil, wire.DefaultRequestLimits())
	if err != nil {
		t.Fatal(err)
	}
	want := int64(len(frame)-4) + scanned.DecodedBytesBound

	r := dialRaw(t, node.Addr("PLAINTEXT"))
	r.write(frame)
	var held int64
	waitUntil(t, "the parked Fetch counted in its connection", 5*time.Second, func() bool {
		node.net.mu.Lock()
		defer node.net.mu.Unlock()
		for _, sc := range node.net.conns {
			if sc.c.RemoteAddr().String() == r.c.LocalAddr().String() {
				sc.mu.Lock()
				held = sc.acct.BufferedBytes()
				sc.mu.Unlock()
			}
		}
		return held > 0
	})
	t.Logf("a Fetch frame of %d bytes decodes into at most %d: the connection holds %d", len(frame)-4, scanned.DecodedBytesBound, held)
	if held != want {
		t.Errorf("the connection holds %d bytes for its parked Fetch, want the frame and its decoded bound, %d", held, want)
	}
}
