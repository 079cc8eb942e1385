package batch

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCheckProducedAcceptsKgoClient produces through the real franz-go client,
// idempotent and compressed with each codec, to franz-go's fake broker, and
// runs CheckProduced on the exact record bytes the client put on the wire.
func TestCheckProducedAcceptsKgoClient(t *testing.T) {
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			var mu sync.Mutex
			var sent [][]byte
			cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				cluster.KeepControl()
				mu.Lock()
				defer mu.Unlock()
				for _, topic := range req.(*kmsg.ProduceRequest).Topics {
					for _, p := range topic.Partitions {
						sent = append(sent, bytes.Clone(p.Records))
					}
				}
				return nil, nil, false // let the fake broker answer
			})
			client, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
				kgo.ProducerBatchCompression(kgoCodec(codec)), kgo.ProducerLinger(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var records []*kgo.Record
			for i := range 20 {
				records = append(records, &kgo.Record{Key: []byte(fmt.Sprint("key", i)), Value: bytes.Repeat([]byte("value "), 50),
					Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(sent) == 0 {
				t.Fatal("captured no produce request")
			}
			limits := testLimits()
			limits.NowMs = time.Now().UnixMilli()
			limits.TimestampBeforeMaxMs, limits.TimestampAfterMaxMs = 60_000, 60_000
			total := int32(0)
			for _, b := range sent {
				info, err := CheckProduced(b, limits)
				if err != nil {
					t.Fatalf("CheckProduced(kgo batch): %v", err)
				}
				if info.Header.Codec() != codec || info.ProducerID < 0 || info.BaseSequence != total {
					t.Fatalf("kgo batch %+v: codec %v, want %v; base sequence want %d", info, info.Header.Codec(), codec, total)
				}
				total += info.RecordCount
			}
			if total != 20 {
				t.Fatalf("kgo sent %d records, want 20", total)
			}
		})
	}
}
