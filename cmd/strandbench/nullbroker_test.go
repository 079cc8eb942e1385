package main

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startNullInProcess serves a null broker with partitions per topic on a
// free port until the test ends.
func startNullInProcess(t *testing.T, partitions int32) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go newNullBroker(l, partitions).serve(l)
	return l.Addr().String()
}

// TestNullBrokerAcknowledgesEveryRecordWithContiguousOffsets produces with
// kgo, idempotent and not, linger 0 and kgo's default, to a three-partition
// topic: every record must be acknowledged, and each partition's offsets
// must be 0, 1, 2... with no gap or repeat, across both producers.
func TestNullBrokerAcknowledgesEveryRecordWithContiguousOffsets(t *testing.T) {
	const partitions, recordsPerProducer = 3, 3000
	address := startNullInProcess(t, partitions)
	offsets := map[int32][]int64{}
	var mu sync.Mutex
	for _, s := range []produceSettings{{acksAll: true, idempotent: true, lingerZero: true}, {acksAll: false}, {acksAll: true, idempotent: true}} {
		cl, err := kgo.NewClient(append(producerOpts([]string{address}, "t", s), kgo.ProducerBatchMaxBytes(8<<10))...)
		if err != nil {
			t.Fatal(err)
		}
		acks := &ackCounter{}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for range recordsPerProducer {
			cl.Produce(ctx, &kgo.Record{Value: recordValue(100)}, func(r *kgo.Record, err error) {
				acks.promise(r, err)
				if err == nil {
					mu.Lock()
					offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
					mu.Unlock()
				}
			})
		}
		err = cl.Flush(ctx)
		cancel()
		cl.Close()
		if err != nil {
			t.Fatalf("%+v: flush: %v", s, err)
		}
		if err := acks.err(); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		if acks.acked.Load() != recordsPerProducer {
			t.Fatalf("%+v: %d of %d records acknowledged", s, acks.acked.Load(), recordsPerProducer)
		}
	}
	var total int
	for partition, got := range offsets {
		seen := make([]bool, len(got))
		for _, offset := range got {
			if offset < 0 || offset >= int64(len(got)) || seen[offset] {
				t.Fatalf("partition %d: offset %d repeated or outside 0..%d", partition, offset, len(got)-1)
			}
			seen[offset] = true
		}
		total += len(got)
	}
	if total != 3*recordsPerProducer {
		t.Errorf("%d offsets over %d partitions, want %d", total, len(offsets), 3*recordsPerProducer)
	}
}

// writeFrame writes one request frame: key, version, correlation id 7, no
// client id, then body.
func writeFrame(t *testing.T, conn net.Conn, key, version int16, flexible bool, body []byte) {
	t.Helper()
	frame := kbin.AppendInt32(nil, 0)
	frame = kbin.AppendInt16(frame, key)
	frame = kbin.AppendInt16(frame, version)
	frame = kbin.AppendInt32(frame, 7)
	frame = kbin.AppendNullableString(frame, nil)
	if flexible {
		frame = append(frame, 0)
	}
	frame = append(frame, body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one response frame's body after the correlation id (and
// header tags if flexible).
func readFrame(t *testing.T, conn net.Conn, flexible bool) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, frame); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != 7 {
		t.Fatalf("correlation id %d, want 7", got)
	}
	if flexible {
		return frame[5:]
	}
	return frame[4:]
}

// expectClosed checks that the null broker closes conn without answering.
func expectClosed(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("%s: read %d bytes, %v; want the connection closed", what, n, err)
	}
}

