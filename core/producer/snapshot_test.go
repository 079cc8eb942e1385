package producer

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"strand/sim/memdisk"
)

func TestSnapshotFormatIsKafkasVersion1(t *testing.T) {
	data := encodeSnapshot([]Entry{{ProducerID: 9, Epoch: 3, LastTimestampMs: 777,
		Batches: []BatchMetadata{{LastSequence: 41, LastOffset: 1234, OffsetDelta: 1, TimestampMs: 777}}}})
	if len(data) != 10+46 {
		t.Fatalf("%d bytes, want a 10-byte header and one 46-byte entry", len(data))
	}
	be := binary.BigEndian
	if be.Uint16(data) != 1 || be.Uint32(data[2:]) != crc32.Checksum(data[6:], crc32.MakeTable(crc32.Castagnoli)) || be.Uint32(data[6:]) != 1 {
		t.Fatalf("header % x", data[:10])
	}
	row := data[10:]
	got := []int64{int64(be.Uint64(row)), int64(int16(be.Uint16(row[8:]))), int64(int32(be.Uint32(row[10:]))),
		int64(be.Uint64(row[14:])), int64(int32(be.Uint32(row[22:]))), int64(be.Uint64(row[26:])),
		int64(int32(be.Uint32(row[34:]))), int64(be.Uint64(row[38:]))}
	want := []int64{9, 3, 41, 1234, 1, 777, -1, -1} // id, epoch, last seq, last offset, delta, timestamp, coordinator epoch, txn first offset
	if !cmp.Equal(got, want) {
		t.Fatalf("entry fields %v, want %v", got, want)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	entries := []Entry{
		{ProducerID: 1, Epoch: 0, LastTimestampMs: 50, Batches: []BatchMetadata{
			{LastSequence: 1, LastOffset: 3, OffsetDelta: 3, TimestampMs: 40}, // wrapped past MaxInt32
			{LastSequence: 2, LastOffset: 9, OffsetDelta: 0, TimestampMs: 50}}},
		{ProducerID: 5, Epoch: 7, LastTimestampMs: -1}, // Kafka's entry without batches
		{ProducerID: math.MaxInt64, Epoch: math.MaxInt16, LastTimestampMs: 60, Batches: []BatchMetadata{
			{LastSequence: math.MaxInt32, LastOffset: 20, OffsetDelta: 4, TimestampMs: 60}}},
	}
	decoded, err := decodeSnapshot(encodeSnapshot(entries))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entries, decoded); diff != "" {
		t.Fatal(diff)
	}
	if entries[0].Batches[0].FirstSequence() != math.MaxInt32-1 {
		t.Fatalf("first sequence %d", entries[0].Batches[0].FirstSequence())
	}
	if empty, err := decodeSnapshot(encodeSnapshot(nil)); err != nil || len(empty) != 0 {
		t.Fatalf("empty snapshot: %v, %v", empty, err)
	}
}

func TestSnapshotDecodeRejectsCorruption(t *testing.T) {
	good := encodeSnapshot([]Entry{{ProducerID: 1, Epoch: 0, LastTimestampMs: 5,
		Batches: []BatchMetadata{{LastSequence: 0, LastOffset: 0, TimestampMs: 5}, {LastSequence: 1, LastOffset: 1, TimestampMs: 5}}}})
	withCRC := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
		return b
	}
	cases := map[string][]byte{
		"empty":       nil,
		"short":       good[:8],
		"truncated":   good[:len(good)-1],
		"version":     append([]byte{0, 2}, good[2:]...),
		"crc":         append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^1),
		"count":       withCRC(append(append([]byte(nil), good[:6]...), append([]byte{0, 0, 0, 3}, good[10:]...)...)),
		"unsorted":    withCRC(append(append([]byte(nil), good[:10]...), append(append([]byte(nil), good[10+46:]...), good[10:10+46]...)...)),
		"negative id": withCRC(append(append([]byte(nil), good[:10]...), append([]byte{0xff}, good[11:]...)...)),
	}
	for name, data := range cases {
		if _, err := decodeSnapshot(data); !errors.Is(err, errCorruptSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// stateWith builds a state over a fresh memLog of n batches from three
// producers.
func stateWith(t *testing.T, n int) (*State, *memLog) {
	s, l := NewState(testConfig(), 0), &memLog{}
	for i := 0; i < n; i++ {
		id := int64(i % 3)
		e, _ := s.Entry(id)
		seq := int32(0)
		if len(e.Batches) > 0 {
			seq = e.Batches[len(e.Batches)-1].LastSequence + 1
		}
		h := header(id, 0, seq, 2)
		h.MaxTimestamp = int64(i)
		h.BaseOffset = mustAppend(t, s, h)
		l.headers = append(l.headers, h)
	}
	return s, l
}

func TestLoadFallsBackFromCorruptSnapshots(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	snaps, err := OpenSnapshots(disk, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{4, 8} {
		at, _ := stateWith(t, n)
		snaps.Take(at, nil)
	}
	live, l := stateWith(t, 12)
	for disk.RunPending() > 0 {
	}
	// Newest snapshot corrupt: the older one plus a longer replay.
	newest := snaps.Offsets()[1]
	if err := disk.FlipBit(SnapshotFileName(newest), 20, 3); err != nil {
		t.Fatal(err)
	}
	reopened, err := OpenSnapshots(disk, "")
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := Load(testConfig(), reopened, 0, l.end(), l.reader())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live.Entries(), rebuilt.Entries()); diff != "" {
		t.Fatal(diff)
	}
	if got := reopened.Offsets(); len(got) != 1 || got[0] == newest {
		t.Fatalf("corrupt snapshot not deleted: %v", got)
	}
	// Every snapshot corrupt: a full replay.
	if err := disk.TruncateFile(SnapshotFileName(reopened.Offsets()[0]), 7); err != nil {
		t.Fatal(err)
	}
	rebuilt, err = Load(testConfig(), reopened, 0, l.end(), l.reader())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live.Entries(), rebuilt.Entries()); diff != "" || len(reopened.Offsets()) != 0 {
		t.Fatalf("full replay: %s, snapshots left %v", diff, reopened.Offsets())
	}
}

// A crash at any point of a snapshot write leaves either no snapshot or a
// whole one, and no temp file once reopened; Load then equals the live state.
func TestSnapshotTakeUnderCrash(t *testing.T) {
	live, l := stateWith(t, 9)
	for seed := uint64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		disk := memdisk.New(memdisk.Options{})
		if err := disk.MkdirAll("t-0"); err != nil {
			t.Fatal(err)
		}
		disk.SyncDir("", func(error) {}) // the log made its directory durable
		for disk.RunPending() > 0 {
		}
		snaps, err := OpenSnapshots(disk, "t-0")
		if err != nil {
			t.Fatal(err)
		}
		snaps.Take(live, nil)
		for steps := rng.IntN(4); steps > 0; steps-- {
			disk.RunPending()
		}
		disk.Crash(rng, memdisk.CrashMode(rng.IntN(3)))
		reopened, err := OpenSnapshots(disk, "t-0")
		if err != nil {
			t.Fatal(err)
		}
		names, _ := disk.List("t-0")
		for _, name := range names {
			if strings.HasSuffix(name, ".tmp") {
				t.Fatalf("seed %d: %s left behind", seed, name)
			}
		}
		rebuilt, err := Load(testConfig(), reopened, 0, l.end(), l.reader())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(live.Entries(), rebuilt.Entries()); diff != "" {
			t.Fatalf("seed %d: %s", seed, diff)
		}
	}
}

