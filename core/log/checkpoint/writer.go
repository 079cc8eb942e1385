package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"strand/core/env"
)

// TempSuffix marks a checkpoint being written. A file with this suffix found
// at start-up is the leftover of an interrupted write and is removed.
const TempSuffix = ".tmp"

// Writer atomically replaces one checkpoint file. It runs on the event loop:
// Write returns at once and done runs later, from a disk completion.
type Writer struct {
	disk env.Disk
	dir  string
	name string

	// inFlight is true from the start of a write until its SyncDir completes.
	inFlight bool
	// inFlightDone are the callbacks the write in flight will answer.
	inFlightDone []func(error)
	// next is the newest content waiting for the write in flight, if any;
	// nextDone are the callbacks it will answer.
	next     []byte
	hasNext  bool
	nextDone []func(error)
	// failed is sticky: after a failed Sync the file is never synced again.
	failed error
}

// NewWriter returns a Writer for dir/name.
func NewWriter(disk env.Disk, dir, name string) *Writer {
	return &Writer{disk: disk, dir: dir, name: name}
}

// Path is the checkpoint's path.
func (w *Writer) Path() string { return joinPath(w.dir, w.name) }

// Write replaces the file with data. done (optional) runs once data, or a
// newer content written after it, is durable, or with the error that stopped
// it. Writes are serialized: if one is in flight, data waits, replacing any
// content that was already waiting (coalescing).
func (w *Writer) Write(data []byte, done func(error)) {
	if w.failed != nil {
		if done != nil {
			done(w.failed)
		}
		return
	}
	if w.inFlight {
		w.next, w.hasNext = data, true
		if done != nil {
			w.nextDone = append(w.nextDone, done)
		}
		return
	}
	var callbacks []func(error)
	if done != nil {
		callbacks = append(callbacks, done)
	}
	w.start(data, callbacks)
}

// Close abandons the writer: a write in flight completes without replacing
// the file and a waiting one never starts, so that a Writer made later for
// the same file (its log reopened in the same process) is not disturbed.
// Callbacks, then and later, get an error wrapping env.ErrClosed.
func (w *Writer) Close() {
	if w.failed == nil {
		w.failed = fmt.Errorf("checkpoint %s: writer closed: %w", w.Path(), env.ErrClosed)
	}
}

// Idle reports whether no write is in flight or waiting.
func (w *Writer) Idle() bool { return !w.inFlight }

// Await runs done once every write issued so far is durable (or failed): at
// once, from within Await, if the writer is idle.
func (w *Writer) Await(done func(error)) {
	switch {
	case !w.inFlight:
		done(w.failed)
	case w.hasNext:
		w.nextDone = append(w.nextDone, done)
	default:
		w.inFlightDone = append(w.inFlightDone, done)
	}
}

func (w *Writer) start(data []byte, done []func(error)) {
	w.inFlight = true
	w.inFlightDone = done
	tmpPath := w.Path() + TempSuffix
	f, err := w.disk.Open(tmpPath, env.OpenOptions{Create: true})
	if err == nil {
		err = writeAll(f, data)
	}
	if err != nil {
		if f != nil {
			_ = f.Close() // the write already failed; its error is the one to report
		}
		w.finish(fmt.Errorf("checkpoint %s: %w", tmpPath, err))
		return
	}
	f.Sync(func(err error) {
		closeErr := f.Close()
		if err == nil && closeErr != nil {
			err = closeErr
		}
		if err == nil {
			err = w.failed // closed meanwhile: the file may belong to a new Writer
		}
		if err == nil {
			err = w.disk.Rename(tmpPath, w.Path())
		}
		if err != nil {
			w.finish(fmt.Errorf("checkpoint %s: %w", tmpPath, err))
			return
		}
		w.disk.SyncDir(w.dir, func(err error) {
			if err != nil {
				err = fmt.Errorf("checkpoint %s: sync directory: %w", w.Path(), err)
			}
			w.finish(err)
		})
	})
}

func writeAll(f env.File, data []byte) error {
	if f.Size() > 0 {
		if err := f.Truncate(0); err != nil {
			return err
		}
	}
	if len(data) == 0 {
		return nil
	}
	return f.Append(data)
}

// finish answers the write in flight and starts the waiting one, if any.
func (w *Writer) finish(err error) {
	if err != nil {
		w.failed = err
	}
	done := w.inFlightDone
	w.inFlight, w.inFlightDone = false, nil
	for _, d := range done {
		d(err)
	}
	if !w.hasNext {
		return
	}
	data, waiting := w.next, w.nextDone
	w.next, w.hasNext, w.nextDone = nil, false, nil
	if w.failed != nil {
		for _, d := range waiting {
			d(w.failed)
		}
		return
	}
	w.start(data, waiting)
}

// ReadFile returns the whole content of the file at path. A missing file
// gives an error wrapping env.ErrNotExist.
func ReadFile(disk env.Disk, path string) ([]byte, error) {
	f, err := disk.Open(path, env.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only: nothing to lose on close
	data := make([]byte, f.Size())
	n, err := f.ReadAt(data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(data)) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// RemoveTemps removes leftover <name>.tmp files in dir, the traces of writes
// a crash interrupted. The checkpoint they would have replaced is intact.
func RemoveTemps(disk env.Disk, dir string) error {
	names, err := disk.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, TempSuffix) {
			if err := disk.Remove(joinPath(dir, name)); err != nil {
				return fmt.Errorf("remove leftover %s: %w", name, err)
			}
		}
	}
	return nil
}

func joinPath(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}
