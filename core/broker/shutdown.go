package broker

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"strand/core/env"
)

// cleanShutdownFile marks, in every log directory, that the last process
// shut down cleanly with that directory's logs durable, and holds its
// broker epoch (Kafka's .kafka_cleanshutdown, KAFKA-15586). The next
// incarnation registers with that PreviousBrokerEpoch, so the controller
// knows it lost nothing and keeps it eligible (KIP-966), only when every
// directory holds the marker with the same epoch: a directory without it
// (swapped, restored from a backup, or the process stopped between two
// directories' markers) may hold less than the broker acknowledged, as
// Kafka reads no epoch when any directory lacks its file.
const cleanShutdownFile = "strand-clean-shutdown"

// CleanShutdownFile is cleanShutdownFile, for the simulator's operator,
// which removes it from a disk whose replicas it repaired.
const CleanShutdownFile = cleanShutdownFile

// cleanShutdownBytesMax bounds what is read from the marker.
const cleanShutdownBytesMax = 32

// BeginShutdown starts a controlled shutdown (Kafka's KIP-631 flow): the
// broker keeps serving while its heartbeats ask to shut down; the controller
// moves every leadership it holds to other ISR members and answers
// ShouldShutdown once it leads nothing. Then done runs, and the caller stops
// the process with Close. A node without the broker role, or not registered
// yet, is done at once.
func (n *Node) BeginShutdown(done func()) { n.meta.beginShutdown(done) }

// beginShutdown is BeginShutdown.
func (mf *metadataFollower) beginShutdown(done func()) {
	if !mf.cfg.Broker.Roles.Broker || mf.brokerEpoch < 0 {
		done()
		return
	}
	mf.shutdownDone = func() {
		mf.shutdownClean = true
		done()
	}
	mf.heartbeat()
}

// AbandonControlledShutdown ends a controlled shutdown that no controller
// can answer (the caller found that no controller quorum can form: the
// whole cluster is stopping) and reports whether one was waiting. The node
// then closes as after a completed one: Close flushes every log and writes
// the clean-shutdown marker, as Kafka's LogManager does whatever became of
// the controlled shutdown, since the marker says only that the logs lost
// nothing. The node's leaderships stay in the metadata for the controller
// to move once a quorum is back.
func (n *Node) AbandonControlledShutdown() bool { return n.meta.abandonControlledShutdown() }

// abandonControlledShutdown is AbandonControlledShutdown.
func (mf *metadataFollower) abandonControlledShutdown() bool {
	done := mf.shutdownDone
	if done == nil {
		return false
	}
	mf.shutdownDone = nil
	done()
	return true
}

// Close releases the node's files: every partition log and the metadata
// log. A voter that leads the metadata quorum first resigns and waits
// (boundedly) for a successor, as KRaft's graceful shutdown does, so the
// controller moves within a round trip instead of a fetch timeout. After a
// completed controlled shutdown it then, as Kafka's LogManager.shutdown
// does, flushes every log, writes each log directory's checkpoints
// (recovery points, which the flush has just raised to every log end
// offset, log start offsets and high watermarks) and then the
// clean-shutdown marker, each step durable before the next; a failed log
// (it cannot be flushed) or an offline log directory (its checkpoints are
// not written) leaves the marker out and done gets the error, so the next
// start registers as unclean. done runs once all of that is over; the node
// must not be used afterwards, and pending timers and callbacks are the
// environment's to drop (the process is going away).
func (n *Node) Close(done func(error)) {
	n.controllerRole.resignQuorum(func() { n.close(done) })
}

// close is Close once the quorum has been handed on.
func (n *Node) close(done func(error)) {
	if !n.meta.shutdownClean {
		done(n.closeFiles())
		return
	}
	n.parts.flushForShutdown(func(flushErr error) {
		n.parts.writeShutdownCheckpoints(func(checkpointErr error) {
			n.writeCleanShutdown(errors.Join(flushErr, checkpointErr), done)
		})
	})
}

// flushForShutdown flushes every log to its end and takes the producer
// snapshots, then runs done with what failed.
func (pm *partitionManager) flushForShutdown(done func(error)) {
	all := joinedCompletions(done)
	for _, p := range pm.sortedPartitions() {
		if err := p.log.Err(); err != nil {
			// A failed log cannot be flushed: its tail may never reach
			// the disk, so no marker may say that every log is durable
			// (Kafka writes none in the offline directory of a failed log).
			all.add()(fmt.Errorf("%s: %w", p.key, err))
		} else {
			p.log.Flush(p.log.LogEndOffset(), all.add())
		}
		if !p.storageFailed() && p.syncProducers() == nil {
			// The next start loads this snapshot instead of replaying the
			// log. It is only an optimisation: a failure is not an
			// unclean shutdown.
			snapshotted := all.add()
			p.snapshots.Take(p.producers, func(error) { snapshotted(nil) })
		}
	}
	all.close()
}

