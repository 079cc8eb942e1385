package log

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"strand/core/batch"
	"strand/core/env"
	"strand/sim/memdisk"
)

// TestLogStateMachine drives a Log on the simulated disk with random
// appends (as leader and as follower), reads, reads by time, truncations,
// rolls, retention, DeleteRecords (AdvanceStartOffset), a new leader's
// AssignEpochStartOffset, flushes with completions run late or never, Writeback,
// crashes of every kind with damage to the unsynced region, clean reopens,
// a full disk and failed syncs, and checks the Log against logModel after
// every step:
//   - every batch below the recovery point that was not removed on purpose
//     (truncation, retention) survives every crash, byte-identical;
//   - offsets are contiguous and unique from the log start offset to the
//     LEO, and the segment files hold exactly the model's batches;
//   - every batch Read returns passes batch.Verify and is the model's;
//   - LEO, log start offset, recovery point, epoch cache, the answers to
//     OffsetForTimestamp, MaxTimestamp and EndOffsetForEpoch agree with a
//     linear scan of the model.
//
// After a crash the model accepts, beyond the synced prefix, any contiguous
// run of batches each of which some append once wrote at its offset: the
// prefix of the unsynced batches a crash kept and, since a truncation is not
// durable until synced (as in Kafka), batches a truncation removed. Then it
// adopts what the log recovered. That acceptance is loose: a batch a crash
// lost stays acceptable until the next Writeback. It is exact where nothing
// may be lost: an undamaged process crash (CrashKeepAll), or any crash when
// every batch is on the medium, must keep every batch.
//
// By default it runs stateMachineChecks checks of about stateMachineSteps
// steps (a few seconds); -rapid.checks and -rapid.steps override, e.g.
//
//	go test ./core/log -run TestLogStateMachine -rapid.checks=2000 -rapid.steps=100 -v
func TestLogStateMachine(t *testing.T) {
	withRapidDefaults(t, stateMachineChecks, stateMachineSteps)
	var stats machineStats
	defer func() { t.Logf("%s", stats) }()
	rapid.Check(t, func(t *rapid.T) {
		sm := newLogMachine(t)
		sm.stats = &stats
		stats.checks++
		t.Repeat(map[string]func(*rapid.T){
			// Actions listed twice are drawn twice as often.
			"appendLeader":   sm.appendLeader,
			"appendLeader2":  sm.appendLeader,
			"appendFollower": sm.appendFollower,
			"appendRejected": sm.appendRejected,
			"read":           sm.read,
			"pinRead":        sm.pinRead,
			"releasePin":     sm.releasePin,
			"readByTime":     sm.readByTime,
			"truncateTo":     sm.truncateTo,
			"truncateFully":  sm.truncateFully,
			"roll":           sm.roll,
			"retention":      sm.retention,
			"flush":          sm.flush,
			"flush2":         sm.flush,
			"runCompletions": sm.runSomeCompletions,
			"writeback":      sm.writeback,
			"crash":          sm.crash,
			"crash2":         sm.crash,
			"reopen":         sm.reopen,
			"storageFault":   sm.storageFault,
			"advanceTime":    sm.advanceTime,
			"advanceStart":   sm.advanceStartOffset,
			"becomeLeader":   sm.becomeLeader,
			"":               sm.check,
		})
	})
}

// The state machine's default size: crashes only find bugs after long runs
// of appends, rolls and flushes, so it runs more and longer than rapid's
// default of 100 checks of 30 steps.
const (
	stateMachineChecks = 300
	stateMachineSteps  = 100
)

// withRapidDefaults sets rapid's -rapid.checks and -rapid.steps for this
// test unless the command line set them, and restores them afterwards.
func withRapidDefaults(t *testing.T, checks, steps int) {
	setOnCommandLine := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { setOnCommandLine[f.Name] = true })
	for _, knob := range []struct {
		name  string
		value int
	}{{"rapid.checks", checks}, {"rapid.steps", steps}} {
		f := flag.Lookup(knob.name)
		if f == nil || setOnCommandLine[knob.name] {
			continue
		}
		previous := f.Value.String()
		if err := f.Value.Set(strconv.Itoa(knob.value)); err != nil {
			t.Fatalf("set -%s: %v", knob.name, err)
		}
		t.Cleanup(func() { _ = f.Value.Set(previous) })
	}
}

// logMachine is the state of one run: the disk, the log under test, the
// model, and the disk completions waiting to run.
type logMachine struct {
	stats   *machineStats
	disk    *memdisk.Disk
	cfg     Config
	log     *Log
	m       logModel
	nowMs   int64
	pending []func()
	// pins are reads whose regions are pinned, as unsent Fetch answers,
	// with the bytes the regions held when pinned.
	pins []pinnedRead
	// tailOffset is where the last checked read ended: a tailing reader
	// fetches there next, as the read hints expect (read.go).
	tailOffset int64
}

// pinnedRead is a pinned Read of the current log incarnation.
type pinnedRead struct {
	regions []Region
	bytes   []byte
	release func()
}

func newLogMachine(t *rapid.T) *logMachine {
	cfg := DefaultConfig()
	cfg.SegmentBytes = rapid.SampledFrom([]int64{700, 1500, 4000}).Draw(t, "segmentBytes")
	cfg.SegmentMs = rapid.SampledFrom([]int64{200, 1 << 40}).Draw(t, "segmentMs")
	cfg.SegmentIndexBytes = rapid.SampledFrom([]int64{segmentIndexBytesMin, 64, 4096}).Draw(t, "segmentIndexBytes")
	cfg.IndexIntervalBytes = rapid.SampledFrom([]int64{0, 100, 400}).Draw(t, "indexIntervalBytes")
	cfg.RetentionMs = rapid.SampledFrom([]int64{-1, 300, 2000}).Draw(t, "retentionMs")
	cfg.RetentionBytes = rapid.SampledFrom([]int64{-1, 0, 800, 3000}).Draw(t, "retentionBytes")
	cfg.FlushIntervalMessages = rapid.SampledFrom([]int64{math.MaxInt64, 7}).Draw(t, "flushIntervalMessages")
	sm := &logMachine{cfg: cfg, m: newLogModel(), nowMs: 1_000_000}
	sm.disk = memdisk.New(memdisk.Options{Post: func(fn func()) { sm.pending = append(sm.pending, fn) }})
	l, err := Open(sm.disk, testDir, cfg, OpenOptions{NowMs: sm.nowMs})
	if err != nil {
		t.Fatalf("Open an empty log: %v", err)
	}
	sm.log = l
	return sm
}

// machineStats counts what the runs exercised, so that a reader can see
// that the interesting cases happen. Shrinking runs count too.
type machineStats struct {
	checks, steps, crashes, crashesWithSynced, damaged, ghostsKept, tailKept, tailLost int
	failures, multiSegmentSteps, retentionDeletes, truncations                         int
	pinsReleased, pinnedCuts                                                           int
}

func (s machineStats) String() string {
	return fmt.Sprintf("%d checks, %d steps (%d with several segments); %d crashes (%d with synced batches, %d with damage): "+
		"unsynced batches kept %d, lost %d, truncated batches resurrected %d; %d injected storage failures; "+
		"%d segments deleted by retention; %d truncations (%d of them inside a pinned segment); %d pinned reads released intact",
		s.checks, s.steps, s.multiSegmentSteps, s.crashes, s.crashesWithSynced, s.damaged, s.tailKept, s.tailLost,
		s.ghostsKept, s.failures, s.retentionDeletes, s.truncations, s.pinnedCuts, s.pinsReleased)
}

