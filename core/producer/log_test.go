package producer

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"strand/core/batch"
	"strand/core/log"
	"strand/sim/memdisk"
)

// leaderRun appends idempotent batches from three producers (and some
// without a producer id) to a real log, as the broker will: Check, append,
// Update, and a snapshot whenever the log rolls a segment.
func leaderRun(t *testing.T, l *log.Log, snaps *Snapshots, state *State, batches int) {
	t.Helper()
	seqs := map[int64]int32{}
	for i := 0; i < batches; i++ {
		id := int64(i % 4) // producer 3 sends without idempotence
		spec := batch.BuildSpec{FirstTimestamp: int64(1000 + i), Idempotent: id < 3, ProducerID: id, BaseSequence: seqs[id]}
		for r := 0; r < 1+i%3; r++ {
			spec.Records = append(spec.Records, batch.Record{Value: make([]byte, 100)})
		}
		b := batch.Build(spec)
		h, err := batch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		v, err := state.Check(h)
		if err != nil || v.Kind == Duplicate {
			t.Fatalf("batch %d: %v, %v", i, v, err)
		}
		segments := l.SegmentCount()
		appended, err := l.AppendAsLeader(b, 0, int64(1000+i))
		if err != nil {
			t.Fatal(err)
		}
		if l.SegmentCount() != segments {
			snaps.Take(state, nil) // state is at the new segment's base offset
		}
		if err := state.Update(h, appended.BaseOffset); err != nil {
			t.Fatal(err)
		}
		if id < 3 {
			seqs[id] += h.LastOffsetDelta + 1
		}
		// A retry of the batch just appended is a duplicate with its offsets.
		if v, err := state.Check(h); id < 3 && (err != nil || v.Kind != Duplicate || v.Original.FirstOffset() != appended.BaseOffset) {
			t.Fatalf("retry of batch %d: %v, %v", i, v, err)
		}
	}
}

func TestLoadFromRealLog(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 2048
	l, err := log.Open(disk, "t-0", cfg, log.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := OpenSnapshots(disk, "t-0")
	if err != nil {
		t.Fatal(err)
	}
	live := NewState(testConfig(), l.LogEndOffset())
	leaderRun(t, l, snaps, live, 60)
	for disk.RunPending() > 0 {
	}
	if len(snaps.Offsets()) < 3 {
		t.Fatalf("only snapshots %v over %d segments", snaps.Offsets(), l.SegmentCount())
	}
	rebuilt, err := Load(testConfig(), snaps, l.LogStartOffset(), l.LogEndOffset(), LogReader(l))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live.Entries(), rebuilt.Entries()); diff != "" || rebuilt.MapEndOffset() != l.LogEndOffset() {
		t.Fatalf("rebuilt from snapshots %v: end %d, LEO %d: %s", snaps.Offsets(), rebuilt.MapEndOffset(), l.LogEndOffset(), diff)
	}
	noSnapshots, err := OpenSnapshots(memdisk.New(memdisk.Options{}), "")
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := Load(testConfig(), noSnapshots, l.LogStartOffset(), l.LogEndOffset(), LogReader(l))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live.Entries(), replayed.Entries()); diff != "" {
		t.Fatalf("full replay: %s", diff)
	}

	// A follower copies the log in a few fetches and catches up from its own
	// log after each append.
	follower, err := log.Open(disk, "t-1", cfg, log.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	followerState := NewState(testConfig(), 0)
	for follower.LogEndOffset() < l.LogEndOffset() {
		result, err := l.Read(follower.LogEndOffset(), 1500, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		fetched, err := log.CopyRegions(result.Regions)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollower(fetched, 0); err != nil {
			t.Fatal(err)
		}
		if err := followerState.CatchUp(follower.LogEndOffset(), LogReader(follower)); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(live.Entries(), followerState.Entries()); diff != "" {
		t.Fatalf("follower: %s", diff)
	}

	// Truncate the log inside its middle segment: the state reloads from a
	// snapshot at or below the new end and equals a full replay of what is
	// left; snapshots above the end are gone.
	bases := l.SegmentBaseOffsets()
	if err := l.TruncateTo(bases[len(bases)/2] + 3); err != nil {
		t.Fatal(err)
	}
	if err := live.TruncateTo(l.LogStartOffset(), l.LogEndOffset(), snaps, LogReader(l)); err != nil {
		t.Fatal(err)
	}
	replayed, err = Load(testConfig(), noSnapshots, l.LogStartOffset(), l.LogEndOffset(), LogReader(l))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(replayed.Entries(), live.Entries()); diff != "" || live.MapEndOffset() != l.LogEndOffset() {
		t.Fatalf("after truncation to %d: end %d: %s", l.LogEndOffset(), live.MapEndOffset(), diff)
	}
	for _, offset := range snaps.Offsets() {
		if offset > l.LogEndOffset() {
			t.Fatalf("snapshot %d above the truncated end %d", offset, l.LogEndOffset())
		}
	}

	if err := live.TruncateFullyAndStartAt(500, snaps); err != nil {
		t.Fatal(err)
	}
	if live.ProducerCount() != 0 || live.MapEndOffset() != 500 || len(snaps.Offsets()) != 0 {
		t.Fatalf("after a full truncation: %d producers, end %d, snapshots %v", live.ProducerCount(), live.MapEndOffset(), snaps.Offsets())
	}
}
