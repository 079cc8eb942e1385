package log

import (
	"math/rand/v2"
	"testing"

	"strand/sim/memdisk"
)

func TestFlushIntervalMessages(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	cfg.FlushIntervalMessages = 1
	l := openLog(t, disk, cfg, OpenOptions{})
	var heard []int64
	l.SetRecoveryPointListener(func(rp int64) { heard = append(heard, rp) })
	var want []appended
	for i := 0; i < 5; i++ {
		want = append(want, appendLeader(t, l, 2, 100, 0))
		if l.RecoveryPoint() == l.LogEndOffset() {
			t.Fatal("the recovery point advanced before the Sync completed")
		}
		for disk.RunPending() > 0 {
		}
		if l.RecoveryPoint() != l.LogEndOffset() {
			t.Fatalf("flush.messages=1: recovery point %d, LEO %d", l.RecoveryPoint(), l.LogEndOffset())
		}
	}
	if len(heard) != 5 || heard[4] != 10 {
		t.Fatalf("listener heard %v", heard)
	}
	// Every acknowledged (synced) batch survives a power loss.
	disk.Crash(rand.New(rand.NewPCG(1, 1)), memdisk.CrashLoseAll)
	l = openLog(t, disk, cfg, OpenOptions{RecoveryPoint: 10})
	if n := checkPrefixOf(t, l, want); n != 5 {
		t.Fatalf("kept %d of 5 synced batches", n)
	}
}

func TestDefaultPolicyFlushesOnlyOnRoll(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	appendLeader(t, l, 2, 100, 0)
	l.MaybeFlushByTime(1 << 40)
	for disk.RunPending() > 0 {
	}
	if l.RecoveryPoint() != 0 {
		t.Fatalf("the default policy flushed: recovery point %d", l.RecoveryPoint())
	}
	for l.SegmentCount() < 2 {
		appendLeader(t, l, 2, 100, 0)
	}
	for disk.RunPending() > 0 {
	}
	if rp := l.RecoveryPoint(); rp != l.SegmentBaseOffsets()[1] {
		t.Fatalf("after a roll the recovery point is %d, want the new segment's base %d", rp, l.SegmentBaseOffsets()[1])
	}
}

func TestFlushIntervalMs(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	cfg := testConfig()
	cfg.FlushIntervalMs = 1000
	l := openLog(t, disk, cfg, OpenOptions{NowMs: 5000})
	appendLeader(t, l, 2, 100, 0)
	l.MaybeFlushByTime(5999)
	for disk.RunPending() > 0 {
	}
	if l.RecoveryPoint() != 0 {
		t.Fatal("flushed before flush.ms passed")
	}
	l.MaybeFlushByTime(6000)
	for disk.RunPending() > 0 {
	}
	if l.RecoveryPoint() != 2 {
		t.Fatalf("flush.ms: recovery point %d, want 2", l.RecoveryPoint())
	}
}

// Appends go on while a Sync is outstanding: fsync never blocks them.
func TestAppendsProceedDuringFlush(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	l := openLog(t, disk, testConfig(), OpenOptions{})
	appendLeader(t, l, 2, 100, 0)
	l.Flush(2, nil)
	appendLeader(t, l, 2, 100, 0)
	if l.LogEndOffset() != 4 || l.RecoveryPoint() != 0 {
		t.Fatalf("LEO %d, recovery point %d", l.LogEndOffset(), l.RecoveryPoint())
	}
	for disk.RunPending() > 0 {
	}
	if l.RecoveryPoint() != 2 {
		t.Fatalf("recovery point %d, want the flushed 2", l.RecoveryPoint())
	}
}