// TestNullBrokerRefusesWhatItDoesNotServe sends requests the null broker
// does not serve and malformed ones: each closes its connection or gets an
// error, and the broker goes on answering (a panic would end the test
// binary).
func TestNullBrokerRefusesWhatItDoesNotServe(t *testing.T) {
	address := startNullInProcess(t, 1)
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", address)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(4)
	conn := dial()
	writeFrame(t, conn, kmsg.Fetch.Int16(), 4, false, fetch.AppendTo(nil))
	expectClosed(t, conn, "Fetch")

	conn = dial()
	writeFrame(t, conn, 999, 0, false, nil)
	expectClosed(t, conn, "key 999")

	conn = dial()
	writeFrame(t, conn, kmsg.Produce.Int16(), 2, false, nil)
	expectClosed(t, conn, "Produce v2")

	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(7)
	produce.Acks = -1
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "t"
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Records = []byte{1, 2, 3}
	topic.Partitions = append(topic.Partitions, partition)
	produce.Topics = append(produce.Topics, topic)
	body := produce.AppendTo(nil)
	conn = dial()
	writeFrame(t, conn, kmsg.Produce.Int16(), 7, false, body[:len(body)-2])
	expectClosed(t, conn, "a truncated Produce")

	// A whole Produce whose records are not a record batch: an error for
	// the partition, and the connection stays open.
	conn = dial()
	writeFrame(t, conn, kmsg.Produce.Int16(), 7, false, body)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(7)
	if err := resp.ReadFrom(readFrame(t, conn, false)); err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.CorruptMessage.Code {
		t.Errorf("Produce of 3 bytes of records: %+v, want CORRUPT_MESSAGE", resp.Topics)
	}

	// ApiVersions from a newer client: v0 with UNSUPPORTED_VERSION and the
	// versions served.
	writeFrame(t, conn, kmsg.ApiVersions.Int16(), 99, false, nil)
	versions := kmsg.NewPtrApiVersionsResponse()
	if err := versions.ReadFrom(readFrame(t, conn, false)); err != nil {
		t.Fatal(err)
	}
	if versions.ErrorCode != kerr.UnsupportedVersion.Code || len(versions.ApiKeys) != len(nullAPIs) {
		t.Errorf("ApiVersions v99: error %d, %d keys", versions.ErrorCode, len(versions.ApiKeys))
	}

	// A frame claiming more than the limit.
	conn = dial()
	var huge [4]byte
	binary.BigEndian.PutUint32(huge[:], nullFrameBytesMax+1)
	if _, err := conn.Write(huge[:]); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, conn, "an oversized frame")

	// Still serving: a kgo client gets metadata naming the null broker.
	c := &cluster{name: "null broker", bootstrap: []string{address}}
	if err := c.probe(1); err != nil {
		t.Errorf("after the refusals: %v", err)
	}
}

func TestCountRecords(t *testing.T) {
	batchOf := func(records int32, size int) []byte {
		b := make([]byte, size)
		binary.BigEndian.PutUint32(b[batchLengthOffset:], uint32(size-batchLogOverheadBytes))
		binary.BigEndian.PutUint32(b[recordsCountOffset:], uint32(records))
		return b
	}
	two := append(batchOf(3, 80), batchOf(5, 100)...)
	shortLength := batchOf(2, 80)
	binary.BigEndian.PutUint32(shortLength[batchLengthOffset:], 20)
	for _, c := range []struct {
		name    string
		records []byte
		count   int64
		ok      bool
	}{
		{"two batches", two, 8, true},
		{"one batch", batchOf(1, recordBatchHeaderBytes), 1, true},
		{"a cut second batch", two[:150], 0, false},
		{"a short header", batchOf(3, 80)[:recordBatchHeaderBytes-1], 0, false},
		{"no records", nil, 0, false},
		{"a count of 0", batchOf(0, 70), 0, false},
		{"a length below the header", shortLength, 0, false},
	} {
		if count, ok := countRecords(c.records); count != c.count || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, count, ok, c.count, c.ok)
		}
	}
}

// TestProduceAtRateAgainstNullBroker runs the latency limit's measurement,
// briefly and slowly, against an in-process null broker: every record is
// timed, the percentiles are ordered, and the run's CPU and elapsed time
// are counted.
func TestProduceAtRateAgainstNullBroker(t *testing.T) {
	c := &cluster{name: "null broker", bootstrap: []string{startNullInProcess(t, 1)}}
	const rate, duration = 20_000, 250 * time.Millisecond
	l, err := produceAtRate(c, "bench-latency", 100, rate, duration, true)
	if err != nil {
		t.Fatal(err)
	}
	if l.records != rate*duration.Milliseconds()/1000 {
		t.Errorf("%d records, want %d", l.records, rate*duration.Milliseconds()/1000)
	}
	if l.p50 <= 0 || l.p50 > l.p99 || l.p99 > l.pMax {
		t.Errorf("p50 %v, p99 %v, max %v: not ordered and positive", l.p50, l.p99, l.pMax)
	}
	if l.elapsed < duration*9/10 || l.clientCPU <= 0 || l.cores(l.clientCPU) > 4 {
		t.Errorf("elapsed %v, client CPU %v", l.elapsed, l.clientCPU)
	}
	if l.elapsed >= latencyWarmup {
		t.Errorf("elapsed %v of a %v run: the %v warm-up was counted", l.elapsed, duration, latencyWarmup)
	}
}
