package realnet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRecycledReplicaFetchFramesKeepFollowerLogsIntact replicates acks=all
// produces to two followers, whose Fetch answers are read into recycled
// frames (poisoned when recycled, framepool_test.go), and checks that every
// follower's segment ends up byte for byte the leader's, whose records are
// consumed back intact. A follower batch still referring to its frame after
// recycling would be written as poison. It fails if no answer frame was
// recycled, so that it cannot pass by never reusing one.
func TestRecycledReplicaFetchFramesKeepFollowerLogsIntact(t *testing.T) {
	c := startCluster(t, 3, nil)
	defer c.stop()
	recycledBefore := replicaFetchFrames.recycled.Load()
	const topic = "recycled-replica"
	c.createTopic(topic, 1, 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	acked := produceKeyed(t, producer, topic, 20_000)
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeAll(t, consumer, topic, acked)

	leader := c.leaders(topic, 1)[0]
	segment := func(id int) []byte {
		data, err := os.ReadFile(filepath.Join(c.configs[id-1].LogDirs[0], topic+"-0", "00000000000000000000.log"))
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		return data
	}
	// The followers' write workers may still hold the last batches.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mismatch := ""
		want := segment(int(leader))
		for id := 1; id <= 3 && mismatch == ""; id++ {
			if got := segment(id); id != int(leader) && !bytes.Equal(got, want) {
				mismatch = describeMismatch(id, got, want)
			}
		}
		if mismatch == "" && len(want) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s a follower's segment still differs from the leader's (node %d): %s", leader, mismatch)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if replicaFetchFrames.recycled.Load() == recycledBefore {
		t.Fatal("no replica Fetch answer frame was recycled")
	}
}

// describeMismatch says where a follower's segment first differs from the
// leader's.
func describeMismatch(id int, got, want []byte) string {
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("node %d differs from byte %d on (%d bytes against %d)", id, i, len(got), len(want))
}
