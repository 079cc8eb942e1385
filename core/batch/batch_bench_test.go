package batch

import (
	"fmt"
	"strings"
	"testing"
)

// benchBatch builds a batch of about size bytes from 1 KiB records, the
// foundation benchmark's record size. Values are JSON-like text drawn from a
// small vocabulary by a fixed LCG, so codecs see data about as compressible
// as real events (a repeated pattern would flatter or punish them).
func benchBatch(size int, codec Codec) []byte {
	words := strings.Fields("user click view purchase session page id true false null error ok cart item price quantity region eu us ap")
	state := uint64(1)
	next := func(n int) int { state = state*6364136223846793005 + 1442695040888963407; return int(state>>33) % n }
	records := make([]Record, max(1, size/(1024+16)))
	for i := range records {
		var value strings.Builder
		for value.Len() < 1000 {
			fmt.Fprintf(&value, `{"%s":"%s","%s":%d},`, words[next(len(words))], words[next(len(words))], words[next(len(words))], next(100000))
		}
		records[i] = Record{Key: []byte(fmt.Sprint("key-", next(1000))), Value: []byte(value.String()[:1000])}
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

// BenchmarkPrecheckPerRecord measures PrecheckProduced on an uncompressed
// batch of 100-byte records, the size cmd/strandbench's raw producer sends,
// and reports the cost per record: there the per-record walk dominates.
func BenchmarkPrecheckPerRecord(b *testing.B) {
	const recordCount = 160
	records := make([]Record, recordCount)
	for i := range records {
		value := make([]byte, 100)
		for j := range value {
			value[j] = byte('a' + (i+j)%26)
		}
		records[i] = Record{Value: value}
	}
	batch := Build(BuildSpec{FirstTimestamp: testNowMs, Records: records})
	SetBaseOffset(batch, 0)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		p := PrecheckProduced(batch, testLimits(), nil)
		if p.w.err != nil {
			b.Fatal(p.w.err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/recordCount, "ns/record")
}