// ---- Disk completions ----

// runCompletions runs the oldest n waiting completions (those they queue
// wait their turn), then notes a failure they caused.
func (sm *logMachine) runCompletions(t *rapid.T, n int) {
	batch := sm.pending[:n:n]
	sm.pending = sm.pending[n:]
	for _, fn := range batch {
		fn()
	}
	sm.noteAsyncFailure(t)
}

// drain runs completions until none is left.
func (sm *logMachine) drain(t *rapid.T) {
	for rounds := 0; len(sm.pending) > 0; rounds++ {
		if rounds > 1000 {
			t.Fatalf("disk completions keep coming after %d rounds", rounds)
		}
		sm.runCompletions(t, len(sm.pending))
	}
}

// noteAsyncFailure checks a failure that a completion caused: only an armed
// FailNextSync may fail the log behind the test's back.
func (sm *logMachine) noteAsyncFailure(t *rapid.T) {
	err := sm.log.Err()
	if err == nil || sm.m.failed {
		return
	}
	if sm.m.syncArms == 0 {
		t.Fatalf("the log failed with no fault injected: %v", err)
	}
	sm.m.syncArms--
	sm.expectFailure(t, err)
}

// expectFailure checks an error that must be a storage failure caused by an
// injected fault, and puts the model in the failed state.
func (sm *logMachine) expectFailure(t *rapid.T, err error) {
	if !errors.Is(err, env.ErrIO) {
		t.Fatalf("storage failure does not wrap env.ErrIO: %v", err)
	}
	if sm.log.Err() == nil {
		t.Fatalf("an operation failed with %v, but the log is not failed", err)
	}
	sm.m.failed = true
	sm.stats.failures++
}

// ---- Batches ----

// drawBatch builds a batch of random records with timestamps around the
// clock (they may go backwards), at baseOffset with epoch.
func (sm *logMachine) drawBatch(t *rapid.T, baseOffset int64, epoch int32) []byte {
	records := rapid.IntRange(1, 5).Draw(t, "records")
	valueBytes := rapid.IntRange(0, 100).Draw(t, "valueBytes")
	first := max(0, sm.nowMs+rapid.Int64Range(-500, 100).Draw(t, "timestampSkewMs"))
	spec := batch.BuildSpec{BaseOffset: baseOffset, PartitionLeaderEpoch: epoch, FirstTimestamp: first}
	for i := 0; i < records; i++ {
		spec.Records = append(spec.Records, batch.Record{
			Key:            []byte(fmt.Sprintf("k%d", baseOffset+int64(i))),
			Value:          bytes.Repeat([]byte{byte(baseOffset) + byte(i)}, valueBytes),
			TimestampDelta: rapid.Int64Range(0, 50).Draw(t, "timestampDelta"),
		})
	}
	return batch.Build(spec)
}

func (sm *logMachine) drawEpoch(t *rapid.T) int32 {
	return sm.m.epochMax + rapid.Int32Range(0, 1).Draw(t, "epochIncrease")
}

// ---- Actions ----

func (sm *logMachine) appendLeader(t *rapid.T) {
	epoch := sm.drawEpoch(t)
	b := sm.drawBatch(t, 0, -1)
	want := newModelBatch(stamped(b, sm.m.leo, epoch))
	sm.m.remember(want)
	result, err := sm.log.AppendAsLeader(b, epoch, sm.nowMs)
	if sm.m.failed {
		expectFailedCall(t, "AppendAsLeader", err)
		return
	}
	if err != nil {
		t.Fatalf("AppendAsLeader at %d: %v", sm.m.leo, err)
	}
	if result.BaseOffset != want.base || result.LastOffset != want.last || result.LogStartOffset != sm.m.lso {
		t.Fatalf("AppendAsLeader: got %+v, want offsets [%d, %d], log start %d", result, want.base, want.last, sm.m.lso)
	}
	sm.m.appended(want)
}

func (sm *logMachine) appendFollower(t *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(t, "batches")
	var all []byte
	var want []modelBatch
	next := sm.m.leo
	for i := 0; i < n; i++ {
		b := newModelBatch(sm.drawBatch(t, next, sm.drawEpoch(t)))
		sm.m.epochMax = max(sm.m.epochMax, b.epoch)
		sm.m.remember(b)
		want = append(want, b)
		all = append(all, b.bytes...)
		next = b.next()
	}
	result, err := sm.log.AppendAsFollower(all, sm.nowMs)
	if sm.m.failed {
		expectFailedCall(t, "AppendAsFollower", err)
		return
	}
	if err != nil {
		t.Fatalf("AppendAsFollower at %d: %v", sm.m.leo, err)
	}
	if result.BaseOffset != sm.m.leo || result.LastOffset != next-1 {
		t.Fatalf("AppendAsFollower: got %+v, want offsets [%d, %d]", result, sm.m.leo, next-1)
	}
	sm.m.appended(want...)
}

// appendRejected hands the log bad input: a follower batch that does not
// start at the LEO, a batch with a corrupt CRC, or one larger than a
// segment. The log must refuse it
// with the right error and change nothing.
func (sm *logMachine) appendRejected(t *rapid.T) {
	if sm.m.failed {
		return
	}
	var err error
	var want error
	switch rapid.IntRange(0, 2).Draw(t, "badAppend") {
	case 0:
		gap := rapid.SampledFrom([]int64{-1, 1, 5}).Draw(t, "gap")
		if sm.m.leo+gap < 0 {
			gap = 1
		}
		_, err = sm.log.AppendAsFollower(sm.drawBatch(t, sm.m.leo+gap, sm.m.epochMax), sm.nowMs)
		want = ErrUnexpectedOffset
	case 1:
		b := sm.drawBatch(t, 0, -1)
		b[rapid.IntRange(batch.HeaderBytes-4, len(b)-1).Draw(t, "corruptByte")] ^= 0x10
		_, err = sm.log.AppendAsLeader(b, sm.m.epochMax, sm.nowMs)
		want = ErrInvalidBatch
	default:
		b := batch.Build(batch.BuildSpec{Records: []batch.Record{{Value: make([]byte, sm.cfg.SegmentBytes)}}})
		_, err = sm.log.AppendAsLeader(b, sm.m.epochMax, sm.nowMs)
		want = ErrBatchTooLarge
	}
	if !errors.Is(err, want) || sm.log.Err() != nil {
		t.Fatalf("bad append: got %v (log error %v), want %v and a healthy log", err, sm.log.Err(), want)
	}
}

func (sm *logMachine) read(t *rapid.T) {
	if sm.m.failed {
		_, err := sm.log.Read(sm.m.lso, 1<<20, sm.m.leo, true)
		expectFailedCall(t, "Read", err)
		return
	}
	fetch := rapid.Int64Range(max(0, sm.m.lso-2), sm.m.leo+2).Draw(t, "fetchOffset")
	if rapid.Bool().Draw(t, "tailing") {
		fetch = sm.tailOffset
	}
	maxBytes := rapid.Int32Range(-1, 3000).Draw(t, "maxBytes")
	maxOffset := rapid.Int64Range(fetch-1, sm.m.leo+2).Draw(t, "maxOffset")
	minOne := rapid.Bool().Draw(t, "minOneBatch")
	sm.checkRead(t, fetch, maxBytes, maxOffset, minOne)
}

