package models

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// registerKey names one write-once register: an offset of a partition.
type registerKey struct {
	tp     TopicPartition
	offset int64
}

// registerInput is one operation on a register: a write of value (a
// produce) or a read that returned value (a fetch).
type registerInput struct {
	key   registerKey
	write bool
	value string
}

// registerModel is the write-once register: its state is the value written
// ("" before any write). A write succeeds on an empty register or one that
// already holds the same value (a duplicate of a retried produce landing
// where it already is); a read must return the value written.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[registerKey][]porcupine.Operation{}
		var keys []registerKey
		for _, op := range history {
			k := op.Input.(registerInput).key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		written, in := state.(string), input.(registerInput)
		if in.write {
			return written == "" || written == in.value, in.value
		}
		return written == in.value, written
	},
	Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(registerInput)
		if in.write {
			return fmt.Sprintf("write %s@%d = %s", in.key.tp, in.key.offset, in.value)
		}
		return fmt.Sprintf("read %s@%d = %s", in.key.tp, in.key.offset, in.value)
	},
	DescribeState: func(state interface{}) string {
		if state.(string) == "" {
			return "(unwritten)"
		}
		return state.(string)
	},
}

// RegisterOptions bound the Porcupine check.
type RegisterOptions struct {
	// Timeout bounds Porcupine per partition; a timeout (Unknown) is a
	// violation, never a pass. Zero means 10 s.
	Timeout time.Duration
	// UnreturnedPerOffsetMax caps the writes of unknown outcome (return
	// time infinity) per offset (CLARIFICATIONS.md: cap their number);
	// more distinct values seen at one offset than this is reported
	// directly. Zero means 4.
	UnreturnedPerOffsetMax int
	// HTMLDir, if set, receives one Porcupine visualization per partition
	// that failed: linearizability-<topic>-<partition>.html.
	HTMLDir string
	// Porcupine runs Porcupine over every partition, not only over those
	// the direct decision rejects, and reports any disagreement between
	// the two as a violation: the harness sets it for a seeded fraction
	// of runs, so that real histories keep testing the direct decision.
	Porcupine bool
}

// CheckRegisters checks the history against the write-once register per
// (partition, offset):
//   - an acks=all produce that was acknowledged writes Values[i] at
//     BaseOffset+i, between its call and return;
//   - every other produce whose values a fetch saw at some offset wrote
//     them there at an unknown time after its call (return = infinity):
//     acks=0 and acks=1 promise nothing, and a failed or timed-out request
//     may have been appended anyway;
//   - every record a fetch returned is a read of its offset.
//
// So an acknowledged record that moves or vanishes from a read, two reads
// that disagree about an offset, or a read of a value nobody produced, is a
// violation.
//
// Each register is first decided directly, in one pass (see
// registerVerdict for why that decision is exact). Porcupine then runs over
// every partition the direct decision rejects, to confirm it and to draw
// its visualization, and over every partition when opts.Porcupine is set;
// a partition on which the two disagree, or on which Porcupine times out,
// is a violation too. The HTML visualization of each failed partition is
// written to opts.HTMLDir; the paths written are returned.
func CheckRegisters(h History, opts RegisterOptions) ([]Violation, []string) {
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.UnreturnedPerOffsetMax == 0 {
		opts.UnreturnedPerOffsetMax = 4
	}
	badByTP, violations := decideRegisters(h, opts.UnreturnedPerOffsetMax)
	if len(badByTP) == 0 && !opts.Porcupine {
		return violations, nil
	}
	opsByTP, _ := registerOperations(h, opts.UnreturnedPerOffsetMax)
	tps := make([]TopicPartition, 0, len(opsByTP))
	for tp := range opsByTP { // order-independent: sorted below
		if _, bad := badByTP[tp]; bad || opts.Porcupine {
			tps = append(tps, tp)
		}
	}
	sortTPs(tps)
	var htmlPaths []string
	for _, tp := range tps {
		fault, bad := badByTP[tp]
		direct := fault.why
		var result porcupine.CheckResult
		var info porcupine.LinearizationInfo
		if opts.HTMLDir != "" && bad {
			result, info = porcupine.CheckOperationsVerbose(registerModel, opsByTP[tp], opts.Timeout)
		} else {
			result = porcupine.CheckOperationsTimeout(registerModel, opsByTP[tp], opts.Timeout)
		}
		var detail string
		loss := false
		switch {
		case result == porcupine.Unknown:
			detail = fmt.Sprintf("Porcupine timed out after %v (counted as a failure)", opts.Timeout)
			if bad {
				detail += "; the direct decision: " + direct
			}
		case bad && result == porcupine.Illegal:
			detail = "no linearization of produces and fetches per offset: " + direct
			loss = fault.loss
		case bad:
			detail = "the checkers disagree: the direct decision finds " + direct + ", Porcupine a linearization"
		case result == porcupine.Illegal:
			detail = "the checkers disagree: Porcupine finds no linearization (" + firstBadOffset(opsByTP[tp]) +
				"), the direct decision accepts every offset"
		default:
			continue
		}
		violations = append(violations, Violation{Check: "linearizability", TP: tp, Detail: detail, Loss: loss})
		if opts.HTMLDir != "" && bad {
			p := filepath.Join(opts.HTMLDir, fmt.Sprintf("linearizability-%s-%d.html", tp.Topic, tp.Partition))
			if err := porcupine.VisualizePath(registerModel, info, p); err != nil {
				violations = append(violations, Violation{Check: "linearizability", TP: tp, Detail: "writing visualization: " + err.Error()})
			} else {
				htmlPaths = append(htmlPaths, p)
			}
		}
	}
	return violations, htmlPaths
}

