package log

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"strand/core/env"
	"strand/core/log/checkpoint"
)

// The per-directory checkpoint files, named as Kafka names them.
const (
	RecoveryPointCheckpointName  = "recovery-point-offset-checkpoint"
	ReplicationCheckpointName    = "replication-offset-checkpoint"
	LogStartOffsetCheckpointName = "log-start-offset-checkpoint"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// DirName is the partition's log directory name, <topic>-<partition>.
func (tp TopicPartition) DirName() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// ParseDirName parses <topic>-<partition> as Kafka does: the topic may
// contain '-', the partition follows the last one.
func ParseDirName(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	partition, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || partition < 0 || strconv.FormatInt(partition, 10) != name[i+1:] {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(partition)}, true
}

// Manager owns one log directory: the partition logs in it and its three
// checkpoint files. Like Log it runs on the event loop.
type Manager struct {
	disk      env.Disk
	dir       string
	configFor func(topic string) Config
	logs      map[TopicPartition]*Log
	// scratch is the read buffer its logs share (OpenOptions.Scratch):
	// they are called one at a time, on the node's loop.
	scratch []byte
	// highWatermarks is replication-offset-checkpoint as found at open.
	highWatermarks map[TopicPartition]int64

	recoveryPoints *checkpoint.Writer
	// recoveryPointTrust is, per partition, the highest recovery point that
	// recovery-point-offset-checkpoint on disk may hold: the file's content
	// at open, raised by every write submitted, set to the last write's
	// values once that write is durable with none submitted after it. A
	// log refuses appends below it (Log.checkTrustedAppend).
	recoveryPointTrust map[TopicPartition]int64
	// recoveryPointWrites numbers the writes of recoveryPoints.
	recoveryPointWrites uint64
	replication         *checkpoint.Writer
	logStartOffsets     *checkpoint.Writer
	cleaner             managerCleaner
	// failed is set once the directory went offline (Fail): a sync of the
	// directory itself, a checkpoint write or a log's deletion failed, or
	// the directory could not be opened (FailedManager).
	failed error
	// logsUnknown is set when the directory went offline before its logs
	// were read (FailedManager): it may hold any partition's log.
	logsUnknown bool
	// logger receives the operator log lines (SetLogger).
	logger env.Log
	// recoveryPointsUnreadable is why recovery-point-offset-checkpoint did
	// not parse at open, when it did not: every log was then recovered
	// from its first segment.
	recoveryPointsUnreadable error
}

// RecoveryPointsUnreadable is why the directory's recovery-point
// checkpoint did not parse when it was opened, or nil: the owner logs it.
func (m *Manager) RecoveryPointsUnreadable() error { return m.recoveryPointsUnreadable }

// SetLogger directs the directory's operator log lines to logger.
func (m *Manager) SetLogger(logger env.Log) { m.logger = logger }

// Err returns the error that took the log directory offline, if any.
func (m *Manager) Err() error { return m.failed }

// LogsUnknown reports whether the directory went offline before its logs
// were read (FailedManager): a partition's log may be there though Log
// does not find it, so a log created elsewhere could stand in for it
// with none of its records. Kafka likewise refuses to create a log that
// is not new while a directory is offline.
func (m *Manager) LogsUnknown() bool { return m.logsUnknown }

// Fail takes the log directory offline, as Kafka's LogDirFailureChannel
// does on an IOException in it: every log in it fails (requests on them
// get KAFKA_STORAGE_ERROR, what waits on them is answered so through
// their failure listeners, and the broker asks to be fenced), CreateLog
// refuses new ones, no checkpoint is written to it any more, and it stays
// so until the process restarts. Writes of the directory's own files
// (checkpoints, directory syncs) call it on failure: a checkpoint that
// cannot be written leaves the directory's durable state behind its logs
// with nobody told (a failed Sync cannot be retried, env.ErrIO), and the
// clean shutdown that needs it would fail anyway. It logs one ERROR line
// for the directory, with the cause and the number of logs it took
// offline (those not failed already), and none per log. It reports
// whether the directory was online before.
func (m *Manager) Fail(cause error) bool {
	if m.failed != nil {
		return false
	}
	m.failed = fmt.Errorf("log directory %s is offline: %w: %w", shownDir(m.dir), env.ErrIO, cause)
	tps := m.Partitions()
	online := 0
	for _, tp := range tps {
		if m.logs[tp].Err() == nil {
			online++
		}
	}
	m.logger.Error("storage failure: the log directory is offline until the broker restarts; requests on its partitions get KAFKA_STORAGE_ERROR",
		slog.Int("logs_taken_offline", online), slog.Int("logs", len(tps)), slog.Any("err", cause))
	for _, tp := range tps {
		_ = m.logs[tp].takeOffline(m.failed, false) // the line above speaks for every log
	}
	return true
}

// shownDir is dir as errors name it: "." for the disk's root, where the
// broker keeps each log directory's files.
func shownDir(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// refuseOffline answers done with the directory's failure and reports
// true once it is offline: nothing more is written to it, as Kafka
// checkpoints only its live log directories. In particular the HW and
// log-start-offset checkpoints a clean shutdown writes then fail, so no
// clean-shutdown marker claims that its unflushed logs are durable.
func (m *Manager) refuseOffline(done func(error)) bool {
	if m.failed == nil {
		return false
	}
	if done != nil {
		done(m.failed)
	}
	return true
}

// failOnError wraps the done of a write to one of the directory's files:
// a failure takes the directory offline (Fail). ErrClosed is not a storage
// failure: the writer was abandoned.
func (m *Manager) failOnError(done func(error)) func(error) {
	return func(err error) {
		if err != nil && !errors.Is(err, env.ErrClosed) {
			m.Fail(err)
		}
		if done != nil {
			done(err)
		}
	}
}

// OpenManager opens every <topic>-<partition> log found in dir with the
// recovery points and log start offsets from its checkpoints, after removing
// leftovers of interrupted checkpoint writes. configFor gives each topic's
// configuration.
func OpenManager(disk env.Disk, dir string, configFor func(topic string) Config, nowMs int64) (*Manager, error) {
	if err := disk.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("open log directory %s: %w", shownDir(dir), err)
	}
	if err := checkpoint.RemoveTemps(disk, dir); err != nil {
		return nil, fmt.Errorf("open log directory %s: %w", shownDir(dir), err)
	}
	m := newManager(disk, dir, configFor)
	checkpoints := map[string]map[TopicPartition]int64{}
	for _, name := range []string{RecoveryPointCheckpointName, ReplicationCheckpointName, LogStartOffsetCheckpointName, CleanerOffsetCheckpointName} {
		offsets, err := readOffsets(disk, joinPath(dir, name))
		if name == RecoveryPointCheckpointName && errors.Is(err, errUnparsableCheckpoint) {
			// As Kafka's LogManager, which resets the recovery points
			// to 0: every log is recovered from its first segment, and
			// nothing is trusted that the lost checkpoint vouched for.
			// A read error still fails the open: a file that could not
			// be read may yet hold higher recovery points, which a
			// later open would trust above appends made meanwhile.
			m.recoveryPointsUnreadable = err
			offsets, err = map[TopicPartition]int64{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("open log directory %s: %w", shownDir(dir), err)
		}
		checkpoints[name] = offsets
	}
	m.highWatermarks = checkpoints[ReplicationCheckpointName]
	m.recoveryPointTrust = checkpoints[RecoveryPointCheckpointName]
	if err := m.openLogs(checkpoints, nowMs); err != nil {
		return nil, errors.Join(err, m.Close())
	}

	// MkdirAll may have created dir: make its entry durable.
	disk.SyncDir(path.Dir(dir), func(err error) {
		if err != nil {
			m.Fail(fmt.Errorf("sync parent of log directory %s: %w", dir, err))
		}
	})
	return m, nil
}

// FailedManager is the Manager of a log directory that could not be opened
// (OpenManager failed with cause): it is offline from the start (Fail, which
// logs its ERROR line to logger), holds no log and refuses new ones. A
// broker with other, healthy, log directories starts on those, as Kafka's
// LogManager does with the directories it could not load.
func FailedManager(disk env.Disk, dir string, configFor func(topic string) Config, logger env.Log, cause error) *Manager {
	m := newManager(disk, dir, configFor)
	m.highWatermarks, m.recoveryPointTrust = map[TopicPartition]int64{}, map[TopicPartition]int64{}
	m.logger, m.logsUnknown = logger, true
	m.Fail(cause)
	return m
}

// newManager is a Manager of dir holding no log yet, its checkpoints not
// read.
func newManager(disk env.Disk, dir string, configFor func(topic string) Config) *Manager {
	return &Manager{
		disk: disk, dir: dir, configFor: configFor, logs: map[TopicPartition]*Log{},
		scratch:         NewScratch(),
		recoveryPoints:  checkpoint.NewWriter(disk, dir, RecoveryPointCheckpointName),
		replication:     checkpoint.NewWriter(disk, dir, ReplicationCheckpointName),
		logStartOffsets: checkpoint.NewWriter(disk, dir, LogStartOffsetCheckpointName),
		cleaner:         managerCleaner{offsets: checkpoint.NewWriter(disk, dir, CleanerOffsetCheckpointName)},
	}
}

func (m *Manager) openLogs(checkpoints map[string]map[TopicPartition]int64, nowMs int64) error {
	names, err := m.disk.List(m.dir)
	if err != nil {
		return fmt.Errorf("list log directory %s: %w", m.dir, err)
	}
	for _, name := range names {
		tp, ok := ParseDirName(name)
		if !ok {
			continue
		}
		l, err := Open(m.disk, joinPath(m.dir, name), m.configFor(tp.Topic), OpenOptions{
			RecoveryPoint:  checkpoints[RecoveryPointCheckpointName][tp],
			LogStartOffset: checkpoints[LogStartOffsetCheckpointName][tp],
			CleanerOffset:  checkpoints[CleanerOffsetCheckpointName][tp],
			NowMs:          nowMs,
			Scratch:        m.scratch,
		})
		if err != nil {
			return err
		}
		m.adopt(tp, l)
	}
	return nil
}

// adopt makes l the log of tp, tied to the recovery-point checkpoint.
func (m *Manager) adopt(tp TopicPartition, l *Log) {
	l.checkpointTrust = func() int64 { return m.recoveryPointTrust[tp] }
	l.checkpointLowered = func() { m.WriteRecoveryPoints(nil) }
	m.logs[tp] = l
	// Recovery cut below the checkpoint, or a deleted log of the same name
	// left its entry there.
	l.lowerCheckpointedRecoveryPoint()
}

// errUnparsableCheckpoint marks a checkpoint that was read but does not
// parse.
var errUnparsableCheckpoint = errors.New("the checkpoint does not parse")

// readOffsets reads a per-directory checkpoint; a missing file is empty.
func readOffsets(disk env.Disk, path string) (map[TopicPartition]int64, error) {
	offsets := map[TopicPartition]int64{}
	data, err := checkpoint.ReadFile(disk, path)
	if errors.Is(err, env.ErrNotExist) {
		return offsets, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := checkpoint.ParseOffsets(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, errUnparsableCheckpoint, err)
	}
	for _, e := range entries {
		offsets[TopicPartition{Topic: e.Topic, Partition: e.Partition}] = e.Offset
	}
	return offsets, nil
}

// Log returns the log of tp, if this directory holds it.
func (m *Manager) Log(tp TopicPartition) (*Log, bool) {
	l, ok := m.logs[tp]
	return l, ok
}

// Partitions lists the partitions in this directory, sorted.
func (m *Manager) Partitions() []TopicPartition {
	tps := make([]TopicPartition, 0, len(m.logs))
	for tp := range m.logs { // order-independent: sorted below
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps
}

// HighWatermark is tp's high watermark from replication-offset-checkpoint as
// found at open, 0 if absent.
func (m *Manager) HighWatermark(tp TopicPartition) int64 { return m.highWatermarks[tp] }

// CreateLog returns tp's log, creating an empty one if there is none. A
// storage failure creating it (env.ErrIO, env.ErrNoSpace) takes the
// directory offline (Fail), as an IOException in Kafka's getOrCreateLog
// does: the broker then asks to be fenced and the partition's leadership
// moves to a replica that could create it, where a broker left unfenced
// would keep leading a partition it cannot host.
func (m *Manager) CreateLog(tp TopicPartition, nowMs int64) (*Log, error) {
	if l, ok := m.logs[tp]; ok {
		return l, nil
	}
	if m.failed != nil {
		return nil, fmt.Errorf("create log %s: %w", tp.DirName(), m.failed)
	}
	l, err := Open(m.disk, joinPath(m.dir, tp.DirName()), m.configFor(tp.Topic), OpenOptions{NowMs: nowMs, Scratch: m.scratch})
	if err != nil {
		err = fmt.Errorf("create log %s: %w", tp.DirName(), err)
		if errors.Is(err, env.ErrIO) || errors.Is(err, env.ErrNoSpace) {
			m.Fail(err)
		}
		return nil, err
	}
	m.adopt(tp, l)
	return l, nil
}
