package main

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/env"
	"strand/core/wire"
	"strand/sim/memdisk"
)

func TestLabelOf(t *testing.T) {
	replica := kmsg.NewPtrFetchRequest()
	replica.SetVersion(12)
	replica.ReplicaID = 2
	replica15 := kmsg.NewPtrFetchRequest()
	replica15.SetVersion(15)
	replica15.ReplicaID, replica15.ReplicaState.ID = -1, 3
	consumer := kmsg.NewPtrFetchRequest()
	consumer.SetVersion(12)
	consumer.ReplicaID = -1
	for _, c := range []struct {
		req  kmsg.Request
		want string
	}{
		{kmsg.NewPtrProduceRequest(), labelProduce},
		{replica, labelFetchReplica},
		{replica15, labelFetchReplica},
		{consumer, labelFetchConsumer},
		{kmsg.NewPtrBrokerHeartbeatRequest(), "BrokerHeartbeat"},
	} {
		if got := labelOf(c.req); got != c.want {
			t.Errorf("labelOf(%T v%d) = %q, want %q", c.req, c.req.GetVersion(), got, c.want)
		}
	}
}

// fakeNet records what reaches the wrapped network.
type fakeNet struct {
	env.Network
	replies, frames, skips int
}

func (n *fakeNet) Reply(env.ConnID, int32, kmsg.Response)  { n.replies++ }
func (n *fakeNet) ReplyFrame(env.ConnID, int32, env.Frame) { n.frames++ }
func (n *fakeNet) Skip(env.ConnID, int32)                  { n.skips++ }

type fakeHandler struct {
	env.Handler
	requests int
}

func (h *fakeHandler) HandleRequest(env.ConnID, env.RequestHeader, kmsg.Request) { h.requests++ }

func TestFrameTallyCountsWhatTheWireCarries(t *testing.T) {
	tally := newFrameTally()
	inner, handler := &fakeNet{}, &fakeHandler{}
	net := countingNet{Network: inner, node: 2, tally: tally}
	h := countingHandler{Handler: handler, node: 2, tally: tally}

	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = 3
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: 12, CorrelationID: 7, ClientID: "broker-3"}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	rt := kmsg.NewFetchResponseTopic()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = batch.Build(batch.BuildSpec{Records: []batch.Record{{Value: make([]byte, 100)}}})
	rt.Partitions = append(rt.Partitions, rp, rp)
	resp.Topics = append(resp.Topics, rt)

	// Before the window: passed on, not counted, but still answerable.
	h.HandleRequest(1, hdr, req)
	net.Reply(1, 7, resp)
	if len(tally.byLabel) != 0 || tally.followerRecordBytes != 0 {
		t.Fatalf("counted with the tally off: %v, %d record bytes", tally.byLabel, tally.followerRecordBytes)
	}

	tally.on = true
	h.HandleRequest(1, hdr, req)
	net.Reply(1, 7, resp)
	wantBytes := int64(len(wire.AppendRequest(nil, hdr, req)) + len(wire.AppendResponse(nil, 7, resp)))
	got := tally.byLabel[labelFetchReplica]
	if got == nil || got.frames != 2 || got.bytes != wantBytes {
		t.Errorf("replica fetch tally = %+v, want 2 frames of %d bytes", got, wantBytes)
	}
	if want := int64(2 * len(rp.RecordBatches)); tally.followerRecordBytes != want || tally.consumerRecordBytes != 0 ||
		tally.followerCopiedBytes != 2*want {
		t.Errorf("record bytes: follower %d (%d copied), consumer %d; want %d (%d copied), 0",
			tally.followerRecordBytes, tally.followerCopiedBytes, tally.consumerRecordBytes, want, 2*want)
	}

	// A zero-copy Fetch frame: its regions are the record bytes, copied
	// once (simnet reads them into the frame); its size is the frame's.
	disk := memdisk.New(memdisk.Options{})
	file, err := disk.Open("seg.log", env.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := file.Append(make([]byte, 500)); err != nil {
		t.Fatal(err)
	}
	frame := env.Frame{Pieces: []env.FramePiece{{Bytes: make([]byte, 40)}, {Region: env.FileRegion{File: file, Position: 100, Bytes: 300}}}}
	recordsBefore, copiedBefore, bytesBefore := tally.followerRecordBytes, tally.followerCopiedBytes, got.bytes
	h.HandleRequest(1, hdr, req)
	net.ReplyFrame(1, 7, frame)
	if tally.followerRecordBytes-recordsBefore != 300 || tally.followerCopiedBytes-copiedBefore != 300 {
		t.Errorf("a 300-byte region counted %d record bytes, %d copied; want 300, 300",
			tally.followerRecordBytes-recordsBefore, tally.followerCopiedBytes-copiedBefore)
	}
	if reqBytes := int64(len(wire.AppendRequest(nil, hdr, req))); got.frames != 4 || got.bytes-bytesBefore != reqBytes+340 {
		t.Errorf("after a frame: %+v; want 4 frames, %d more bytes", got, reqBytes+340)
	}

	// A skipped request (acks=0) has no response frame.
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	h.HandleRequest(1, env.RequestHeader{APIKey: produce.Key(), APIVersion: 9, CorrelationID: 8}, produce)
	net.Skip(1, 8)
	if c := tally.byLabel[labelProduce]; c == nil || c.frames != 1 {
		t.Errorf("acks=0 produce tally = %+v, want 1 frame", c)
	}
	if len(tally.pending) != 0 {
		t.Errorf("requests still pending after their answers: %v", tally.pending)
	}
	if handler.requests != 4 || inner.replies != 2 || inner.frames != 1 || inner.skips != 1 {
		t.Errorf("passed on %d requests, %d replies, %d frames, %d skips; want 4, 2, 1, 1",
			handler.requests, inner.replies, inner.frames, inner.skips)
	}

	defer func() {
		if recover() == nil {
			t.Error("a reply to a request never received did not panic")
		}
	}()
	net.Reply(1, 99, resp)
}

func TestCopiesPerFollowerByte(t *testing.T) {
	r := replicationResult{batchesAcked: 10, producedBytes: 1000, followers: 2, followerRecordBytes: 2000, followerCopiedBytes: 4000}
	if got := r.copiesPerFollowerByte(); got != 2 {
		t.Errorf("each byte fetched once by each of 2 followers, 2 copies each: %v copies per follower byte, want 2", got)
	}
	if r.goalMet() {
		t.Error("2 copies per follower byte met the goal of at most 1")
	}
	r.followerCopiedBytes = 2000
	if got := r.copiesPerFollowerByte(); got != 1 || !r.goalMet() {
		t.Errorf("one copy of each fetched byte: %v copies (goal met %v), want 1 and met", got, r.goalMet())
	}
	if (replicationResult{followers: 2}).goalMet() {
		t.Error("a run that acknowledged nothing met the goal")
	}
}

func TestNextOffset(t *testing.T) {
	one := batch.Build(batch.BuildSpec{BaseOffset: 5, Records: []batch.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	two := batch.Build(batch.BuildSpec{BaseOffset: 7, Records: []batch.Record{{Value: []byte("c")}}})
	records := append(append([]byte(nil), one...), two...)
	for _, c := range []struct {
		name    string
		records []byte
		want    int64
	}{
		{"empty", nil, 5},
		{"two batches", records, 8},
		{"second batch partial", records[:len(records)-3], 7},
	} {
		got, err := nextOffset(c.records, 5)
		if err != nil || got != c.want {
			t.Errorf("%s: nextOffset = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}
