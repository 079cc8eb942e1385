package faulty

import (
	"fmt"
	"path"
)

// Op is a kind of Disk or File call a Rule can fail.
type Op int

// The calls a Rule can fail.
const (
	OpOpen     Op = iota + 1 // Disk.Open
	OpMkdirAll               // Disk.MkdirAll
	OpList                   // Disk.List
	OpRename                 // Disk.Rename (matches the old or the new path)
	OpRemove                 // Disk.Remove
	OpSyncDir                // Disk.SyncDir
	OpWrite                  // File.Append and File.WriteAt
	OpRead                   // File.ReadAt
	OpTruncate               // File.Truncate
	OpSync                   // File.Sync
)

var opNames = map[Op]string{
	OpOpen: "open", OpMkdirAll: "mkdirall", OpList: "list", OpRename: "rename",
	OpRemove: "remove", OpSyncDir: "syncdir", OpWrite: "write", OpRead: "read",
	OpTruncate: "truncate", OpSync: "sync",
}

// String returns the op's lowercase name.
func (op Op) String() string {
	if name, ok := opNames[op]; ok {
		return name
	}
	return fmt.Sprintf("op(%d)", int(op))
}

// Fault is the error a firing Rule injects.
type Fault int

// The faults a Rule can inject.
const (
	// FaultIO is an I/O error (EIO); the call fails with env.ErrIO.
	FaultIO Fault = iota + 1
	// FaultNoSpace is a full device (ENOSPC); the call fails with
	// env.ErrNoSpace. On a Sync it becomes env.ErrIO, as any fsync failure
	// does.
	FaultNoSpace
)

// String returns the fault's errno name.
func (f Fault) String() string {
	switch f {
	case FaultIO:
		return "EIO"
	case FaultNoSpace:
		return "ENOSPC"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Rule fails the Nth call of kind Op on a path matching PathPattern, and with
// Persist every matching call after it too. Each rule counts its own matching
// calls from 1, so a plan fires at the same calls in every run that makes the
// same calls.
type Rule struct {
	// Op is the kind of call the rule counts.
	Op Op
	// PathPattern selects paths with path.Match ("*.log", "topic-0/*");
	// empty matches every path.
	PathPattern string
	// Nth is the 1-based index, among the calls the rule matches, of the
	// first call it fails.
	Nth int
	// Persist fails every matching call from the Nth on: a device that
	// stays broken or full.
	Persist bool
	// Fault is the error to inject.
	Fault Fault
	// ShortWriteBytes > 0, on OpWrite only, makes the failing write a torn
	// one: it writes the first ShortWriteBytes bytes of p (at most
	// len(p)-1) through the wrapped disk, then fails. The file's Size grows
	// by those bytes, as a real write that runs out of space midway does.
	ShortWriteBytes int
}

// Plan is the list of rules of a faulty Disk. When several rules fire on one
// call, the first in the plan decides the fault; every matching rule counts
// the call either way.
type Plan []Rule

// check reports the first invalid rule, naming its field.
func (p Plan) check() error {
	for i, r := range p {
		if _, ok := opNames[r.Op]; !ok {
			return fmt.Errorf("faulty: rule %d: Op %d is not a known op", i, int(r.Op))
		}
		if r.Fault != FaultIO && r.Fault != FaultNoSpace {
			return fmt.Errorf("faulty: rule %d: Fault %d is not a known fault", i, int(r.Fault))
		}
		if r.Nth < 1 {
			return fmt.Errorf("faulty: rule %d: Nth is %d, must be >= 1", i, r.Nth)
		}
		if _, err := path.Match(r.PathPattern, ""); err != nil {
			return fmt.Errorf("faulty: rule %d: PathPattern %q: %w", i, r.PathPattern, err)
		}
		if r.ShortWriteBytes < 0 {
			return fmt.Errorf("faulty: rule %d: ShortWriteBytes is %d, must be >= 0", i, r.ShortWriteBytes)
		}
		if r.ShortWriteBytes > 0 && r.Op != OpWrite {
			return fmt.Errorf("faulty: rule %d: ShortWriteBytes applies to OpWrite only, not %s", i, r.Op)
		}
	}
	return nil
}

// matches reports whether the rule counts a call of kind op on any of paths.
func (r Rule) matches(op Op, paths ...string) bool {
	if r.Op != op {
		return false
	}
	if r.PathPattern == "" {
		return true
	}
	for _, p := range paths {
		if ok, _ := path.Match(r.PathPattern, p); ok { // the pattern was checked in New
			return true
		}
	}
	return false
}
