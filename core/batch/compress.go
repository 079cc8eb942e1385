package batch

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compress returns raw, the records section of a batch, compressed with
// codec in the form Kafka clients read: a gzip stream, one raw snappy block
// (as franz-go and librdkafka send; Java's xerial framing is only needed on
// input), an LZ4 frame with 64 KiB blocks (as Kafka's Java client writes),
// or a zstd frame. For CodecNone it returns raw itself, not a copy.
//
// Like the decoders, the encoders run on the caller's goroutine: lz4 and zstd
// are created per call with a concurrency of one.
func Compress(codec Codec, raw []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return raw, nil
	case CodecGzip:
		var out bytes.Buffer
		w := gzip.NewWriter(&out)
		if _, err := w.Write(raw); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return out.Bytes(), nil
	case CodecSnappy:
		return snappy.Encode(nil, raw), nil
	case CodecLZ4:
		var out bytes.Buffer
		w := lz4.NewWriter(&out)
		if err := w.Apply(lz4.ConcurrencyOption(1), lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return nil, fmt.Errorf("lz4 options: %w", err)
		}
		if _, err := w.Write(raw); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return out.Bytes(), nil
	case CodecZstd:
		w, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd options: %w", err)
		}
		defer w.Close()
		return w.EncodeAll(raw, nil), nil
	}
	return nil, &Error{"attributes", fmt.Sprintf("unknown compression codec %d", codec), codeUnsupportedCompression}
}