// registerSummary is what the direct decision needs of one register's
// operations, gathered in one pass over the history: the same operations
// registerOperations gives Porcupine.
type registerSummary struct {
	// value is the first value written; valuesDiffer says another write
	// wrote a different one.
	value        string
	written      bool
	valuesDiffer bool
	// other is the first value written or read that differs from value.
	other string
	// firstWriteCallNs is the earliest call among the writes.
	firstWriteCallNs int64
	read             bool
	// unproduced is a value read that nobody produced, or "".
	unproduced string
	// firstReadReturnNs is the earliest return among the reads.
	firstReadReturnNs int64
	// unknownValues are the values of the writes of unknown outcome, one
	// per distinct value read that was not acknowledged here.
	unknownValues []string
}

// differ records a value other than the one written first.
func (r *registerSummary) differ(value string) {
	if !r.valuesDiffer {
		r.valuesDiffer, r.other = true, value
	}
}

func (r *registerSummary) write(value string, callNs int64) {
	switch {
	case !r.written:
		r.value, r.written, r.firstWriteCallNs = value, true, callNs
	case value != r.value:
		r.differ(value)
	}
	r.firstWriteCallNs = min(r.firstWriteCallNs, callNs)
}

// registerVerdict decides one write-once register's history exactly, and
// returns "" when it is linearizable, otherwise why not. Every operation
// completed (a write of unknown outcome has return time infinity, so it
// too must take effect), and a write of a value other than the one held
// fails, so:
//   - every write must carry the same value v, and every read return v (a
//     read of another value either has its own write of that value, or
//     reads what nobody wrote);
//   - if anything was read, something was written, and some write must be
//     able to take effect before every read: the earliest-called write w
//     can be placed first unless a read returned before w was called (a
//     call and a return at the same instant overlap, as in Porcupine), and
//     once v is held every other operation succeeds in any order the real
//     times allow.
//
// When those hold the order "w, then everything else by call time" is a
// linearization; when one fails, none exists. A property test compares
// this decision with Porcupine's on random histories.
func (r *registerSummary) verdict(offset int64) registerFault {
	switch {
	case r.unproduced != "":
		return registerFault{why: fmt.Sprintf("offset %d: a fetch read %q, which nobody produced", offset, r.unproduced)}
	case r.valuesDiffer:
		return registerFault{why: fmt.Sprintf("offset %d: written or read with different values (%q and %q)", offset, r.value, r.other), loss: true}
	case r.read && !r.written:
		return registerFault{why: fmt.Sprintf("offset %d: read, never written", offset)}
	case r.read && r.firstWriteCallNs > r.firstReadReturnNs:
		return registerFault{why: fmt.Sprintf("offset %d: %q read by t=%dns, before any write of it was sent (t=%dns)",
			offset, r.value, r.firstReadReturnNs, r.firstWriteCallNs)}
	}
	return registerFault{}
}

