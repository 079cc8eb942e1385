package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
	"strand/sim/memdisk"
)

func metadataFetch(version int16, offset int64, maxWaitMs, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, 1, maxBytes
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic, topic.TopicID = MetadataTopic, MetadataTopicID
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset, p.PartitionMaxBytes = offset, maxBytes
	topic.Partitions = []kmsg.FetchRequestTopicPartition{p}
	req.Topics = []kmsg.FetchRequestTopic{topic}
	return req
}

func fetchedPartition(t tb, r kmsg.Response) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp := r.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response with %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// follow fetches the whole committed log, maxBytes at a time, the way a
// broker does, and applies it to a fresh image.
func follow(t tb, h *harness, version int16, maxBytes int32) *metadata.Image {
	t.Helper()
	im := metadata.NewImage()
	for fetches := 0; im.Offset()+1 < h.c.CommittedOffset(); fetches++ {
		if fetches > 1000 {
			t.Fatal("following the metadata log makes no progress")
		}
		p := fetchedPartition(t, h.send(metadataFetch(version, im.Offset()+1, 0, maxBytes)))
		if p.ErrorCode != 0 || p.HighWatermark != h.c.CommittedOffset() {
			t.Fatalf("metadata fetch: error %d, HW %d (committed %d)", p.ErrorCode, p.HighWatermark, h.c.CommittedOffset())
		}
		batches, err := metadata.DecodeBatches(p.RecordBatches)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			if err := im.ApplyBatch(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	return im
}

func TestBrokerFollowingTheLogBuildsTheSameImage(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(3)
	h.createTopic("a", 5, 3, nil)
	h.createTopic("b", 2, 1, nil)
	if !Handles(metadataFetch(12, 0, 0, 1)) || !Handles(metadataFetch(15, 0, 0, 1)) {
		t.Fatal("metadata fetches by name (v12) and by id (v15) not recognized")
	}
	other := metadataFetch(12, 0, 0, 1)
	other.Topics[0].Topic = "a"
	if Handles(other) {
		t.Fatal("a fetch of another topic routed to the controller")
	}
	for _, version := range []int16{12, 15} {
		for _, maxBytes := range []int32{1, 300, 1 << 20} {
			im := follow(t, h, version, maxBytes)
			if diff := imageDiff(h.c.Image(), im); diff != "" {
				t.Fatalf("fetch v%d, %d bytes at a time: follower image differs (-controller +follower):\n%s", version, maxBytes, diff)
			}
		}
	}
	beyond := fetchedPartition(t, h.send(metadataFetch(12, h.c.quorum.EndOffset()+1, 0, 1<<20)))
	if beyond.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch beyond the commit offset: error %d", beyond.ErrorCode)
	}
}

func TestMetadataFetchLongPolls(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(1)
	end := h.c.CommittedOffset()
	replies := h.sendAsync(metadataFetch(12, end, 500, 1<<20))
	h.settle()
	if len(*replies) != 0 {
		t.Fatal("fetch at the commit offset answered at once; it should wait for records")
	}
	h.createTopic("a", 1, 1, nil)
	if len(*replies) != 1 {
		t.Fatalf("held fetch got %d answers after a commit, want 1", len(*replies))
	}
	if p := fetchedPartition(t, (*replies)[0]); len(p.RecordBatches) == 0 || p.HighWatermark <= end {
		t.Fatalf("woken fetch: %d bytes, HW %d (was %d)", len(p.RecordBatches), p.HighWatermark, end)
	}
	// Nothing commits: the fetch is answered empty when MaxWaitMs runs out.
	replies = h.sendAsync(metadataFetch(12, h.c.CommittedOffset(), 500, 1<<20))
	h.advance(499)
	if len(*replies) != 0 {
		t.Fatal("fetch answered before its wait ran out")
	}
	h.advance(1)
	if len(*replies) != 1 || len(fetchedPartition(t, (*replies)[0]).RecordBatches) != 0 {
		t.Fatalf("expired fetch: %d answers, want one empty", len(*replies))
	}
	h.advance(1000)
	if len(*replies) != 1 {
		t.Fatal("expired fetch answered twice")
	}
}

func TestMetadataFetchWaitersAreBounded(t *testing.T) {
	cfg := DefaultConfig(100)
	cfg.FetchWaitersMax = 2
	h := newHarness(t, cfg)
	var all []*[]kmsg.Response
	for range 3 {
		all = append(all, h.sendAsync(metadataFetch(12, h.c.CommittedOffset(), 500, 1<<20)))
	}
	if len(*all[0]) != 0 || len(*all[1]) != 0 || len(*all[2]) != 1 {
		t.Fatalf("with 2 waiter slots, answers %d %d %d, want 0 0 1", len(*all[0]), len(*all[1]), len(*all[2]))
	}
}

// TestCrashLosesOnlyUncommittedRecords: a power loss keeps every record a
// request was answered for, and loses the records whose Sync had not
// completed, whose requests were never answered.
func TestCrashLosesOnlyUncommittedRecords(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(3)
	h.createTopic("a", 3, 3, nil)
	committed := h.c.Image().Clone()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "b", NumPartitions: 1, ReplicationFactor: 1}}
	replies := h.sendAsync(req)
	if len(*replies) != 0 {
		t.Fatal("CreateTopics answered before its records were synced")
	}
	h.stop()
	h.disk.Crash(nil, memdisk.CrashLoseAll)
	h.start()
	// The restarted voter's epoch begins with its leader-change entry.
	if err := committed.Apply(committed.Offset()+1, &metadata.NoOpRecord{}); err != nil {
		t.Fatal(err)
	}
	if diff := imageDiff(committed, h.c.Image()); diff != "" {
		t.Fatalf("image after the crash differs from the committed one (-want +got):\n%s", diff)
	}
	if rt := h.createTopic("b", 1, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("creating the lost topic again: error %d", rt.ErrorCode)
	}
}

