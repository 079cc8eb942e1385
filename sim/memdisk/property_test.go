package memdisk

import (
	"bytes"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"strand/core/env"
)

// modelOp is one change in the reference model: a write, or a truncate when
// truncate is set.
type modelOp struct {
	truncate bool
	offset   int64
	data     []byte
	size     int64
}

func (op modelOp) apply(buf []byte) []byte {
	if op.truncate {
		if op.size <= int64(len(buf)) {
			return buf[:op.size]
		}
		return append(buf, make([]byte, op.size-int64(len(buf)))...)
	}
	if len(op.data) == 0 {
		return buf
	}
	if end := op.offset + int64(len(op.data)); end > int64(len(buf)) {
		buf = append(buf, make([]byte, end-int64(len(buf)))...)
	}
	copy(buf[op.offset:], op.data)
	return buf
}

// modelFile is a reference model of one file, written independently of the
// implementation: its durable bytes and the changes made since, numbered
// globally so that a Sync can name the changes it covers.
type modelFile struct {
	durable []byte
	ops     []modelOp
	opBase  int // global number of ops[0]
}

func replayModel(durable []byte, ops []modelOp) []byte {
	out := slices.Clone(durable)
	for _, op := range ops {
		out = op.apply(out)
	}
	return out
}

func (m *modelFile) current() []byte { return replayModel(m.durable, m.ops) }

// syncTo makes the changes numbered below end durable.
func (m *modelFile) syncTo(end int) {
	n := end - m.opBase
	if n <= 0 {
		return
	}
	m.durable = replayModel(m.durable, m.ops[:n])
	m.ops = m.ops[n:]
	m.opBase = end
}

// survivors lists every content a crash may leave: a prefix of the changes
// applied to durable, the last kept write torn at any byte.
func (m *modelFile) survivors() [][]byte {
	out := [][]byte{slices.Clone(m.durable)}
	state := slices.Clone(m.durable)
	for _, op := range m.ops {
		if !op.truncate {
			for keep := range len(op.data) {
				torn := op
				torn.data = op.data[:keep]
				out = append(out, torn.apply(slices.Clone(state)))
			}
		}
		state = op.apply(state)
		out = append(out, slices.Clone(state))
	}
	return out
}

// TestPropertyCrashKeepsAPrefixOfTheOpLog drives two files with arbitrary
// writes, truncates, syncs (completed or not) and crashes of every mode, and
// checks against the reference model that: reads always see the model's
// current content; the implementation's invariant (pending applied to durable
// gives current) holds; after a crash each file holds exactly the durable
// content (lose-all), exactly the current content (keep-all), or one of the
// model's survivors (torn).
func TestPropertyCrashKeepsAPrefixOfTheOpLog(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := New(Options{})
		names := []string{"a", "b"}
		models := map[string]*modelFile{}
		handles := map[string]env.File{}
		for _, name := range names {
			handles[name] = create(rt, d, name)
			models[name] = &modelFile{}
		}
		syncDirNow(rt, d, ".")
		type pendingSync struct {
			name string
			end  int
		}
		var pending []pendingSync
		reopen := func() {
			for _, name := range names {
				handles[name] = mustOpen(rt, d, name, env.OpenOptions{})
			}
		}
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for range steps {
			name := rapid.SampledFrom(names).Draw(rt, "file")
			f, m := handles[name], models[name]
			switch rapid.IntRange(0, 6).Draw(rt, "action") {
			case 0:
				data := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(rt, "data")
				mustWrite(rt, f.Append(slices.Clone(data)))
				m.ops = append(m.ops, modelOp{offset: int64(len(m.current())), data: data})
			case 1:
				data := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(rt, "data")
				off := rapid.Int64Range(0, f.Size()+4).Draw(rt, "offset")
				mustWrite(rt, f.WriteAt(slices.Clone(data), off))
				m.ops = append(m.ops, modelOp{offset: off, data: data})
			case 2:
				size := rapid.Int64Range(0, f.Size()+4).Draw(rt, "size")
				mustWrite(rt, f.Truncate(size))
				m.ops = append(m.ops, modelOp{truncate: true, size: size})
			case 3:
				f.Sync(func(err error) {
					if err != nil {
						rt.Fatalf("sync: %v", err)
					}
				})
				pending = append(pending, pendingSync{name, m.opBase + len(m.ops)})
			case 4:
				d.RunPending()
				for _, p := range pending {
					models[p.name].syncTo(p.end)
				}
				pending = nil
			case 5, 6:
				mode := rapid.SampledFrom([]CrashMode{CrashLoseAll, CrashTorn, CrashKeepAll}).Draw(rt, "mode")
				seed := rapid.Uint64().Draw(rt, "seed")
				trace := d.Crash(seeded(seed), mode)
				pending = nil
				for _, n := range names {
					checkCrashOutcome(rt, d, n, models[n], mode, trace)
				}
				reopen()
			}
			for _, n := range names {
				checkAgainstModel(rt, d, n, models[n])
			}
		}
	})
}

