package models

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"
)

// TestRegisterVerdictMatchesPorcupine draws small histories over a few
// offsets (few values, so that writes collide; few instants, so that calls
// and returns tie; writes that never returned; reads of values nobody
// produced) and checks that the direct decision rejects exactly the
// partitions Porcupine finds no linearization for.
func TestRegisterVerdictMatchesPorcupine(t *testing.T) {
	illegal := 0
	rapid.Check(t, func(rt *rapid.T) {
		timeNs := rapid.Int64Range(0, 12)
		value := rapid.SampledFrom([]string{"a", "b", "c"})
		offset := rapid.Int64Range(0, 2)
		var h History
		for i, n := 0, rapid.IntRange(0, 4).Draw(rt, "produces"); i < n; i++ {
			callNs := timeNs.Draw(rt, "call")
			returnNs := callNs + rapid.Int64Range(0, 6).Draw(rt, "duration")
			if rapid.Bool().Draw(rt, "never returned") {
				returnNs = NeverReturnedNs
			}
			p := Produce{Client: i, TP: tp0, Acks: rapid.SampledFrom([]int16{-1, 1}).Draw(rt, "acks"),
				CallNs: callNs, ReturnNs: returnNs, Acked: returnNs != NeverReturnedNs && rapid.Bool().Draw(rt, "acked"),
				BaseOffset: offset.Draw(rt, "base")}
			for j, m := 0, rapid.IntRange(1, 2).Draw(rt, "records"); j < m; j++ {
				p.Values = append(p.Values, value.Draw(rt, "value"))
			}
			h.Produces = append(h.Produces, p)
		}
		for i, n := 0, rapid.IntRange(0, 4).Draw(rt, "fetches"); i < n; i++ {
			callNs := timeNs.Draw(rt, "call")
			f := Fetch{Client: 10 + i, TP: tp0, CallNs: callNs, ReturnNs: callNs + rapid.Int64Range(0, 6).Draw(rt, "duration")}
			from := offset.Draw(rt, "from")
			for j, m := 0, rapid.IntRange(1, 2).Draw(rt, "records"); j < m; j++ {
				v := value.Draw(rt, "value")
				if rapid.IntRange(0, 9).Draw(rt, "ghost") == 0 {
					v = "ghost"
				}
				f.Records = append(f.Records, Record{Offset: from + int64(j), Value: v})
			}
			h.Fetches = append(h.Fetches, f)
		}
		bad, _ := decideRegisters(h, 1<<20)
		ops, _ := registerOperations(h, 1<<20)
		linearizable := porcupine.CheckOperations(registerModel, ops[tp0])
		fault, directBad := bad[tp0]
		why := fault.why
		if !linearizable {
			illegal++
		}
		if directBad == linearizable {
			rt.Fatalf("direct decision %q, Porcupine linearizable=%v; history:\n%s", why, linearizable, describe(h))
		}
	})
	if illegal == 0 {
		t.Fatal("no drawn history was illegal: the test compared only easy cases")
	}
}

func describe(h History) string {
	var b strings.Builder
	for _, p := range h.Produces {
		fmt.Fprintf(&b, "produce client=%d acks=%d acked=%v base=%d %v [%d,%d]\n", p.Client, p.Acks, p.Acked, p.BaseOffset, p.Values, p.CallNs, p.ReturnNs)
	}
	for _, f := range h.Fetches {
		fmt.Fprintf(&b, "fetch client=%d %v [%d,%d]\n", f.Client, f.Records, f.CallNs, f.ReturnNs)
	}
	return b.String()
}

// TestRegistersSampledPorcupineAgrees runs the Porcupine cross-check the
// harness enables on a fraction of seeds: on a linearizable history and on
// a broken one, both checkers agree, so no "disagree" violation appears.
func TestRegistersSampledPorcupineAgrees(t *testing.T) {
	good := History{
		Produces: []Produce{ackedAll(0, 10, 20, 0, "a", "b")},
		Fetches:  []Fetch{fetch(1, 25, 30, 0, 2, "a", "b")},
	}
	if vs, _ := CheckRegisters(good, RegisterOptions{Porcupine: true}); len(vs) != 0 {
		t.Fatalf("violations in a linearizable history: %v", vs)
	}
	broken := History{
		Produces: []Produce{ackedAll(0, 10, 20, 0, "a")},
		Fetches:  []Fetch{fetch(1, 25, 30, 0, 1, "b")},
	}
	vs, _ := CheckRegisters(broken, RegisterOptions{Porcupine: true})
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, "no linearization") {
		t.Fatalf("want one agreed linearizability violation, got %v", vs)
	}
}

// TestFirstCallsKeepsValuesApart: values that parse alike only in a
// non-canonical form stay distinct, and the first call wins.
func TestFirstCallsKeepsValuesApart(t *testing.T) {
	var fc firstCalls
	values := []string{"p1-2", "p01-2", "p1-02", "p1-2x", "p-2", "p1-", "q1-2", "p1048576-1", "p0-0", ""}
	for i, v := range values {
		fc.add(v, int64(10+i))
		fc.add(v, int64(100+i)) // a later produce of the same value
	}
	for i, v := range values {
		if got, ok := fc.get(v); !ok || got != int64(10+i) {
			t.Errorf("value %q: got %d %v, want %d", v, got, ok, 10+i)
		}
	}
	for _, v := range []string{"p1-3", "p2-2", "p9-0", "x"} {
		if _, ok := fc.get(v); ok {
			t.Errorf("value %q was never added, yet found", v)
		}
	}
}

// TestRegistersNameBothValues: two acknowledged writes of different values
// at one offset are reported with both values.
func TestRegistersNameBothValues(t *testing.T) {
	h := History{Produces: []Produce{ackedAll(0, 10, 20, 5, "a"), ackedAll(1, 30, 40, 5, "b")}}
	vs, _ := CheckRegisters(h, RegisterOptions{})
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, `offset 5`) || !strings.Contains(vs[0].Detail, `"a" and "b"`) {
		t.Fatalf("want one violation at offset 5 naming a and b, got %v", vs)
	}
}