// registerFault is why a register is not linearizable ("" if it is), and
// whether that is a loss the fault budget may excuse: an offset holding
// two values (an acknowledged record lost and its offset reused). A read
// of a value nobody produced, or before it was produced, is never one.
type registerFault struct {
	why  string
	loss bool
}

// denseOffsetsMax bounds the offsets kept in a partition's slice of
// registers; an offset beyond it (a corrupted answer) is kept in a map.
const denseOffsetsMax = 1 << 20

// partitionRegisters are one partition's registers, by offset: a slice
// indexed by offset (logs in a run start at 0 and stay short), a map for
// the others. An untouched register is the zero summary, which is
// linearizable.
type partitionRegisters struct {
	dense  []registerSummary
	sparse map[int64]*registerSummary
}

func (p *partitionRegisters) at(offset int64) *registerSummary {
	if offset >= 0 && offset < denseOffsetsMax {
		if offset >= int64(len(p.dense)) {
			grown := make([]registerSummary, min(max(offset+1, 2*int64(len(p.dense)), 1024), denseOffsetsMax))
			copy(grown, p.dense)
			p.dense = grown
		}
		return &p.dense[offset]
	}
	if p.sparse == nil {
		p.sparse = map[int64]*registerSummary{}
	}
	r := p.sparse[offset]
	if r == nil {
		r = &registerSummary{}
		p.sparse[offset] = r
	}
	return r
}

// firstViolation returns the lowest offset's fault among the registers
// that are not linearizable, or the zero fault.
func (p *partitionRegisters) firstViolation() registerFault {
	lowest, fault := int64(0), registerFault{}
	for o, r := range p.sparse { // order-independent: the lowest offset wins
		if o > lowest && fault.why != "" {
			continue
		}
		if v := r.verdict(o); v.why != "" {
			lowest, fault = o, v
		}
	}
	for o := range p.dense {
		if fault.why != "" && int64(o) > lowest {
			break
		}
		if v := p.dense[o].verdict(int64(o)); v.why != "" {
			return v
		}
	}
	return fault
}

// firstCalls maps each produced value to the call time of the first produce
// that sent it. The workload's values ("p<client>-<seq>", models.Record)
// are kept in slices indexed by client and sequence number, which costs a
// fraction of a map of strings; any other value, or one of that shape with
// leading zeros or huge numbers, goes to the map, so the mapping stays one
// to one.
type firstCalls struct {
	byClient [][]firstCall
	others   map[string]int64
}

type firstCall struct {
	callNs int64
	set    bool
}

// clientSeqMax bounds the numbers firstCalls keeps in slices.
const clientSeqMax = 1 << 20

// parseClientSeq parses "p<client>-<seq>" in canonical decimal form.
func parseClientSeq(v string) (client, seq int, ok bool) {
	if len(v) < 4 || v[0] != 'p' {
		return 0, 0, false
	}
	client, rest, ok := parseDecimal(v[1:])
	if !ok || len(rest) < 2 || rest[0] != '-' {
		return 0, 0, false
	}
	seq, rest, ok = parseDecimal(rest[1:])
	if !ok || rest != "" {
		return 0, 0, false
	}
	return client, seq, true
}

// parseDecimal parses the leading digits of s, refusing leading zeros and
// numbers of clientSeqMax or more, and returns the rest.
func parseDecimal(s string) (n int, rest string, ok bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		n = n*10 + int(s[i]-'0')
		i++
		if n >= clientSeqMax {
			return 0, "", false
		}
	}
	if i == 0 || (i > 1 && s[0] == '0') {
		return 0, "", false
	}
	return n, s[i:], true
}

