package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"strand/core/batch"
	"strand/core/env"
	"strand/sim/memdisk"
)

// fataler is what the checks need of testing.T and rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// compactRecord is one record as produced (the model) or as read back.
type compactRecord struct {
	offset      int64
	key         string
	value       []byte // nil: a tombstone
	timestampMs int64
	// appendMs is when the model appended it (not read back).
	appendMs int64
}

func compactConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	cfg.IndexIntervalBytes = 128
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	cfg.Compaction.Compact = true
	cfg.Compaction.MinCleanableDirtyRatio = 0
	cfg.Compaction.DeleteRetentionMs = 50
	return cfg
}

// appendKeyed appends one batch of records and returns them with offsets.
func appendKeyed(t fataler, l *Log, codec batch.Codec, nowMs int64, keys []string, values [][]byte) []compactRecord {
	spec := batch.BuildSpec{Codec: codec, FirstTimestamp: nowMs, PartitionLeaderEpoch: -1,
		Idempotent: true, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0}
	for i, key := range keys {
		spec.Records = append(spec.Records, batch.Record{Key: []byte(key), Value: values[i], TimestampDelta: int64(i)})
	}
	result, err := l.AppendAsLeader(batch.Build(spec), 3, nowMs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	out := make([]compactRecord, len(keys))
	for i, key := range keys {
		out[i] = compactRecord{offset: result.BaseOffset + int64(i), key: key, value: values[i], timestampMs: nowMs + int64(i), appendMs: nowMs}
	}
	return out
}

// readCompacted reads the whole log and decodes it with kmsg, checking
// every batch's CRC-32C, batch.Verify, batch contiguity and strictly
// increasing record offsets.
func readCompacted(t fataler, l *Log) []compactRecord {
	result, err := l.Read(l.LogStartOffset(), 1<<30, l.LogEndOffset(), true)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	data, err := CopyRegions(result.Regions)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var records []compactRecord
	next, lastRecord := int64(-1), int64(-1)
	for position := 0; position < len(data); {
		total := 12 + int(int32(binary.BigEndian.Uint32(data[position+8:])))
		raw := data[position : position+total]
		position += total
		if _, err := batch.Verify(raw); err != nil {
			t.Fatalf("batch.Verify: %v", err)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatalf("kmsg cannot read a batch: %v", err)
		}
		if crc := crc32.Checksum(raw[21:], castagnoli); crc != uint32(rb.CRC) {
			t.Fatalf("batch %d: CRC 0x%08x, stored 0x%08x", rb.FirstOffset, crc, uint32(rb.CRC))
		}
		if next >= 0 && rb.FirstOffset != next {
			t.Fatalf("batch at %d does not follow the previous batch ending before %d", rb.FirstOffset, next)
		}
		next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		rest, err := []byte(nil), error(nil)
		if rb.NumRecords > 0 { // an empty batch has no compressed section
			rest, err = batch.Decompress(batch.Codec(rb.Attributes&7), rb.Records, 1<<24)
		}
		if err != nil {
			t.Fatalf("batch %d: decompress: %v", rb.FirstOffset, err)
		}
		for i := int32(0); i < rb.NumRecords; i++ {
			length, n := binary.Varint(rest)
			var rec kmsg.Record
			if n <= 0 || rec.ReadFrom(rest[:int64(n)+length]) != nil {
				t.Fatalf("batch %d: kmsg cannot read record %d", rb.FirstOffset, i)
			}
			rest = rest[int64(n)+length:]
			offset := rb.FirstOffset + int64(rec.OffsetDelta)
			if offset <= lastRecord || offset >= next {
				t.Fatalf("record offset %d after %d, batch ends before %d", offset, lastRecord, next)
			}
			lastRecord = offset
			records = append(records, compactRecord{offset: offset, key: string(rec.Key), value: rec.Value,
				timestampMs: rb.FirstTimestamp + rec.TimestampDelta64})
		}
		if len(rest) != 0 {
			t.Fatalf("batch %d: %d bytes after its records", rb.FirstOffset, len(rest))
		}
	}
	return records
}

// checkCompacted checks the log against every record produced (model, in
// offset order, cut at the LEO): no record is invented or changed; each
// key's latest record is there, unless it is a tombstone past
// delete.retention.ms; everything at or beyond untouchedFrom is there; and
// below the cleaner point each key appears at most once, as its latest
// record below the point.
func checkCompacted(t fataler, l *Log, model []compactRecord, nowMs, untouchedFrom int64) {
	got := readCompacted(t, l)
	byOffset := map[int64]compactRecord{}
	for _, r := range model {
		byOffset[r.offset] = r
	}
	present := map[int64]bool{}
	belowPoint := map[string]int64{}
	for _, r := range got {
		want, ok := byOffset[r.offset]
		if !ok || want.key != r.key || !bytes.Equal(want.value, r.value) || (want.value == nil) != (r.value == nil) || want.timestampMs != r.timestampMs {
			t.Fatalf("offset %d holds %+v, produced %+v (%v)", r.offset, r, want, ok)
		}
		present[r.offset] = true
		if r.offset < l.CleanerPoint() {
			if earlier, dup := belowPoint[r.key]; dup {
				t.Fatalf("key %q at %d and %d below the cleaner point %d", r.key, earlier, r.offset, l.CleanerPoint())
			}
			belowPoint[r.key] = r.offset
		}
	}
	latest := map[string]compactRecord{}
	latestBelowPoint := map[string]int64{}
	for _, r := range model {
		latest[r.key] = r
		if r.offset < l.CleanerPoint() {
			latestBelowPoint[r.key] = r.offset
		}
		if r.offset >= untouchedFrom && !present[r.offset] {
			t.Fatalf("record %+v at or beyond %d (untouched by cleaning) is gone", r, untouchedFrom)
		}
	}
	for key, r := range latest {
		expired := r.value == nil && nowMs >= r.appendMs+l.cfg.Compaction.DeleteRetentionMs
		if !present[r.offset] && !expired {
			t.Fatalf("key %q lost its latest record %+v (now %d)", key, r, nowMs)
		}
	}
	for key, offset := range belowPoint {
		if latestBelowPoint[key] != offset {
			t.Fatalf("key %q below the cleaner point is at %d, its latest there is %d", key, offset, latestBelowPoint[key])
		}
	}
}

func untouchedFrom(l *Log) int64 {
	if p := l.clean.pass; p != nil {
		return max(l.clean.point, p.endOffset)
	}
	return l.clean.point
}

// checkNoCleanerFiles fails if .cleaned or .swap files are left.
func checkNoCleanerFiles(t fataler, disk *memdisk.Disk) {
	names, err := disk.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, cleanedSuffix) || strings.HasSuffix(name, swapSuffix) {
			t.Fatalf("%s left after recovery", name)
		}
	}
}

