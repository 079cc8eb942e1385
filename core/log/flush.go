package log

import "path"

// flushState is the log's side of Kafka's flush policy.
type flushState struct {
	// unflushedMessages counts records appended since the last flush was
	// issued (log.flush.interval.messages).
	unflushedMessages int64
	// lastFlushMs is when the last time-based flush was issued
	// (log.flush.interval.ms).
	lastFlushMs int64
	// dirDirty is set when a segment file was created or removed since the
	// last flush issued a SyncDir.
	dirDirty bool
	// parentDirty is set until a flush has synced the parent directory once,
	// which makes the log directory's own entry durable (Open may have just
	// created it).
	parentDirty bool
	// truncations counts truncations: a flush issued before one must not
	// move the recovery point, because bytes below its target were
	// rewritten after its Syncs were issued.
	truncations uint64
	// onRecoveryPoint, if set, hears every advance of the recovery point.
	onRecoveryPoint func(recoveryPoint int64)
}

// SetRecoveryPointListener registers fn to run (on the event loop) each time
// the recovery point advances, e.g. so that a partition configured with
// flush.messages=1 answers acks=all only once records are durable.
func (l *Log) SetRecoveryPointListener(fn func(recoveryPoint int64)) {
	l.flush.onRecoveryPoint = fn
}

// Flush makes every batch below upToOffset (capped at the LEO) durable: it
// issues Sync on each segment file holding data at or above the recovery
// point, SyncDir if segment files were created or removed, and waits for the
// leader-epoch-checkpoint. It returns at once; when every completion has
// arrived the recovery point advances and done (optional) runs, possibly
// before Flush returns when there is nothing to wait for. Flushing never
// blocks appends. A failed Sync fails the log (see package comment).
func (l *Log) Flush(upToOffset int64, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	if l.failed != nil {
		done(l.failed)
		return
	}
	upTo := min(upToOffset, l.LogEndOffset())
	truncations := l.flush.truncations
	pending, firstErr := 1, error(nil)
	complete := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
		pending--
		if pending > 0 {
			return
		}
		l.flushCompleted(upTo, truncations, firstErr, done)
	}
	for _, s := range l.segments {
		if (s.nextOffset <= l.recoveryPoint && !s.truncated) || s.baseOffset >= upTo {
			continue
		}
		s.truncated = false
		for _, f := range s.files() {
			pending++
			f.Sync(complete)
		}
	}
	if l.flush.dirDirty {
		l.flush.dirDirty = false
		pending++
		l.disk.SyncDir(l.dir, complete)
	}
	if l.flush.parentDirty {
		l.flush.parentDirty = false
		pending++
		l.disk.SyncDir(path.Dir(l.dir), complete)
	}
	pending++
	l.persistEpochs(complete)
	complete(nil)
}

// flushCompleted advances the recovery point once a flush's Syncs are done.
func (l *Log) flushCompleted(upTo int64, truncations uint64, err error, done func(error)) {
	if err != nil {
		done(l.fail(err))
		return
	}
	if l.failed != nil {
		done(l.failed)
		return
	}
	if truncations == l.flush.truncations && upTo > l.recoveryPoint {
		l.recoveryPoint = upTo
		if l.flush.onRecoveryPoint != nil {
			l.flush.onRecoveryPoint(upTo)
		}
	}
	done(nil)
}

// maybeFlushByMessages applies log.flush.interval.messages after an append.
func (l *Log) maybeFlushByMessages(records int64) {
	l.flush.unflushedMessages += records
	if l.flush.unflushedMessages >= l.cfg.FlushIntervalMessages {
		l.flush.unflushedMessages = 0
		l.Flush(l.LogEndOffset(), nil)
	}
}

// MaybeFlushByTime applies log.flush.interval.ms: the owner calls it
// periodically (Kafka's log.flush.scheduler.interval.ms) with the wall clock.
func (l *Log) MaybeFlushByTime(nowMs int64) {
	if l.failed != nil || l.LogEndOffset() <= l.recoveryPoint {
		return
	}
	if nowMs-l.flush.lastFlushMs >= l.cfg.FlushIntervalMs {
		l.flush.lastFlushMs = nowMs
		l.flush.unflushedMessages = 0
		l.Flush(l.LogEndOffset(), nil)
	}
}