func TestSnapshotsDeleteBelowAndAbove(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	snaps, err := OpenSnapshots(disk, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3, 4} {
		s, _ := stateWith(t, n)
		snaps.Take(s, nil)
	}
	for disk.RunPending() > 0 {
	}
	if got := snaps.Offsets(); !cmp.Equal(got, []int64{2, 4, 6, 8}) {
		t.Fatalf("offsets %v", got)
	}
	synced := false
	if err := snaps.DeleteBelow(4, func(err error) { synced = err == nil }); err != nil {
		t.Fatal(err)
	}
	if err := snaps.DeleteAbove(6, nil); err != nil {
		t.Fatal(err)
	}
	for disk.RunPending() > 0 {
	}
	names, _ := disk.List("")
	if !synced || !cmp.Equal(snaps.Offsets(), []int64{4, 6}) || !cmp.Equal(names, []string{SnapshotFileName(4), SnapshotFileName(6)}) {
		t.Fatalf("left %v on disk %v (synced %v)", snaps.Offsets(), names, synced)
	}
}

// A snapshot deleted while its write is in flight must not come back when
// the write's rename would have happened, and a new snapshot at the same
// offset waits until the old write is done.
func TestSnapshotDeletedWhileWriting(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	snaps, err := OpenSnapshots(disk, "")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := stateWith(t, 2)
	var writeErr error
	snaps.Take(s, func(err error) { writeErr = err })
	if err := snaps.DeleteAbove(0, nil); err != nil {
		t.Fatal(err)
	}
	skipped := false
	snaps.Take(s, func(err error) { skipped = err == nil })
	for disk.RunPending() > 0 {
	}
	if _, err := disk.ReadFile(SnapshotFileName(4)); err == nil || writeErr == nil || !skipped {
		t.Fatalf("deleted snapshot came back (%v), or its write reported success (%v), or the retake ran (%v)", err, writeErr, skipped)
	}
	snaps.Take(s, nil)
	for disk.RunPending() > 0 {
	}
	if _, err := disk.ReadFile(SnapshotFileName(4)); err != nil {
		t.Fatalf("snapshot after the abandoned write finished: %v", err)
	}
}

func TestSnapshotOverTheBoundEvictsOldest(t *testing.T) {
	var entries []Entry
	for id := int64(1); id <= 6; id++ {
		ts := 100 - id // producer 6 is the oldest
		entries = append(entries, Entry{ProducerID: id, LastTimestampMs: ts,
			Batches: []BatchMetadata{{LastSequence: 0, LastOffset: id, TimestampMs: ts}}})
	}
	state, ok := stateFromEntries(testConfig(), 10, entries) // ProducersMax 4
	if !ok {
		t.Fatal("snapshot refused")
	}
	var ids []int64
	for _, e := range state.Entries() {
		ids = append(ids, e.ProducerID)
	}
	if !cmp.Equal(ids, []int64{1, 2, 3, 4}) {
		t.Fatalf("kept %v, want the four newest", ids)
	}
	if _, ok := stateFromEntries(testConfig(), 3, entries); ok {
		t.Fatal("a snapshot holding batches beyond its offset was accepted")
	}
}
