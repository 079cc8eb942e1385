package log

import (
	"fmt"
	"testing"

	"strand/core/batch"
	"strand/core/log/checkpoint"
	"strand/sim/memdisk"
)

// TestManagerCleanStepWritesCheckpoint cleans the dirty compacted log of a
// directory (not the delete-policy one), writes cleaner-offset-checkpoint in
// Kafka's format, and reopens with the cleaner point it holds.
func TestManagerCleanStepWritesCheckpoint(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	configFor := func(topic string) Config {
		cfg := compactConfig()
		cfg.Compaction.Compact = topic == "compacted"
		return cfg
	}
	m, err := OpenManager(disk, "data", configFor, 1000)
	if err != nil {
		t.Fatal(err)
	}
	compacted := TopicPartition{Topic: "compacted", Partition: 0}
	plain := TopicPartition{Topic: "plain", Partition: 0}
	for _, tp := range []TopicPartition{compacted, plain} {
		l, err := m.CreateLog(tp, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40; i++ {
			appendKeyed(t, l, batch.CodecNone, 1000+int64(i), []string{fmt.Sprintf("k%d", i%3)}, [][]byte{[]byte("some value of a size")})
		}
		if err := l.Roll(2000); err != nil {
			t.Fatal(err)
		}
	}
	leo := func(tp TopicPartition) int64 { l, _ := m.Log(tp); return l.LogEndOffset() }
	status := CleanWorking
	for steps := 0; status != CleanPassDone; steps++ {
		if steps > 1000 {
			t.Fatal("no pass finished in 1000 steps")
		}
		if status, err = m.CleanStep(3000, leo, CleanLimits{StepBytesMax: 500, KeysMax: 10, KeyBytesMax: 100}); err != nil || status == CleanIdle {
			t.Fatalf("CleanStep: %v, %v", status, err)
		}
		disk.RunPending()
	}
	for disk.RunPending() > 0 {
	}
	if status, _ := m.CleanStep(3000, leo, DefaultCleanLimits()); status != CleanIdle {
		t.Fatalf("a clean directory still cleans: %v", status)
	}
	data, err := checkpoint.ReadFile(disk, "data/"+CleanerOffsetCheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("0\n1\ncompacted 0 %d\n", leo(compacted))
	if string(data) != want {
		t.Fatalf("checkpoint %q, want %q", data, want)
	}
	plainLog, _ := m.Log(plain)
	if got := len(readCompacted(t, plainLog)); got != 40 {
		t.Fatalf("the delete-policy log was cleaned: %d records", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = OpenManager(disk, "data", configFor, 4000)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.Log(compacted)
	if l.CleanerPoint() != l.LogEndOffset() || len(readCompacted(t, l)) != 3 {
		t.Fatalf("reopened: cleaner point %d, LEO %d, %d records", l.CleanerPoint(), l.LogEndOffset(), len(readCompacted(t, l)))
	}
}
