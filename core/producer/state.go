package producer

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/batch"
)

// BatchMetadata describes one appended batch of a producer, in Kafka's
// BatchMetadata terms: the last sequence and offset, and the offset delta
// from which the first ones follow.
type BatchMetadata struct {
	LastSequence int32
	LastOffset   int64
	// OffsetDelta is LastOffset - FirstOffset, which for a batch as
	// produced is also the sequence span.
	OffsetDelta int32
	// TimestampMs is the batch's MaxTimestamp as stored in the log.
	TimestampMs int64
}

// FirstSequence is the sequence of the batch's first record.
func (b BatchMetadata) FirstSequence() int32 { return firstSequence(b.LastSequence, b.OffsetDelta) }

// FirstOffset is the offset of the batch's first record.
func (b BatchMetadata) FirstOffset() int64 { return b.LastOffset - int64(b.OffsetDelta) }

// Entry is what a partition knows of one producer id.
type Entry struct {
	ProducerID int64
	Epoch      int16
	// Batches are the latest batches of this epoch, oldest first, at most
	// BatchesRetained. Never empty for entries Strand makes; a snapshot
	// written by Kafka for a transactional producer may hold none.
	Batches []BatchMetadata
	// LastTimestampMs is the timestamp of the producer's latest batch: the
	// producer expires ExpirationMs after it.
	LastTimestampMs int64
}

// lastSequence is the sequence the next batch must follow, -1 without batches.
func (e *Entry) lastSequence() int32 {
	if len(e.Batches) == 0 {
		return -1
	}
	return e.Batches[len(e.Batches)-1].LastSequence
}

// clone returns a deep copy, so that callers never alias the State's slices.
func (e *Entry) clone() Entry {
	c := *e
	c.Batches = append([]BatchMetadata(nil), e.Batches...)
	return c
}

// VerdictKind is Check's decision.
type VerdictKind uint8

const (
	// Append: append the batch, then call Update.
	Append VerdictKind = iota + 1
	// Duplicate: the batch repeats one already in the log. Append nothing
	// and answer NONE with the original batch's offsets (Verdict.Original),
	// as Kafka does: it uses DUPLICATE_SEQUENCE_NUMBER only internally.
	// With acks=all, wait for the high watermark to pass
	// Original.LastOffset, as for a fresh append.
	Duplicate
	// NotIdempotent: the batch has no producer id; append it, and Update
	// only advances MapEndOffset.
	NotIdempotent
)

func (k VerdictKind) String() string {
	switch k {
	case Append:
		return "Append"
	case Duplicate:
		return "Duplicate"
	case NotIdempotent:
		return "NotIdempotent"
	}
	return fmt.Sprintf("VerdictKind(%d)", uint8(k))
}

// Verdict is Check's answer for a batch it accepts.
type Verdict struct {
	Kind VerdictKind
	// Original is the batch this one repeats, for Duplicate.
	Original BatchMetadata
}

// State is one partition replica's producer state. It is pure: it runs on the
// event loop, and its only inputs are batch headers, offsets and nowMs.
type State struct {
	cfg       Config
	producers map[int64]*Entry
	// mapEndOffset is the offset after the last batch applied: the log end
	// offset the state describes.
	mapEndOffset int64
}

// NewState returns an empty state describing a log that ends at
// mapEndOffset. cfg must be valid (Config.Validate).
func NewState(cfg Config, mapEndOffset int64) *State {
	if err := cfg.Validate(); err != nil {
		panic(err) // the caller validated its configuration
	}
	return &State{cfg: cfg, producers: map[int64]*Entry{}, mapEndOffset: mapEndOffset}
}

// Config is the state's configuration.
func (s *State) Config() Config { return s.cfg }

// MapEndOffset is the offset after the last batch applied: the state
// describes the log below it.
func (s *State) MapEndOffset() int64 { return s.mapEndOffset }

// ProducerCount is the number of producer ids kept.
func (s *State) ProducerCount() int { return len(s.producers) }