// TestRestartedControllerServesFetchesOnceActive: right after a restart the
// voter has not been elected and nothing is known committed: a metadata
// fetch is refused (NOT_LEADER_OR_FOLLOWER, so the broker retries, at the
// leader CurrentLeader names when known). Once active, a fetch from where
// the broker was is held, not told it is out of range, and answered with
// the next decision.
func TestRestartedControllerServesFetchesOnceActive(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	h.startBrokers(2)
	h.createTopic("a", 2, 2, nil)
	end := h.c.CommittedOffset()
	h.stop()
	c, node := h.startController()
	h.c, h.node = c, node
	if c.Active() || c.CommittedOffset() >= end {
		t.Fatalf("restarted controller active %v with %d committed before its election", c.Active(), c.CommittedOffset())
	}
	replies := h.sendAsync(metadataFetch(12, end, 500, 1<<20))
	if len(*replies) != 1 || fetchedPartition(t, (*replies)[0]).ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch before the election: %d answers, want one NOT_LEADER_OR_FOLLOWER", len(*replies))
	}
	for waited := 0; !c.Active(); waited += 10 {
		if waited > 10_000 {
			t.Fatal("the restarted voter did not become active")
		}
		h.advance(10)
	}
	end = c.CommittedOffset()
	replies = h.sendAsync(metadataFetch(12, end, 500, 1<<20))
	if len(*replies) != 0 {
		t.Fatalf("fetch at the commit offset %d answered at once", end)
	}
	h.createTopic("b", 1, 1, nil)
	if len(*replies) != 1 || len(fetchedPartition(t, (*replies)[0]).RecordBatches) == 0 {
		t.Fatalf("held fetch: %d answers, want one with the new records", len(*replies))
	}
}

// TestSnapshotsTruncateTheLogAndRestoreTheImage: with a snapshot every few
// records, the controller hands the quorum its committed image, the log
// behind the snapshot is dropped, and a restarted controller rebuilds the
// same image from the snapshot and the log after it.
func TestSnapshotsTruncateTheLogAndRestoreTheImage(t *testing.T) {
	cfg := DefaultConfig(100)
	cfg.SnapshotIntervalRecords = 5
	h := newHarness(t, cfg)
	epochs := h.startBrokers(3)
	h.createTopic("a", 3, 3, nil)
	h.createTopic("b", 1, 1, nil)
	h.advance(10) // the snapshot runs as its own event
	s := h.partition("a", 0)
	h.alterISR("a", 0, s.Leader, epochs[s.Leader], s.LeaderEpoch, s.PartitionEpoch, []int32{s.Leader})
	h.advance(10)
	snap := h.node.Raft().LatestSnapshot()
	if snap == nil || h.node.Raft().LogStartOffset() != snap.EndOffset || snap.EndOffset <= 5 {
		t.Fatalf("snapshot %+v, log start %d: want a snapshot past offset 5 with the log starting there", snap, h.node.Raft().LogStartOffset())
	}
	im, err := metadata.DecodeSnapshot(snap.Data)
	if err != nil || im.Offset() != snap.EndOffset-1 {
		t.Fatalf("snapshot data: image at %d, err %v; want the image at %d", im.Offset(), err, snap.EndOffset-1)
	}
	// A broker behind the log start is told the snapshot's id, and reads
	// it with FetchSnapshot, in chunks.
	p := fetchedPartition(t, h.send(metadataFetch(12, 0, 0, 1<<20)))
	if p.ErrorCode != kerr.OffsetOutOfRange.Code || p.SnapshotID.EndOffset != snap.EndOffset || p.SnapshotID.Epoch != snap.Epoch {
		t.Fatalf("fetch below the log start: error %d snapshot %+v, want OFFSET_OUT_OF_RANGE naming %d-%d", p.ErrorCode, p.SnapshotID, snap.EndOffset, snap.Epoch)
	}
	var read []byte
	for {
		req := kmsg.NewPtrFetchSnapshotRequest()
		req.MaxBytes = 100
		rp := kmsg.NewFetchSnapshotRequestTopicPartition()
		rp.Position, rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch = int64(len(read)), snap.EndOffset, snap.Epoch
		req.Topics = []kmsg.FetchSnapshotRequestTopic{{Topic: MetadataTopic, Partitions: []kmsg.FetchSnapshotRequestTopicPartition{rp}}}
		got := h.send(req).(*kmsg.FetchSnapshotResponse).Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.Size != int64(len(snap.Data)) || len(got.Bytes) == 0 || len(got.Bytes) > 100 {
			t.Fatalf("FetchSnapshot at %d: error %d, size %d, %d bytes", len(read), got.ErrorCode, got.Size, len(got.Bytes))
		}
		if read = append(read, got.Bytes...); int64(len(read)) == got.Size {
			break
		}
	}
	if string(read) != string(snap.Data) {
		t.Fatal("the snapshot read in chunks differs from the quorum's")
	}
	before := h.c.Image().Clone()
	h.restart()
	// The restarted voter's epoch begins with its leader-change entry.
	if err := before.Apply(before.Offset()+1, &metadata.NoOpRecord{}); err != nil {
		t.Fatal(err)
	}
	if diff := imageDiff(before, h.c.Image()); diff != "" {
		t.Fatalf("image rebuilt from the snapshot differs (-before +after):\n%s", diff)
	}
	if rt := h.createTopic("c", 1, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create after a restart from a snapshot: error %d", rt.ErrorCode)
	}
}
