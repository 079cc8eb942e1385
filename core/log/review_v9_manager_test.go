package log

import (
	"errors"
	"testing"

	"strand/sim/memdisk"
)

// TestOfflineDirectoryWritesNoCheckpoint: once a log directory is offline
// (Fail, here from a failed write of one checkpoint), none of its
// checkpoints is written again, as Kafka checkpoints only live log
// directories, and every write answers the directory's failure. Before,
// the writers that had not failed themselves went on replacing their
// files, so a clean shutdown (which writes the HW and log-start-offset
// checkpoints and writes its marker only if they succeed) succeeded for a
// directory whose failed logs it had not flushed.
func TestOfflineDirectoryWritesNoCheckpoint(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	m, err := OpenManager(disk, "data", func(string) Config { return testConfig() }, 0)
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	l, err := m.CreateLog(tp, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		appendLeader(t, l, 1, 100, 0)
	}
	for disk.RunPending() > 0 {
	}
	cause := errors.New("injected: cleaner-offset-checkpoint sync failed")
	if !m.Fail(cause) {
		t.Fatal("Fail of an online directory reported it already offline")
	}
	if m.Fail(cause) {
		t.Fatal("a second Fail reported the directory online before it")
	}
	if !errors.Is(l.Err(), cause) {
		t.Fatalf("log of the offline directory: Err %v, want the directory's failure", l.Err())
	}

	var errs []error
	collect := func(err error) { errs = append(errs, err) }
	m.WriteHighWatermarks(map[TopicPartition]int64{tp: 3}, collect)
	m.WriteRecoveryPoints(collect)
	m.WriteLogStartOffsets(collect)
	m.WriteCleanerOffsets(collect)
	for disk.RunPending() > 0 {
	}
	if len(errs) != 4 {
		t.Fatalf("%d of 4 checkpoint writes answered", len(errs))
	}
	for i, err := range errs {
		if !errors.Is(err, cause) {
			t.Errorf("checkpoint write %d to the offline directory answered %v, want its failure", i, err)
		}
	}
	names, err := disk.List("data")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		switch name {
		case ReplicationCheckpointName, RecoveryPointCheckpointName, LogStartOffsetCheckpointName, CleanerOffsetCheckpointName:
			t.Errorf("%s written to the offline directory", name)
		}
	}
	if _, err := m.CreateLog(TopicPartition{Topic: "t", Partition: 1}, 0); !errors.Is(err, cause) {
		t.Errorf("CreateLog in the offline directory: %v, want its failure", err)
	}
}
