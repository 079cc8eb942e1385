package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSingleNodeProduceFetchRoundTrip(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "events", 2, 1)

	r := c.produce(1, "events", 0, -1, recordBatch("a", "b"))
	if r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("acks=all produce: error %d base offset %d, want 0 0", r.ErrorCode, r.BaseOffset)
	}
	r = c.produce(1, "events", 0, 1, recordBatch("c"))
	if r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("acks=1 produce: error %d base offset %d, want 0 2", r.ErrorCode, r.BaseOffset)
	}
	// acks=0: no answer; the record still lands.
	if resp, err := c.send(1, produceReq("events", 0, 0, recordBatch("d")))(); err != nil || resp != nil {
		t.Fatalf("acks=0 produce answered %v, %v; want no response", resp, err)
	}
	c.run(10)

	f := c.fetch(1, "events", 0, 0)
	if f.ErrorCode != 0 || f.HighWatermark != 4 || f.LastStableOffset != 4 || f.LogStartOffset != 0 {
		t.Fatalf("fetch: error %d hw %d lso %d lso %d, want 0 4 4 0", f.ErrorCode, f.HighWatermark, f.LastStableOffset, f.LogStartOffset)
	}
	if got := joined(values(t, f.RecordBatches)); got != "a,b,c,d" {
		t.Fatalf("fetched %q, want a,b,c,d", got)
	}
	// From the middle of a batch: the whole batch comes (batch-aligned).
	if got := joined(values(t, c.fetch(1, "events", 0, 3).RecordBatches)); got != "d" {
		t.Fatalf("fetch from 3: %q, want d", got)
	}
	if f := c.fetch(1, "events", 1, 0); f.ErrorCode != 0 || len(f.RecordBatches) != 0 || f.HighWatermark != 0 {
		t.Fatalf("empty partition: error %d, %d bytes, hw %d", f.ErrorCode, len(f.RecordBatches), f.HighWatermark)
	}
	// An empty record set on the wire, not a null one: librdkafka rejects
	// null ("invalid MessageSetSize -1") and never reaches the end.
	if f := c.fetch(1, "events", 1, 0); f.RecordBatches == nil {
		t.Fatalf("empty partition: records encoded as null, want an empty record set")
	}
}

func TestAPIVersionsAdvertisesWhatClientsNeed(t *testing.T) {
	c := newCluster(t, 1, nil)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	resp := c.request(1, req).(*kmsg.ApiVersionsResponse)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{0: {3, 11}, 1: {4, 16}, 2: {1, 7}, 3: {0, 12}, 18: {0, 4}, 19: {2, 7}, 23: {0, 4}}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %d: advertised %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got[68]; ok {
		t.Errorf("advertises ConsumerGroupHeartbeat (68), which is not served")
	}
	// sarama at its newest Version asks v4 first, as Kafka 3.9+ serves it.
	req.SetVersion(4)
	if v4 := c.request(1, req).(*kmsg.ApiVersionsResponse); v4.ErrorCode != 0 || len(v4.ApiKeys) != len(resp.ApiKeys) {
		t.Errorf("ApiVersions v4: error %d, %d keys; want the v3 table of %d keys", v4.ErrorCode, len(v4.ApiKeys), len(resp.ApiKeys))
	}
	// kafka-go's fixed versions and kafkajs's maximums fall inside.
	for _, kv := range [][2]int16{{1, 5}, {1, 10}, {0, 3}, {0, 7}, {3, 1}, {3, 6}, {2, 1}, {1, 11}, {2, 3}} {
		if r := got[kv[0]]; kv[1] < r[0] || kv[1] > r[1] {
			t.Errorf("key %d v%d is outside the advertised %v", kv[0], kv[1], r)
		}
	}
}

func TestAPIVersionsKIP511Downgrade(t *testing.T) {
	c := newCluster(t, 1, nil)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(5) // kmsg knows v5 (KIP-1242); the node advertises up to v4
	resp := c.request(1, req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	i := slices.IndexFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 18 })
	if i < 0 || resp.ApiKeys[i].MaxVersion != 4 {
		t.Fatalf("KIP-511 answer lacks ApiVersions v4: %+v", resp.ApiKeys)
	}
}

func TestUnadvertisedVersionClosesConnection(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	req := produceReq("x", 0, 1, recordBatch("a"))
	req.SetVersion(2) // magic 0/1 era: not advertised
	if _, err := c.send(1, req)(); err == nil {
		t.Fatal("Produce v2 was answered; want the connection closed")
	}
	// The node still serves a new connection.
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	if resp := c.request(1, api).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("after close: ApiVersions error %d", resp.ErrorCode)
	}
}
