// Package faulty wraps any env.Disk and injects disk faults (EIO, ENOSPC,
// torn short writes, failed fsyncs) by a deterministic Plan, so that tests
// of the real build can script what the simulator's disk does at random:
// "fail the 3rd write to *.log with ENOSPC after writing 100 bytes of it".
//
// It only decides which calls fail; everything else is the wrapped disk's
// doing, and completions still reach the event loop the wrapped disk's way.
// It must not be used in production: it exists for tests.
package faulty
