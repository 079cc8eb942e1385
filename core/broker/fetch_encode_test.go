package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"strand/core/env"
	"strand/core/log"
	"strand/core/wire"
	"strand/sim/memdisk"
)

// TestFetchFrameMatchesKmsg: for random Fetch responses of every encoded
// version, the frame fetchFrame builds, with some partitions' record
// batches moved into file regions, reads back as exactly the bytes kmsg's
// AppendTo writes for the same response with the batches inline.
func TestFetchFrameMatchesKmsg(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		disk := memdisk.New(memdisk.Options{})
		file, err := disk.Open("segment.log", env.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		// Some garbage first, so regions never start at 0 by accident.
		if err := file.Append(rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, "lead")); err != nil {
			t.Fatal(err)
		}
		version := rapid.Int16Range(fetchEncodedVersionMin, fetchEncodedVersionMax).Draw(t, "version")
		inline := kmsg.NewPtrFetchResponse()
		inline.SetVersion(version)
		inline.ThrottleMillis = rapid.Int32().Draw(t, "throttle")
		if version >= 7 {
			inline.ErrorCode = rapid.Int16().Draw(t, "error")
			inline.SessionID = rapid.Int32().Draw(t, "session")
		}
		encoded := kmsg.NewPtrFetchResponse()
		*encoded = *inline
		encoded.Topics = nil
		var records []partitionRecords
		for range rapid.IntRange(0, 3).Draw(t, "topics") {
			it := kmsg.NewFetchResponseTopic()
			it.Topic = rapid.StringMatching(`[a-z._-]{0,20}`).Draw(t, "topic")
			et := it
			for range rapid.IntRange(0, 4).Draw(t, "partitions") {
				ip, ep, r := drawPartition(t, file, version)
				it.Partitions = append(it.Partitions, ip)
				et.Partitions = append(et.Partitions, ep)
				records = append(records, r)
			}
			inline.Topics = append(inline.Topics, it)
			encoded.Topics = append(encoded.Topics, et)
		}
		corr := rapid.Int32().Draw(t, "correlation id")
		want := wire.AppendResponse(nil, corr, inline)
		frame := fetchFrame(corr, encoded, records)
		got, err := frame.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if frame.Len() != int64(len(got)) {
			t.Fatalf("Frame.Len %d, materialised %d bytes", frame.Len(), len(got))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: encoded frame differs from kmsg's:\n got %x\nwant %x", version, got, want)
		}
	})
}

// drawPartition draws one partition: as kmsg encodes it (inline record
// batches) and as the broker does (batches in regions of file, when drawn
// so), with its record set.
func drawPartition(t *rapid.T, file env.File, version int16) (inline, encoded kmsg.FetchResponseTopicPartition, records partitionRecords) {
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition = rapid.Int32().Draw(t, "partition")
	p.ErrorCode = rapid.Int16().Draw(t, "partition error")
	p.HighWatermark = rapid.Int64().Draw(t, "hw")
	p.LastStableOffset = rapid.Int64().Draw(t, "lso")
	if version >= 5 {
		p.LogStartOffset = rapid.Int64().Draw(t, "log start")
	}
	if rapid.Bool().Draw(t, "aborted set") {
		for range rapid.IntRange(0, 2).Draw(t, "aborted") {
			a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			a.ProducerID, a.FirstOffset = rapid.Int64().Draw(t, "producer"), rapid.Int64().Draw(t, "first offset")
			p.AbortedTransactions = append(p.AbortedTransactions, a)
		}
		if p.AbortedTransactions == nil {
			p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		}
	}
	if version >= 11 {
		p.PreferredReadReplica = rapid.Int32().Draw(t, "preferred replica")
	}
	if version >= 12 {
		if rapid.Bool().Draw(t, "diverging") {
			p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rapid.Int32().Draw(t, "div epoch"), rapid.Int64().Draw(t, "div end")
		}
		if rapid.Bool().Draw(t, "leader") {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = rapid.Int32().Draw(t, "leader id"), rapid.Int32().Draw(t, "leader epoch")
		}
		if rapid.Bool().Draw(t, "snapshot") {
			p.SnapshotID.EndOffset, p.SnapshotID.Epoch = rapid.Int64().Draw(t, "snap end"), rapid.Int32().Draw(t, "snap epoch")
		}
	}
	switch rapid.IntRange(0, 2).Draw(t, "records kind") {
	case 0:
		p.RecordBatches = nil
	case 1:
		p.RecordBatches = []byte{}
	default:
		p.RecordBatches = rapid.SliceOfN(rapid.Byte(), 1, 300).Draw(t, "records")
	}
	inline, encoded = p, p
	if len(p.RecordBatches) == 0 || !rapid.Bool().Draw(t, "as regions") {
		return inline, encoded, partitionRecords{}
	}
	encoded.RecordBatches = []byte{}
	rest := p.RecordBatches
	for len(rest) > 0 {
		n := rapid.IntRange(1, len(rest)).Draw(t, "region bytes")
		position := file.Size()
		if err := file.Append(bytes.Clone(rest[:n])); err != nil {
			t.Fatal(err)
		}
		records.regions = append(records.regions, log.Region{File: file, Position: position, Bytes: int64(n)})
		rest = rest[n:]
	}
	return inline, encoded, records
}

// The encoder covers every Fetch version a broker advertises to clients.
func TestFetchEncoderCoversAdvertisedVersions(t *testing.T) {
	found := false
	for _, r := range clientAPIs {
		if r.key == kmsg.Fetch.Int16() {
			found = true
			if r.min < fetchEncodedVersionMin || r.max > fetchEncodedVersionMax {
				t.Fatalf("Fetch advertised v%d..v%d, encoder covers v%d..v%d", r.min, r.max, fetchEncodedVersionMin, fetchEncodedVersionMax)
			}
		}
	}
	if !found {
		t.Fatal("Fetch not advertised")
	}
}
