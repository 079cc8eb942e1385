package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// errDecompressedTooLarge marks output beyond the caller's bound, so that
// CheckProduced can answer MESSAGE_TOO_LARGE rather than CORRUPT_MESSAGE.
var errDecompressedTooLarge = errors.New("decompressed records exceed the limit")

// xerialMagic opens a snappy payload in the xerial framing that the Java
// client (snappy-java's SnappyOutputStream) sends: the magic, then a version
// and a minimum compatible version (int32 each), then blocks, each an int32
// big-endian length followed by one raw snappy block. franz-go and librdkafka
// send one raw snappy block instead; Kafka accepts both.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// xerialHeaderBytes is the magic plus the two version fields.
const xerialHeaderBytes = 16

// decompress returns the records section of a batch compressed with codec,
// refusing to produce more than decompressedBytesMax bytes: a few kilobytes of
// gzip or zstd can expand to gigabytes, and the output is what we allocate.
// It starts no goroutines: lz4 and zstd are asked for a concurrency of one,
// and every decoder is created for this call alone, so nothing is shared.
func decompress(codec Codec, src []byte, decompressedBytesMax int) ([]byte, error) {
	switch codec {
	case CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readBounded(r, decompressedBytesMax, gzipSizeHint(src), "gzip")
	case CodecSnappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return decodeXerial(src, decompressedBytesMax)
		}
		return decodeSnappyBlock(nil, src, decompressedBytesMax)
	case CodecLZ4:
		r := lz4.NewReader(bytes.NewReader(src))
		if err := r.Apply(lz4.ConcurrencyOption(1)); err != nil {
			panic(fmt.Sprintf("batch: lz4 rejected concurrency 1: %v", err)) // a fixed, valid option
		}
		return readBounded(r, decompressedBytesMax, 4*len(src), "lz4") // lz4 rarely exceeds 4:1 on real data
	case CodecZstd:
		return decodeZstd(src, decompressedBytesMax)
	}
	panic(fmt.Sprintf("batch: decompress called with codec %d", codec)) // Verify rejects unknown codecs first
}

// readBounded reads r to its end (so gzip and lz4 check their trailing
// checksums), failing once it would exceed limit bytes. sizeHint, an
// untrusted guess at the output size, only sets the first allocation, and
// is clamped to the limit.
func readBounded(r io.Reader, limit, sizeHint int, codecName string) ([]byte, error) {
	out := make([]byte, 0, min(max(sizeHint, 512), limit)+1)
	for {
		if len(out) == cap(out) {
			out = slices.Grow(out, min(cap(out), limit+1-len(out)))
		}
		n, err := r.Read(out[len(out):min(cap(out), limit+1)])
		out = out[:len(out)+n]
		if len(out) > limit {
			return nil, fmt.Errorf("%s: %w of %d bytes", codecName, errDecompressedTooLarge, limit)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", codecName, err)
		}
	}
}

// gzipSizeHint reads the size a gzip stream records in its trailer (ISIZE,
// little-endian, modulo 2^32), true for single-member streams, which is what
// producers send. Deflate cannot expand beyond about 1032:1, so a forged
// ISIZE cannot make a small input reserve more than that.
func gzipSizeHint(src []byte) int {
	if len(src) < 4 {
		return 0
	}
	return min(int(binary.LittleEndian.Uint32(src[len(src)-4:])), 1032*len(src))
}