var testCodecs = []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}

// TestCompactionProperty interleaves keyed appends (a small key space, some
// tombstones), rolls, flushes, cleaning steps with small budgets and maps,
// disk completions and crashes of every mode, and checks the log against
// the model after every step.
func TestCompactionProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		disk := memdisk.New(memdisk.Options{})
		cfg := compactConfig()
		cfg.Compaction.MinCompactionLagMs = rapid.SampledFrom([]int64{0, 20}).Draw(rt, "minLagMs")
		codec := rapid.SampledFrom(testCodecs).Draw(rt, "codec")
		l, err := Open(disk, testDir, cfg, OpenOptions{})
		if err != nil {
			rt.Fatal(err)
		}
		var model []compactRecord
		// incarnations: by offset, every record appended since the last
		// completed flush, and the latest before it. A crash may bring
		// back one that a recovery cut removed, since a cut is not durable
		// until synced (see adoptRecoveredTail).
		incarnations := map[int64][]compactRecord{}
		nowMs, checkpointed := int64(1000), int64(0)
		// touched: a crash in a pass may leave its swapped groups cleaned
		// beyond the checkpointed point, as in Kafka.
		touched := int64(0)
		steps := rapid.IntRange(10, 80).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			nowMs += rapid.Int64Range(0, 15).Draw(rt, "advanceMs")
			epochsBefore := fmt.Sprint(l.Epochs().Entries())
			switch action := rapid.IntRange(0, 9).Draw(rt, "action"); {
			case action <= 3:
				n := rapid.IntRange(1, 4).Draw(rt, "records")
				keys, values := make([]string, n), make([][]byte, n)
				for i := range keys {
					keys[i] = fmt.Sprintf("k%d", rapid.IntRange(0, 7).Draw(rt, "key"))
					if rapid.IntRange(0, 6).Draw(rt, "tombstone") > 0 {
						values[i] = []byte(fmt.Sprintf("v%d-%s", len(model)+i, strings.Repeat("x", 30)))
					}
				}
				appended := appendKeyed(rt, l, codec, nowMs, keys, values)
				for _, r := range appended {
					incarnations[r.offset] = append(incarnations[r.offset], r)
				}
				model = append(model, appended...)
			case action == 4:
				if err := l.Roll(nowMs); err != nil {
					rt.Fatal(err)
				}
			case action == 5:
				l.Flush(l.LogEndOffset(), func(err error) {
					if err != nil {
						rt.Fatalf("flush: %v", err)
					}
					// Every recovery cut came before this flush (only
					// Open cuts here) and is now durable: no earlier
					// incarnation can come back.
					incarnations = map[int64][]compactRecord{}
					for _, r := range model {
						incarnations[r.offset] = []compactRecord{r}
					}
				})
				disk.RunPending()
			case action <= 8:
				limits := CleanLimits{StepBytesMax: rapid.Int64Range(1, 3000).Draw(rt, "stepBytes"),
					KeysMax: rapid.IntRange(1, 10).Draw(rt, "keysMax"), KeyBytesMax: 1 << 20}
				status, err := l.CleanStep(nowMs, l.RecoveryPoint(), limits)
				if err != nil {
					rt.Fatalf("CleanStep: %v", err)
				}
				if status == CleanPassDone {
					checkpointed = l.CleanerPoint()
				}
				if rapid.Bool().Draw(rt, "complete") {
					disk.RunPending()
				}
				if got := fmt.Sprint(l.Epochs().Entries()); got != epochsBefore {
					rt.Fatalf("cleaning changed the epoch cache: %v, was %v", got, epochsBefore)
				}
			default:
				recoveryPoint := l.RecoveryPoint()
				mode := memdisk.CrashMode(rapid.IntRange(0, 2).Draw(rt, "crashMode"))
				disk.Crash(rand.New(rand.NewPCG(uint64(step), 7)), mode)
				_ = l.Close()
				l, err = Open(disk, testDir, cfg, OpenOptions{RecoveryPoint: recoveryPoint, CleanerOffset: checkpointed, NowMs: nowMs})
				if err != nil {
					rt.Fatalf("reopen after %v crash: %v", mode, err)
				}
				if l.LogEndOffset() < recoveryPoint {
					rt.Fatalf("recovery lost synced offsets: LEO %d < recovery point %d", l.LogEndOffset(), recoveryPoint)
				}
				if l.CleanerPoint() != checkpointed {
					rt.Fatalf("cleaner point %d after reopen, checkpoint %d", l.CleanerPoint(), checkpointed)
				}
				model = adoptRecoveredTail(rt, l, model, incarnations, recoveryPoint)
				checkNoCleanerFiles(rt, disk)
			}
			touched = max(touched, untouchedFrom(l))
			checkCompacted(rt, l, model, nowMs, touched)
		}
		_ = l.Close()
	})
}

