package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"strand/core/batch"
	"strand/core/env"
	"strand/sim/memdisk"
)

// The disk faults of SPEC.md §2.3, one test each: what the log does when
// its device misbehaves.

// TestDeferredAppendFailureFailsTheLog: an Append the disk reports failed
// only at the next call (diskio's write worker, memdisk's
// DeferAppendErrors) fails the log as an immediate failure does: the next
// append, flush or read of the missing bytes fails it, for good, and no
// read returns bytes that were never written.
func TestDeferredAppendFailureFailsTheLog(t *testing.T) {
	for _, next := range []string{"append", "flush", "read"} {
		t.Run(next, func(t *testing.T) {
			disk := memdisk.New(memdisk.Options{DeferAppendErrors: true})
			l := openLog(t, disk, testConfig(), OpenOptions{})
			kept := appendLeader(t, l, 2, 100, 0)
			disk.SetFull(true)
			if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), 0, 1); err != nil {
				t.Fatalf("the deferred failure surfaced in the append itself: %v", err)
			}
			disk.SetFull(false)
			var err error
			switch next {
			case "append":
				_, err = l.AppendAsLeader(makeBatch(1, 1, 1), 0, 1)
			case "flush":
				l.Flush(l.LogEndOffset(), func(e error) { err = e })
				for disk.RunPending() > 0 {
				}
			case "read":
				var res ReadResult
				if res, err = l.Read(kept.baseOffset+2, 1<<20, l.LogEndOffset(), true); err == nil {
					_, err = CopyRegions(res.Regions)
				}
			}
			if err == nil {
				t.Fatalf("%s after a deferred append failure succeeded", next)
			}
			if next != "read" && (l.Err() == nil || !isErr(l.Err(), env.ErrIO)) {
				t.Fatalf("after the %s the log is not failed: %v", next, l.Err())
			}
			if l.Err() != nil {
				if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), 0, 1); !isErr(err, env.ErrIO) {
					t.Fatalf("the log recovered by itself: %v", err)
				}
			}
		})
	}
}

// TestReadErrorFailsTheLog: a read error of the device on a fetch's path
// (a batch header, an index entry) fails the log, as Kafka's
// LogDirFailureChannel takes the directory offline on an IOException:
// the read and every later call return an error wrapping env.ErrIO, which
// the broker answers KAFKA_STORAGE_ERROR (TestReadErrorOnFetchAnswersStorageErrorAndFences).
func TestReadErrorFailsTheLog(t *testing.T) {
	for _, file := range []string{"log", "index"} {
		t.Run(file, func(t *testing.T) {
			disk := memdisk.New(memdisk.Options{})
			l := openLog(t, disk, testConfig(), OpenOptions{})
			for i := 0; i < 40; i++ {
				appendLeader(t, l, 2, int64(100+i), 0)
			}
			path := testDir + "/" + segmentFileName(l.SegmentBaseOffsets()[0], "."+file)
			if err := disk.FailReads(path, 0, 1<<20, false); err != nil {
				t.Fatal(err)
			}
			_, err := l.Read(41, 1<<20, l.LogEndOffset(), true)
			if !isErr(err, env.ErrIO) || !isErr(l.Err(), env.ErrIO) {
				t.Fatalf("Read over a read error: %v, log error %v; want both ErrIO", err, l.Err())
			}
			if _, err := l.Read(0, 1<<20, l.LogEndOffset(), true); !isErr(err, env.ErrIO) {
				t.Fatalf("a later read of a failed log: %v", err)
			}
		})
	}
}

// readEveryOffset reads the log at each offset in [from, to) and checks
// that each read returns, from the batch holding the offset on, exactly
// the batches appended there, or fails: a damaged file may make a read
// fail, never return wrong batches.
func readEveryOffset(t *testing.T, l *Log, want map[int64][]byte, from, to int64) (served, failed int) {
	t.Helper()
	for offset := from; offset < to && l.Err() == nil; offset++ {
		res, err := l.Read(offset, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			failed++
			continue
		}
		data, err := CopyRegions(res.Regions)
		if err != nil {
			failed++
			continue
		}
		first := true
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil || h.TotalBytes() > int64(len(data)) {
				t.Fatalf("read at %d returned bytes that are no batch", offset)
			}
			if first && (h.BaseOffset > offset || h.LastOffset() < offset) {
				t.Fatalf("read at %d starts with the batch [%d, %d]", offset, h.BaseOffset, h.LastOffset())
			}
			if !bytes.Equal(data[:h.TotalBytes()], want[h.BaseOffset]) {
				t.Fatalf("read at %d returned a batch at %d that was not appended there", offset, h.BaseOffset)
			}
			first = false
			data = data[h.TotalBytes():]
		}
		served++
	}
	return served, failed
}

