package sched

import (
	"fmt"
	"io"
)

// Record is one line of the run's trace. Kind is a short constant string
// ("net.deliver", "node.crash"); Node is the node it concerns, or -1; A, B, C
// are kind-specific numbers and Text an optional detail. Keeping the record
// structured lets hot paths trace without formatting: text is produced only
// when a TraceWriter is set.
type Record struct {
	Kind    string
	Node    int32
	A, B, C int64
	Text    string
}

// The FNV-1a 64-bit offset basis and prime; every field is folded in a
// word at a time.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// tracer folds every record into a running 64-bit hash and, in verbose
// mode, writes it out as text. Numbers are hashed a whole word at a time
// (xor, multiply by the FNV prime, then fold the high half down so every
// bit reaches the low bits), strings eight bytes at a time the same way and
// then their length, which costs one multiply per word instead of one per
// byte. The hash is a fingerprint for comparing runs, not a defence against
// adversaries.
type tracer struct {
	hash    uint64
	records uint64
	w       io.Writer
	// writeErr is the first error from w; later records are still hashed.
	writeErr error
}

func newTracer(w io.Writer) tracer { return tracer{hash: fnvOffset64, w: w} }

func (t *tracer) int64(v int64) {
	t.hash ^= uint64(v)
	t.hash *= fnvPrime64
	t.hash ^= t.hash >> 32
}

// string hashes s followed by its length, so that ("ab","c") and
// ("a","bc") hash differently. It takes eight bytes at a time, like the
// numbers: every record hashes at least two strings.
func (t *tracer) string(s string) {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		t.int64(int64(uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56))
	}
	if i < len(s) {
		var tail uint64
		for j := len(s) - 1; j >= i; j-- {
			tail = tail<<8 | uint64(s[j])
		}
		t.int64(int64(tail))
	}
	t.int64(int64(len(s)))
}

// Trace appends r, stamped with the current virtual time, to the trace.
func (s *Scheduler) Trace(r Record) {
	t := &s.trace
	t.records++
	t.int64(s.nowNs)
	t.string(r.Kind)
	t.int64(int64(r.Node))
	t.int64(r.A)
	t.int64(r.B)
	t.int64(r.C)
	t.string(r.Text)
	if t.w != nil && t.writeErr == nil {
		_, t.writeErr = fmt.Fprintf(t.w, "%d.%09d %s node=%d a=%d b=%d c=%d %s\n",
			s.nowNs/1e9, s.nowNs%1e9, r.Kind, r.Node, r.A, r.B, r.C, r.Text)
	}
}

// Verbose reports whether records are being written out, so that a caller
// can skip building an expensive Text nobody will read. The hash must not
// depend on it: a caller that sets Text only when Verbose must leave Text
// out of the hash some other way (put the numbers in A, B, C instead).
func (s *Scheduler) Verbose() bool { return s.trace.w != nil }

// TraceHash returns the hash of every record so far.
func (s *Scheduler) TraceHash() uint64 { return s.trace.hash }

// TraceRecords counts the records so far.
func (s *Scheduler) TraceRecords() uint64 { return s.trace.records }

// TraceWriteErr returns the first error the TraceWriter returned, if any.
func (s *Scheduler) TraceWriteErr() error { return s.trace.writeErr }

// Summary is the line every run prints: the trace hash that two runs of one
// seed must share, and the counts behind it.
func (s *Scheduler) Summary() string {
	return fmt.Sprintf("trace_hash=%016x trace_records=%d events=%d dropped=%d sim_ns=%d",
		s.TraceHash(), s.TraceRecords(), s.eventsRun, s.eventsDropped, s.nowNs)
}