// adoptRecoveredTail checks what a crash left at and beyond the recovery
// point it happened at, and returns the model with that tail adopted.
// Below the point nothing may change (checkCompacted checks it against the
// model). At and beyond it every offset up to the LEO must hold a record
// (the cleaner only works below the recovery point), and each must be one
// that some append wrote at that offset: the latest, or an earlier
// incarnation. Earlier ones come back when a crash undoes a recovery cut
// that was never synced: recovery after an earlier crash removed the
// segments beyond a torn batch, appends reused their offsets, and a torn
// crash kept none of the directory's changes, so the removed segment file
// is back, holding records of the first incarnation (as a truncation is not
// durable until synced; TestLogStateMachine accepts the same ghosts).
func adoptRecoveredTail(t fataler, l *Log, model []compactRecord, incarnations map[int64][]compactRecord, recoveryPoint int64) []compactRecord {
	t.Helper()
	kept := len(model)
	for kept > 0 && model[kept-1].offset >= recoveryPoint {
		kept--
	}
	adopted := model[:kept:kept]
	next := recoveryPoint
	for _, r := range readCompacted(t, l) {
		if r.offset < recoveryPoint {
			continue
		}
		if r.offset != next {
			t.Fatalf("recovered log holds offset %d after %d, below its LEO %d and at or beyond the recovery point %d", r.offset, next-1, l.LogEndOffset(), recoveryPoint)
		}
		next++
		found := false
		for _, want := range slices.Backward(incarnations[r.offset]) {
			if want.key == r.key && bytes.Equal(want.value, r.value) && (want.value == nil) == (r.value == nil) && want.timestampMs == r.timestampMs {
				adopted, found = append(adopted, want), true
				break
			}
		}
		if !found {
			t.Fatalf("recovery kept %+v at %d, which no append wrote there (recovery point %d)", r, r.offset, recoveryPoint)
		}
	}
	if next < l.LogEndOffset() {
		t.Fatalf("recovered log ends at offset %d, LEO %d (recovery point %d)", next, l.LogEndOffset(), recoveryPoint)
	}
	return adopted
}

