package broker

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
)

// TestAcksZeroCloseKeepsEarlierAnswers: Kafka reads one request of a
// connection at a time (SocketServer mutes the channel until the response,
// or the no-response of an acks=0 produce, is done), so when an acks=0
// produce fails and Kafka closes the connection, every earlier request on it
// has already been answered. Strand reads pipelined requests: closing at
// once (as 5f2c071 did) lost the answer of an acks=all produce still
// waiting for its followers though its batch was appended, so the client
// saw a connection error and, without idempotence, sent the batch again (a
// duplicate). The close is now in request order (env.Network.Close): the
// acks=all answer arrives, then the connection closes.
func TestAcksZeroCloseKeepsEarlierAnswers(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.waitRegistered()
	c.createTopic(1, "pipelined", 1, 2)
	leader := c.leaderOf("pipelined", 0)
	c.waitFor("both replicas in the ISR", 10000, func() bool {
		st, ok := c.nodes[leader].node.meta.image.PartitionByName("pipelined", 0)
		return ok && len(st.ISR) == 2
	})
	cc := c.conn(leader)

	var first kmsg.Response
	var firstErr error
	firstDone := false
	cc.Send(produceReq("pipelined", 0, -1, recordBatch("acked")), func(r kmsg.Response, err error) {
		first, firstErr, firstDone = r, err, true
	})
	cc.Send(produceReq("pipelined", 7, 0, recordBatch("refused")), func(kmsg.Response, error) {})
	c.waitFor("the acks=all answer or the connection's end", 10000, func() bool { return firstDone })
	if firstErr != nil {
		if got := values(t, c.fetch(leader, "pipelined", 0, 0).RecordBatches); joined(got) == "acked" {
			t.Logf("the batch was appended, yet its producer was told the connection failed")
		}
		t.Fatalf("the acks=all produce sent before the failing acks=0 one lost its answer (%v); Kafka answers it before closing", firstErr)
	}
	if code := first.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("acks=all produce: error %d", code)
	}
	c.waitFor("the close after the answer", 1000, func() bool { return !cc.Open() })
}

// TestRecompressionKeepsIdempotenceAndHeader: every producer codec into
// every topic codec: the stored batch verifies (length, CRC), keeps the
// producer id, epoch, sequence, offsets and timestamps, holds the records,
// and a retry of the same batch (same sequence, as sent: in the producer's
// codec) is recognised as a duplicate and answered with the first offsets,
// then the next sequence appends after it.
func TestRecompressionKeepsIdempotenceAndHeader(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	codecs := []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}
	types := map[batch.Codec]string{batch.CodecNone: "uncompressed", batch.CodecGzip: "gzip", batch.CodecSnappy: "snappy", batch.CodecLZ4: "lz4", batch.CodecZstd: "zstd"}
	recs := []batch.Record{{Key: []byte("a"), Value: []byte("one one one one"), TimestampDelta: 0}, {Key: []byte("b"), Value: []byte("two two two two"), TimestampDelta: 5}}
	pid := int64(100)
	for _, to := range codecs {
		topic := "to-" + types[to]
		c.createTopicWith(topic, map[string]string{"compression.type": types[to]})
		next := int64(0)
		for _, from := range codecs {
			pid++
			spec := batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Codec: from, Records: recs,
				Idempotent: true, ProducerID: pid, ProducerEpoch: 3, BaseSequence: 0}
			sent := batch.Build(spec)
			r := c.produce(1, topic, 0, -1, append([]byte(nil), sent...))
			if r.ErrorCode != 0 || r.BaseOffset != next {
				t.Fatalf("%s from %s: error %d base %d, want 0 and %d", topic, from, r.ErrorCode, r.BaseOffset, next)
			}
			f := c.fetch(1, topic, 0, next)
			h, err := batch.Verify(f.RecordBatches)
			if err != nil {
				t.Fatalf("%s from %s: stored batch: %v", topic, from, err)
			}
			if int(h.TotalBytes()) != len(f.RecordBatches) {
				t.Fatalf("%s from %s: fetched %d bytes, batch says %d", topic, from, len(f.RecordBatches), h.TotalBytes())
			}
			if h.Codec() != to || h.ProducerID != pid || h.ProducerEpoch != 3 || h.BaseSequence != 0 ||
				h.BaseOffset != next || h.LastOffsetDelta != 1 || h.RecordCount != 2 ||
				h.FirstTimestamp != 1_767_225_600_000 || h.MaxTimestamp != 1_767_225_600_005 ||
				h.Attributes&batch.AttrLogAppendTime != 0 {
				t.Fatalf("%s from %s: stored header %+v", topic, from, h)
			}
			if _, _, vals := storedBatch(t, f.RecordBatches); joined(vals) != "one one one one,two two two two" {
				t.Fatalf("%s from %s: values %q", topic, from, vals)
			}
			retry := c.produce(1, topic, 0, -1, append([]byte(nil), sent...))
			if retry.ErrorCode != 0 || retry.BaseOffset != next {
				t.Fatalf("%s from %s: retry of the same sequence: error %d base %d, want the first answer (0, %d)", topic, from, retry.ErrorCode, retry.BaseOffset, next)
			}
			spec.BaseSequence = 2
			if r := c.produce(1, topic, 0, -1, batch.Build(spec)); r.ErrorCode != 0 || r.BaseOffset != next+2 {
				t.Fatalf("%s from %s: next sequence: error %d base %d, want 0 and %d", topic, from, r.ErrorCode, r.BaseOffset, next+2)
			}
			next += 4
		}
	}
}