// writeShutdownCheckpoints writes every log directory's checkpoints once
// the final flush is done, then runs done with what failed:
//   - the recovery points, which the flush raised to every log end offset:
//     the next start then verifies no batch it already holds (SPEC.md
//     §3.4), where the periodic checkpoint, seconds old and behind any
//     flush since, made it verify every active segment whole;
//   - the log start offsets, as Kafka's LogManager.shutdown does: a node
//     restarted cleanly (eligible to lead from the ELR) with an older log
//     start would serve records a completed DeleteRecords deleted;
//   - the high watermarks, as Kafka's ReplicaManager.shutdown does: a node
//     restarted with older ones hides committed records from consumers
//     until its followers fetch again.
func (pm *partitionManager) writeShutdownCheckpoints(done func(error)) {
	all := joinedCompletions(done)
	hws := pm.highWatermarksByManager()
	for i, m := range pm.managers {
		m.WriteRecoveryPoints(all.add())
		m.WriteLogStartOffsets(all.add())
		m.WriteHighWatermarks(hws[i], all.add())
	}
	all.close()
}

// completions joins the outcomes of asynchronous operations: done runs
// once, with every error joined, when each callback add handed out has
// run and close has been called.
type completions struct {
	pending int
	err     error
	done    func(error)
}

// joinedCompletions starts a join that ends in done.
func joinedCompletions(done func(error)) *completions {
	return &completions{pending: 1, done: done}
}

// add hands out one more callback to wait for.
func (c *completions) add() func(error) {
	c.pending++
	return c.finish
}

// close says that every callback has been handed out.
func (c *completions) close() { c.finish(nil) }

func (c *completions) finish(err error) {
	c.err = errors.Join(c.err, err)
	if c.pending--; c.pending == 0 {
		c.done(c.err)
	}
}

// writeCleanShutdown writes the marker in every log directory, one after
// the other, once every log is durable, then closes the files.
func (n *Node) writeCleanShutdown(flushErr error, done func(error)) {
	if flushErr != nil {
		done(errors.Join(fmt.Errorf("broker: flush at shutdown: %w", flushErr), n.closeFiles()))
		return
	}
	n.writeCleanShutdownFrom(0, done)
}

// writeCleanShutdownFrom writes the marker in log directory i and those
// after it, each synced with its directory before the next, then closes
// the files.
func (n *Node) writeCleanShutdownFrom(i int, done func(error)) {
	if i == len(n.disks) {
		done(n.closeFiles())
		return
	}
	disk := n.disks[i]
	f, err := disk.Open(cleanShutdownFile, env.OpenOptions{Create: true})
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		err = f.Append([]byte(strconv.FormatInt(n.meta.brokerEpoch, 10)))
	}
	if err != nil {
		if f != nil {
			err = errors.Join(err, f.Close())
		}
		done(errors.Join(fmt.Errorf("broker: write %s in log directory %d: %w", cleanShutdownFile, i, err), n.closeFiles()))
		return
	}
	f.Sync(func(err error) {
		disk.SyncDir(".", func(dirErr error) {
			if err = errors.Join(err, dirErr, f.Close()); err != nil {
				done(errors.Join(fmt.Errorf("broker: sync %s in log directory %d: %w", cleanShutdownFile, i, err), n.closeFiles()))
				return
			}
			n.writeCleanShutdownFrom(i+1, done)
		})
	})
}

// closeFiles closes every log, its producer snapshots, and the controller.
func (n *Node) closeFiles() error {
	var err error
	for _, p := range n.parts.sortedPartitions() {
		p.snapshots.Close()
	}
	for _, m := range n.parts.managers {
		err = errors.Join(err, m.Close())
	}
	n.controllerRole.close()
	if err != nil {
		return fmt.Errorf("broker: close node %d: %w", n.id, err)
	}
	return nil
}

// takeCleanShutdown reads and removes the clean-shutdown markers of every
// log directory: the broker epoch of a previous clean shutdown when every
// directory holds it, or -1. An error is returned only for the first
// directory, which the broker cannot start without; a later one whose
// marker cannot be read or removed makes the restart unclean (the
// directory goes offline when its logs are opened). The removals are made
// durable before the node registers, so a crash later in this incarnation
// is never mistaken for a clean one.
func takeCleanShutdown(disks []env.Disk) (int64, error) {
	previous := int64(-1)
	for i, disk := range disks {
		epoch, err := takeCleanShutdownFrom(disk)
		if err != nil && i == 0 {
			return -1, err
		}
		switch {
		case err != nil || epoch < 0:
			previous = -2 // unclean, whatever the others hold
		case i == 0:
			previous = epoch
		case previous != epoch:
			previous = -2
		}
	}
	return max(previous, -1), nil
}

// takeCleanShutdownFrom reads and removes one directory's marker: the epoch
// it holds, or -1 without one (or with one that cannot be read).
func takeCleanShutdownFrom(disk env.Disk) (int64, error) {
	f, err := disk.Open(cleanShutdownFile, env.OpenOptions{})
	if errors.Is(err, env.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("broker: open %s: %w", cleanShutdownFile, err)
	}
	buf := make([]byte, min(f.Size(), cleanShutdownBytesMax))
	_, readErr := f.ReadAt(buf, 0)
	if err := errors.Join(f.Close(), disk.Remove(cleanShutdownFile)); err != nil {
		return -1, fmt.Errorf("broker: remove %s: %w", cleanShutdownFile, err)
	}
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		return -1, nil // unreadable: treat as unclean
	}
	epoch, err := strconv.ParseInt(strings.TrimSpace(string(buf)), 10, 64)
	if err != nil || epoch < 0 {
		return -1, nil
	}
	return epoch, nil
}