// pinRead reads and pins the regions, as the broker does for a Fetch
// answer the network has not sent yet: truncations, retention and
// deletions must leave their bytes alone until released.
func (sm *logMachine) pinRead(t *rapid.T) {
	if sm.m.failed {
		return
	}
	fetch := rapid.Int64Range(sm.m.lso, max(sm.m.lso, sm.m.leo-1)).Draw(t, "pinOffset")
	result, err := sm.log.Read(fetch, rapid.Int32Range(0, 3000).Draw(t, "pinMaxBytes"), sm.m.leo, true)
	if err != nil || len(result.Regions) == 0 {
		return
	}
	data, err := CopyRegions(result.Regions)
	if err != nil {
		t.Fatalf("CopyRegions: %v", err)
	}
	sm.pins = append(sm.pins, pinnedRead{regions: result.Regions, bytes: data, release: sm.log.Pin(result.Regions)})
}

// releasePin releases a pinned read after checking that its regions still
// hold what they held when pinned.
func (sm *logMachine) releasePin(t *rapid.T) {
	if len(sm.pins) == 0 {
		return
	}
	i := rapid.IntRange(0, len(sm.pins)-1).Draw(t, "pin")
	sm.releasePinned(t, sm.pins[i])
	sm.pins = append(sm.pins[:i], sm.pins[i+1:]...)
}

func (sm *logMachine) releasePinned(t *rapid.T, p pinnedRead) {
	data, err := CopyRegions(p.regions)
	if err != nil && !sm.m.failed {
		t.Fatalf("a pinned region can no longer be read: %v", err)
	}
	if err == nil && !bytes.Equal(data, p.bytes) {
		t.Fatalf("a pinned region's bytes changed before its release")
	}
	p.release()
	sm.stats.pinsReleased++
}

// checkRead compares one Read with the model: the same batches, byte for
// byte, every one passing batch.Verify.
func (sm *logMachine) checkRead(t *rapid.T, fetch int64, maxBytes int32, maxOffset int64, minOne bool) {
	want, first, next, outOfRange := sm.m.read(fetch, maxBytes, maxOffset, minOne)
	result, err := sm.log.Read(fetch, maxBytes, maxOffset, minOne)
	if outOfRange {
		if !errors.Is(err, ErrOffsetOutOfRange) || sm.log.Err() != nil {
			t.Fatalf("Read(%d) outside [%d, %d]: got %v, want ErrOffsetOutOfRange", fetch, sm.m.lso, sm.m.leo, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Read(%d, %d, %d, %v): %v", fetch, maxBytes, maxOffset, minOne, err)
	}
	data, err := CopyRegions(result.Regions)
	if err != nil {
		t.Fatalf("CopyRegions: %v", err)
	}
	got := splitBatches(t, data)
	if result.FirstOffset != first || result.NextOffset != next || len(got) != len(want) ||
		result.LogStartOffset != sm.m.lso || result.LogEndOffset != sm.m.leo {
		t.Fatalf("Read(%d, %d, %d, %v): %d batches [%d, %d) log [%d, %d), want %d batches [%d, %d) log [%d, %d)",
			fetch, maxBytes, maxOffset, minOne, len(got), result.FirstOffset, result.NextOffset,
			result.LogStartOffset, result.LogEndOffset, len(want), first, next, sm.m.lso, sm.m.leo)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i].bytes) {
			t.Fatalf("Read(%d): batch %d (offset %d) differs from the one appended", fetch, i, want[i].base)
		}
	}
	sm.tailOffset = result.NextOffset
}

func (sm *logMachine) readByTime(t *rapid.T) {
	if sm.m.failed {
		_, _, err := sm.log.OffsetForTimestamp(0, testDecompressedBytesMax)
		expectFailedCall(t, "OffsetForTimestamp", err)
		return
	}
	sm.checkTimestamp(t, sm.nowMs+rapid.Int64Range(-800, 100).Draw(t, "timestampMs"))
}

func (sm *logMachine) checkTimestamp(t *rapid.T, timestampMs int64) {
	want, wantFound := sm.m.offsetForTimestamp(t, timestampMs)
	got, found, err := sm.log.OffsetForTimestamp(timestampMs, testDecompressedBytesMax)
	if err != nil || found != wantFound || (found && got != want) {
		t.Fatalf("OffsetForTimestamp(%d): (%+v, %v, %v), want (%+v, %v)", timestampMs, got, found, err, want, wantFound)
	}
}

func (sm *logMachine) truncateTo(t *rapid.T) {
	offset := rapid.Int64Range(sm.m.lso, sm.m.leo+1).Draw(t, "truncateOffset")
	err := sm.log.TruncateTo(offset)
	if sm.m.failed {
		expectFailedCall(t, "TruncateTo", err)
		return
	}
	if err != nil {
		t.Fatalf("TruncateTo(%d): %v", offset, err)
	}
	if offset < sm.m.leo {
		sm.stats.truncations++
	}
	for _, s := range sm.log.segments {
		if s.cutPending {
			sm.stats.pinnedCuts++
			break
		}
	}
	sm.m.truncateTo(offset)
}

func (sm *logMachine) truncateFully(t *rapid.T) {
	offset := rapid.Int64Range(max(0, sm.m.lso-3), sm.m.leo+20).Draw(t, "startOffset")
	err := sm.log.TruncateFullyAndStartAt(offset, sm.nowMs)
	if sm.m.failed {
		expectFailedCall(t, "TruncateFullyAndStartAt", err)
		return
	}
	if err != nil {
		t.Fatalf("TruncateFullyAndStartAt(%d): %v", offset, err)
	}
	sm.stats.truncations++
	sm.m.truncateFullyAndStartAt(offset)
}

// advanceStartOffset is DeleteRecords: the log start offset moves up,
// possibly into a segment; reads below it fail, retention later deletes the
// segments wholly below it.
func (sm *logMachine) advanceStartOffset(t *rapid.T) {
	offset := rapid.Int64Range(sm.m.lso, sm.m.leo+1).Draw(t, "newLogStartOffset")
	err := sm.log.AdvanceStartOffset(offset)
	switch {
	case sm.m.failed:
		expectFailedCall(t, "AdvanceStartOffset", err)
	case offset > sm.m.leo:
		if !errors.Is(err, ErrOffsetOutOfRange) || sm.log.Err() != nil {
			t.Fatalf("AdvanceStartOffset(%d) beyond LEO %d: %v, want ErrOffsetOutOfRange", offset, sm.m.leo, err)
		}
	case err != nil:
		t.Fatalf("AdvanceStartOffset(%d): %v", offset, err)
	default:
		sm.m.lso = offset
		sm.m.epochTruncateFromStart(offset)
	}
}

