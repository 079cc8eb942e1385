package realnet

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestConsumerFetchFromAFollower: against three real nodes, a consumer's
// Fetch v12 sent by franz-go straight to a follower (KIP-392) reads the
// committed records from the follower's log, sent from its segment files
// and decoded by kmsg, with the follower's HW; Fetch v10 to the same
// follower is NOT_LEADER_OR_FOLLOWER.
func TestConsumerFetchFromAFollower(t *testing.T) {
	c := startCluster(t, 3, nil)
	const topic = "from-follower"
	c.createTopic(topic, 1, 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var want []string
	for i := range 5 {
		value := fmt.Sprintf("v%d", i)
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want = append(want, value)
	}
	follower := int32(1)
	if c.leaders(topic, 1)[0] == 1 {
		follower = 2
	}
	// kgo sends the highest version both sides know: cap Fetch's.
	clients := map[int16]*kgo.Client{}
	for _, version := range []int16{10, 12} {
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(1, version)
		clients[version] = c.client(kgo.MaxVersions(versions))
	}
	fetch := func(version int16) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, fp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := clients[version].Broker(int(follower)).Request(ctx, req)
		if err != nil {
			t.Fatalf("fetch v%d from node %d: %v", version, follower, err)
		}
		if v := resp.GetVersion(); v != version {
			t.Fatalf("fetch answered at v%d, want v%d", v, version)
		}
		return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	var got []string
	c.waitFor("the follower serving every record", 10*time.Second, func() bool {
		p := fetch(12)
		if p.ErrorCode != 0 {
			t.Fatalf("fetch v12 from follower %d: %v", follower, kerr.ErrorForCode(p.ErrorCode))
		}
		got = got[:0]
		for _, b := range fetchedBatches(t, p.RecordBatches) {
			for _, r := range b {
				got = append(got, string(r.Value))
			}
		}
		return p.HighWatermark == int64(len(want)) && slices.Equal(got, want)
	})
	if p := fetch(10); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch v10 from follower %d: error %d, want NOT_LEADER_OR_FOLLOWER", follower, p.ErrorCode)
	}
}

// fetchedBatches decodes a Fetch answer's record batches.
func fetchedBatches(t *testing.T, b []byte) [][]kmsg.Record {
	t.Helper()
	var out [][]kmsg.Record
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("fetched batch: %v", err)
		}
		size := int(rb.Length) + 12
		if size > len(b) {
			t.Fatalf("batch of %d bytes with %d left", size, len(b))
		}
		records := make([]kmsg.Record, rb.NumRecords)
		raw := rb.Records // uncompressed: the producer sends none
		for i := range records {
			length, n := binary.Varint(raw)
			if n <= 0 || length < 0 || n+int(length) > len(raw) {
				t.Fatalf("record %d: bad length", i)
			}
			if err := records[i].ReadFrom(raw[:n+int(length)]); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			raw = raw[n+int(length):]
		}
		out = append(out, records)
		b = b[size:]
	}
	return out
}
