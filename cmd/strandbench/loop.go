package main

// eventLoop stands in for a node's event loop: the benchmark's goroutine runs
// the log and, in between, the completions diskio posts from its I/O worker.
// The log never waits for a completion except when the benchmark asks it to
// flush, so the loop only drains what has arrived (runPending) after each
// call, and blocks (runUntil) only for a flush's answer.
type eventLoop struct {
	posted chan func()
}

// postedMax bounds the completions waiting for the loop. diskio's worker
// posts at most one per queued Sync, and the benchmark drains after every
// call, so the worker never waits long on a full queue.
const postedMax = 1024

func newEventLoop() *eventLoop {
	return &eventLoop{posted: make(chan func(), postedMax)}
}

// post is diskio.Options.Post: called from the I/O worker goroutine.
func (l *eventLoop) post(fn func()) { l.posted <- fn }

// runPending runs every completion already posted, without waiting.
func (l *eventLoop) runPending() {
	for {
		select {
		case fn := <-l.posted:
			fn()
		default:
			return
		}
	}
}

// runUntil runs completions, waiting for them, until *done is set.
func (l *eventLoop) runUntil(done *bool) {
	for !*done {
		(<-l.posted)()
	}
}