// becomeLeader is a new leader's AssignEpochStartOffset(epoch, LEO): an
// epoch cache entry that no batch carries yet.
func (sm *logMachine) becomeLeader(t *rapid.T) {
	epoch := sm.m.epochMax + 1
	err := sm.log.AssignEpochStartOffset(epoch, sm.m.leo)
	if sm.m.failed {
		expectFailedCall(t, "AssignEpochStartOffset", err)
		return
	}
	if err != nil {
		t.Fatalf("AssignEpochStartOffset(%d, %d): %v", epoch, sm.m.leo, err)
	}
	sm.m.epochMax = epoch
	sm.m.epochAssign(epoch, sm.m.leo)
}

func (sm *logMachine) roll(t *rapid.T) {
	before := sm.log.SegmentBaseOffsets()
	err := sm.log.Roll(sm.nowMs)
	if sm.m.failed {
		expectFailedCall(t, "Roll", err)
		return
	}
	if err != nil {
		t.Fatalf("Roll: %v", err)
	}
	after := sm.log.SegmentBaseOffsets()
	activeEmpty := before[len(before)-1] == sm.m.leo
	if (activeEmpty && !equalInts(after, before)) || (!activeEmpty && !equalInts(after, append(before, sm.m.leo))) {
		t.Fatalf("Roll at LEO %d: segments %v became %v", sm.m.leo, before, after)
	}
}

func (sm *logMachine) retention(t *rapid.T) {
	highWatermark := rapid.Int64Range(sm.m.lso, sm.m.leo).Draw(t, "highWatermark")
	bases := sm.log.SegmentBaseOffsets()
	segs := sm.m.segments(bases)
	want := retentionModel(segs, sm.cfg, sm.m.lso, sm.nowMs, highWatermark)
	deleted, err := sm.log.ApplyRetention(sm.nowMs, highWatermark)
	if sm.m.failed {
		expectFailedCall(t, "ApplyRetention", err)
		return
	}
	if err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	if deleted != want {
		t.Fatalf("ApplyRetention(now %d, HW %d) with retention.ms %d, retention.bytes %d on segments %v: deleted %d, want %d",
			sm.nowMs, highWatermark, sm.cfg.RetentionMs, sm.cfg.RetentionBytes, describeSegments(segs), deleted, want)
	}
	sm.stats.retentionDeletes += deleted
	if deleted > 0 {
		sm.m.durable = false
		sm.m.lso = max(sm.m.lso, segs[deleted].base)
		sm.m.batches = sm.m.batches[len(sm.m.batches)-countBatches(segs[deleted:]):]
		sm.m.epochTruncateFromStart(sm.m.lso)
	}
}

func (sm *logMachine) flush(t *rapid.T) {
	upTo := rapid.Int64Range(sm.m.lso, sm.m.leo+1).Draw(t, "flushUpTo")
	issuedLEO, truncations := sm.m.leo, sm.m.truncations
	var flushErr error
	ran := false
	sm.log.Flush(upTo, func(err error) {
		if ran {
			t.Fatalf("Flush(%d): done called twice", upTo)
		}
		ran, flushErr = true, err
		if err == nil && truncations == sm.m.truncations {
			sm.m.syncedFloor = max(sm.m.syncedFloor, min(upTo, issuedLEO))
		}
	})
	if sm.m.failed {
		if !ran || !errors.Is(flushErr, env.ErrIO) {
			t.Fatalf("Flush on a failed log: ran %v, err %v", ran, flushErr)
		}
		return
	}
	if rapid.Bool().Draw(t, "drainAfterFlush") {
		sm.drain(t)
		if !ran {
			t.Fatalf("Flush(%d): done never ran although every completion did", upTo)
		}
		if flushErr != nil && !sm.m.failed {
			t.Fatalf("Flush(%d): %v", upTo, flushErr)
		}
		return
	}
	sm.runSomeCompletions(t)
}

// runSomeCompletions runs a random number of the waiting completions,
// leaving the rest pending (a crash may then drop them).
func (sm *logMachine) runSomeCompletions(t *rapid.T) {
	sm.runCompletions(t, rapid.IntRange(0, len(sm.pending)).Draw(t, "completions"))
}

// writeback is the kernel writing dirty pages back without fsync: every
// change is now durable, so only the current batches can come back after a
// crash.
func (sm *logMachine) writeback(t *rapid.T) {
	sm.disk.Writeback()
	cutPending := false
	for _, s := range sm.log.segments {
		cutPending = cutPending || s.cutPending
	}
	sm.m.forgetGhosts(cutPending)
}

func (sm *logMachine) advanceTime(t *rapid.T) {
	sm.nowMs += rapid.Int64Range(0, 400).Draw(t, "advanceMs")
}

// storageFault injects a full disk or a failed sync.
func (sm *logMachine) storageFault(t *rapid.T) {
	if rapid.Bool().Draw(t, "diskFull") {
		sm.diskFull(t)
	} else {
		sm.failNextSync(t)
	}
}

// diskFull fills the disk and appends: the append must fail with env.ErrIO
// (wrapping env.ErrNoSpace) and the log stay failed until the disk is
// replaced (a crash and a reopen).
func (sm *logMachine) diskFull(t *rapid.T) {
	sm.disk.SetFull(true)
	defer sm.disk.SetFull(false)
	b := sm.drawBatch(t, 0, -1)
	sm.m.remember(newModelBatch(stamped(b, sm.m.leo, sm.m.epochMax)))
	_, err := sm.log.AppendAsLeader(b, sm.m.epochMax, sm.nowMs)
	if err == nil {
		t.Fatalf("an append on a full disk succeeded")
	}
	if !sm.m.failed && !errors.Is(err, env.ErrNoSpace) {
		t.Fatalf("append on a full disk: %v, want env.ErrNoSpace", err)
	}
	sm.expectFailure(t, err)
}

// failNextSync arms a failure of the next Sync of one of the active
// segment's files or of the log's directory, then flushes. The log must
// fail with env.ErrIO once that Sync completes, and stay failed.
func (sm *logMachine) failNextSync(t *rapid.T) {
	bases := sm.log.SegmentBaseOffsets()
	active := bases[len(bases)-1]
	target := rapid.SampledFrom([]string{
		testDir + "/" + segmentFileName(active, logSuffix),
		testDir + "/" + segmentFileName(active, indexSuffix),
		testDir + "/" + segmentFileName(active, timeIndexSuffix),
		testDir,
	}).Draw(t, "failSyncOf")
	if err := sm.disk.FailNextSync(target); err != nil {
		t.Fatalf("FailNextSync(%s): %v", target, err)
	}
	sm.m.syncArms++
	sm.flush(t)
}

