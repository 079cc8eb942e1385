package models

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"
)

// inEpoch is f answered by the leader (node 1) of epoch.
func inEpoch(f Fetch, epoch int32) Fetch {
	f.LeaderEpoch, f.Replica = epoch, 1
	return f
}

// finalWith is a converged partition holding values from offset 0, in one
// batch of leader epoch epoch.
func finalWith(epoch int32, values ...string) map[TopicPartition]PartitionFinal {
	b := Batch{BaseOffset: 0, LastOffset: int64(len(values)) - 1}
	for i, v := range values {
		b.Records = append(b.Records, Record{Offset: int64(i), Value: v, LeaderEpoch: epoch})
	}
	r := ReplicaLog{Node: 1, Batches: []Batch{b}}
	return map[TopicPartition]PartitionFinal{tp0: {Leader: 1, HighWatermark: int64(len(values)), Replicas: []ReplicaLog{r}}}
}

// oldCheckers runs the history checkers that existed before the HW model:
// the write-once registers (with Porcupine), contiguity, DeleteRecords and
// the per-client HW check (now its follower half).
func oldCheckers(h History) []Violation {
	vs, _ := CheckRegisters(h, RegisterOptions{Porcupine: true})
	vs = append(vs, CheckFetchContiguity(h)...)
	vs = append(vs, CheckDeleteRecords(h)...)
	return append(vs, CheckHighWatermarks(h, nil)...)
}

// TestHWCatchesFindingOneHistories: two hand-built histories that a
// checker comparing a leader's HW per client only would pass; the model
// rejects both.
func TestHWCatchesFindingOneHistories(t *testing.T) {
	// Client A sees HW 100; client B, called after A's answer returned,
	// in the same leader epoch, sees 50.
	lower := History{Fetches: []Fetch{inEpoch(fetch(0, 10, 20, 100, 100), 3), inEpoch(fetch(1, 30, 40, 50, 50), 3)}}
	// An acks=all produce of offsets 0-9 is acknowledged; a fetch called
	// later reports HW 0.
	values := make([]string, 10)
	for i := range values {
		values[i] = fmt.Sprintf("v%d", i)
	}
	behind := History{Produces: []Produce{ackedAll(0, 10, 20, 0, values...)}, Fetches: []Fetch{inEpoch(fetch(1, 30, 40, 0, 0), 3)}}
	for name, c := range map[string]struct {
		h     History
		final map[TopicPartition]PartitionFinal
	}{"HW 100 then 50": {lower, nil}, "acked 0-9 then HW 0": {behind, finalWith(3, values...)}} {
		if vs := oldCheckers(c.h); len(vs) != 0 {
			t.Errorf("%s: the checkers other than the HW model now flag it: %v", name, vs)
		}
		vs, _ := CheckHighWatermarkOrder(c.h, HWOptions{Final: c.final})
		if !checks(vs, "hw-linearizability") {
			t.Errorf("%s: the HW model passed it", name)
		}
		// Porcupine agrees with the direct decision.
		vs, _ = CheckHighWatermarkOrder(c.h, HWOptions{Final: c.final, Porcupine: true})
		for _, v := range vs {
			if strings.Contains(v.Detail, "disagree") {
				t.Errorf("%s: %v", name, v)
			}
		}
	}
}

// TestHWAllowsWhatKafkaAllows: answers Kafka gives clients pass.
func TestHWAllowsWhatKafkaAllows(t *testing.T) {
	starts := []EpochStart{{TP: tp0, LeaderEpoch: 3, StartOffset: 0}, {TP: tp0, LeaderEpoch: 4, StartOffset: 10}}
	for name, h := range map[string]History{
		// Overlapping answers may come back in either order.
		"overlapping answers": {Fetches: []Fetch{inEpoch(fetch(0, 10, 40, 9, 9), 3), inEpoch(fetch(1, 20, 30, 7, 7), 3)}},
		// A new leader that has not committed in its epoch shows its
		// lagging HW in a Fetch (Kafka's readRecords has no KIP-207 check).
		"new leader before its first commit": {Fetches: []Fetch{inEpoch(fetch(0, 10, 20, 9, 9), 3), inEpoch(fetch(1, 30, 40, 5, 5), 4)}},
		// A follower's HW lags its leader's (KIP-392).
		"a lagging follower": {Fetches: []Fetch{inEpoch(fetch(0, 10, 20, 9, 9), 3), fromFollower(inEpoch(fetch(1, 30, 40, 5, 5), 3), 2)}},
		// A deposed leader (a client with old metadata) shows the old
		// epoch's HW after the new one moved on.
		"a deposed leader": {Fetches: []Fetch{inEpoch(fetch(0, 10, 20, 12, 12), 4), inEpoch(fetch(1, 30, 40, 9, 9), 3)}},
	} {
		if vs, _ := CheckHighWatermarkOrder(h, HWOptions{EpochStarts: starts, Porcupine: true}); len(vs) != 0 {
			t.Errorf("%s flagged: %v", name, vs)
		}
	}
}

