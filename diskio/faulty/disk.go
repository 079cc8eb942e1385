package faulty

import (
	"fmt"
	"sync"

	"strand/core/env"
)

// Injection records one injected fault.
type Injection struct {
	// Rule is the index in the Plan of the rule that fired.
	Rule int
	// Op and Path name the call that failed.
	Op   Op
	Path string
	// Call is the rule's count of matching calls at this one, from 1.
	Call int
}

// Disk is an env.Disk that forwards to another and fails the calls its Plan
// names. It is safe for use from several goroutines, though the core uses it
// from one.
type Disk struct {
	inner    env.Disk
	plan     Plan
	mu       sync.Mutex
	counts   []int // per rule: matching calls so far
	injected []Injection
}

var _ env.Disk = (*Disk)(nil)

// New wraps inner with the faults of plan.
func New(inner env.Disk, plan Plan) (*Disk, error) {
	if inner == nil {
		return nil, fmt.Errorf("faulty: inner disk is nil")
	}
	if err := plan.check(); err != nil {
		return nil, err
	}
	return &Disk{inner: inner, plan: plan, counts: make([]int, len(plan))}, nil
}

// Injected returns the faults injected so far, in order.
func (d *Disk) Injected() []Injection {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Injection(nil), d.injected...)
}

// decide counts a call against every matching rule and returns the first
// rule that fires, or nil.
func (d *Disk) decide(op Op, paths ...string) *Rule {
	d.mu.Lock()
	defer d.mu.Unlock()
	var fired *Rule
	for i := range d.plan {
		r := &d.plan[i]
		if !r.matches(op, paths...) {
			continue
		}
		d.counts[i]++
		call := d.counts[i]
		if fired != nil || call < r.Nth || (call > r.Nth && !r.Persist) {
			continue
		}
		fired = r
		d.injected = append(d.injected, Injection{Rule: i, Op: op, Path: paths[0], Call: call})
	}
	return fired
}

// injectedErr is the error a fired rule returns.
func injectedErr(r *Rule, op Op, filePath string) error {
	sentinel := env.ErrIO
	if r.Fault == FaultNoSpace && op != OpSync && op != OpSyncDir {
		sentinel = env.ErrNoSpace
	}
	return fmt.Errorf("faulty: injected %s on %s %s: %w", r.Fault, op, filePath, sentinel)
}

// MkdirAll forwards unless the plan fails it.
func (d *Disk) MkdirAll(dir string) error {
	if r := d.decide(OpMkdirAll, dir); r != nil {
		return injectedErr(r, OpMkdirAll, dir)
	}
	return d.inner.MkdirAll(dir)
}

// Open forwards unless the plan fails it, and wraps the File it opens.
func (d *Disk) Open(filePath string, opts env.OpenOptions) (env.File, error) {
	if r := d.decide(OpOpen, filePath); r != nil {
		return nil, injectedErr(r, OpOpen, filePath)
	}
	inner, err := d.inner.Open(filePath, opts)
	if err != nil {
		return nil, err
	}
	return &File{disk: d, inner: inner}, nil
}

// List forwards unless the plan fails it.
func (d *Disk) List(dir string) ([]string, error) {
	if r := d.decide(OpList, dir); r != nil {
		return nil, injectedErr(r, OpList, dir)
	}
	return d.inner.List(dir)
}

// Rename forwards unless the plan fails it; rules match either path.
func (d *Disk) Rename(oldPath, newPath string) error {
	if r := d.decide(OpRename, oldPath, newPath); r != nil {
		return injectedErr(r, OpRename, oldPath+" -> "+newPath)
	}
	return d.inner.Rename(oldPath, newPath)
}

// Remove forwards unless the plan fails it.
func (d *Disk) Remove(filePath string) error {
	if r := d.decide(OpRemove, filePath); r != nil {
		return injectedErr(r, OpRemove, filePath)
	}
	return d.inner.Remove(filePath)
}

// SyncDir forwards. When the plan fails it, the wrapped disk still syncs, so
// that done reaches the event loop the wrapped disk's way, but done gets the
// injected error instead of the outcome.
func (d *Disk) SyncDir(dir string, done func(error)) {
	r := d.decide(OpSyncDir, dir)
	if r == nil {
		d.inner.SyncDir(dir, done)
		return
	}
	injected := injectedErr(r, OpSyncDir, dir)
	d.inner.SyncDir(dir, func(error) { done(injected) })
}
