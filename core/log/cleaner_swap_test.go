package log

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"strand/core/batch"
	"strand/sim/memdisk"
)

// buildCompactable makes a durable log of several segments in which every
// key was overwritten many times, and returns it with the model.
func buildCompactable(t *testing.T, disk *memdisk.Disk, run func()) (*Log, []compactRecord) {
	l, err := Open(disk, testDir, compactConfig(), OpenOptions{NowMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var model []compactRecord
	for i := 0; i < 60; i++ {
		value := []byte(fmt.Sprintf("value-%d-padding-padding", i))
		if i%11 == 5 {
			value = nil
		}
		model = append(model, appendKeyed(t, l, batch.CodecSnappy, 1000+int64(i), []string{fmt.Sprintf("k%d", i%5)}, [][]byte{value})...)
	}
	if err := l.Roll(2000); err != nil {
		t.Fatal(err)
	}
	done := false
	l.Flush(l.LogEndOffset(), func(err error) {
		if err != nil {
			t.Fatal(err)
		}
		done = true
	})
	for !done {
		run()
	}
	if l.SegmentCount() < 4 {
		t.Fatalf("only %d segments", l.SegmentCount())
	}
	return l, model
}

// TestCleanerCrashAtEverySwapStep crashes, in every mode, after each disk
// completion of a cleaning pass (and before the first), reopens, and checks
// that recovery completed or rolled back the swap: no record invented,
// every key's latest record there, no .cleaned or .swap file left, and a
// pass after reopening still cleans the log.
func TestCleanerCrashAtEverySwapStep(t *testing.T) {
	totalCompletions := -1
	for crashAfter := 0; totalCompletions < 0 || crashAfter <= totalCompletions; crashAfter++ {
		for mode := memdisk.CrashLoseAll; mode <= memdisk.CrashKeepAll; mode++ {
			var queue []func()
			disk := memdisk.New(memdisk.Options{Post: func(fn func()) { queue = append(queue, fn) }})
			runOne := func() {
				fn := queue[0]
				queue = queue[1:]
				fn()
			}
			l, model := buildCompactable(t, disk, runOne)
			queue = nil
			completions, status := 0, CleanWorking
			limits := CleanLimits{StepBytesMax: 200, KeysMax: 100, KeyBytesMax: 1 << 20}
			for status != CleanPassDone && completions < crashAfter {
				var err error
				status, err = l.CleanStep(3000, l.LogEndOffset(), limits)
				if err != nil {
					t.Fatal(err)
				}
				if status == CleanIdle {
					t.Fatal("a dirty log was not cleaned")
				}
				if status == CleanWaiting {
					runOne()
					completions++
				}
			}
			if status == CleanPassDone && totalCompletions < 0 {
				totalCompletions = completions
			}
			recoveryPoint := l.RecoveryPoint()
			disk.Crash(rand.New(rand.NewPCG(uint64(crashAfter), uint64(mode))), mode)
			_ = l.Close()
			queue = nil
			l, err := Open(disk, testDir, compactConfig(), OpenOptions{RecoveryPoint: recoveryPoint, NowMs: 3000})
			if err != nil {
				t.Fatalf("crash (%v) after %d completions: reopen: %v", mode, crashAfter, err)
			}
			checkNoCleanerFiles(t, disk)
			if l.LogEndOffset() != model[len(model)-1].offset+1 {
				t.Fatalf("crash (%v) after %d completions: LEO %d, want %d", mode, crashAfter, l.LogEndOffset(), model[len(model)-1].offset+1)
			}
			checkCompacted(t, l, model, 3000, l.LogEndOffset())
			for status = CleanWorking; status != CleanPassDone; {
				if status, err = l.CleanStep(3000, l.LogEndOffset(), limits); err != nil || status == CleanIdle {
					t.Fatalf("cleaning after recovery: %v, %v", status, err)
				}
				for len(queue) > 0 {
					runOne()
				}
			}
			checkCompacted(t, l, model, 3000, l.CleanerPoint())
			if got := len(readCompacted(t, l)); got > 5+6 {
				t.Fatalf("after a full pass %d records remain of 5 keys", got)
			}
			_ = l.Close()
		}
	}
	if totalCompletions < 6 {
		t.Fatalf("a pass took only %d completions", totalCompletions)
	}
}

// TestTruncationAbortsCleaning truncates a log while its pass has .cleaned
// or .swap files on disk: the pass is dropped, its files deleted, late disk
// completions change nothing, and a crash then leaves the truncated log.
func TestTruncationAbortsCleaning(t *testing.T) {
	for completionsBefore := 0; completionsBefore < 5; completionsBefore++ {
		var queue []func()
		disk := memdisk.New(memdisk.Options{Post: func(fn func()) { queue = append(queue, fn) }})
		runOne := func() {
			fn := queue[0]
			queue = queue[1:]
			fn()
		}
		l, model := buildCompactable(t, disk, runOne)
		queue = nil
		limits := CleanLimits{StepBytesMax: 1 << 20, KeysMax: 100, KeyBytesMax: 1 << 20}
		// The high watermark bounds cleaning; truncation never goes below it.
		cut := model[len(model)/2].offset
		for ran := 0; ; {
			status, err := l.CleanStep(3000, cut, limits)
			if err != nil || status != CleanWaiting {
				t.Fatalf("CleanStep: %v, %v", status, err)
			}
			if ran == completionsBefore {
				break
			}
			runOne()
			ran++
		}
		if err := l.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		if l.Cleaning() {
			t.Fatal("a truncation left the pass running")
		}
		checkNoCleanerFiles(t, disk)
		for len(queue) > 0 {
			runOne()
		}
		checkNoCleanerFiles(t, disk)
		model = model[:len(model)/2]
		checkCompacted(t, l, model, 3000, cut)
		disk.Crash(nil, memdisk.CrashKeepAll)
		_ = l.Close()
		l, err := Open(disk, testDir, compactConfig(), OpenOptions{NowMs: 3000})
		if err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != cut {
			t.Fatalf("after a crash the truncated log ends at %d, want %d", l.LogEndOffset(), cut)
		}
		checkCompacted(t, l, model, 3000, cut)
		_ = l.Close()
	}
}
