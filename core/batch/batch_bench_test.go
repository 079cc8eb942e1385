package batch

import (
	"bytes"
	"fmt"
	"testing"
)

// benchBatch builds an uncompressed batch of about size bytes from 1 KiB
// records, the foundation benchmark's record size.
func benchBatch(size int, codec Codec) []byte {
	value := bytes.Repeat([]byte("0123456789abcdef"), 64)
	records := make([]Record, max(1, size/(len(value)+16)))
	for i := range records {
		records[i] = Record{Key: []byte(fmt.Sprint(i)), Value: value}
	}
	b := Build(BuildSpec{Codec: codec, FirstTimestamp: testNowMs, Records: records})
	SetBaseOffset(b, 0)
	return b
}

// BenchmarkVerify measures the log's per-append check. The copy
// sub-benchmarks are the reference: a memmove of the same bytes, which is
// the least any append can cost.
func BenchmarkVerify(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		batch := benchBatch(size, CodecNone)
		b.Run(fmt.Sprintf("verify/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				if _, err := Verify(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("copy/%dKiB", size>>10), func(b *testing.B) {
			dst := make([]byte, len(batch))
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				copy(dst, batch)
			}
		})
	}
}

// BenchmarkCheckProduced measures the full produce validation per codec on a
// 16 KiB batch, the work realnet's connection goroutines do per partition.
func BenchmarkCheckProduced(b *testing.B) {
	for _, codec := range allCodecs {
		batch := benchBatch(16<<10, codec)
		raw := benchBatch(16<<10, CodecNone)
		b.Run(codec.String(), func(b *testing.B) {
			b.SetBytes(int64(len(raw))) // uncompressed bytes, so codecs compare
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CheckProduced(batch, testLimits()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
