package cluster

import (
	"math/rand/v2"

	"strand/sim/sched"
)

// syncLatency delays a disk's completions (Sync, SyncDir) by the drawn
// fsync latency, in simulated time, keeping them in order, as diskio's
// per-directory I/O worker completes them: a crash before a completion
// drops it, so a crash during an fsync loses what it covered.
type syncLatency struct {
	s    *sched.Scheduler
	proc *sched.Node
	r    *rand.Rand
	cfg  *DeepDiskFaults
	hits *deepHits
	// lastNs is when the latest completion posted runs.
	lastNs int64
}

// post is the disk's memdisk.Options.Post.
func (l *syncLatency) post(fn func()) {
	cfg := l.cfg
	if cfg.SyncLatencyNsMax == 0 {
		l.proc.Post(fn)
		return
	}
	delayNs := sched.Int64Between(l.r, cfg.SyncLatencyNsMin, cfg.SyncLatencyNsMax)
	if sched.Chance(l.r, cfg.SyncTailPerMille) {
		delayNs += sched.Int64Between(l.r, 0, cfg.SyncTailNsMax)
	}
	l.lastNs = max(l.s.NowNs()+delayNs, l.lastNs)
	l.proc.At(l.lastNs, fn)
	l.hits.syncsDelayed++
}

// ioStalls stalls a node's event loop, about once every StallOneIn file
// operations, for up to StallNsMax: a read or write that blocks (a cold
// page, dirty-page throttling) holds the loop that made it, as the
// simulator's synchronous disk calls would if they took time.
type ioStalls struct {
	node *Node
	r    *rand.Rand
	cfg  *DeepDiskFaults
	// countdown is how many operations remain before the next stall.
	countdown int64
}

// rearm draws the operations until the next stall.
func (st *ioStalls) rearm() {
	if st.cfg.StallOneIn > 0 {
		st.countdown = sched.Int64Between(st.r, 1, 2*st.cfg.StallOneIn)
	}
}

// tick counts one file operation, and stalls the node when it is due.
func (st *ioStalls) tick() {
	if st.cfg.StallOneIn == 0 {
		return
	}
	if st.countdown--; st.countdown > 0 {
		return
	}
	st.rearm()
	proc := st.node.Proc
	if proc.Up() && !proc.Paused() {
		proc.PauseFor(sched.Int64Between(st.r, 1, st.cfg.StallNsMax))
		st.node.deep.stalls++
	}
}