// Entry returns a copy of the entry of producerID.
func (s *State) Entry(producerID int64) (Entry, bool) {
	e, ok := s.producers[producerID]
	if !ok {
		return Entry{}, false
	}
	return e.clone(), true
}

// Entries returns copies of every entry, sorted by producer id.
func (s *State) Entries() []Entry {
	ids := s.sortedIDs()
	entries := make([]Entry, len(ids))
	for i, id := range ids {
		entries[i] = s.producers[id].clone()
	}
	return entries
}

func (s *State) sortedIDs() []int64 {
	ids := make([]int64, 0, len(s.producers))
	for id := range s.producers { // order-independent: sorted below
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Check decides what a leader does with a batch a client produced, by
// Kafka's rules (UnifiedLog.analyzeAndValidateProducerState, then
// ProducerAppendInfo's checkProducerEpoch and checkSequence), in order:
//   - no producer id: NotIdempotent;
//   - the producer's current epoch and the exact sequence range of one of
//     its retained batches: Duplicate with that batch's offsets;
//   - an unknown producer: Append whatever the sequence (since KIP-360 the
//     broker no longer answers UNKNOWN_PRODUCER_ID: the producer's state may
//     have expired or been truncated away with the log), unless the
//     partition is full (ErrTooManyProducers);
//   - an epoch below the current one: INVALID_PRODUCER_EPOCH;
//   - a newer epoch: Append if the sequence is 0, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER;
//   - the same epoch: Append if the base sequence follows the last one
//     (0 follows math.MaxInt32), else OUT_OF_ORDER_SEQUENCE_NUMBER.
//
// Check changes nothing. The broker must call Update for an Append before it
// checks the next batch of the same partition. h is the header as produced.
func (s *State) Check(h batch.Header) (Verdict, error) {
	if h.ProducerID < 0 {
		return Verdict{Kind: NotIdempotent}, nil
	}
	e, known := s.producers[h.ProducerID]
	if !known {
		if len(s.producers) >= s.cfg.ProducersMax {
			return Verdict{}, &Error{h.ProducerID, CodeTooManyProducers,
				fmt.Sprintf("%v: the partition keeps %d already, the maximum", ErrTooManyProducers, len(s.producers)), ErrTooManyProducers}
		}
		return Verdict{Kind: Append}, nil
	}
	if original, ok := e.retained(h); ok {
		if s.cfg.DedupOff {
			return Verdict{Kind: Append}, nil // planted bug: the retry is appended again
		}
		return Verdict{Kind: Duplicate, Original: original}, nil
	}
	switch {
	case h.ProducerEpoch < e.Epoch:
		return Verdict{}, &Error{h.ProducerID, kerr.InvalidProducerEpoch,
			fmt.Sprintf("epoch %d is older than the current epoch %d", h.ProducerEpoch, e.Epoch), nil}
	case h.ProducerEpoch > e.Epoch:
		if h.BaseSequence != 0 {
			return Verdict{}, &Error{h.ProducerID, kerr.OutOfOrderSequenceNumber,
				fmt.Sprintf("new epoch %d (current %d) must start at sequence 0, not %d", h.ProducerEpoch, e.Epoch, h.BaseSequence), nil}
		}
	case !inSequence(e.lastSequence(), h.BaseSequence):
		return Verdict{}, &Error{h.ProducerID, kerr.OutOfOrderSequenceNumber,
			fmt.Sprintf("base sequence %d does not follow the last sequence %d of epoch %d", h.BaseSequence, e.lastSequence(), e.Epoch), nil}
	}
	return Verdict{Kind: Append}, nil
}

// retained finds the retained batch of the current epoch with h's exact
// sequence range (ProducerStateEntry.findDuplicateBatch).
func (e *Entry) retained(h batch.Header) (BatchMetadata, bool) {
	if h.ProducerEpoch != e.Epoch {
		return BatchMetadata{}, false
	}
	last := lastSequence(h.BaseSequence, h.LastOffsetDelta)
	for _, b := range e.Batches {
		if b.FirstSequence() == h.BaseSequence && b.LastSequence == last {
			return b, true
		}
	}
	return BatchMetadata{}, false
}

// Update records a batch the leader appended after Check answered Append or
// NotIdempotent. h is the header as produced (its BaseOffset is 0) except
// that MaxTimestamp must be the value the log holds (after
// batch.SetMaxTimestamp); baseOffset is the offset the log assigned.
// Batches must come in offset order.
func (s *State) Update(h batch.Header, baseOffset int64) error {
	if baseOffset < s.mapEndOffset {
		return fmt.Errorf("producer state: update with a batch at offset %d, below the map end offset %d", baseOffset, s.mapEndOffset)
	}
	s.apply(h, baseOffset)
	return nil
}

// UpdateFromReplicated records a batch a follower copied from its leader, or
// that recovery read from the log, without any check (the leader checked
// it): h is the header as stored, BaseOffset included. Batches must come in
// offset order. A new producer in a full partition evicts the producer with
// the oldest timestamp, so that the bound holds on every replica.
func (s *State) UpdateFromReplicated(h batch.Header) error {
	return s.Update(h, h.BaseOffset)
}

// apply records a batch at baseOffset, with Kafka's ProducerStateEntry.addBatch:
// a new epoch clears the retained batches; the oldest of BatchesRetained+1
// goes.
func (s *State) apply(h batch.Header, baseOffset int64) {
	lastOffset := baseOffset + int64(h.LastOffsetDelta)
	s.mapEndOffset = max(s.mapEndOffset, lastOffset+1)
	if h.ProducerID < 0 || h.IsControl() {
		return
	}
	e, known := s.producers[h.ProducerID]
	if !known {
		if len(s.producers) >= s.cfg.ProducersMax {
			s.evictOldest()
		}
		e = &Entry{ProducerID: h.ProducerID, Epoch: h.ProducerEpoch}
		s.producers[h.ProducerID] = e
	}
	if e.Epoch != h.ProducerEpoch {
		e.Epoch, e.Batches = h.ProducerEpoch, e.Batches[:0]
	}
	if len(e.Batches) == BatchesRetained {
		e.Batches = append(e.Batches[:0], e.Batches[1:]...)
	}
	e.Batches = append(e.Batches, BatchMetadata{
		LastSequence: lastSequence(h.BaseSequence, h.LastOffsetDelta),
		LastOffset:   lastOffset,
		OffsetDelta:  h.LastOffsetDelta,
		TimestampMs:  h.MaxTimestamp,
	})
	e.LastTimestampMs = h.MaxTimestamp
	if len(s.producers) > s.cfg.ProducersMax || len(e.Batches) > BatchesRetained {
		panic(fmt.Sprintf("producer state: %d producers (max %d), %d batches retained", len(s.producers), s.cfg.ProducersMax, len(e.Batches)))
	}
}

// evictOldest forgets the producer with the oldest last timestamp, the
// lowest id among equals, so that every replica evicts the same one.
func (s *State) evictOldest() {
	victim, found := int64(0), false
	for _, id := range s.sortedIDs() {
		if !found || s.producers[id].LastTimestampMs < s.producers[victim].LastTimestampMs {
			victim, found = id, true
		}
	}
	delete(s.producers, victim)
}

// ExpireProducers forgets every producer whose last batch timestamp is at
// least ExpirationMs before nowMs (ProducerStateManager.removeExpiredProducers)
// and returns their ids, sorted. Kafka runs it every
// producer.id.expiration.check.interval.ms (DefaultExpirationCheckIntervalMs).
func (s *State) ExpireProducers(nowMs int64) []int64 {
	var expired []int64
	for _, id := range s.sortedIDs() {
		if nowMs-s.producers[id].LastTimestampMs >= s.cfg.ExpirationMs {
			expired = append(expired, id)
			delete(s.producers, id)
		}
	}
	return expired
}

// reset replaces the state's contents with other's, keeping the config.
func (s *State) reset(other *State) {
	s.producers, s.mapEndOffset = other.producers, other.mapEndOffset
}