// TestUnsyncedRecoveryCutCanBeUndone is a case TestCompactionProperty
// reaches, written out without torn crashes: a
// recovery cut removes a later segment, appends reuse its offsets, and a
// crash before any flush undoes the removal (it was never synced), so the
// removed segment's records come back at their offsets, replacing the new
// ones there. That is allowed, as a truncation is not durable until synced;
// adoptRecoveredTail accepts it. After a flush the cut is durable and the
// new records must stay.
func TestUnsyncedRecoveryCutCanBeUndone(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		t.Run(fmt.Sprintf("flushed=%v", flushed), func(t *testing.T) {
			disk := memdisk.New(memdisk.Options{})
			cfg := compactConfig()
			l := openLog(t, disk, cfg, OpenOptions{NowMs: 1000})
			var model []compactRecord
			incarnations := map[int64][]compactRecord{}
			appendOne := func(incarnation string) {
				t.Helper()
				records := appendKeyed(t, l, batch.CodecNone, 1000, []string{"k"}, [][]byte{[]byte(fmt.Sprintf("%s%d", incarnation, l.LogEndOffset()))})
				incarnations[records[0].offset] = append(incarnations[records[0].offset], records[0])
				model = append(model, records...)
			}
			reopen := func(recoveryPoint int64) {
				t.Helper()
				_ = l.Close()
				l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: recoveryPoint, NowMs: 1000})
				model = adoptRecoveredTail(t, l, model, incarnations, recoveryPoint)
				checkCompacted(t, l, model, 1000, l.CleanerPoint())
			}
			for range 6 {
				appendOne("a") // offsets 0-5 in segment 0
			}
			if err := l.Roll(1000); err != nil {
				t.Fatal(err)
			}
			appendOne("a") // offsets 6 and 7 in segment 6
			appendOne("a")
			disk.Writeback() // every file and entry durable, none synced by the log
			segment0 := testDir + "/" + segmentFileName(0, logSuffix)
			size, _ := disk.DurableSize(segment0)
			disk.Crash(nil, memdisk.CrashKeepAll)
			if err := disk.TruncateFile(segment0, size-5); err != nil { // tear offset 5
				t.Fatal(err)
			}
			reopen(0)
			if l.LogEndOffset() != 5 || !slices.Equal(l.SegmentBaseOffsets(), []int64{0}) {
				t.Fatalf("after the tear: LEO %d, segments %v; want 5, [0]", l.LogEndOffset(), l.SegmentBaseOffsets())
			}
			for range 4 {
				appendOne("b") // offsets 5-8, all in segment 0
			}
			if flushed {
				l.Flush(l.LogEndOffset(), nil)
				for disk.RunPending() > 0 {
				}
			} else {
				// segment 0's bytes reach the disk, the directory's
				// removal of segment 6 does not.
				f, err := disk.Open(segment0, env.OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := disk.TruncateFile(segment0, f.Size()); err != nil {
					t.Fatal(err)
				}
			}
			recoveryPoint := l.RecoveryPoint()
			if wantRP := map[bool]int64{false: 0, true: 9}[flushed]; recoveryPoint != wantRP {
				t.Fatalf("recovery point %d before the crash, want %d", recoveryPoint, wantRP)
			}
			disk.Crash(nil, memdisk.CrashLoseAll)
			reopen(recoveryPoint)
			got := readCompacted(t, l)
			var values []string
			for _, r := range got[5:] {
				values = append(values, string(r.value))
			}
			want := []string{"b5", "a6", "a7"} // segment 6 is back, cutting segment 0 at its base
			if flushed {
				want = []string{"b5", "b6", "b7", "b8"}
			}
			if !slices.Equal(values, want) {
				t.Fatalf("offsets from 5 hold %q, want %q", values, want)
			}
		})
	}
}

