package producer

import (
	"errors"
	"fmt"
	"io"

	"strand/core/batch"
	"strand/core/env"
	"strand/core/log"
)

// BatchReader visits the headers of the log's batches, in offset order,
// from the batch holding fromOffset to the log end. It stops at the first
// error visit returns, and returns it.
type BatchReader func(fromOffset int64, visit func(batch.Header) error) error

// Load rebuilds a partition's producer state, as Kafka's
// ProducerStateManager.truncateAndReload and the log loader do:
//   - snapshots outside [logStartOffset, logEndOffset] are deleted: those
//     above describe truncated batches, those below are incomplete;
//   - the newest remaining snapshot is read; a corrupt one is deleted and
//     the next older one tried; without any, the state starts empty at
//     logStartOffset;
//   - every batch from there to logEndOffset is replayed with
//     UpdateFromReplicated.
//
// Expired producers are not dropped here: the broker's periodic
// ExpireProducers does that, on live and rebuilt state alike.
func Load(cfg Config, snapshots *Snapshots, logStartOffset, logEndOffset int64, read BatchReader) (*State, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logStartOffset < 0 || logEndOffset < logStartOffset {
		return nil, fmt.Errorf("load producer state: log spans [%d, %d]", logStartOffset, logEndOffset)
	}
	err := errors.Join(snapshots.DeleteAbove(logEndOffset, nil), snapshots.DeleteBelow(logStartOffset, nil))
	if err != nil {
		return nil, fmt.Errorf("load producer state: %w", err)
	}
	state, err := loadNewestSnapshot(cfg, snapshots, logStartOffset)
	if err != nil {
		return nil, err
	}
	if err := replay(state, logEndOffset, read); err != nil {
		return nil, err
	}
	return state, nil
}

// loadNewestSnapshot returns the state of the newest snapshot that decodes,
// deleting corrupt ones, or an empty state at logStartOffset.
func loadNewestSnapshot(cfg Config, snapshots *Snapshots, logStartOffset int64) (*State, error) {
	for offsets := snapshots.Offsets(); len(offsets) > 0; offsets = offsets[:len(offsets)-1] {
		offset := offsets[len(offsets)-1]
		entries, err := snapshots.read(offset)
		if err == nil {
			if state, ok := stateFromEntries(cfg, offset, entries); ok {
				return state, nil
			}
		} else if !errors.Is(err, errCorruptSnapshot) && !errors.Is(err, io.EOF) && !errors.Is(err, env.ErrNotExist) {
			return nil, fmt.Errorf("load producer state: %w", err)
		}
		// Corrupt, out of place, or still being written: Kafka deletes a
		// corrupt snapshot too.
		if err := snapshots.deleteWhere(func(o int64) bool { return o == offset }, nil); err != nil {
			return nil, fmt.Errorf("load producer state: %w", err)
		}
	}
	return NewState(cfg, logStartOffset), nil
}

// stateFromEntries builds the state a snapshot at offset describes. It
// refuses a snapshot with a batch at or beyond its offset, which Take never
// writes. A snapshot holding more producers than the bound (lowered since)
// loses the oldest, as replication would.
func stateFromEntries(cfg Config, offset int64, entries []Entry) (*State, bool) {
	state := NewState(cfg, offset)
	for _, e := range entries {
		if len(e.Batches) > 0 && e.Batches[len(e.Batches)-1].LastOffset >= offset {
			return nil, false
		}
		entry := e.clone()
		state.producers[e.ProducerID] = &entry
	}
	for len(state.producers) > cfg.ProducersMax {
		state.evictOldest()
	}
	return state, true
}