// TestHWCatchesWhatKafkaForbids: the cross-epoch rule, for committed
// answers and ListOffsets, and what the fault budget excuses.
func TestHWCatchesWhatKafkaForbids(t *testing.T) {
	starts := []EpochStart{{TP: tp0, LeaderEpoch: 3, StartOffset: 0}, {TP: tp0, LeaderEpoch: 4, StartOffset: 10}}
	old := inEpoch(fetch(0, 10, 20, 12, 12), 3)
	// The new leader has committed in epoch 4 (HW 11 ≥ its start 10), yet
	// shows less than epoch 3 showed.
	committedBehind := History{Fetches: []Fetch{old, inEpoch(fetch(1, 30, 40, 11, 11), 4)}}
	// A ListOffsets answer must not show a lagging HW at all (KIP-207).
	listBehind := History{Fetches: []Fetch{old}, ListOffsets: []ListOffsets{{Client: 1, TP: tp0, LeaderEpoch: 4, Replica: 1, CallNs: 30, ReturnNs: 40, HighWatermark: 9}}}
	// A follower's answer is committed: a committed leader below it is not.
	followerAhead := History{Fetches: []Fetch{fromFollower(inEpoch(fetch(0, 10, 20, 12, 12), 4), 2), inEpoch(fetch(1, 30, 40, 11, 11), 4)}}
	for name, h := range map[string]History{"committed new leader behind": committedBehind,
		"ListOffsets behind": listBehind, "committed leader behind a follower": followerAhead} {
		vs, _ := CheckHighWatermarkOrder(h, HWOptions{EpochStarts: starts, Porcupine: true})
		if !checks(vs, "hw-linearizability") {
			t.Errorf("%s passed", name)
		}
		for _, v := range vs {
			if strings.Contains(v.Detail, "disagree") {
				t.Errorf("%s: %v", name, v)
			}
		}
		over := map[TopicPartition]bool{tp0: true}
		if vs, _ := CheckHighWatermarkOrder(h, HWOptions{EpochStarts: starts, OverBudget: over}); len(vs) != 0 {
			t.Errorf("%s over budget (committed records may be lost): %v", name, vs)
		}
	}
	// Within one epoch the leader never lowers its HW, over budget too.
	within := History{Fetches: []Fetch{inEpoch(fetch(0, 10, 20, 12, 12), 4), inEpoch(fetch(1, 30, 40, 11, 11), 4)}}
	if vs, _ := CheckHighWatermarkOrder(within, HWOptions{OverBudget: map[TopicPartition]bool{tp0: true}}); !checks(vs, "hw-linearizability") {
		t.Error("a leader lowering its HW within its epoch passed over budget")
	}
}

// TestHWVisualization: a failing (partition, epoch) is drawn.
func TestHWVisualization(t *testing.T) {
	dir := t.TempDir()
	h := History{Fetches: []Fetch{inEpoch(fetch(0, 10, 20, 100, 100), 3), inEpoch(fetch(1, 30, 40, 50, 50), 3)}}
	vs, html := CheckHighWatermarkOrder(h, HWOptions{HTMLDir: dir})
	if len(vs) != 1 || len(html) != 1 {
		t.Fatalf("violations %v, visualizations %v; want one of each", vs, html)
	}
	if filepath.Base(html[0]) != "hw-t-0-epoch-3.html" {
		t.Errorf("visualization %s", html[0])
	}
	if st, err := os.Stat(html[0]); err != nil || st.Size() == 0 {
		t.Errorf("visualization %s: %v", html[0], err)
	}
}