// add records callNs for v unless an earlier produce sent v.
func (fc *firstCalls) add(v string, callNs int64) {
	client, seq, ok := parseClientSeq(v)
	if !ok {
		if fc.others == nil {
			fc.others = map[string]int64{}
		}
		if _, seen := fc.others[v]; !seen {
			fc.others[v] = callNs
		}
		return
	}
	if client >= len(fc.byClient) {
		fc.byClient = append(fc.byClient, make([][]firstCall, client+1-len(fc.byClient))...)
	}
	calls := fc.byClient[client]
	if seq >= len(calls) {
		grown := make([]firstCall, max(seq+1, 2*len(calls), 256))
		copy(grown, calls)
		calls = grown
		fc.byClient[client] = calls
	}
	if !calls[seq].set {
		calls[seq] = firstCall{callNs: callNs, set: true}
	}
}

// get returns the call time recorded for v.
func (fc *firstCalls) get(v string) (int64, bool) {
	client, seq, ok := parseClientSeq(v)
	if !ok {
		callNs, seen := fc.others[v]
		return callNs, seen
	}
	if client >= len(fc.byClient) || seq >= len(fc.byClient[client]) {
		return 0, false
	}
	c := fc.byClient[client][seq]
	return c.callNs, c.set
}

// decideRegisters decides every register directly and returns, for each
// partition with a register that is not linearizable, why its lowest such
// offset is not, together with the violations of the cap on writes of
// unknown outcome per offset (more values at one offset than the cap: a
// reused offset, a loss).
func decideRegisters(h History, unreturnedMax int) (map[TopicPartition]registerFault, []Violation) {
	byTP := map[TopicPartition]*partitionRegisters{}
	partition := func(tp TopicPartition) *partitionRegisters {
		p := byTP[tp]
		if p == nil {
			p = &partitionRegisters{}
			byTP[tp] = p
		}
		return p
	}
	// producedCallNs finds when the first produce that sent a value was
	// called: the call time of a write of unknown outcome.
	var producedCallNs firstCalls
	for _, p := range h.Produces {
		var regs *partitionRegisters
		ackedAll := p.Acks == -1 && p.Acked
		if ackedAll {
			regs = partition(p.TP)
		}
		for j, v := range p.Values {
			producedCallNs.add(v, p.CallNs)
			if ackedAll {
				regs.at(p.BaseOffset+int64(j)).write(v, p.CallNs)
			}
		}
	}
	var violations []Violation
	for _, f := range h.Fetches {
		if len(f.Records) == 0 {
			continue
		}
		regs := partition(f.TP)
		for _, rec := range f.Records {
			r := regs.at(rec.Offset)
			if !r.read || f.ReturnNs < r.firstReadReturnNs {
				r.firstReadReturnNs = f.ReturnNs
			}
			r.read = true
			if r.written && !r.valuesDiffer && r.value == rec.Value {
				continue // the value written here (acknowledged, or already known)
			}
			callNs, produced := producedCallNs.get(rec.Value)
			if !produced {
				if r.unproduced == "" {
					r.unproduced = rec.Value
				}
				continue
			}
			if containsString(r.unknownValues, rec.Value) {
				continue
			}
			if len(r.unknownValues) == unreturnedMax {
				violations = append(violations, Violation{Check: "linearizability", TP: f.TP, Loss: true,
					Detail: fmt.Sprintf("more than %d distinct values read at offset %d", unreturnedMax, rec.Offset)})
				r.differ(rec.Value)
				continue
			}
			r.unknownValues = append(r.unknownValues, rec.Value)
			r.write(rec.Value, callNs)
		}
	}
	bad := map[TopicPartition]registerFault{}
	for tp, regs := range byTP { // order-independent: one entry per partition, each decided alone
		if fault := regs.firstViolation(); fault.why != "" {
			bad[tp] = fault
		}
	}
	return bad, violations
}