// crash ends the process with one of memdisk's crash modes, may damage
// the unsynced region, and reopens, checking what recovery kept.
//
// Damage (bit flips, truncated or zero-extended files, lost or damaged
// indexes) goes only where the log has not declared the data durable: after
// the recovery point in the .log files, and in the index files of the
// segments recovery rebuilds. Below the recovery point the data is trusted,
// as in Kafka (SPEC.md §2.3): recovery does not scan it, and a flip there
// is caught end to end by consumers' CRC checks, not by the log. A flip in
// synced bytes would also destroy data the model requires to survive.
func (sm *logMachine) crash(t *rapid.T) {
	crashRP := sm.log.RecoveryPoint()
	mode := rapid.SampledFrom([]memdisk.CrashMode{memdisk.CrashLoseAll, memdisk.CrashTorn, memdisk.CrashKeepAll}).Draw(t, "crashMode")
	seed := rapid.Uint64().Draw(t, "crashSeed")
	// The recovery-point checkpoint may lag: any lower value is safe. A
	// higher one is not: after a truncation lowered the recovery point, a
	// checkpoint still holding the old value makes Open trust segments
	// rewritten since, and claim unsynced batches durable. The checkpoint
	// must be lowered durably at a truncation, as Kafka's
	// LogManager.truncateTo does (checkpointRecoveryOffsetsInDir).
	reopenRP := crashRP
	if rapid.IntRange(0, 3).Draw(t, "staleRecoveryPoint") == 0 {
		reopenRP = rapid.Int64Range(0, crashRP).Draw(t, "reopenRecoveryPoint")
	}
	trace := sm.disk.Crash(rand.New(rand.NewPCG(seed, 0x5eed)), mode)
	sm.pending = nil
	sm.pins = nil // the process died with its unsent answers
	damage := sm.damageUnsynced(t, max(crashRP, reopenRP), reopenRP)
	sm.stats.crashes++
	if damage != "" {
		sm.stats.damaged++
	}
	l, err := Open(sm.disk, testDir, sm.cfg, OpenOptions{RecoveryPoint: reopenRP, LogStartOffset: sm.m.lso, NowMs: sm.nowMs})
	if err != nil {
		t.Fatalf("Open after crash (%s%s): %v", trace, damage, err)
	}
	sm.log = l
	sm.m.failed = false
	// Undamaged, a process crash keeps every batch, and so does any crash
	// once every batch is on the medium.
	keepAll := damage == "" && (mode == memdisk.CrashKeepAll || sm.m.durable)
	sm.adoptRecovered(t, crashRP, reopenRP, keepAll, fmt.Sprintf("%s%s", trace, damage))
	// After a power loss, what recovery kept is what the medium holds.
	sm.m.durable = mode != memdisk.CrashKeepAll
}

// reopen closes the log cleanly, with or without waiting for its I/O, and
// opens it again: nothing may change.
func (sm *logMachine) reopen(t *rapid.T) {
	if sm.m.failed {
		return
	}
	// A clean shutdown waits for its I/O; a partition stopped and
	// restarted at once may not.
	if rapid.Bool().Draw(t, "drainBeforeClose") {
		sm.drain(t)
	}
	if sm.m.failed {
		return
	}
	sm.m.truncations++ // the old log's late flush completions say nothing of the new one
	rp := sm.log.RecoveryPoint()
	if err := sm.log.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Answers of the old incarnation still in flight are sent after it
	// closed, and before the new one opens: the pinned files are intact.
	for _, p := range sm.pins {
		sm.releasePinned(t, p)
	}
	sm.pins = nil
	l, err := Open(sm.disk, testDir, sm.cfg, OpenOptions{RecoveryPoint: rp, LogStartOffset: sm.m.lso, NowMs: sm.nowMs})
	if err != nil {
		t.Fatalf("Open after a clean close: %v", err)
	}
	sm.log = l
	// Segments wholly below the log start offset (left by a crash under a
	// retention) go at open.
	first := l.SegmentBaseOffsets()[0]
	for len(sm.m.batches) > 0 && sm.m.batches[0].base < first {
		if sm.m.batches[0].next() > sm.m.lso {
			t.Fatalf("a clean reopen dropped the batch at %d, log start offset %d", sm.m.batches[0].base, sm.m.lso)
		}
		sm.m.batches = sm.m.batches[1:]
	}
	sm.adoptEpochs(t, "clean reopen")
	if l.RecoveryPoint() < rp {
		t.Fatalf("recovery point %d after a clean reopen, was %d", l.RecoveryPoint(), rp)
	}
	sm.m.syncedFloor = rp
}

// ---- Crash helpers ----

// damageUnsynced may damage the files after a crash, only where recovery
// verifies or rebuilds (from the segment holding reopenRP) and only in the
// .log bytes beyond trustedRP: what was synced, or what recovery will trust
// because the recovery point it is given says so (see crash).
func (sm *logMachine) damageUnsynced(t *rapid.T, trustedRP, reopenRP int64) string {
	kind := rapid.IntRange(0, 7).Draw(t, "damage")
	if kind >= 5 {
		return ""
	}
	names, err := sm.disk.List(testDir)
	if errors.Is(err, env.ErrNotExist) {
		return "" // the crash lost the log's directory: nothing to damage
	}
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var bases []int64
	for _, name := range names {
		if base, suffix, ok := parseSegmentFileName(name); ok && suffix == logSuffix {
			bases = append(bases, base)
		}
	}
	if len(bases) == 0 {
		return ""
	}
	// Recovery starts at the segment holding the recovery point it is
	// given; the synced bytes end in the segment holding trustedRP.
	recovered := holderOf(bases, reopenRP)
	syncedHolder := holderOf(bases, trustedRP)
	i := rapid.IntRange(recovered, len(bases)-1).Draw(t, "damagedSegment")
	logPath := testDir + "/" + segmentFileName(bases[i], logSuffix)
	data, err := sm.disk.ReadFile(logPath)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", logPath, err)
	}
	// A segment before the one holding trustedRP is wholly synced, its size
	// included: only its indexes may be damaged (it is recovered, hence
	// they are rebuilt, when reopenRP is stale).
	logDamage := i >= syncedHolder
	unsyncedFrom := int64(0)
	if i == syncedHolder {
		unsyncedFrom = positionOfOffset(data, trustedRP)
	}
	indexPath := testDir + "/" + segmentFileName(bases[i], rapid.SampledFrom([]string{indexSuffix, timeIndexSuffix}).Draw(t, "damagedIndex"))
	switch kind {
	case 0, 1: // a flipped bit in the unsynced bytes of the .log
		if !logDamage || unsyncedFrom >= int64(len(data)) {
			return ""
		}
		at := rapid.Int64Range(unsyncedFrom, int64(len(data))-1).Draw(t, "flipByte")
		if inEpochField(data, at) {
			// PartitionLeaderEpoch lies outside the CRC (Kafka's format), so
			// a flip there is a valid batch no check can tell from the
			// original; flip the CRC next to it instead.
			at += 4
		}
		bit := uint(rapid.IntRange(0, 7).Draw(t, "flipBit"))
		mustNot(t, sm.disk.FlipBit(logPath, at, bit))
		return fmt.Sprintf("; flipped bit %d of byte %d of %s", bit, at, logPath)
	case 2: // the file system lost the .log's tail, or shows preallocated zeros
		if !logDamage {
			return ""
		}
		size := rapid.Int64Range(unsyncedFrom, int64(len(data))+64).Draw(t, "truncateLogTo")
		mustNot(t, sm.disk.TruncateFile(logPath, size))
		return fmt.Sprintf("; %s cut to %d bytes", logPath, size)
	case 3: // a damaged index of a segment recovery rebuilds
		index, err := sm.disk.ReadFile(indexPath)
		if err != nil || len(index) == 0 {
			return ""
		}
		at := rapid.Int64Range(0, int64(len(index))-1).Draw(t, "flipIndexByte")
		mustNot(t, sm.disk.FlipBit(indexPath, at, uint(rapid.IntRange(0, 7).Draw(t, "flipIndexBit"))))
		size := rapid.Int64Range(0, int64(len(index))+16).Draw(t, "truncateIndexTo")
		mustNot(t, sm.disk.TruncateFile(indexPath, size))
		return fmt.Sprintf("; damaged %s (flipped byte %d, cut to %d)", indexPath, at, size)
	default: // a lost index of a segment recovery rebuilds
		if err := sm.disk.Remove(indexPath); err != nil && !errors.Is(err, env.ErrNotExist) {
			t.Fatalf("Remove(%s): %v", indexPath, err)
		}
		return "; removed " + indexPath
	}
}