func checkCrashOutcome(rt *rapid.T, d *Disk, name string, m *modelFile, mode CrashMode, trace string) {
	got, err := d.ReadFile(name)
	if err != nil {
		rt.Fatalf("%s after crash: %v", name, err)
	}
	switch mode {
	case CrashLoseAll:
		if !bytes.Equal(got, m.durable) {
			rt.Fatalf("%s after lose-all: %q, want durable %q\n%s", name, got, m.durable, trace)
		}
	case CrashKeepAll:
		if want := m.current(); !bytes.Equal(got, want) {
			rt.Fatalf("%s after keep-all: %q, want current %q\n%s", name, got, want, trace)
		}
		return // nothing became durable: the model is unchanged
	case CrashTorn:
		if !slices.ContainsFunc(m.survivors(), func(s []byte) bool { return bytes.Equal(s, got) }) {
			rt.Fatalf("%s after torn crash: %q is no prefix of the op log %v on durable %q\n%s",
				name, got, m.ops, m.durable, trace)
		}
	}
	*m = modelFile{durable: got, opBase: m.opBase + len(m.ops)}
}

// replayPending applies f's pending changes to a copy of its durable
// content, reading the bytes of a prefix-form file's appends from current.
func replayPending(f *fileNode) []byte {
	pending := f.pending
	if f.prefix {
		pending = nil
		for _, op := range f.pending {
			op.data, op.size = f.current[op.offset:op.offset+op.size], 0
			pending = append(pending, op)
		}
	}
	return replayFile(f.durableContent(), pending)
}

func checkAgainstModel(rt *rapid.T, d *Disk, name string, m *modelFile) {
	got, err := d.ReadFile(name)
	if err != nil {
		rt.Fatalf("read %s: %v", name, err)
	}
	if want := m.current(); !bytes.Equal(got, want) {
		rt.Fatalf("%s: content %q, model %q", name, got, want)
	}
	n, _ := d.lookupFile("check", name)
	if replayed := replayPending(n.file); !bytes.Equal(replayed, n.file.current) {
		rt.Fatalf("%s: pending applied to durable gives %q, current is %q", name, replayed, n.file.current)
	}
	if durable := n.file.durableContent(); !bytes.Equal(durable, m.durable) {
		rt.Fatalf("%s: durable %q, model %q", name, durable, m.durable)
	}
}

// TestPropertyDirectoryCrash drives one directory with arbitrary creates,
// removes, renames and SyncDirs, and checks that after a crash its entries
// are those of a prefix of the unsynced entry changes applied to the durable
// entries (exactly the durable ones for lose-all).
func TestPropertyDirectoryCrash(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := New(Options{})
		durable := []string{}
		var log [][]string // the entry set after each unsynced change
		current := func() []string {
			if len(log) == 0 {
				return durable
			}
			return log[len(log)-1]
		}
		names := []string{"a", "b", "c"}
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for range steps {
			name := rapid.SampledFrom(names).Draw(rt, "name")
			cur := current()
			switch rapid.IntRange(0, 4).Draw(rt, "action") {
			case 0:
				mustWrite(rt, create(rt, d, name).Close())
				if !slices.Contains(cur, name) {
					log = append(log, sortedWith(cur, name))
				}
			case 1:
				err := d.Remove(name)
				if slices.Contains(cur, name) != (err == nil) {
					rt.Fatalf("remove %s: %v with entries %v", name, err, cur)
				}
				if err == nil {
					log = append(log, sortedWithout(cur, name))
				}
			case 2:
				to := rapid.SampledFrom(names).Draw(rt, "to")
				err := d.Rename(name, to)
				if slices.Contains(cur, name) != (err == nil) {
					rt.Fatalf("rename %s: %v with entries %v", name, err, cur)
				}
				if err == nil && to != name {
					log = append(log, sortedWith(sortedWithout(cur, name), to))
				}
			case 3:
				syncDirNow(rt, d, ".")
				durable, log = cur, nil
			case 4:
				mode := rapid.SampledFrom([]CrashMode{CrashLoseAll, CrashTorn}).Draw(rt, "mode")
				trace := d.Crash(seeded(rapid.Uint64().Draw(rt, "seed")), mode)
				got, _ := d.List(".")
				allowed := [][]string{durable}
				if mode == CrashTorn {
					allowed = append(allowed, log...)
				}
				if !slices.ContainsFunc(allowed, func(s []string) bool { return slices.Equal(s, got) }) {
					rt.Fatalf("%s crash left %v; allowed %v\n%s", mode, got, allowed, trace)
				}
				durable, log = got, nil
			}
			if got, _ := d.List("."); !slices.Equal(got, current()) {
				rt.Fatalf("entries %v, model %v", got, current())
			}
		}
	})
}

func sortedWith(names []string, name string) []string {
	out := slices.Clone(names)
	if !slices.Contains(out, name) {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func sortedWithout(names []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == name })
}

// durableContent returns a file's durable content, for the model
// comparison; the caller must not modify it.
func (f *fileNode) durableContent() []byte {
	if f.prefix {
		return f.current[:f.durableLen]
	}
	return f.durable
}
