package log

import (
	"testing"

	"strand/core/batch"
	"strand/core/env"
	"strand/sim/memdisk"
)

// FuzzRecover writes arbitrary bytes as a segment's .log, .index and
// .timeindex files and opens the log. Open must never panic, and the log it
// recovers must serve only whole batches with contiguous offsets; with a
// recovery point of 0 (nothing trusted) every batch must pass batch.Verify.
// The log must then accept an append and read it back.
func FuzzRecover(f *testing.F) {
	valid, index, timeIndex := validSegmentFiles(f)
	f.Add(valid, index, timeIndex, uint16(0))
	f.Add(valid, index, timeIndex, uint16(5))
	f.Add(valid[:len(valid)-7], index, timeIndex, uint16(0))
	f.Add(append(valid, make([]byte, 100)...), []byte{}, []byte{}, uint16(0))
	flipped := append([]byte(nil), valid...)
	flipped[len(flipped)/2] ^= 0x10
	f.Add(flipped, index, timeIndex, uint16(0))
	f.Add([]byte{}, []byte{1, 2, 3}, []byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, logBytes, indexBytes, timeIndexBytes []byte, recoveryPoint uint16) {
		disk := memdisk.New(memdisk.Options{})
		if err := disk.MkdirAll(testDir); err != nil {
			t.Fatal(err)
		}
		writeFile(t, disk, testDir+"/"+segmentFileName(0, logSuffix), logBytes)
		writeFile(t, disk, testDir+"/"+segmentFileName(0, indexSuffix), indexBytes)
		writeFile(t, disk, testDir+"/"+segmentFileName(0, timeIndexSuffix), timeIndexBytes)
		cfg := testConfig()
		cfg.SegmentBytes = 1 << 20
		l, err := Open(disk, testDir, cfg, OpenOptions{RecoveryPoint: int64(recoveryPoint)})
		if err != nil {
			return // refusing is allowed; serving garbage is not
		}
		checkServesOnlyWholeBatches(t, l, recoveryPoint == 0)
		leo := l.LogEndOffset()
		epoch := max(l.Epochs().LatestEpoch(), 0)
		if _, err := l.AppendAsLeader(makeBatch(2, 10, 5), epoch, 10); err != nil && l.Err() == nil {
			t.Fatalf("append after recovery: %v", err)
		}
		if l.Err() == nil && l.LogEndOffset() != leo+2 {
			t.Fatalf("append after recovery moved the LEO from %d to %d", leo, l.LogEndOffset())
		}
		checkServesOnlyWholeBatches(t, l, recoveryPoint == 0)
	})
}

func checkServesOnlyWholeBatches(t *testing.T, l *Log, mustVerify bool) {
	t.Helper()
	if l.Err() != nil {
		return
	}
	result, err := l.Read(l.LogStartOffset(), 1<<30, l.LogEndOffset(), true)
	if err != nil {
		if l.Err() == nil {
			t.Fatalf("read of a recovered log failed without failing the log: %v", err)
		}
		return
	}
	data, err := CopyRegions(result.Regions)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(-1)
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Length < 0 || h.TotalBytes() > int64(len(data)) {
			t.Fatalf("read served a partial batch (%d bytes left): %v", len(data), err)
		}
		if mustVerify {
			if _, err := batch.Verify(data[:h.TotalBytes()]); err != nil {
				t.Fatalf("read served a corrupt batch: %v", err)
			}
		}
		if next >= 0 && h.BaseOffset != next {
			t.Fatalf("batch at %d after one ending at %d", h.BaseOffset, next)
		}
		next = h.NextOffset()
		data = data[h.TotalBytes():]
	}
	if next >= 0 && next != l.LogEndOffset() {
		t.Fatalf("batches end at %d, LEO %d", next, l.LogEndOffset())
	}
}

// validSegmentFiles writes a small real segment and returns its files, as a
// seed for the fuzzer.
func validSegmentFiles(f *testing.F) (logBytes, index, timeIndex []byte) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 100
	l, err := Open(disk, testDir, cfg, OpenOptions{})
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if _, err := l.AppendAsLeader(makeBatch(1+i%3, int64(100+i), 20), int32(i/3), int64(100+i)); err != nil {
			f.Fatal(err)
		}
	}
	read := func(suffix string) []byte {
		data, err := disk.ReadFile(testDir + "/" + segmentFileName(0, suffix))
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	return read(logSuffix), read(indexSuffix), read(timeIndexSuffix)
}

var _ env.Disk = (*memdisk.Disk)(nil)