// holderOf returns the index of the last base <= offset, or 0.
func holderOf(bases []int64, offset int64) int {
	i := sort.Search(len(bases), func(i int) bool { return bases[i] > offset })
	return max(i-1, 0)
}

// positionOfOffset returns the position of the first batch in data whose
// base offset >= offset, walking headers over the synced (intact) bytes;
// where the walk cannot go on, that position.
func positionOfOffset(data []byte, offset int64) int64 {
	position := int64(0)
	for position+batch.HeaderBytes <= int64(len(data)) {
		h, _ := batch.ParseHeader(data[position:])
		if h.BaseOffset >= offset || h.Length < 0 || position+h.TotalBytes() > int64(len(data)) {
			return position
		}
		position += h.TotalBytes()
	}
	return position
}

// inEpochField reports whether position at of a segment file falls in the
// PartitionLeaderEpoch field of one of its batches, walking the headers as
// far as they lead.
func inEpochField(data []byte, at int64) bool {
	const epochFieldStart, epochFieldBytes = 12, 4 // after BaseOffset, Length
	position := int64(0)
	for position+batch.HeaderBytes <= int64(len(data)) && position <= at {
		if at >= position+epochFieldStart && at < position+epochFieldStart+epochFieldBytes {
			return true
		}
		h, _ := batch.ParseHeader(data[position:])
		if h.Length <= 0 {
			return false
		}
		position += h.TotalBytes()
	}
	return false
}

// adoptRecovered checks the log recovery produced, from its segment files
// and from its answers, then makes it the model:
//   - every batch holding an offset >= the log start offset that was below
//     the recovery point at the crash is there, byte-identical; with
//     keepAll (nothing could be lost), every such batch, synced or not;
//   - every other batch is one that some append wrote at its offset;
//   - all verify, and the offsets are contiguous across segments.
func (sm *logMachine) adoptRecovered(t *rapid.T, crashRP, reopenRP int64, keepAll bool, trace string) {
	l := sm.log
	// The log start offset may move up to the first segment: a crash can
	// lose the segments of a TruncateFullyAndStartAt that was not synced
	// and bring back a later one from before it.
	if want := max(sm.m.lso, l.SegmentBaseOffsets()[0]); l.LogStartOffset() != want {
		t.Fatalf("log start offset %d after recovery, was %d, first segment %d (%s)", l.LogStartOffset(), sm.m.lso, l.SegmentBaseOffsets()[0], trace)
	}
	var synced []modelBatch
	for _, b := range sm.m.visible() {
		if b.next() <= crashRP || keepAll {
			synced = append(synced, b)
		}
	}
	sm.m.lso = l.LogStartOffset()
	if len(synced) > 0 {
		sm.stats.crashesWithSynced++
	}
	unsynced := map[int64][]byte{} // the model's batches beyond the synced ones
	for _, b := range sm.m.visible()[len(synced):] {
		unsynced[b.base] = b.bytes
	}
	recovered := sm.segmentFileBatches(t, trace)
	kept, tailKept := 0, 0
	defer func() {
		sm.stats.tailKept += tailKept
		sm.stats.tailLost += len(unsynced) - tailKept
	}()
	for _, b := range recovered {
		if b.last < sm.m.lso {
			if !sm.m.isIncarnation(b.bytes) {
				t.Fatalf("recovery kept a batch at %d below the log start %d that was never appended (%s)", b.base, sm.m.lso, trace)
			}
			continue
		}
		if kept < len(synced) {
			if !bytes.Equal(b.bytes, synced[kept].bytes) {
				t.Fatalf("synced batch at %d (recovery point %d) changed across a crash (%s)", synced[kept].base, crashRP, trace)
			}
			kept++
			continue
		}
		if want, ok := unsynced[b.base]; ok && bytes.Equal(want, b.bytes) {
			tailKept++
			continue
		}
		if !sm.m.isIncarnation(b.bytes) {
			t.Fatalf("recovery kept a batch at %d that no append wrote there (%s)", b.base, trace)
		}
		sm.stats.ghostsKept++
	}
	if kept < len(synced) {
		t.Fatalf("recovery dropped the synced batch at %d (recovery point at the crash %d, given %d, LEO now %d, all kept: %v) (%s)",
			synced[kept].base, crashRP, reopenRP, l.LogEndOffset(), keepAll, trace)
	}
	sm.m.batches = recovered
	sm.m.leo = l.LogEndOffset()
	if len(recovered) > 0 && recovered[len(recovered)-1].next() != sm.m.leo {
		t.Fatalf("LEO %d after recovery, the last batch ends at %d (%s)", sm.m.leo, recovered[len(recovered)-1].next(), trace)
	}
	sm.m.syncedFloor = min(reopenRP, sm.m.leo)
	sm.m.truncations++
	sm.adoptEpochs(t, trace)
}

// adoptEpochs checks the epoch cache recovery rebuilt and makes it the
// model's. Which checkpoint survived a crash is the crash's choice, so the
// model does not predict the cache; it must be what the batches imply, or,
// on an empty log, at most one entry starting at the log start offset (the
// latest epoch, kept by retention or a checkpoint older than a truncation).
func (sm *logMachine) adoptEpochs(t *rapid.T, trace string) {
	got := sm.log.Epochs().Entries()
	switch {
	case len(sm.m.visible()) > 0:
		if implied := sm.m.epochsOfBatches(); fmt.Sprint(got) != fmt.Sprint(implied) {
			t.Fatalf("epoch cache %v after recovery, the batches imply %v (batches %s) (%s)", got, implied, describeBatches(sm.m.batches), trace)
		}
	case len(got) > 1 || (len(got) == 1 && (got[0].StartOffset != sm.m.lso || got[0].Epoch > sm.m.epochMax)):
		t.Fatalf("epoch cache %v after recovery of an empty log at %d (%s)", got, sm.m.lso, trace)
	}
	sm.m.epochCache = got
}

// segmentFileBatches parses the log's segment files straight from the disk,
// checking that every batch verifies and that offsets are contiguous from
// the first segment's base to the LEO.
func (sm *logMachine) segmentFileBatches(t *rapid.T, trace string) []modelBatch {
	bases := sm.log.SegmentBaseOffsets()
	var out []modelBatch
	next := bases[0]
	for _, base := range bases {
		if base != next {
			t.Fatalf("segment %d follows a segment ending at %d (segments %v) (%s)", base, next, bases, trace)
		}
		path := testDir + "/" + segmentFileName(base, logSuffix)
		data, err := sm.disk.ReadFile(path)
		if err != nil {
			t.Fatalf("ReadFile(%s): %v", path, err)
		}
		for _, b := range splitBatches(t, data) {
			mb := newModelBatch(b)
			if s := sm.log.segments[sm.segmentIndex(base)]; s.cutPending && mb.base >= s.nextOffset {
				break // a pinned cut's tail, cut at release (pin.go)
			}
			if mb.base != next {
				t.Fatalf("%s: batch at offset %d, want %d (%s)", path, mb.base, next, trace)
			}
			out = append(out, mb)
			next = mb.next()
		}
	}
	if next != sm.log.LogEndOffset() {
		t.Fatalf("segment files end at offset %d, LEO %d (%s)", next, sm.log.LogEndOffset(), trace)
	}
	return out
}

