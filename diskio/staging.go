package diskio

// Staging: File.Append copies the caller's bytes into buffers the writer
// owns and recycles, so that the caller may reuse its own buffer as soon as
// Append returns. realnet reads each Produce request into a frame buffer it
// recycles once the request is handled; without the copy every frame would
// live until the write worker had written it, and the broker would allocate
// (and the kernel fault in and zero) a fresh frame per request. The copy
// costs one memmove per appended byte on the event loop; it also makes the
// appends of one file that share a chunk adjacent in memory.
//
// Appends are written in queue order, so chunks are filled and emptied in
// order too: a chunk is recycled once every append staged in it is written
// and it is no longer the one being filled (or, when it is the one being
// filled, it starts over from its beginning).

// stagingChunkBytes is the size of a staging chunk: a whole default-sized
// Produce batch (kgo's 1,000,012-byte ProducerBatchMaxBytes) fits in one.
// An append larger than a chunk is staged in a buffer of its own, which is
// not recycled.
const stagingChunkBytes = 4 << 20

// spareChunksMax bounds the empty chunks kept for reuse, so that a burst
// that filled the whole write queue does not pin its memory for good.
const spareChunksMax = 4

// poisonRecycledStaging, set by the package's tests, overwrites a chunk's
// bytes when it is recycled, so that a write or read still referring to them
// sees garbage rather than passing by luck.
var poisonRecycledStaging bool

// stagingPoisonByte is what recycled staging bytes are overwritten with.
const stagingPoisonByte = 0xdb

// stagingChunk is one buffer of staged appends.
type stagingChunk struct {
	buf []byte
	// used is how much of buf is handed out; unstaged counts the appends
	// staged in it and not yet written.
	used     int
	unstaged int
}

// staging is a writer's chunks; guarded by writer.mu.
type staging struct {
	// filling is the chunk appends are staged in; nil before the first.
	filling *stagingChunk
	spare   []*stagingChunk
}

// stage copies p into a staging buffer and returns the copy, with its
// chunk (nil for an append larger than a chunk) and its position there.
func (s *staging) stage(p []byte) ([]byte, *stagingChunk, int) {
	if len(p) > stagingChunkBytes {
		return append([]byte(nil), p...), nil, 0
	}
	if s.filling == nil || len(p) > len(s.filling.buf)-s.filling.used {
		s.replaceFilling()
	}
	c := s.filling
	at := c.used
	staged := c.buf[at : at+len(p) : at+len(p)]
	copy(staged, p)
	c.used += len(p)
	c.unstaged++
	return staged, c, at
}

// replaceFilling starts filling an empty chunk: a spare one or a new one.
// The chunk filled so far is recycled when its last append is written.
func (s *staging) replaceFilling() {
	old := s.filling
	if n := len(s.spare); n > 0 {
		s.filling = s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
	} else {
		s.filling = &stagingChunk{buf: make([]byte, stagingChunkBytes)}
	}
	if old != nil && old.unstaged == 0 {
		s.recycle(old)
	}
}

// written records that an append staged in c (nil: in a buffer of its own)
// is written, so its bytes are no longer referenced.
func (s *staging) written(c *stagingChunk) {
	if c == nil {
		return
	}
	c.unstaged--
	if c.unstaged < 0 {
		panic("diskio: a staging chunk has more appends written than staged")
	}
	if c.unstaged > 0 {
		return
	}
	if c == s.filling {
		s.poison(c)
		c.used = 0
		return
	}
	s.recycle(c)
}

// recycle keeps an emptied chunk as a spare, or lets it go.
func (s *staging) recycle(c *stagingChunk) {
	s.poison(c)
	c.used = 0
	if len(s.spare) < spareChunksMax {
		s.spare = append(s.spare, c)
	}
}

func (s *staging) poison(c *stagingChunk) {
	if !poisonRecycledStaging {
		return
	}
	used := c.buf[:c.used]
	if len(used) == 0 {
		return
	}
	used[0] = stagingPoisonByte
	for n := 1; n < len(used); n *= 2 {
		copy(used[n:], used[:n])
	}
}