// appendMany appends batches of 2 records to l and returns them by base
// offset.
func appendMany(t *testing.T, l *Log, batches int) map[int64][]byte {
	t.Helper()
	want := map[int64][]byte{}
	for i := 0; i < batches; i++ {
		a := appendLeader(t, l, 2, int64(100+i), 0)
		want[a.baseOffset] = a.bytes
	}
	return want
}

// TestCorruptIndexNeverServesWrongBatches: a bit flipped anywhere in an
// offset or time index, in a live log or found at a restart, makes reads
// fail or still find the right batches (an index is a hint), never skip
// or misplace one.
func TestCorruptIndexNeverServesWrongBatches(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 200; round++ {
		disk := memdisk.New(memdisk.Options{})
		l := openLog(t, disk, testConfig(), OpenOptions{})
		want := appendMany(t, l, 60)
		flushAll(t, l, disk)
		end := l.LogEndOffset()
		bases := l.SegmentBaseOffsets()
		suffix := []string{indexSuffix, timeIndexSuffix}[r.IntN(2)]
		path := testDir + "/" + segmentFileName(bases[r.IntN(len(bases))], suffix)
		data, _ := disk.ReadFile(path)
		if len(data) == 0 {
			continue
		}
		at := r.Int64N(int64(len(data)))
		if err := disk.FlipBit(path, at, uint(r.IntN(8))); err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("round %d live %s byte %d", round, path, at), func(t *testing.T) {
			readEveryOffset(t, l, want, 0, end)
		})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, disk, testConfig(), OpenOptions{RecoveryPoint: end})
		t.Run(fmt.Sprintf("round %d reopened %s byte %d", round, path, at), func(t *testing.T) {
			readEveryOffset(t, l, want, 0, end)
		})
	}
}

// TestMisdirectedWriteIsCaughtAfterAPowerLoss: a segment write that
// reached the medium at the wrong place shows after a power loss as bytes
// the recovery point vouches for but that are not what was written; the
// reopened log reads only batches appended where they are, or fails, or
// was cut; it never serves the stray bytes as the batch at an offset.
func TestMisdirectedWriteIsCaughtAfterAPowerLoss(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := 0; round < 100; round++ {
		disk := memdisk.New(memdisk.Options{})
		l := openLog(t, disk, testConfig(), OpenOptions{})
		want := appendMany(t, l, 20)
		flushAll(t, l, disk)
		bases := l.SegmentBaseOffsets()
		active := testDir + "/" + segmentFileName(bases[len(bases)-1], logSuffix)
		targets := []string{active, testDir + "/" + segmentFileName(bases[0], logSuffix), testDir + "/" + segmentFileName(bases[0], indexSuffix)}
		to := targets[r.IntN(len(targets))]
		size, _ := disk.DurableSize(to)
		if size == 0 {
			continue
		}
		at := r.Int64N(size)
		if err := disk.MisdirectNextWrite(active, to, at); err != nil {
			t.Fatal(err)
		}
		for k, v := range appendMany(t, l, 5) { // order-independent: fills a map
			want[k] = v
		}
		flushAll(t, l, disk)
		end := l.LogEndOffset()
		disk.Crash(r, memdisk.CrashLoseAll)
		reopened, err := Open(disk, testDir, testConfig(), OpenOptions{RecoveryPoint: end})
		if err != nil {
			continue // refusing to open is one way to catch it
		}
		t.Run(fmt.Sprintf("round %d to %s at %d", round, to, at), func(t *testing.T) {
			readEveryOffset(t, reopened, want, reopened.LogStartOffset(), reopened.LogEndOffset())
		})
	}
}

// TestCorruptSyncedBatchIsRefusedByAFollower: a bit flipped in a synced
// batch of one replica is served by its log as it is (the log reads
// headers only, as Kafka's: zero copy), and a follower's append refuses
// it by its CRC: the follower's log stays healthy and takes nothing, so
// the corruption never spreads as good data.
func TestCorruptSyncedBatchIsRefusedByAFollower(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	leader := openLog(t, disk, testConfig(), OpenOptions{})
	appendMany(t, leader, 10)
	flushAll(t, leader, disk)
	path := testDir + "/" + segmentFileName(0, logSuffix)
	size, _ := disk.DurableSize(path)
	if err := disk.FlipBit(path, size-5, 3); err != nil { // a record's bytes: the CRC covers them
		t.Fatal(err)
	}
	res, err := leader.Read(0, 1<<20, leader.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := CopyRegions(res.Regions)
	if err != nil {
		t.Fatal(err)
	}
	followerDisk := memdisk.New(memdisk.Options{})
	follower := openLog(t, followerDisk, testConfig(), OpenOptions{})
	_, err = follower.AppendAsFollower(data, 0)
	if !isErr(err, ErrInvalidBatch) {
		t.Fatalf("a follower appended a batch whose CRC fails: %v", err)
	}
	if follower.Err() != nil || follower.LogEndOffset() != 0 {
		t.Fatalf("the follower's log after refusing: err %v, LEO %d; want healthy and empty", follower.Err(), follower.LogEndOffset())
	}
}