// registerOperations builds the Porcupine operations of each partition.
func registerOperations(h History, unreturnedMax int) (map[TopicPartition][]porcupine.Operation, []Violation) {
	ops := map[TopicPartition][]porcupine.Operation{}
	// ackedAt holds the acknowledged acks=all writes, so that reads of
	// them add no write of unknown outcome.
	ackedAt := map[registerKey]string{}
	// producedBy finds the first produce that sent a value.
	producedBy := map[string]int{}
	for i, p := range h.Produces {
		for j, v := range p.Values {
			if _, seen := producedBy[v]; !seen {
				producedBy[v] = i
			}
			if p.Acks == -1 && p.Acked {
				k := registerKey{p.TP, p.BaseOffset + int64(j)}
				ackedAt[k] = v
				ops[p.TP] = append(ops[p.TP], porcupine.Operation{
					ClientId: p.Client, Input: registerInput{key: k, write: true, value: v},
					Call: p.CallNs, Return: p.ReturnNs,
				})
			}
		}
	}
	var violations []Violation
	unknownWrites := map[registerKey][]string{}
	for _, f := range h.Fetches {
		for _, r := range f.Records {
			k := registerKey{f.TP, r.Offset}
			ops[f.TP] = append(ops[f.TP], porcupine.Operation{
				ClientId: f.Client, Input: registerInput{key: k, value: r.Value},
				Call: f.CallNs, Return: f.ReturnNs,
			})
			if ackedAt[k] == r.Value {
				continue
			}
			i, produced := producedBy[r.Value]
			if !produced || containsString(unknownWrites[k], r.Value) {
				continue // a read of a value nobody sent fails in Porcupine
			}
			if len(unknownWrites[k]) == unreturnedMax {
				violations = append(violations, Violation{Check: "linearizability", TP: f.TP, Loss: true,
					Detail: fmt.Sprintf("more than %d distinct values read at offset %d", unreturnedMax, r.Offset)})
				continue
			}
			unknownWrites[k] = append(unknownWrites[k], r.Value)
			p := h.Produces[i]
			ops[f.TP] = append(ops[f.TP], porcupine.Operation{
				ClientId: p.Client, Input: registerInput{key: k, write: true, value: r.Value},
				Call: p.CallNs, Return: NeverReturnedNs,
			})
		}
	}
	return ops, violations
}

// firstBadOffset names the lowest offset whose operations disagree, for
// the report: two different values read, or a read that contradicts an
// acknowledged write, or a value nobody wrote.
func firstBadOffset(ops []porcupine.Operation) string {
	byKey := map[int64][]registerInput{}
	var offsets []int64
	for _, op := range ops {
		in := op.Input.(registerInput)
		if _, seen := byKey[in.key.offset]; !seen {
			offsets = append(offsets, in.key.offset)
		}
		byKey[in.key.offset] = append(byKey[in.key.offset], in)
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	for _, o := range offsets {
		values := map[string]bool{}
		written := false
		var seen []string
		for _, in := range byKey[o] {
			written = written || in.write
			if !values[in.value] {
				values[in.value] = true
				seen = append(seen, in.value)
			}
		}
		if len(values) > 1 || !written {
			return fmt.Sprintf("offset %d saw %v (written: %v)", o, seen, written)
		}
	}
	return "the order of operations cannot be linearized"
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortTPs(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// VisualizePartition writes Porcupine's visualization of one partition's
// operations to dir/history-<topic>-<partition>.html and returns the path:
// what a violation's reader opens to see who wrote and read which offset
// when.
func VisualizePartition(h History, tp TopicPartition, dir string) (string, error) {
	opsByTP, _ := registerOperations(h, 1<<20)
	_, info := porcupine.CheckOperationsVerbose(registerModel, opsByTP[tp], 10*time.Second)
	p := filepath.Join(dir, fmt.Sprintf("history-%s-%d.html", tp.Topic, tp.Partition))
	if err := porcupine.VisualizePath(registerModel, info, p); err != nil {
		return "", fmt.Errorf("visualize %s: %w", tp, err)
	}
	return p, nil
}