// TestHWVerdictMatchesPorcupine draws small (partition, epoch) histories
// of the HW model (few values and instants, so that they tie; reads that
// must or need not commit; acknowledgements; earlier observations) and
// checks that the direct decision rejects exactly those Porcupine finds no
// linearization for.
func TestHWVerdictMatchesPorcupine(t *testing.T) {
	illegal := 0
	rapid.Check(t, func(rt *rapid.T) {
		timeNs := rapid.Int64Range(0, 12)
		value := rapid.Int64Range(0, 5)
		var ops []hwOp
		for i, n := 0, rapid.IntRange(1, 7).Draw(rt, "ops"); i < n; i++ {
			call := timeNs.Draw(rt, "call")
			in := hwInput{kind: hwKind(rapid.IntRange(0, 2).Draw(rt, "kind")), value: value.Draw(rt, "value")}
			in.committed = in.kind == hwLeaderRead && rapid.Bool().Draw(rt, "committed")
			in.what = hwOrigin{source: "fetch", client: i}
			ops = append(ops, hwOp{in: in, client: i, call: call, ret: call + rapid.Int64Range(0, 6).Draw(rt, "duration")})
		}
		pops := make([]porcupine.Operation, len(ops))
		for i, o := range ops {
			pops[i] = o.porcupine()
		}
		linearizable := porcupine.CheckOperations(hwModel, pops)
		why := decideHW(ops)
		if !linearizable {
			illegal++
		}
		if (why == "") != linearizable {
			var b strings.Builder
			for _, o := range ops {
				fmt.Fprintf(&b, "%+v [%d,%d]\n", o.in, o.call, o.ret)
			}
			rt.Fatalf("direct decision %q, Porcupine linearizable=%v; history:\n%s", why, linearizable, b.String())
		}
	})
	if illegal == 0 {
		t.Fatal("no drawn history was illegal: the test compared only easy cases")
	}
}

// TestHWIdempotentRetryAckedByALaterLeader: an idempotent batch appended
// in epoch 0 is acknowledged, on a retry, by the leader of epoch 1, which
// holds the first append; the deposed leader of epoch 0, cut off, still
// answers its old HW. The acknowledgement bounds epoch 1, not epoch 0; a
// plain produce's acknowledgement bounds its own.
func TestHWIdempotentRetryAckedByALaterLeader(t *testing.T) {
	ack := ackedAll(2, 10, 50, 18, "a", "b")
	ack.Idempotent = true
	h := History{Produces: []Produce{ack}, Fetches: []Fetch{inEpoch(fetch(10, 60, 70, 35, 12), 0)}}
	final := map[TopicPartition]PartitionFinal{tp0: {Leader: 2, HighWatermark: 20, Replicas: []ReplicaLog{{Node: 2,
		Batches: []Batch{{BaseOffset: 18, LastOffset: 19, Records: []Record{{Offset: 18, Value: "a"}, {Offset: 19, Value: "b"}}}}}}}}
	if vs, _ := CheckHighWatermarkOrder(h, HWOptions{Final: final, Porcupine: true}); len(vs) != 0 {
		t.Fatalf("the deposed leader's old HW flagged against a later leader's acknowledgement: %v", vs)
	}
	h.Produces[0].Idempotent = false
	if vs, _ := CheckHighWatermarkOrder(h, HWOptions{Final: final}); !checks(vs, "hw-linearizability") {
		t.Fatal("a plain produce acknowledged in epoch 0, then HW 12 from epoch 0's leader, passed")
	}
	// A later epoch that has committed is bounded by it.
	h.Produces[0].Idempotent = true
	h.Fetches = []Fetch{inEpoch(fetch(10, 60, 70, 35, 15), 1)}
	starts := []EpochStart{{TP: tp0, LeaderEpoch: 1, StartOffset: 15}}
	if vs, _ := CheckHighWatermarkOrder(h, HWOptions{Final: final, EpochStarts: starts}); !checks(vs, "hw-linearizability") {
		t.Fatal("epoch 1, committed at 15, below an acknowledgement through 19 passed")
	}
}
