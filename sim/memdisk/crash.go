package memdisk

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// CrashMode says how much unsynced state a Crash keeps.
type CrashMode int

const (
	// CrashLoseAll is a power loss after which only durable state remains.
	CrashLoseAll CrashMode = iota
	// CrashTorn is a power loss in the middle of writeback: each file and
	// directory keeps a random prefix of its unsynced changes, the last kept
	// write torn at a random byte.
	CrashTorn
	// CrashKeepAll is a process crash (kill -9) without power loss: the page
	// cache survives, so everything written is kept, still unsynced.
	CrashKeepAll
)

func (m CrashMode) String() string {
	switch m {
	case CrashLoseAll:
		return "lose-all"
	case CrashTorn:
		return "torn"
	case CrashKeepAll:
		return "keep-all"
	}
	return fmt.Sprintf("CrashMode(%d)", int(m))
}

// Crash simulates the end of the process: every open File becomes unusable
// (env.ErrClosed), pending completions are dropped (their done callbacks
// never run), and each file's and directory's content reverts to its durable
// state plus possibly part of the unsynced changes, chosen with rng according
// to mode (see the package comment). rng is used only for CrashTorn (it may
// be nil otherwise), and only for integer draws. Crash returns a description of what was kept, for
// traces: one line per file or directory that had unsynced changes, in path
// order.
func (d *Disk) Crash(rng *rand.Rand, mode CrashMode) string {
	d.epoch++
	d.queued = nil
	c := crasher{disk: d, rng: rng, mode: mode, visited: map[*node]bool{}}
	if mode == CrashKeepAll {
		c.note("crash %s: all written data kept, still unsynced", mode)
	} else {
		c.note("crash %s:", mode)
	}
	d.usedBytes = 0
	c.visit(d.root, ".")
	if mode != CrashKeepAll {
		// A misdirected write kept by this crash may have landed in a
		// file visited before it: every file now shows its medium.
		for n := range c.visited { // order-independent: each file copies its own durable content
			if !n.isDir() && n.file.diverged {
				n.file.reveal()
				n.file.reprefix()
			}
		}
	}
	return strings.Join(c.lines, "\n")
}

// crasher walks the tree as it is after the crash, from the root, in
// bytewise name order, so that the draws from rng follow one fixed order.
type crasher struct {
	disk    *Disk
	rng     *rand.Rand
	mode    CrashMode
	visited map[*node]bool // guards against a node reachable twice
	lines   []string
}

func (c *crasher) note(format string, args ...any) {
	c.lines = append(c.lines, fmt.Sprintf(format, args...))
}

func (c *crasher) visit(n *node, p string) {
	if c.visited[n] {
		n.links++
		return
	}
	c.visited[n] = true
	n.openHandles = 0
	n.links = 1
	n.endTransientReadFaults()
	if n.isDir() {
		c.crashDir(n.dir, p)
		for _, name := range sortedNames(n.dir.current) {
			c.visit(n.dir.current[name], joinPath(p, name))
		}
		return
	}
	c.crashFile(n.file, p)
	c.disk.usedBytes += int64(len(n.file.current))
}

func joinPath(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// keptCount draws how many of pendingCount changes survive.
func (c *crasher) keptCount(pendingCount int) int {
	switch c.mode {
	case CrashKeepAll:
		return pendingCount
	case CrashTorn:
		return c.rng.IntN(pendingCount + 1)
	}
	return 0
}

func (c *crasher) crashDir(dir *dirNode, p string) {
	if len(dir.pending) == 0 || c.mode == CrashKeepAll {
		return
	}
	kept := c.keptCount(len(dir.pending))
	c.note("  %s/: kept %d of %d entry changes", p, kept, len(dir.pending))
	for _, op := range dir.pending[:kept] {
		applyDirOp(dir.durable, op)
	}
	dir.pending = nil
	dir.current = cloneEntries(dir.durable)
}

func (c *crasher) crashFile(f *fileNode, p string) {
	if len(f.pending) == 0 || c.mode == CrashKeepAll {
		if f.diverged && c.mode != CrashKeepAll {
			c.note("  %s: the medium's content differs from what was written", p)
		}
		return
	}
	kept := c.keptCount(len(f.pending))
	torn := ""
	for i, op := range f.pending[:kept] {
		if i == kept-1 && c.mode == CrashTorn && !op.truncate {
			writeBytes := op.writeBytes(f.prefix)
			keptBytes := c.rng.IntN(int(writeBytes) + 1)
			torn = fmt.Sprintf(", last write torn at %d of %d bytes", keptBytes, writeBytes)
			if f.prefix {
				op.size = int64(keptBytes)
			} else {
				op.data = op.data[:keptBytes]
			}
		}
		if f.prefix {
			f.durableLen = op.offset + op.size
		} else {
			f.applyDurable(op)
		}
	}
	c.note("  %s: kept %d of %d changes%s", p, kept, len(f.pending), torn)
	f.pending = nil
	if f.prefix {
		// What was lost lies past durableLen: cut it off. Later appends
		// overwrite those bytes in place; nothing else refers to them.
		f.current = f.current[:f.durableLen]
		return
	}
	f.current = f.durable
	f.diverged = false
	f.reprefix()
}