// segmentIndex is the index of the segment whose base is base.
func (sm *logMachine) segmentIndex(base int64) int {
	for i, s := range sm.log.segments {
		if s.baseOffset == base {
			return i
		}
	}
	panic(fmt.Sprintf("no segment at %d", base))
}

// ---- The invariant check, after every step ----

func (sm *logMachine) check(t *rapid.T) {
	l := sm.log
	sm.stats.steps++
	if l.SegmentCount() > 1 {
		sm.stats.multiSegmentSteps++
	}
	if sm.m.failed {
		if err := l.Err(); !errors.Is(err, env.ErrIO) {
			t.Fatalf("failed log reports %v, want env.ErrIO", err)
		}
		return
	}
	sm.noteAsyncFailure(t)
	if sm.m.failed {
		return
	}
	if l.LogStartOffset() != sm.m.lso || l.LogEndOffset() != sm.m.leo {
		t.Fatalf("log spans [%d, %d), model [%d, %d)", l.LogStartOffset(), l.LogEndOffset(), sm.m.lso, sm.m.leo)
	}
	if rp := l.RecoveryPoint(); rp < sm.m.syncedFloor || rp > sm.m.leo {
		t.Fatalf("recovery point %d outside [%d (flushed), %d (LEO)]", rp, sm.m.syncedFloor, sm.m.leo)
	}
	// The files hold exactly the model's batches; a full read returns the
	// visible ones.
	onDisk := sm.segmentFileBatches(t, "check")
	if len(onDisk) != len(sm.m.batches) {
		t.Fatalf("segment files hold %d batches, model %d", len(onDisk), len(sm.m.batches))
	}
	var size int64
	for i, b := range onDisk {
		if !bytes.Equal(b.bytes, sm.m.batches[i].bytes) {
			t.Fatalf("segment files: batch at %d differs from the model's", b.base)
		}
		size += int64(len(b.bytes))
	}
	if l.SizeBytes() != size {
		t.Fatalf("SizeBytes %d, the batches total %d", l.SizeBytes(), size)
	}
	sm.checkRead(t, sm.m.lso, math.MaxInt32, sm.m.leo, true)
	sm.checkEpochs(t)
	if got, found, err := l.MaxTimestamp(testDecompressedBytesMax); true {
		want, wantFound := sm.m.maxTimestamp(t, l.SegmentBaseOffsets())
		if err != nil || found != wantFound || (found && got != want) {
			t.Fatalf("MaxTimestamp (%+v, %v, %v), want (%+v, %v); batches %s", got, found, err, want, wantFound, describeBatches(sm.m.batches))
		}
	}
	for _, b := range sm.m.visible() {
		sm.checkTimestamp(t, b.maxTs)
	}
	sm.checkTimestamp(t, math.MinInt64)
	sm.checkTimestamp(t, math.MaxInt64)
}

// checkEpochs compares the epoch cache with the model's, with what the
// batches imply, and EndOffsetForEpoch with a linear scan.
func (sm *logMachine) checkEpochs(t *rapid.T) {
	want := sm.m.epochCache
	got := sm.log.Epochs().Entries()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("epoch cache %v, model %v (batches %s)", got, want, describeBatches(sm.m.batches))
	}
	// A new leader's entry at the LEO is not carried by any batch yet.
	if n := len(got); n > 0 && got[n-1].StartOffset == sm.m.leo && len(sm.m.visible()) > 0 {
		got = got[:n-1]
	}
	if implied := sm.m.epochsOfBatches(); len(sm.m.visible()) > 0 && fmt.Sprint(got) != fmt.Sprint(implied) {
		t.Fatalf("epoch cache %v, the batches imply %v (batches %s)", got, implied, describeBatches(sm.m.batches))
	}
	for epoch := int32(-1); epoch <= sm.m.epochMax+1; epoch++ {
		e, offset := sm.log.EndOffsetForEpoch(epoch)
		we, woffset := endOffsetForEpoch(want, epoch, sm.m.leo)
		if e != we || offset != woffset {
			t.Fatalf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d) from %v", epoch, e, offset, we, woffset, want)
		}
	}
}

// ---- Small helpers ----

// stamped returns a copy of b with base offset and epoch stamped, as the
// log stamps a leader append.
func stamped(b []byte, baseOffset int64, epoch int32) []byte {
	c := append([]byte(nil), b...)
	batch.SetBaseOffset(c, baseOffset)
	batch.SetPartitionLeaderEpoch(c, epoch)
	return c
}

// splitBatches splits data into whole batches, failing on any that does not
// pass batch.Verify.
func splitBatches(t *rapid.T, data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Length < 0 || h.TotalBytes() > int64(len(data)) {
			t.Fatalf("a partial batch: %v (%d bytes left)", err, len(data))
		}
		if _, err := batch.Verify(data[:h.TotalBytes()]); err != nil {
			t.Fatalf("a corrupt batch at offset %d: %v", h.BaseOffset, err)
		}
		out = append(out, data[:h.TotalBytes():h.TotalBytes()])
		data = data[h.TotalBytes():]
	}
	return out
}

// expectFailedCall checks that a call on a failed log reports env.ErrIO.
func expectFailedCall(t *rapid.T, call string, err error) {
	if !errors.Is(err, env.ErrIO) {
		t.Fatalf("%s on a failed log: %v, want env.ErrIO", call, err)
	}
}

func mustNot(t *rapid.T, err error) {
	if err != nil {
		t.Fatalf("fault injection: %v", err)
	}
}

func countBatches(segs []modelSegment) int {
	n := 0
	for _, s := range segs {
		n += len(s.batches)
	}
	return n
}

func describeSegments(segs []modelSegment) string {
	var parts []string
	for _, s := range segs {
		parts = append(parts, fmt.Sprintf("[%d,%d) %dB maxTs %d", s.base, s.next, s.bytes, s.maxTs))
	}
	return strings.Join(parts, " ")
}

func describeBatches(bs []modelBatch) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("[%d,%d]e%d@%d", b.base, b.last, b.epoch, b.maxTs))
	}
	return strings.Join(parts, " ")
}

// ---- Regression tests for bugs the state machine found ----

// TestMaxTimestampOffsetSurvivesReopen: when several batches share the
// largest timestamp, MaxTimestamp names the first of them (Kafka keeps the
// first record that reached the maximum). Loading a trusted segment must
// not prefer a later batch of the tail walk over the time index's equal
// entry.
func TestMaxTimestampOffsetSurvivesReopen(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentIndexBytes, cfg.IndexIntervalBytes = segmentIndexBytesMin, 0 // index every batch; roll after two
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, cfg, OpenOptions{NowMs: 1})
	for i := 0; i < 3; i++ {
		appendLeader(t, l, 1, 5000, 0)
	}
	flushAll(t, l, disk)
	before, _, _ := l.MaxTimestamp(testDecompressedBytesMax)
	if before.Offset != 0 || before.TimestampMs != 5000 {
		t.Fatalf("MaxTimestamp before reopen %+v, want 5000 at 0", before)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: l.RecoveryPoint(), NowMs: 2})
	if got, _, _ := l.MaxTimestamp(testDecompressedBytesMax); got != before {
		t.Fatalf("MaxTimestamp after a clean reopen %+v, was %+v", got, before)
	}
}