// cleanUntilDone runs steps and completions until a pass finishes.
func cleanUntilDone(t *testing.T, disk *memdisk.Disk, l *Log, nowMs int64) {
	t.Helper()
	for steps := 0; ; steps++ {
		status, err := l.CleanStep(nowMs, l.LogEndOffset(), CleanLimits{StepBytesMax: 300, KeysMax: 100, KeyBytesMax: 1 << 20})
		if err != nil || status == CleanIdle || steps > 1000 {
			t.Fatalf("CleanStep: %v, %v after %d steps", status, err, steps)
		}
		if status == CleanPassDone {
			return
		}
		disk.RunPending()
	}
}

// TestTombstoneDeleteHorizon: a cleaned tombstone gets a delete horizon
// (attribute bit 6, FirstTimestamp) of nowMs + delete.retention.ms and
// stays; once the clock passes the horizon the log is due again although
// nothing is dirty, and that pass drops the tombstone and keeps other keys.
func TestTombstoneDeleteHorizon(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, compactConfig(), OpenOptions{NowMs: 1000})
	var model []compactRecord
	model = append(model, appendKeyed(t, l, batch.CodecZstd, 1000, []string{"a", "b"}, [][]byte{[]byte("a1"), []byte("b1")})...)
	model = append(model, appendKeyed(t, l, batch.CodecZstd, 1001, []string{"a"}, [][]byte{nil})...)
	if err := l.Roll(1002); err != nil {
		t.Fatal(err)
	}
	cleanUntilDone(t, disk, l, 2000)
	checkCompacted(t, l, model, 2000, l.LogEndOffset())
	got := readCompacted(t, l)
	if len(got) != 2 || got[0].key != "b" || got[1].key != "a" || got[1].value != nil {
		t.Fatalf("after the first pass: %+v, want b1 and a's tombstone", got)
	}
	result, err := l.Read(got[1].offset, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := CopyRegions(result.Regions)
	if err != nil {
		t.Fatal(err)
	}
	h, err := batch.Verify(data)
	if err != nil {
		t.Fatal(err)
	}
	deleteRetentionMs := l.cfg.Compaction.DeleteRetentionMs
	if h.Attributes&attrDeleteHorizon == 0 || h.FirstTimestamp != 2000+deleteRetentionMs {
		t.Fatalf("tombstone batch attributes 0x%x first timestamp %d, want the horizon bit and %d", h.Attributes, h.FirstTimestamp, 2000+deleteRetentionMs)
	}
	if _, due := l.DirtyRatio(2000+deleteRetentionMs-1, l.LogEndOffset()); due {
		t.Fatal("a clean log is due before its tombstones' horizon")
	}
	if _, due := l.DirtyRatio(2000+deleteRetentionMs, l.LogEndOffset()); !due {
		t.Fatal("a log whose tombstone horizon passed is not due")
	}
	cleanUntilDone(t, disk, l, 2000+deleteRetentionMs)
	got = readCompacted(t, l)
	if len(got) != 1 || got[0].key != "b" || string(got[0].value) != "b1" {
		t.Fatalf("after the horizon: %+v, want b1 alone", got)
	}
	if _, due := l.DirtyRatio(1<<40, l.LogEndOffset()); due {
		t.Fatal("a log without tombstones is still due")
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("LEO moved to %d", l.LogEndOffset())
	}
}
