package producer

import (
	"flag"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"strand/core/batch"
	"strand/sim/memdisk"
)

// memLog is a log of batch headers, each record tagged with its producer,
// epoch and sequence, for the property tests.
type memLog struct {
	headers []batch.Header
}

func (l *memLog) end() int64 {
	if len(l.headers) == 0 {
		return 0
	}
	return l.headers[len(l.headers)-1].NextOffset()
}

func (l *memLog) reader() BatchReader {
	return func(from int64, visit func(batch.Header) error) error {
		for _, h := range l.headers {
			if h.NextOffset() > from {
				if err := visit(h); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// clientProducer models an idempotent client: batches it has sent, which it
// may send again (retries, after a lost response) or out of order (a
// reordering network).
type clientProducer struct {
	id      int64
	epoch   int16
	nextSeq int32
	sent    []batch.Header
}

// produceRun drives a State as a leader would, with a random interleaving of
// producers sending new batches, retries of any of their last five batches,
// batches out of order and epoch bumps, and returns the log it built.
// Duplicate verdicts are checked against the log on the way.
func produceRun(t *rapid.T, cfg Config) (*State, *memLog, error) {
	s := NewState(cfg, 0)
	l := &memLog{}
	producers := make([]*clientProducer, rapid.IntRange(1, 3).Draw(t, "producers"))
	for i := range producers {
		start := rapid.SampledFrom([]int32{0, math.MaxInt32 - 3}).Draw(t, "startSeq")
		producers[i] = &clientProducer{id: int64(100 + i), nextSeq: start}
	}
	steps := rapid.IntRange(1, 120).Draw(t, "steps")
	for step := 0; step < steps; step++ {
		p := producers[rapid.IntRange(0, len(producers)-1).Draw(t, "producer")]
		var h batch.Header
		switch action := rapid.IntRange(0, 9).Draw(t, "action"); {
		case action < 5 || len(p.sent) == 0: // a new batch
			h = header(p.id, p.epoch, p.nextSeq, int32(rapid.IntRange(1, 3).Draw(t, "records")))
			p.nextSeq = lastSequence(h.BaseSequence, h.LastOffsetDelta) + 1
			if p.nextSeq < 0 {
				p.nextSeq = 0
			}
			p.sent = append(p.sent, h)
			if len(p.sent) > BatchesRetained {
				p.sent = p.sent[1:]
			}
			if rapid.Bool().Draw(t, "delayed") { // reordered: arrives after a later one
				continue
			}
		case action < 9: // a retry of one of the last five batches sent
			h = p.sent[rapid.IntRange(0, len(p.sent)-1).Draw(t, "retry")]
		default: // KIP-360 epoch bump: sequences restart at 0
			p.epoch, p.nextSeq, p.sent = p.epoch+1, 0, nil
			continue
		}
		h.MaxTimestamp = int64(step)
		v, err := s.Check(h)
		if err != nil {
			continue // the client retries later
		}
		switch v.Kind {
		case Append:
			base := l.end()
			if err := s.Update(h, base); err != nil {
				return nil, nil, err
			}
			h.BaseOffset = base
			l.headers = append(l.headers, h)
		case Duplicate:
			if err := checkDuplicate(l, h, v.Original); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, fmt.Errorf("verdict %v for an idempotent batch", v.Kind)
		}
	}
	return s, l, nil
}

// checkDuplicate checks that a Duplicate verdict names the log's batch with
// the same producer, epoch and sequences.
func checkDuplicate(l *memLog, h batch.Header, original BatchMetadata) error {
	for _, logged := range l.headers {
		if logged.BaseOffset == original.FirstOffset() {
			if logged.ProducerID != h.ProducerID || logged.ProducerEpoch != h.ProducerEpoch ||
				logged.BaseSequence != h.BaseSequence || logged.LastOffsetDelta != h.LastOffsetDelta {
				return fmt.Errorf("duplicate of %+v points at %+v", h, logged)
			}
			return nil
		}
	}
	return fmt.Errorf("duplicate of %+v points at offset %d, where no batch starts", h, original.FirstOffset())
}

// exactlyOnceInOrder is the checker: every (producer, epoch, sequence) is in
// the log at most once, and each producer epoch's sequences follow each
// other from the first (0 following math.MaxInt32).
func exactlyOnceInOrder(l *memLog) error {
	type key struct {
		id    int64
		epoch int16
	}
	last := map[key]int32{}
	for _, h := range l.headers {
		k := key{h.ProducerID, h.ProducerEpoch}
		for delta := int32(0); delta <= h.LastOffsetDelta; delta++ {
			seq := lastSequence(h.BaseSequence, delta)
			if prev, seen := last[k]; seen && !inSequence(prev, seq) {
				return fmt.Errorf("producer %d epoch %d: sequence %d at offset %d follows %d: duplicated or out of order",
					h.ProducerID, h.ProducerEpoch, seq, h.BaseOffset+int64(delta), prev)
			}
			last[k] = seq
		}
	}
	return nil
}

func TestPropertyExactlyOnceInOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, l, err := produceRun(t, testConfig())
		if err == nil {
			err = exactlyOnceInOrder(l)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
}

// failureRecorder is a rapid.TB that records a failure instead of failing
// the test, for checking that the checker catches a planted bug.
type failureRecorder struct {
	*testing.T
	failed bool
}

func (r *failureRecorder) Errorf(string, ...any) { r.failed = true }
func (r *failureRecorder) Error(...any)          { r.failed = true }
func (r *failureRecorder) Fatalf(string, ...any) { r.failed = true }
func (r *failureRecorder) Fatal(...any)          { r.failed = true }
func (r *failureRecorder) FailNow()              { r.failed = true }
func (r *failureRecorder) Fail()                 { r.failed = true }
func (r *failureRecorder) Failed() bool          { return r.failed }
func (r *failureRecorder) Logf(string, ...any)   {}
func (r *failureRecorder) Log(...any)            {}

func TestPropertyCatchesDedupOff(t *testing.T) {
	cfg := testConfig()
	cfg.DedupOff = true
	// The expected failure must not leave a fail file behind for later runs.
	previous := flag.Lookup("rapid.nofailfile").Value.String()
	if err := flag.Set("rapid.nofailfile", "true"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = flag.Set("rapid.nofailfile", previous) }() // a value the flag held: cannot fail
	recorder := &failureRecorder{T: t}
	rapid.Check(recorder, func(t *rapid.T) {
		_, l, err := produceRun(t, cfg)
		if err == nil {
			err = exactlyOnceInOrder(l)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	if !recorder.failed {
		t.Fatalf("the exactly-once checker did not fire with %s", BugDedupOff)
	}
}

// Rebuilding from a snapshot taken at a random point plus a replay of the
// rest gives the live state; so does truncating at a random batch boundary
// and reloading, compared with a state built from the truncated log alone.
func TestPropertyRebuildAndTruncate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := testConfig()
		live, l, err := produceRun(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		disk := memdisk.New(memdisk.Options{})
		snaps, err := OpenSnapshots(disk, "")
		if err != nil {
			t.Fatal(err)
		}
		// Snapshots of the state at a few batch boundaries, replayed from
		// the log as a follower would have built it.
		follower := NewState(cfg, 0)
		cuts := map[int]bool{}
		for range rapid.IntRange(0, 3).Draw(t, "snapshots") {
			cuts[rapid.IntRange(0, len(l.headers)).Draw(t, "snapshotAt")] = true
		}
		for i := 0; i <= len(l.headers); i++ {
			if cuts[i] {
				snaps.Take(follower, nil)
			}
			if i < len(l.headers) {
				if err := follower.UpdateFromReplicated(l.headers[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
		for disk.RunPending() > 0 {
		}
		if diff := cmp.Diff(live.Entries(), follower.Entries()); diff != "" {
			t.Fatalf("follower differs from the leader: %s", diff)
		}
		rebuilt, err := Load(cfg, snaps, 0, l.end(), l.reader())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(live.Entries(), rebuilt.Entries()); diff != "" || rebuilt.MapEndOffset() != live.MapEndOffset() {
			t.Fatalf("rebuilt from snapshots %v differs (end %d, want %d): %s", snaps.Offsets(), rebuilt.MapEndOffset(), live.MapEndOffset(), diff)
		}

		cut := rapid.IntRange(0, len(l.headers)).Draw(t, "truncateAt")
		truncated := &memLog{headers: l.headers[:cut]}
		if err := live.TruncateTo(0, truncated.end(), snaps, truncated.reader()); err != nil {
			t.Fatal(err)
		}
		fresh, err := Load(cfg, mustOpenEmpty(t), 0, truncated.end(), truncated.reader())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fresh.Entries(), live.Entries()); diff != "" || fresh.MapEndOffset() != live.MapEndOffset() {
			t.Fatalf("truncated to %d: differs from the truncated log's state: %s", truncated.end(), diff)
		}
		for _, offset := range snaps.Offsets() {
			if offset > truncated.end() {
				t.Fatalf("snapshot %d kept above the truncation point %d", offset, truncated.end())
			}
		}
	})
}

func mustOpenEmpty(t *rapid.T) *Snapshots {
	snaps, err := OpenSnapshots(memdisk.New(memdisk.Options{}), "")
	if err != nil {
		t.Fatal(err)
	}
	return snaps
}