// heldSyncDisk holds the Syncs of files whose path contains match while
// hold is set, so that a test can keep a partition's flush pending.
type heldSyncDisk struct {
	env.Disk
	match string
	hold  bool
	held  []func()
}

// heldSyncFile is a file of a heldSyncDisk.
type heldSyncFile struct {
	env.File
	d    *heldSyncDisk
	path string
}

// Open wraps the file so that its Syncs can be held.
func (d *heldSyncDisk) Open(path string, opts env.OpenOptions) (env.File, error) {
	f, err := d.Disk.Open(path, opts)
	if err != nil {
		return f, err
	}
	return &heldSyncFile{File: f, d: d, path: path}, nil
}

// Sync holds the Sync while the disk holds Syncs of this path.
func (f *heldSyncFile) Sync(done func(error)) {
	if f.d.hold && strings.Contains(f.path, f.d.match) {
		f.d.held = append(f.d.held, func() { f.File.Sync(done) })
		return
	}
	f.File.Sync(done)
}

// createAssigned creates a one-partition topic with the given replicas
// (the first leads) and configs.
func (c *cluster) createAssigned(name string, replicas []int32, configs map[string]string) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v := configs[k]
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, &v
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	if code := c.request(1, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("create %s: %v", name, kerr.ErrorForCode(code))
	}
	c.waitFor(name+" on every replica", 10000, func() bool {
		for _, id := range replicas {
			if c.nodes[id].node.parts.partitions[partitionKey{name, 0}] == nil {
				return false
			}
		}
		return true
	})
}

// TestFetcherNotStalledWhenASyncingPartitionLeaves: a follower's fetcher
// skips a round while one of its flush.messages=1 partitions awaits its
// Sync, and the Sync's completion runs the fetcher the partition is in
// then (onDurable: fetcherOf). If the partition left the fetcher meanwhile
// (its topic deleted, or its leader moved), nothing runs the old fetcher
// again: its other partitions stop replicating until some metadata change
// of theirs (an ISR shrink, replica.lag.time.max.ms later) calls follow:
// 31.9 s for one record before the fix. follow and unfollow now run the
// fetcher a partition leaves.
func TestFetcherNotStalledWhenASyncingPartitionLeaves(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.waitRegistered()
	tn := c.nodes[2]
	tn.proc.Crash()
	c.run(100)
	tn.proc.Restart()
	disk := &heldSyncDisk{Disk: tn.disk, match: "synced-0"}
	node, err := New(tn.cfg, tn.clock, tn.nn, []env.Disk{disk}, c.ids)
	if err != nil {
		t.Fatal(err)
	}
	tn.node = node
	tn.nn.SetHandler(node)
	c.waitRegistered()

	c.createAssigned("q", []int32{1, 2}, nil)
	c.createAssigned("synced", []int32{1, 2}, map[string]string{"flush.messages": "1"})
	c.run(2000)
	q := partitionKey{"q", 0}
	if r := c.produce(1, "q", 0, -1, recordBatch("q0")); r.ErrorCode != 0 {
		t.Fatalf("produce q: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	disk.hold = true
	if r := c.produce(1, "synced", 0, 1, recordBatch("s0")); r.ErrorCode != 0 {
		t.Fatalf("produce synced: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.waitFor("the follower's Sync of synced-0 held", 5000, func() bool { return len(disk.held) > 0 })
	c.run(200)

	c.deleteTopic(1, "synced")
	c.waitFor("synced retired on the follower", 10000, func() bool {
		return node.parts.partitions[partitionKey{"synced", 0}] == nil
	})
	disk.hold = false
	for _, sync := range disk.held {
		sync()
	}
	disk.held = nil
	c.run(200)

	if r := c.produce(1, "q", 0, 1, recordBatch("q1")); r.ErrorCode != 0 {
		t.Fatalf("produce q: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	startMs := node.nowMs()
	c.waitFor("q-0 replicated to the follower", 60000, func() bool { return node.parts.partitions[q].log.LogEndOffset() == 2 })
	if tookMs := node.nowMs() - startMs; tookMs > 2000 {
		t.Fatalf("the follower replicated q-0 %d ms after the produce: its fetcher stalled after synced-0 left it mid-Sync", tookMs)
	}
}
