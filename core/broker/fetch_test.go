package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

func TestFetchLongPolling(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)

	// Nothing arrives: the answer comes, empty, after MaxWaitMillis.
	start := c.s.NowNs()
	resp := c.request(1, fetchReq("t", 0, 0, 300)).(*kmsg.FetchResponse)
	if waited := (c.s.NowNs() - start) / 1e6; waited < 300 || waited > 350 {
		t.Fatalf("empty long poll answered after %d ms, want about 300", waited)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("empty long poll: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}

	// A produce during the wait answers it at once with the record.
	start = c.s.NowNs()
	wait := c.send(1, fetchReq("t", 0, 0, 5000))
	c.run(50)
	c.produce(1, "t", 0, 1, recordBatch("late"))
	r, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if waited := (c.s.NowNs() - start) / 1e6; waited > 1000 {
		t.Fatalf("long poll woke after %d ms", waited)
	}
	if got := joined(values(t, r.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches)); got != "late" {
		t.Fatalf("woken fetch returned %q", got)
	}
}

func TestFetchMaxBytesAndKIP74(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 2, 1)
	for _, v := range []string{"one", "two", "three"} {
		c.produce(1, "t", 0, 1, recordBatch(v))
		c.produce(1, "t", 1, 1, recordBatch(v))
	}
	batchBytes := int32(len(recordBatch("one")))

	// Partition max smaller than one batch: the first batch still comes whole.
	req := fetchReq("t", 0, 0, 0)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 10
	p := c.request(1, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if got := joined(values(t, p.RecordBatches)); got != "one" {
		t.Fatalf("KIP-74 first batch: %q, want one", got)
	}

	// Total max across two partitions: the second gets nothing once the
	// first used the budget (and is not the first non-empty partition).
	req = fetchReq("t", 0, 0, 0)
	req.MaxBytes = 2 * batchBytes
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 1, 0, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, fp)
	parts := c.request(1, req).(*kmsg.FetchResponse).Topics[0].Partitions
	if got := joined(values(t, parts[0].RecordBatches)); got != "one,two" {
		t.Fatalf("partition 0 under MaxBytes: %q, want one,two", got)
	}
	if len(parts[1].RecordBatches) != 0 {
		t.Fatalf("partition 1 got %d bytes past MaxBytes", len(parts[1].RecordBatches))
	}
}

func TestListOffsets(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	base := int64(1_767_225_600_000)
	for i, ts := range []int64{base + 10, base + 30, base + 20} {
		b := batch.Build(batch.BuildSpec{FirstTimestamp: ts, Records: []batch.Record{{Value: []byte{byte(i)}}}})
		if r := c.produce(1, "t", 0, 1, b); r.ErrorCode != 0 {
			t.Fatalf("produce: %d", r.ErrorCode)
		}
	}
	ask := func(ts int64) kmsg.ListOffsetsResponseTopicPartition { return c.listOffset(1, "t", 0, ts) }
	cases := []struct {
		name   string
		ts     int64
		offset int64
	}{
		{"earliest", -2, 0}, {"latest", -1, 3}, {"max timestamp", -3, 1},
		{"by timestamp", base + 15, 1}, {"before all", base, 0}, {"after all", base + 31, -1},
	}
	for _, tc := range cases {
		if r := ask(tc.ts); r.ErrorCode != 0 || r.Offset != tc.offset {
			t.Errorf("%s: error %d offset %d, want %d", tc.name, r.ErrorCode, r.Offset, tc.offset)
		}
	}
	if r := ask(-3); r.Timestamp != base+30 {
		t.Errorf("max timestamp: %d, want %d", r.Timestamp, base+30)
	}
}

// listOffset asks node for partition p of topic at timestamp ts (or -1
// latest, -2 earliest, -3 max timestamp) with ListOffsets v7, as a consumer
// that knows no leader epoch.
func (c *cluster) listOffset(node int32, topic string, p int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.request(node, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

// TestListOffsetsFindsTheRecord: a lookup by timestamp answers the exact
// record inside a compressed batch, with that record's timestamp, as Kafka
// does; MAX_TIMESTAMP the first record carrying the largest timestamp
// (KAFKA-16310), not its batch's last offset.
func TestListOffsetsFindsTheRecord(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	base := int64(1_767_225_600_000)
	spec := batch.BuildSpec{FirstTimestamp: base, Codec: batch.CodecLZ4}
	for _, delta := range []int64{0, 10, 40, 20, 40, 30} {
		spec.Records = append(spec.Records, batch.Record{Value: []byte("v"), TimestampDelta: delta})
	}
	if r := c.produce(1, "t", 0, 1, batch.Build(spec)); r.ErrorCode != 0 {
		t.Fatalf("produce: %d", r.ErrorCode)
	}
	ask := func(ts int64) kmsg.ListOffsetsResponseTopicPartition { return c.listOffset(1, "t", 0, ts) }
	for _, tc := range []struct {
		ts, offset, timestamp int64
	}{
		{base + 5, 1, base + 10}, {base + 15, 2, base + 40}, {base + 40, 2, base + 40}, {-3, 2, base + 40}, {base + 41, -1, -1},
	} {
		r := ask(tc.ts)
		if r.ErrorCode != 0 || r.Offset != tc.offset || r.Timestamp != tc.timestamp {
			t.Errorf("ListOffsets(%d): error %d offset %d timestamp %d, want offset %d timestamp %d", tc.ts, r.ErrorCode, r.Offset, r.Timestamp, tc.offset, tc.timestamp)
		}
		if tc.offset >= 0 && r.LeaderEpoch < 0 {
			t.Errorf("ListOffsets(%d): leader epoch %d, want the batch's", tc.ts, r.LeaderEpoch)
		}
	}
}

// TestFetchPurgatoryBoundedPerPartition: beyond
// strand.purgatory.requests.per.partition.max waiting requests on a
// partition, a long poll is answered at once instead of waiting.
func TestFetchPurgatoryBoundedPerPartition(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"strand.purgatory.requests.per.partition.max": "1"})
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	start := c.s.NowNs()
	first := c.send(1, fetchReq("t", 0, 0, 2000))
	c.run(10) // parked
	// Another connection: answers on one connection keep request order.
	other, err := c.client.Dial(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	answered := false
	other.Send(fetchReq("t", 0, 0, 2000), func(kmsg.Response, error) { answered = true })
	c.waitFor("second long poll answered", 1000, func() bool { return answered })
	if waited := (c.s.NowNs() - start) / 1e6; waited >= 2000 {
		t.Fatalf("the second long poll waited %d ms; the purgatory holds one", waited)
	}
	if _, err := first(); err != nil {
		t.Fatal(err)
	}
	if waited := (c.s.NowNs() - start) / 1e6; waited < 2000 {
		t.Fatalf("the first long poll waited only %d ms", waited)
	}
}
