package log

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"strand/core/env"
	"strand/sim/memdisk"
)

// mkdirFailingDisk fails MkdirAll of paths containing match with err, as a
// full or failing device fails creating a partition's directory.
type mkdirFailingDisk struct {
	*memdisk.Disk
	match string
	err   error
}

func (d mkdirFailingDisk) MkdirAll(dir string) error {
	if strings.Contains(dir, d.match) {
		return fmt.Errorf("mkdirall %s: %w", dir, d.err)
	}
	return d.Disk.MkdirAll(dir)
}

// TestCreateLogStorageFailureTakesTheDirOffline: a log that cannot be
// created for a storage error (ENOSPC, EIO) takes its directory offline,
// as an IOException in Kafka's getOrCreateLog does: the directory's other
// logs fail, it logs one ERROR line, and it refuses later logs. Another
// error (here a path that is not a directory) leaves it online. Were the
// directory to stay online after a storage error, the broker would stay
// unfenced and go on leading the partition it could not create.
func TestCreateLogStorageFailureTakesTheDirOffline(t *testing.T) {
	for _, cause := range []error{env.ErrNoSpace, env.ErrIO} {
		t.Run(cause.Error(), func(t *testing.T) {
			disk := memdisk.New(memdisk.Options{})
			var got lines
			m := openManagerWithLogs(t, disk, 1, &got)
			m.disk = mkdirFailingDisk{Disk: disk, match: "fresh-", err: cause}
			got = nil
			_, err := m.CreateLog(TopicPartition{Topic: "fresh", Partition: 0}, 0)
			if !errors.Is(err, cause) {
				t.Fatalf("CreateLog: %v, want %v", err, cause)
			}
			if !errors.Is(m.Err(), env.ErrIO) || !errors.Is(m.Err(), cause) {
				t.Fatalf("directory error %v, want it offline for %v", m.Err(), cause)
			}
			if l, _ := m.Log(TopicPartition{Topic: "t", Partition: 0}); !errors.Is(l.Err(), env.ErrIO) {
				t.Errorf("the directory's other log: %v, want it offline", l.Err())
			}
			if len(got) != 1 {
				t.Errorf("logged %d lines, want the directory's one: %+v", len(got), got)
			}
			m.disk = disk
			if _, err := m.CreateLog(TopicPartition{Topic: "later", Partition: 0}, 0); !errors.Is(err, env.ErrIO) {
				t.Errorf("CreateLog in the offline directory: %v, want a refusal", err)
			}
		})
	}
	t.Run("not a storage error", func(t *testing.T) {
		disk := memdisk.New(memdisk.Options{})
		var got lines
		m := openManagerWithLogs(t, disk, 1, &got)
		if err := disk.MkdirAll("data"); err != nil {
			t.Fatal(err)
		}
		f, err := disk.Open("data/fresh-0", env.OpenOptions{Create: true}) // a file where the log's directory goes
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if _, err := m.CreateLog(TopicPartition{Topic: "fresh", Partition: 0}, 0); err == nil {
			t.Fatal("CreateLog over a file succeeded")
		}
		if m.Err() != nil {
			t.Errorf("a non-storage error took the directory offline: %v", m.Err())
		}
	})
}