// replay applies every batch from state's map end offset to logEndOffset.
// A batch that ends at or below the map end offset (the one holding a log
// start offset inside a batch) is skipped.
func replay(state *State, logEndOffset int64, read BatchReader) error {
	if state.mapEndOffset < logEndOffset {
		err := read(state.mapEndOffset, func(h batch.Header) error {
			if h.NextOffset() <= state.mapEndOffset {
				return nil
			}
			if h.BaseOffset >= logEndOffset {
				return fmt.Errorf("batch at %d lies beyond the log end offset %d", h.BaseOffset, logEndOffset)
			}
			state.apply(h, h.BaseOffset)
			return nil
		})
		if err != nil {
			return fmt.Errorf("producer state: replay from %d: %w", state.mapEndOffset, err)
		}
	}
	// The log's end may lie past its last batch (a log truncated fully and
	// restarted there); the state describes the log up to it either way.
	state.mapEndOffset = max(state.mapEndOffset, logEndOffset)
	return nil
}

// CatchUp applies the log's batches from the state's map end offset to
// logEndOffset, read back from the log: what a follower calls after
// log.AppendAsFollower (which owns the fetched bytes once called), instead of
// UpdateFromReplicated per batch. read only reads batch headers (LogReader).
func (s *State) CatchUp(logEndOffset int64, read BatchReader) error {
	if logEndOffset < s.mapEndOffset {
		return fmt.Errorf("producer state: catch up to %d, below the map end offset %d (truncations go through TruncateTo)", logEndOffset, s.mapEndOffset)
	}
	return replay(s, logEndOffset, read)
}

// TruncateTo brings the state in line with a log just truncated, as Kafka's
// truncateAndReload does: call it after log.TruncateTo with the log's new
// log start and end offsets. Snapshots above logEndOffset are deleted; if the
// state went past logEndOffset, it is reloaded from the newest snapshot at or
// below it and the log replayed. On error the state is unchanged.
func (s *State) TruncateTo(logStartOffset, logEndOffset int64, snapshots *Snapshots, read BatchReader) error {
	if logEndOffset == s.mapEndOffset {
		return snapshots.DeleteAbove(logEndOffset, nil)
	}
	reloaded, err := Load(s.cfg, snapshots, logStartOffset, logEndOffset, read)
	if err != nil {
		return fmt.Errorf("truncate producer state to %d: %w", logEndOffset, err)
	}
	s.reset(reloaded)
	return nil
}

// TruncateFullyAndStartAt empties the state and deletes every snapshot, for
// a log truncated fully and restarted at offset (log.TruncateFullyAndStartAt).
func (s *State) TruncateFullyAndStartAt(offset int64, snapshots *Snapshots) error {
	s.reset(NewState(s.cfg, offset))
	if err := snapshots.DeleteAll(nil); err != nil {
		return fmt.Errorf("truncate producer state fully at %d: %w", offset, err)
	}
	return nil
}

// readChunkBytes bounds one log.Read of LogReader: regions only, no bytes are
// copied but the headers.
const readChunkBytes = 64 << 20

// LogReader reads batch headers from l for Load and TruncateTo: it asks
// l.Read for regions and reads only each batch's header from them.
func LogReader(l *log.Log) BatchReader {
	return func(fromOffset int64, visit func(batch.Header) error) error {
		header := make([]byte, batch.HeaderBytes)
		for from := fromOffset; from < l.LogEndOffset(); {
			result, err := l.Read(from, readChunkBytes, l.LogEndOffset(), true)
			if err != nil {
				return err
			}
			if len(result.Regions) == 0 {
				return nil
			}
			for _, region := range result.Regions {
				if err := visitRegion(region, header, visit); err != nil {
					return err
				}
			}
			from = result.NextOffset
		}
		return nil
	}
}

// visitRegion visits the headers of the whole batches in region.
func visitRegion(region log.Region, header []byte, visit func(batch.Header) error) error {
	for position := region.Position; position < region.Position+region.Bytes; {
		if _, err := region.File.ReadAt(header, position); err != nil {
			return fmt.Errorf("read batch header of %s at %d: %w", region.File.Path(), position, err)
		}
		h, err := batch.ParseHeader(header)
		if err != nil {
			return err
		}
		if h.Length < 0 || position+h.TotalBytes() > region.Position+region.Bytes {
			return fmt.Errorf("batch at %d of %s overruns its region", position, region.File.Path())
		}
		if err := visit(h); err != nil {
			return err
		}
		position += h.TotalBytes()
	}
	return nil
}
