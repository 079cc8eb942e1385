package broker

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"strand/core/env"
	"strand/core/log"
	"strand/core/replica"
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
			if version >= fetchTopicIDVersionMin {
				copy(it.TopicID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "topic id"))
			} else {
				it.Topic = rapid.StringMatching(`[a-z._-]{0,20}`).Draw(t, "topic")
			}
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
		if version >= 16 {
			for range rapid.IntRange(0, 2).Draw(t, "brokers") {
				b := kmsg.NewFetchResponseBroker()
				b.NodeID, b.Port = rapid.Int32().Draw(t, "node id"), rapid.Int32().Draw(t, "port")
				b.Host = rapid.StringMatching(`[a-z0-9.-]{0,20}`).Draw(t, "host")
				if rapid.Bool().Draw(t, "rack set") {
					rack := rapid.StringMatching(`[a-z0-9]{0,8}`).Draw(t, "rack")
					b.Rack = &rack
				}
				inline.Brokers = append(inline.Brokers, b)
			}
			encoded.Brokers = inline.Brokers
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
	for _, r := range versionsTable(brokerListener) {
		if r.ApiKey == kmsg.Fetch.Int16() {
			found = true
			if r.MinVersion < fetchEncodedVersionMin || r.MaxVersion > fetchEncodedVersionMax {
				t.Fatalf("Fetch advertised v%d..v%d, encoder covers v%d..v%d", r.MinVersion, r.MaxVersion, fetchEncodedVersionMin, fetchEncodedVersionMax)
			}
		}
	}
	if !found {
		t.Fatal("Fetch not advertised")
	}
}

// holdingNet keeps the frames the node answers with instead of sending
// them, as a slow socket would.
type holdingNet struct {
	env.Network
	frames []env.Frame
}

func (h *holdingNet) ReplyFrame(_ env.ConnID, _ int32, f env.Frame) { h.frames = append(h.frames, f) }

// TestFetchRegionsPinnedUntilSent: a Fetch answer not yet sent keeps its
// record bytes while the topic is deleted and recreated, new batches
// written under the same file names; the release closes the old file.
func TestFetchRegionsPinnedUntilSent(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "t", 1, 1)
	c.produce(1, "t", 0, 1, recordBatch("a", "b"))
	c.produce(1, "t", 0, 1, recordBatch("c"))
	node := c.nodes[1].node
	hold := &holdingNet{Network: node.net}
	node.net = hold
	// A connection of its own: the held answer blocks every later one on it.
	slow, err := c.client.Dial(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow.Send(fetchReq("t", 0, 0, 0), func(kmsg.Response, error) {})
	c.run(100)
	node.net = hold.Network
	if len(hold.frames) != 1 {
		t.Fatalf("%d frames held, want the Fetch answer", len(hold.frames))
	}
	frame := hold.frames[0]
	if frame.Release == nil || frame.RegionBytes() == 0 {
		t.Fatalf("the Fetch answer has %d region bytes and release %v", frame.RegionBytes(), frame.Release != nil)
	}
	c.deleteTopic(1, "t")
	c.waitFor("replica retired", 5000, func() bool { return node.parts.partitions[partitionKey{"t", 0}] == nil })
	c.createTopic(1, "t", 1, 1)
	c.waitFor("recreated topic led", 5000, func() bool {
		p := node.parts.partitions[partitionKey{"t", 0}]
		return p != nil && p.replica.Role() == replica.RoleLeader
	})
	if r := c.produce(1, "t", 0, 1, recordBatch("x", "y", "z")); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("produce after recreating: error %d, offset %d", r.ErrorCode, r.BaseOffset)
	}
	encoded, err := frame.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	req := fetchReq("t", 0, 0, 0)
	_, resp, err := wire.ParseResponse(encoded[4:], req)
	if err != nil {
		t.Fatal(err)
	}
	if got := joined(values(t, resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches)); got != "a,b,c" {
		t.Fatalf("the held answer reads %q after the truncation, want a,b,c", got)
	}
	frame.Release()
	for _, piece := range frame.Pieces {
		if f := piece.Region.File; f != nil {
			if _, err := f.ReadAt(make([]byte, 1), piece.Region.Position); !errors.Is(err, env.ErrClosed) {
				t.Fatalf("the replaced segment file after release: %v, want closed", err)
			}
		}
	}
	if got := joined(values(t, c.fetch(1, "t", 0, 0).RecordBatches)); got != "x,y,z" {
		t.Fatalf("the log reads %q, want x,y,z", got)
	}
}
