package quorum

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"strand/sim/memdisk"
)

// storageRig drives a single voter whose Readies go through Storage on a
// memdisk, so that a crash loses exactly what was not synced.
type storageRig struct {
	t       *rapid.T
	disk    *memdisk.Disk
	st      *Storage
	r       *Raft
	nowMs   int64
	applied []Entry // the state machine: committed entries, in order
	// pending is a Ready whose Persist has not completed.
	pending *Ready
}

func (g *storageRig) open() {
	st, rec, err := OpenStorage(g.disk, "__cluster_metadata-0")
	if err != nil {
		g.t.Fatalf("open: %v", err)
	}
	cfg := DefaultConfig(1, []int32{1}, func(int64) int64 { return 0 })
	r, err := New(cfg, rec.Hard, rec.Snapshot, rec.Entries, g.nowMs)
	if err != nil {
		g.t.Fatalf("restart from %+v: %v", rec.Hard, err)
	}
	g.st, g.r, g.pending = st, r, nil
	g.applied = nil
	if rec.Snapshot != nil {
		g.applied = decodeStateOrFail(g.t, rec.Snapshot.Data)
	}
}

func decodeStateOrFail(t *rapid.T, b []byte) []Entry {
	entries, err := decodeState(b)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return entries
}

// pump persists every Ready; with leave, the last one's Sync never
// completes (the crash comes first).
func (g *storageRig) pump(leave bool) {
	for g.pending == nil && g.r.HasReady() {
		rd := g.r.Ready()
		g.pending = &rd
		completed := false
		g.st.Persist(rd, func(err error) {
			if err != nil {
				g.t.Fatalf("persist: %v", err)
			}
			completed = true
		})
		if leave && !g.r.HasReady() {
			return
		}
		for !completed {
			if g.disk.RunPending() == 0 {
				g.t.Fatalf("persist never completed")
			}
		}
		g.applied = append(g.applied, rd.Committed...)
		g.pending = nil
		g.r.Advance(g.nowMs, rd)
	}
}

// TestStorageRecoversEverythingCommitted: a single voter commits an entry
// only once Storage has made it durable, so whatever crash comes (losing
// all unsynced data, or tearing it), the reopened voter holds every entry it
// committed, identical, and its hard state.
func TestStorageRecoversEverythingCommitted(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := &storageRig{t: t, disk: memdisk.New(memdisk.Options{})}
		g.open()
		crashRng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "crashSeed"), 1))
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			g.nowMs += 10
			switch rapid.IntRange(0, 5).Draw(t, "action") {
			case 0, 1:
				g.r.Tick(g.nowMs + DefaultElectionTimeoutMs*2)
				g.nowMs += DefaultElectionTimeoutMs * 2
			case 2, 3:
				if g.r.Role() == Leader {
					if _, err := g.r.Propose(g.nowMs, fmt.Appendf(nil, "e%d", step)); err != nil {
						t.Fatal(err)
					}
				}
			case 4:
				if int64(len(g.applied)) > g.r.LogStartOffset() {
					_ = g.r.TakeSnapshot(int64(len(g.applied)), encodeState(g.applied))
				}
			case 5:
				g.pump(true)
				committed, hard := g.applied, g.r.hard
				if g.pending != nil && g.pending.HardState != nil {
					hard = HardState{} // the pending one may or may not survive
				}
				mode := memdisk.CrashLoseAll
				if rapid.Bool().Draw(t, "torn") {
					mode = memdisk.CrashTorn
				}
				g.disk.Crash(crashRng, mode)
				g.open()
				if hard != (HardState{}) && g.r.hard != hard {
					t.Fatalf("hard state %+v recovered as %+v", hard, g.r.hard)
				}
				// Everything committed is in the snapshot or the log.
				for _, e := range committed {
					var got Entry
					switch {
					case e.Offset < g.r.LogStartOffset():
						got = g.applied[e.Offset]
					case e.Offset < g.r.EndOffset():
						got = g.r.Entries(e.Offset, e.Offset+1)[0]
					default:
						t.Fatalf("committed entry %d lost: recovered log [%d, %d)", e.Offset, g.r.LogStartOffset(), g.r.EndOffset())
					}
					if got.Epoch != e.Epoch || !bytes.Equal(got.Data, e.Data) {
						t.Fatalf("committed entry %d recovered as epoch %d %q, was epoch %d %q", e.Offset, got.Epoch, got.Data, e.Epoch, e.Data)
					}
				}
				continue
			}
			g.pump(false)
		}
	})
}