// TestRecoveryCutIsNotTrustedAfterRoll: recovery cuts a corrupt tail off the
// segment holding the recovery point, but the cut is not durable. After a
// roll at the recovery point and another crash, that segment lies wholly
// below the recovery point and is trusted: its stale tail must not become
// part of the log. Found by TestLogStateMachine.
func TestRecoveryCutIsNotTrustedAfterRoll(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	l := openLog(t, disk, cfg, OpenOptions{NowMs: 1})
	want := []appended{appendLeader(t, l, 1, 100, 0), appendLeader(t, l, 1, 101, 0)}
	flushAll(t, l, disk)
	rp := l.RecoveryPoint()
	appendLeader(t, l, 1, 102, 0) // unsynced, then damaged on the medium
	disk.Writeback()
	logPath := testDir + "/" + segmentFileName(0, logSuffix)
	data, _ := disk.ReadFile(logPath)
	if err := disk.FlipBit(logPath, int64(len(data)-1), 0); err != nil {
		t.Fatal(err)
	}
	disk.Crash(nil, memdisk.CrashLoseAll)
	l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: rp, NowMs: 2})
	if n := checkPrefixOf(t, l, want); n != 2 || l.LogEndOffset() != rp {
		t.Fatalf("first recovery kept %d batches, LEO %d, want 2 and %d", n, l.LogEndOffset(), rp)
	}
	if err := l.Roll(3); err != nil {
		t.Fatal(err)
	}
	for disk.RunPending() > 0 {
	}
	disk.Crash(nil, memdisk.CrashLoseAll)
	l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: l.RecoveryPoint(), NowMs: 4})
	if n := checkPrefixOf(t, l, want); n != 2 || l.LogEndOffset() != rp {
		t.Fatalf("second recovery kept %d batches, LEO %d, want 2 and %d", n, l.LogEndOffset(), rp)
	}
}

// TestRetentionBytesCountsWhatTheTimePassLeft: retention.bytes compares the
// size left after the retention.ms pass with the limit, as Kafka's
// deleteRetentionSizeBreachedSegments computes it when it runs. Found by
// TestLogStateMachine: the size was taken before the time pass, so segments
// within the size limit were deleted too.
func TestRetentionBytesCountsWhatTheTimePassLeft(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	cfg.RetentionMs = 500
	l := openLog(t, disk, cfg, OpenOptions{NowMs: 1})
	for i, ts := range []int64{100, 100, 1000, 1000} { // two expired segments, two recent
		if i > 0 {
			if err := l.Roll(ts); err != nil {
				t.Fatal(err)
			}
		}
		appendLeader(t, l, 1, ts, 0)
	}
	segmentBytes := l.SizeBytes() / 4
	l.cfg.RetentionBytes = 2 * segmentBytes // exactly what the recent segments hold
	deleted, err := l.ApplyRetention(1000, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 2 || l.LogStartOffset() != 2 {
		t.Fatalf("retention deleted %d segments, log start %d; want the 2 expired ones, log start 2", deleted, l.LogStartOffset())
	}
}

// TestTornTimeIndexRewriteAfterRoll: recovery rewrites the indexes of the
// segment holding the recovery point without syncing them. A roll at the
// recovery point then makes that segment trusted, and a power loss may keep
// only a prefix of the rewritten time index. The segment's max timestamp
// must still be found, as Kafka's loadLargestTimestamp finds it: from the
// last time index entry, scanning the batches after it.
func TestTornTimeIndexRewriteAfterRoll(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	cfg.IndexIntervalBytes = 0 // index every batch
	l := openLog(t, disk, cfg, OpenOptions{NowMs: 1})
	for _, ts := range []int64{100, 200, 300, 150} { // time index (200, 1), (300, 2)
		appendLeader(t, l, 1, ts, 0)
	}
	flushAll(t, l, disk)
	rp := l.RecoveryPoint()
	disk.Crash(nil, memdisk.CrashLoseAll)
	l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: rp, NowMs: 2}) // rewrites segment 0's indexes
	if err := l.Roll(3); err != nil {
		t.Fatal(err)
	}
	// A power loss that keeps the new segment's entry and only the first
	// entry of the time index's rewrite.
	disk.Writeback()
	if err := disk.TruncateFile(testDir+"/"+segmentFileName(0, timeIndexSuffix), timeIndexEntryBytes); err != nil {
		t.Fatal(err)
	}
	disk.Crash(nil, memdisk.CrashLoseAll)
	l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: rp, NowMs: 4})
	if got, _, _ := l.MaxTimestamp(testDecompressedBytesMax); got.TimestampMs != 300 || got.Offset != 2 {
		t.Fatalf("MaxTimestamp %+v, want 300 at 2", got)
	}
	if got, found, err := l.OffsetForTimestamp(250, testDecompressedBytesMax); err != nil || !found || got.Offset != 2 {
		t.Fatalf("OffsetForTimestamp(250) = %+v, %v, %v; want offset 2", got, found, err)
	}
}

// TestCloseWithCheckpointWriteInFlightIsNoFailure: a log closed while its
// leader-epoch-checkpoint write waits (a deleted topic's partition, as
// sarama's DeleteRecords then DeleteTopic did on a 1-node cluster) must not
// log a storage failure nor enter the failed state when the abandoned write
// completes.
func TestCloseWithCheckpointWriteInFlightIsNoFailure(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{NowMs: 1})
	for disk.RunPending() > 0 {
	}
	var got lines
	l.SetLogger(env.NewLog(&got))
	appendLeader(t, l, 1, 100, 3) // a new epoch: a checkpoint write starts
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for disk.RunPending() > 0 {
	}
	if err := l.Err(); err != nil {
		t.Fatalf("closed log failed: %v", err)
	}
	for _, line := range got {
		if line.level >= slog.LevelError {
			t.Fatalf("closing logged %+v", line)
		}
	}
}

// TestReopenWhileCheckpointWriteInFlight: a log closed while its
// leader-epoch-checkpoint write waits for its Sync, then opened again in the
// same process (a partition stopped and restarted), must not be failed by
// the old write's late completion renaming the new log's temp file.
func TestReopenWhileCheckpointWriteInFlight(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	l := openLog(t, disk, cfg, OpenOptions{NowMs: 1})
	for disk.RunPending() > 0 {
	}
	appendLeader(t, l, 1, 100, 3) // a new epoch: a checkpoint write starts
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, disk, cfg, OpenOptions{NowMs: 2}) // writes the checkpoint too
	for disk.RunPending() > 0 {
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the reopened log failed: %v", err)
	}
	data, err := disk.ReadFile(testDir + "/" + EpochCheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n1\n3 0\n"; string(data) != want {
		t.Fatalf("leader-epoch-checkpoint %q, want %q", data, want)
	}
}
