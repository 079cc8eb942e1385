package models

import (
	"fmt"
	"math"
)

// NeverReturnedNs is the return time of an operation that never returned
// (its client timed out or the run ended first): infinity, as Porcupine
// wants for operations whose effect is unknown.
const NeverReturnedNs = math.MaxInt64

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Record is one record as a client saw it: its offset and its value. Values
// are unique per produced record ("p<client>-<seq>"), so a value names the
// produce that sent it.
type Record struct {
	Offset int64
	Value  string
	// LeaderEpoch is the PartitionLeaderEpoch of the batch holding it:
	// the epoch of the leader that appended it.
	LeaderEpoch int32
}

// Produce is one produce request for one partition, as its client saw it.
// Retries of a failed request are separate Produces carrying the same
// values.
type Produce struct {
	// Client numbers the client, from 0 (Porcupine's visualization).
	Client int
	TP     TopicPartition
	// Acks is -1 (all), 0 or 1.
	Acks   int16
	Values []string
	// CallNs is when the request was sent, ReturnNs when its answer came
	// back (NeverReturnedNs if none did), both in virtual nanoseconds.
	CallNs, ReturnNs int64
	// Acked: the answer came back without an error; BaseOffset is then
	// the offset of Values[0], the others following it.
	Acked      bool
	BaseOffset int64
	// Idempotent: the batch carries a producer id and sequence, so a
	// retry of a batch already appended is acknowledged with the first
	// append's offsets, perhaps by a later leader than the one that
	// appended it.
	Idempotent bool
}

// Fetch is one successful consumer fetch of one partition, with records or
// without.
type Fetch struct {
	Client int
	TP     TopicPartition
	// LeaderEpoch is the leader epoch the consumer sent as
	// CurrentLeaderEpoch; a successful answer means the replica that
	// answered was in it.
	LeaderEpoch int32
	// Replica is the broker that answered; Follower is set when it was
	// not the leader the client's metadata named, but a follower serving
	// a consumer (KIP-392): its high watermark may lag the leader's.
	Replica          int32
	Follower         bool
	FetchOffset      int64
	CallNs, ReturnNs int64
	// Records are the records returned at or above FetchOffset, in the
	// order returned.
	Records       []Record
	HighWatermark int64
}

// answeredBy names the replica that answered f, for violations.
func (f Fetch) answeredBy() string {
	if f.Follower {
		return fmt.Sprintf("follower %d", f.Replica)
	}
	return fmt.Sprintf("leader %d", f.Replica)
}

// DeleteRecords is one DeleteRecords request for one partition, as its
// client saw it: a request to move the log start offset up to Offset.
type DeleteRecords struct {
	Client int
	TP     TopicPartition
	// Offset is the offset asked for, at or below a high watermark the
	// client saw.
	Offset int64
	// CallNs and ReturnNs as for Produce: NeverReturnedNs if no answer
	// came (the log start may have moved anyway).
	CallNs, ReturnNs int64
	// Completed: the answer carried no error, so the leader's low
	// watermark (the smallest log start offset among its live replicas)
	// had reached LowWatermark ≥ Offset. A REQUEST_TIMED_OUT or other
	// error says nothing: the leader may have moved its log start anyway.
	Completed    bool
	LowWatermark int64
}

// History is everything the clients did in one run.
type History struct {
	Produces []Produce
	Fetches  []Fetch
	// DeleteRecords are the clients' DeleteRecords requests.
	DeleteRecords []DeleteRecords
	// ListOffsets are the answers to ListOffsets for the latest offset
	// (the HW) that carried no error.
	ListOffsets []ListOffsets
}

// Violation is one broken guarantee.
type Violation struct {
	// Check names the checker ("linearizability", "contiguity", ...).
	Check string
	TP    TopicPartition
	// Group is the consumer group it concerns, if any: a loss of its
	// commits is a loss of its coordinator's partition, not of TP.
	Group string
	// Detail says what was seen, with offsets, values and times.
	Detail string
	// Loss: the violation is acknowledged or committed records lost, or
	// an offset reused by another record (for a Group, commits accepted
	// and lost). Only that is excused on a partition over its fault budget
	// (CLARIFICATIONS.md, "The fault budget": TP's, or the Group's
	// coordinator partition's); every other violation stands whatever the
	// budget.
	Loss bool
}

func (v Violation) String() string {
	if v.TP.Topic == "" {
		return fmt.Sprintf("%s: %s", v.Check, v.Detail)
	}
	return fmt.Sprintf("%s %s: %s", v.Check, v.TP, v.Detail)
}
