package log

import "fmt"

// Pinning keeps the bytes of in-flight Fetch responses in place
// (CLARIFICATIONS.md, "Zero copy and mmap"): realnet sends a region with
// sendfile from the segment's open file after the event loop has moved on,
// and a truncation or a close under it would send short or wrong bytes.
//
// While a segment is pinned, only its physical side waits; the log's
// logical state changes at once:
//   - Deletion (retention, DeleteRecords, truncation, topic deletion, the
//     cleaner's swap) removes the directory entries and closes the indexes
//     at once; the .log file is closed when the last pin goes. An unlinked
//     file stays readable through an open handle on both disks.
//   - A truncation inside a pinned segment cuts its logical size and
//     indexes at once but leaves the file's tail (cutPending), and rolls: the
//     segment takes no more appends, and the file is cut when the last pin
//     goes. A crash or a reopen before that finds a stale tail past the next
//     segment's base offset, which recovery cuts (recoverSegment's
//     endOffset), exactly as it cuts an unsynced truncation. (A reopen
//     while the old incarnation's regions are still pinned thus cuts under
//     them: that send fails and its connection closes.)
//   - A truncation that would empty a pinned segment deletes it instead and
//     starts a new one, a new file under the same name.

// Pin holds the segments of regions, which a Read of this log returned,
// until release runs. release must run exactly once, on the event loop.
func (l *Log) Pin(regions []Region) (release func()) {
	segments := make([]*segment, len(regions))
	for i, r := range regions {
		if r.seg == nil {
			panic(fmt.Sprintf("log %s: pinning a region at %d that no Read returned", l.dir, r.Position))
		}
		r.seg.pins++
		segments[i] = r.seg
	}
	released := false
	return func() {
		if released {
			panic(fmt.Sprintf("log %s: regions released twice", l.dir))
		}
		released = true
		for _, s := range segments {
			if err := s.unpin(); err != nil {
				_ = l.fail(err) // recorded; every later call reports it
			}
		}
	}
}

// unpin drops one pin and, with the last, does what waited for it: closes
// a closed segment's .log file, or cuts a truncated one.
func (s *segment) unpin() error {
	if s.pins <= 0 {
		panic(fmt.Sprintf("log: segment %d unpinned more often than pinned", s.baseOffset))
	}
	s.pins--
	if s.pins > 0 {
		return nil
	}
	switch {
	case s.closed:
		return s.log.Close()
	case s.cutPending:
		s.cutPending = false
		if err := s.log.Truncate(s.bytes); err != nil {
			return fmt.Errorf("truncate %s at %d: %w", s.log.Path(), s.bytes, err)
		}
		s.truncated = true // the next flush makes the cut durable
	}
	return nil
}
