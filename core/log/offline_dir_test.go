package log

import (
	"errors"
	"log/slog"
	"testing"

	"strand/core/env"
	"strand/sim/memdisk"
)

// openManagerWithLogs opens a Manager over directory "data" on disk with
// count logs t-0 .. t-(count-1), each holding one batch, every write
// completed, and its operator lines going to got.
func openManagerWithLogs(t *testing.T, disk *memdisk.Disk, count int32, got *lines) *Manager {
	t.Helper()
	m, err := OpenManager(disk, "data", func(string) Config { return testConfig() }, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.SetLogger(env.NewLog(got))
	for i := range count {
		l, err := m.CreateLog(TopicPartition{Topic: "t", Partition: i}, 0)
		if err != nil {
			t.Fatal(err)
		}
		l.SetLogger(env.NewLog(got)) // as the broker does: a log's own lines go to the same place
		appendLeader(t, l, 1, 100, 0)
	}
	for disk.RunPending() > 0 {
	}
	return m
}

// TestFailLogsOneLineForTheDirectory: taking a directory offline logs one
// ERROR line naming the cause and how many logs it took offline, and no
// line per log (an operator with 2,000 partitions in the directory reads
// one line, as Kafka's LogDirFailureChannel logs once per directory).
// Each log still fails, and its failure listener hears it once, without
// a line of its own.
func TestFailLogsOneLineForTheDirectory(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	var got lines
	m := openManagerWithLogs(t, disk, 3, &got)
	failedBefore, _ := m.Log(TopicPartition{Topic: "t", Partition: 2})
	_ = failedBefore.fail(errors.New("segment sync failed")) // already offline: not counted again
	got = nil
	heard := map[int32]int{}
	for _, tp := range m.Partitions() {
		l, _ := m.Log(tp)
		l.SetFailureListener(func(error) { heard[tp.Partition]++ })
	}

	m.Fail(errors.New("injected: recovery-point-offset-checkpoint sync failed"))
	m.Fail(errors.New("a second failure"))

	if len(got) != 1 {
		t.Fatalf("Fail logged %d lines, want 1 for the directory: %+v", len(got), got)
	}
	g := got[0]
	if g.level != slog.LevelError || g.attrs["err"] != "injected: recovery-point-offset-checkpoint sync failed" ||
		g.attrs["logs_taken_offline"] != "2" || g.attrs["logs"] != "3" {
		t.Fatalf("the directory's line is %+v, want ERROR with the cause, logs_taken_offline=2, logs=3", g)
	}
	for _, tp := range m.Partitions() {
		l, _ := m.Log(tp)
		if !errors.Is(l.Err(), env.ErrIO) {
			t.Errorf("%s: Err %v, want a storage failure", tp.DirName(), l.Err())
		}
	}
	if heard[0] != 1 || heard[1] != 1 || heard[2] != 0 {
		t.Fatalf("failure listeners heard %v, want t-0 and t-1 once each and t-2 (failed before) not again", heard)
	}
}

// TestFailureListenerHearsAFailedSync: a log failed by its own failed
// Sync tells its listener once, with the error every later call returns.
func TestFailureListenerHearsAFailedSync(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	var got lines
	m := openManagerWithLogs(t, disk, 1, &got)
	l, _ := m.Log(TopicPartition{Topic: "t", Partition: 0})
	appendLeader(t, l, 1, 100, 0)
	var heard []error
	l.SetFailureListener(func(err error) { heard = append(heard, err) })
	if err := disk.FailNextSync(l.Dir() + "/00000000000000000000.log"); err != nil {
		t.Fatal(err)
	}
	l.Flush(l.LogEndOffset(), nil)
	for disk.RunPending() > 0 {
	}
	if _, err := l.AppendAsLeader(makeBatch(1, 100, 40), 0, 100); err == nil {
		t.Fatal("append to the failed log succeeded")
	}
	if len(heard) != 1 || heard[0] != l.Err() || !errors.Is(heard[0], env.ErrIO) {
		t.Fatalf("listener heard %v, want the log's failure (%v) once", heard, l.Err())
	}
}

// TestDeleteLogFailedSyncTakesTheDirOffline: DeleteLog's own sync of the
// directory failing takes the directory offline like any other failed
// sync of it: the removal may not be durable, so the log may come back at
// the next start, and nothing would tell the broker otherwise: the error
// cannot only reach done, which every caller passes as nil.
func TestDeleteLogFailedSyncTakesTheDirOffline(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	var got lines
	m := openManagerWithLogs(t, disk, 2, &got)
	if err := disk.FailNextSync("data"); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteLog(TopicPartition{Topic: "t", Partition: 0}, nil); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	for disk.RunPending() > 0 {
	}
	if !errors.Is(m.Err(), env.ErrIO) {
		t.Fatalf("after DeleteLog's failed directory sync, the directory's Err is %v, want offline", m.Err())
	}
	kept, _ := m.Log(TopicPartition{Topic: "t", Partition: 1})
	if kept.Err() == nil {
		t.Fatal("the offline directory's other log is still online")
	}
	if _, err := m.CreateLog(TopicPartition{Topic: "t", Partition: 2}, 0); err == nil {
		t.Fatal("CreateLog in the offline directory succeeded")
	}
}

// TestFailedManagerIsOfflineFromTheStart: the Manager of a directory that
// could not be opened holds no log, refuses new ones and every checkpoint
// write, says its logs are unknown, and logs its failure once.
func TestFailedManagerIsOfflineFromTheStart(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	var got lines
	cause := errors.New("open the log directory: garbage checkpoint")
	m := FailedManager(disk, "data", func(string) Config { return testConfig() }, env.NewLog(&got), cause)
	if !errors.Is(m.Err(), cause) || !errors.Is(m.Err(), env.ErrIO) || !m.LogsUnknown() || len(m.Partitions()) != 0 {
		t.Fatalf("Err %v, LogsUnknown %v, %d logs; want offline with the cause, logs unknown, none held", m.Err(), m.LogsUnknown(), len(m.Partitions()))
	}
	if _, err := m.CreateLog(TopicPartition{Topic: "t", Partition: 0}, 0); !errors.Is(err, cause) {
		t.Errorf("CreateLog: %v, want the directory's failure", err)
	}
	var written error
	m.WriteRecoveryPoints(func(err error) { written = err })
	if !errors.Is(written, cause) {
		t.Errorf("WriteRecoveryPoints: %v, want the directory's failure", written)
	}
	if len(got) != 1 || got[0].level != slog.LevelError || got[0].attrs["err"] != cause.Error() {
		t.Fatalf("logged %+v, want one ERROR line with the cause", got)
	}
	if names, _ := disk.List("data"); len(names) != 0 {
		t.Fatalf("a failed Manager wrote %v", names)
	}
	if m2, err := OpenManager(disk, "data", func(string) Config { return testConfig() }, 0); err != nil || m2.LogsUnknown() {
		t.Fatalf("OpenManager: %v; an opened directory's logs are known", err)
	}
}

// TestOfflineDirectoryWritesNoCheckpoint: once a log directory is offline
// (Fail, here from a failed write of one checkpoint), none of its
// checkpoints is written again, as Kafka checkpoints only live log
// directories, and every write answers the directory's failure. Were the
// writers that had not failed themselves to go on replacing their files, a
// clean shutdown (which writes the HW and log-start-offset checkpoints and
// writes its marker only if they succeed) would succeed for a directory
// whose failed logs it had not flushed.
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
