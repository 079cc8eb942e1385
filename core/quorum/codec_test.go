package quorum

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

func drawMessage(t *rapid.T) Message {
	typ := rapid.SampledFrom([]MsgType{MsgVote, MsgVoteResp, MsgBeginEpoch, MsgBeginEpochResp, MsgFetch, MsgFetchResp,
		MsgFetchSnapshot, MsgFetchSnapshotResp, MsgEndEpoch, MsgEndEpochResp}).Draw(t, "type")
	m := Message{
		Type: typ, From: rapid.Int32Range(0, 5).Draw(t, "from"), To: rapid.Int32Range(0, 5).Draw(t, "to"),
		Ref: rapid.Uint64().Draw(t, "ref"), Epoch: rapid.Int32Range(0, 9).Draw(t, "epoch"),
		LeaderID: -1, DivergingEpoch: -1, DivergingEndOffset: -1, SnapshotEndOffset: -1, SnapshotEpoch: -1,
	}
	switch typ {
	case MsgVote:
		m.PreVote = rapid.Bool().Draw(t, "preVote")
		m.LastEpoch, m.LastOffset = rapid.Int32Range(0, 9).Draw(t, "lastEpoch"), rapid.Int64Range(0, 99).Draw(t, "lastOffset")
	case MsgVoteResp:
		m.PreVote, m.Granted = rapid.Bool().Draw(t, "preVote"), rapid.Bool().Draw(t, "granted")
		m.LeaderID = rapid.Int32Range(-1, 5).Draw(t, "leader")
	case MsgBeginEpoch:
		m.LeaderID = m.From
	case MsgBeginEpochResp:
		m.LeaderID, m.ErrorCode = rapid.Int32Range(-1, 5).Draw(t, "leader"), rapid.SampledFrom([]int16{0, errFencedLeaderEpoch}).Draw(t, "error")
	case MsgFetch:
		m.LeaderID = m.To
		m.FetchOffset, m.LastFetchedEpoch = rapid.Int64Range(0, 99).Draw(t, "fetchOffset"), rapid.Int32Range(0, 9).Draw(t, "lastFetchedEpoch")
		m.MaxWaitMs = rapid.Int64Range(0, 500).Draw(t, "maxWait")
	case MsgFetchResp:
		m.LeaderID, m.HighWatermark = rapid.Int32Range(-1, 5).Draw(t, "leader"), rapid.Int64Range(0, 99).Draw(t, "hw")
		if rapid.Bool().Draw(t, "diverging") {
			m.DivergingEpoch, m.DivergingEndOffset = rapid.Int32Range(-1, 9).Draw(t, "divEpoch"), rapid.Int64Range(0, 99).Draw(t, "divEnd")
		}
		if rapid.Bool().Draw(t, "snapshot") {
			m.SnapshotEndOffset, m.SnapshotEpoch = rapid.Int64Range(1, 99).Draw(t, "snapEnd"), rapid.Int32Range(0, 9).Draw(t, "snapEpoch")
		}
		base := rapid.Int64Range(0, 50).Draw(t, "base")
		for i := range rapid.IntRange(0, 4).Draw(t, "entries") {
			var data []byte
			if rapid.Bool().Draw(t, "hasData") {
				data = rapid.SliceOf(rapid.Byte()).Draw(t, "data")
			}
			m.Entries = append(m.Entries, Entry{Offset: base + int64(i), Epoch: m.Epoch, Data: data})
		}
	case MsgEndEpoch:
		m.LeaderID = m.From
		m.PreferredSuccessors = rapid.SliceOfN(rapid.Int32Range(0, 5), 1, 4).Draw(t, "successors")
	case MsgEndEpochResp:
		m.LeaderID, m.ErrorCode = rapid.Int32Range(-1, 5).Draw(t, "leader"), rapid.SampledFrom([]int16{0, errFencedLeaderEpoch}).Draw(t, "error")
	case MsgFetchSnapshot:
		m.LeaderID = m.To
		m.SnapshotEndOffset, m.SnapshotEpoch = rapid.Int64Range(1, 99).Draw(t, "snapEnd"), rapid.Int32Range(0, 9).Draw(t, "snapEpoch")
		m.Position = rapid.Int64Range(0, 1<<20).Draw(t, "position")
	case MsgFetchSnapshotResp:
		m.LeaderID, m.ErrorCode = rapid.Int32Range(-1, 5).Draw(t, "leader"), rapid.SampledFrom([]int16{0, errSnapshotNotFound}).Draw(t, "error")
		m.SnapshotEndOffset, m.SnapshotEpoch = rapid.Int64Range(1, 99).Draw(t, "snapEnd"), rapid.Int32Range(0, 9).Draw(t, "snapEpoch")
		m.Position = rapid.Int64Range(0, 99).Draw(t, "position")
		m.SnapshotBytes = rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")
		m.SnapshotSize = m.Position + int64(len(m.SnapshotBytes)) + rapid.Int64Range(0, 9).Draw(t, "rest")
	}
	return m
}

// TestCodecRoundTrip: every message survives encoding to its KRaft RPC,
// to bytes and back. The Data of entries may come back empty for empty.
func TestCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawMessage(t)
		var got Message
		if !m.Type.IsResponse() {
			req, err := EncodeRequest(m)
			if err != nil {
				t.Fatal(err)
			}
			back := kmsg.RequestForKey(req.Key())
			back.SetVersion(req.GetVersion())
			if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
			if got, err = DecodeRequest(m.To, back); err != nil {
				t.Fatal(err)
			}
			got.Ref = m.Ref
		} else {
			resp, err := EncodeResponse(m)
			if err != nil {
				t.Fatal(err)
			}
			back := kmsg.ResponseForKey(resp.Key())
			back.SetVersion(resp.GetVersion())
			if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
			req := Message{Type: requestOf(m.Type), From: m.To, To: m.From, Ref: m.Ref, PreVote: m.PreVote}
			if got, err = DecodeResponse(req, back); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(m, got, cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); diff != "" {
			t.Fatalf("round trip of %v (-sent +received):\n%s", m.Type, diff)
		}
	})
}

// TestDecodeRejectsForeignShapes: requests for another partition or with
// corrupt entries get errors, not panics.
func TestDecodeRejectsForeignShapes(t *testing.T) {
	req, err := EncodeRequest(Message{Type: MsgVote, From: 1, To: 2, Epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	req.(*kmsg.VoteRequest).Topics[0].Partitions[0].Partition = 1
	if _, err := DecodeRequest(2, req); err == nil {
		t.Fatal("a Vote for partition 1 decoded")
	}
	if _, err := DecodeRequest(2, kmsg.NewPtrProduceRequest()); err == nil {
		t.Fatal("a Produce request decoded as a quorum message")
	}
	resp, err := EncodeResponse(Message{Type: MsgFetchResp, From: 2, To: 1, Entries: []Entry{{Offset: 0, Epoch: 1, Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	records := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches
	records[len(records)-1] ^= 0xff // breaks the CRC
	if _, err := DecodeResponse(Message{Type: MsgFetch, From: 1, To: 2}, resp); err == nil {
		t.Fatal("a corrupt fetched batch decoded")
	}
	resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches = records[:20]
	if _, err := DecodeResponse(Message{Type: MsgFetch, From: 1, To: 2}, resp); err == nil {
		t.Fatal("a truncated fetched batch decoded")
	}
}
