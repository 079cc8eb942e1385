package workload

import (
	"testing"

	"strand/core/batch"
)

func buildBatch(base int64, values ...string) []byte {
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Value: []byte(v)}
	}
	return batch.Build(batch.BuildSpec{BaseOffset: base, FirstTimestamp: 1, Records: recs})
}

func TestDecodeRecordsKeepsOffsetsFromTheFetchOffset(t *testing.T) {
	data := append(buildBatch(10, "a", "b", "c"), buildBatch(13, "d")...)
	got, err := decodeRecords(data, 11)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		offset int64
		value  string
	}{{11, "b"}, {12, "c"}, {13, "d"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i, w := range want {
		if got[i].Offset != w.offset || got[i].Value != w.value {
			t.Fatalf("record %d: got %+v, want %+v", i, got[i], w)
		}
	}
}

func TestDecodeRecordsSkipsABatchCutShort(t *testing.T) {
	second := buildBatch(1, "y")
	data := append(buildBatch(0, "x"), second[:len(second)-5]...)
	got, err := decodeRecords(data, 0)
	if err != nil || len(got) != 1 || got[0].Value != "x" {
		t.Fatalf("got %v, %v; want only x", got, err)
	}
}

func TestDecodeRecordsRejectsACorruptBatch(t *testing.T) {
	data := buildBatch(0, "x", "y")
	data[len(data)-3] ^= 0xff // inside the records
	data = append(data, buildBatch(2, "z")...)
	if _, err := decodeRecords(data, 0); err == nil {
		t.Fatal("a damaged record decoded without error")
	}
}