// decodeSnappyBlock appends the decoding of one raw snappy block to dst. The
// block states its decoded length up front, so the bound is checked before
// anything is allocated. It uses the strict decoder: the faster one also
// accepts the s2 extension, which Java consumers could not read back.
func decodeSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > limit-len(dst) {
		return nil, fmt.Errorf("snappy: block of %d bytes after %d: %w of %d bytes", n, len(dst), errDecompressedTooLarge, limit)
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	decoded, err := snappy.DecodeStrict(dst[start:], block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if len(decoded) != n || (n > 0 && &decoded[0] != &dst[start]) {
		panic(fmt.Sprintf("batch: snappy decoded %d bytes outside the %d-byte room made for them", len(decoded), n))
	}
	return dst, nil
}

// decodeXerial decodes the xerial framing (see xerialMagic) block by block.
func decodeXerial(src []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderBytes {
		return nil, fmt.Errorf("snappy: xerial header is %d bytes, need %d", len(src), xerialHeaderBytes)
	}
	var out []byte
	for pos := xerialHeaderBytes; pos < len(src); {
		if len(src)-pos < 4 {
			return nil, fmt.Errorf("snappy: xerial block length at byte %d is cut off", pos)
		}
		blockBytes := int(binary.BigEndian.Uint32(src[pos:]))
		pos += 4
		if blockBytes > len(src)-pos {
			return nil, fmt.Errorf("snappy: xerial block at byte %d claims %d bytes, %d remain", pos-4, blockBytes, len(src)-pos)
		}
		var err error
		if out, err = decodeSnappyBlock(out, src[pos:pos+blockBytes], limit); err != nil {
			return nil, err
		}
		pos += blockBytes
	}
	return out, nil
}

// decodeZstd decodes with a decoder made for this call. With concurrency 1
// and no reader, klauspost's NewReader starts no goroutines and DecodeAll
// runs on the caller's goroutine; WithDecoderMaxMemory bounds DecodeAll's
// output, checked against the frame's declared size before decoding too.
// klauspost also caps a frame's declared window by that bound, although
// DecodeAll never allocates a window, so a frame whose window exceeds the
// bound is refused as too large whatever its content (see ProduceLimits).
func decodeZstd(src []byte, limit int) ([]byte, error) {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(limit)),
	)
	if err != nil {
		panic(fmt.Sprintf("batch: zstd rejected fixed decoder options: %v", err))
	}
	defer d.Close()
	out, err := d.DecodeAll(src, nil)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, fmt.Errorf("zstd: %w of %d bytes", errDecompressedTooLarge, limit)
	}
	if errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return nil, fmt.Errorf("zstd: frame window larger than the bound: %w of %d bytes", errDecompressedTooLarge, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return out, nil
}

// Decompress returns the records section src of a batch compressed with
// codec, refusing to produce more than decompressedBytesMax bytes. For
// CodecNone it returns src itself, not a copy. The log cleaner uses it to
// read the records of stored batches; an unknown codec is an *Error.
func Decompress(codec Codec, src []byte, decompressedBytesMax int) ([]byte, error) {
	switch codec {
	case CodecNone:
		return src, nil
	case CodecGzip, CodecSnappy, CodecLZ4, CodecZstd:
		return decompress(codec, src, decompressedBytesMax)
	}
	return nil, &Error{"attributes", fmt.Sprintf("unknown compression codec %d", codec), codeUnsupportedCompression}
}

// DecompressionBufferBytes is what checking batch b may allocate at once to
// decompress its records within decompressedBytesMax, for a caller that
// bounds decompression buffers over many goroutines: 0 for an uncompressed
// batch or one too short to name its codec; for snappy the decoded length
// its blocks declare, which the decoder checks before allocating (kgo's
// default codec, so honest traffic reserves what it uses); for gzip, lz4
// and zstd the bound itself, as their streams declare nothing the decoders
// hold them to. It never exceeds decompressedBytesMax.
func DecompressionBufferBytes(b []byte, decompressedBytesMax int) int {
	h, err := ParseHeader(b)
	if err != nil || h.Codec() == CodecNone {
		return 0
	}
	if h.Codec() != CodecSnappy {
		return decompressedBytesMax
	}
	src := b[HeaderBytes:]
	if !bytes.HasPrefix(src, xerialMagic) {
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return 0 // refused before anything is allocated
		}
		return min(n, decompressedBytesMax)
	}
	total := 0
	for pos := xerialHeaderBytes; pos+4 <= len(src) && total < decompressedBytesMax; {
		blockBytes := int(binary.BigEndian.Uint32(src[pos:]))
		pos += 4
		if blockBytes > len(src)-pos {
			break
		}
		if n, err := snappy.DecodedLen(src[pos : pos+blockBytes]); err == nil {
			total += n
		}
		pos += blockBytes
	}
	return min(total, decompressedBytesMax)
}
