package realnet

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	// Every realnet test runs with recycled Produce frames poisoned: a
	// batch the broker still referred to after recycling its frame would
	// fail its CRC or be consumed altered.
	poisonRecycledFrames = true
}

// TestRecycledProduceFramesKeepRecordsIntact produces to an in-process
// three-node cluster (RF 3) with acks=all, whose answers wait for the
// followers, and with acks=1, while Produce frames are recycled and
// poisoned, and consumes every record back identical. It fails if no frame
// was recycled, so that it cannot pass by never reusing one.
func TestRecycledProduceFramesKeepRecordsIntact(t *testing.T) {
	c := startCluster(t, 3, nil)
	defer c.stop()
	recycledBefore := produceFrames.recycled.Load()
	for _, acks := range []struct {
		name string
		acks kgo.Acks
	}{{"acks-all", kgo.AllISRAcks()}, {"acks-1", kgo.LeaderAck()}} {
		t.Run(acks.name, func(t *testing.T) {
			topic := "recycled-" + acks.name
			c.createTopic(topic, 2, 3)
			roundTripKeyed(t, c, topic, acks.acks)
		})
	}
	if produceFrames.recycled.Load() == recycledBefore {
		t.Fatal("no Produce frame was recycled")
	}
}

// roundTripKeyed produces 20,000 keyed records to topic with acks, one by
// one (linger 0, uncompressed, so that many Produce frames go through the
// pool), and consumes them back: each acknowledged record, in produce order,
// identical.
func roundTripKeyed(t *testing.T, c *testCluster, topic string, acks kgo.Acks) {
	t.Helper()
	producer := c.client(kgo.RequiredAcks(acks), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	acked := produceKeyed(t, producer, topic, 20_000)
	checkProduceOrder(t, acked)
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeAll(t, consumer, topic, acked)
}

// TestFramePoolSizeClasses checks the pool's size classes: a frame gets a
// buffer of the next power of two (at least 4 KiB), a frame beyond the
// largest class is not pooled, and a recycled buffer is poisoned and
// handed out again for its class.
func TestFramePoolSizeClasses(t *testing.T) {
	var p framePool
	for _, tc := range []struct {
		length  int
		wantCap int
		pooled  bool
	}{
		{1, 4 << 10, true},
		{4 << 10, 4 << 10, true},
		{4<<10 + 1, 8 << 10, true},
		{1_000_012, 1 << 20, true},
		{16 << 20, 16 << 20, true},
		{16<<20 + 1, 16<<20 + 1, false},
	} {
		fb := p.get(tc.length)
		if len(fb.buf) != tc.length || cap(fb.buf) != tc.wantCap || fb.pooled != tc.pooled {
			t.Errorf("get(%d): len %d cap %d pooled %v; want len %d cap %d pooled %v",
				tc.length, len(fb.buf), cap(fb.buf), fb.pooled, tc.length, tc.wantCap, tc.pooled)
		}
	}
	fb := p.get(5000)
	fb.buf[0] = 1
	p.put(fb)
	if fb.buf[:cap(fb.buf)][cap(fb.buf)-1] != framePoisonByte || fb.buf[0] != framePoisonByte {
		t.Error("a recycled frame was not poisoned")
	}
}
