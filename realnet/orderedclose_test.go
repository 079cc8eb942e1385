package realnet

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/broker"
	"strand/core/env"
	"strand/core/wire"
)

// rawProduce is a Produce v9 of one record to partition p of topic.
func rawProduce(topic string, p int32, acks int16, value string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = batch.Build(batch.BuildSpec{FirstTimestamp: time.Now().UnixMilli(), Records: []batch.Record{{Value: []byte(value)}}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// writeWhileBusy writes frames while n's event loop is kept busy, then
// frees it once the reader has had time to read them all: every request
// is then queued for the loop before the first runs, so an acks=all
// produce among them still waits for its follower when a later one closes
// the connection, and requests behind the close are already read, so only
// the Network's own check keeps them from the core.
func writeWhileBusy(n *Node, r *rawConn, frames []byte) {
	busy, free := make(chan struct{}), make(chan struct{})
	go n.Call(func(*broker.Node) {
		close(busy)
		<-free
	})
	<-busy
	r.write(frames)
	time.Sleep(100 * time.Millisecond)
	close(free)
}

// TestCloseInRequestOrderOverTCP: on a real connection to the leader of an
// RF-2 partition, a client pipelines a request whose answer the broker
// holds (an acks=all produce waiting for the follower; a Fetch long-polling
// an empty partition), an acks=0 produce to a partition that does not
// exist (which closes the connection, as in Kafka) or a frame the reader
// refuses (an unknown api key), and an acks=1 produce behind it. The held answer must arrive, then the end of the connection;
// the produce behind must be neither answered nor appended, and the broker
// must go on serving.
func TestCloseInRequestOrderOverTCP(t *testing.T) {
	c := startCluster(t, 2, nil)
	const topic = "ordered-close"
	c.createTopic(topic, 1, 2)
	leader := c.leaders(topic, 1)[0]
	addr := c.nodes[leader-1].Addr("PLAINTEXT")
	admin := c.client()

	t.Run("acks=all produce held for the follower", func(t *testing.T) {
		r := dialRaw(t, addr)
		held := rawProduce(topic, 0, -1, "acked")
		var frames []byte
		for i, req := range []kmsg.Request{held, rawProduce(topic, 7, 0, "refused"), rawProduce(topic, 0, 1, "behind")} {
			hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: int32(i + 1), ClientID: "raw"}
			frames = wire.AppendRequest(frames, hdr, req)
		}
		writeWhileBusy(c.nodes[leader-1], r, frames)
		resp := r.receive(1, held).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Fatalf("acks=all produce before the close: error %d base offset %d, want 0 and 0", p.ErrorCode, p.BaseOffset)
		}
		r.expectClosed("after the acks=all answer")
	})

	t.Run("a frame the reader refuses", func(t *testing.T) {
		// An unknown api key, which the reader refuses without the core
		// seeing it: the close still waits for the answer before it.
		r := dialRaw(t, addr)
		held := rawProduce(topic, 0, -1, "acked too")
		frames := wire.AppendRequest(nil, env.RequestHeader{APIKey: 0, APIVersion: 9, CorrelationID: 1, ClientID: "raw"}, held)
		frames = append(frames, frameOf([]byte{0x27, 0x0F, 0, 0, 0, 0, 0, 2, 0, 3, 'r', 'a', 'w'})...)
		behind := rawProduce(topic, 0, 1, "behind")
		frames = wire.AppendRequest(frames, env.RequestHeader{APIKey: 0, APIVersion: 9, CorrelationID: 3, ClientID: "raw"}, behind)
		writeWhileBusy(c.nodes[leader-1], r, frames)
		resp := r.receive(1, held).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
			t.Fatalf("acks=all produce before the refused frame: error %d base offset %d, want 0 and 1", p.ErrorCode, p.BaseOffset)
		}
		r.expectClosed("after the acks=all answer")
	})

	t.Run("fetch long-polling", func(t *testing.T) {
		r := dialRaw(t, addr)
		fetch := fetchRequest(topic, 2, 400) // at the end: waits 400 ms
		start := time.Now()
		r.send(1, fetch)
		r.send(2, rawProduce(topic, 7, 0, "refused"))
		r.send(3, rawProduce(topic, 0, 1, "behind"))
		resp := r.receive(1, fetch).(*kmsg.FetchResponse)
		if waited := time.Since(start); waited < 300*time.Millisecond {
			t.Errorf("fetch answered after %s; it should long-poll for 400 ms", waited)
		}
		if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch before the close: %+v", resp)
		}
		r.expectClosed("after the fetch answer")
	})

	time.Sleep(200 * time.Millisecond) // a produce behind the close would have landed by now
	ends, err := listEnds(admin, topic, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ends[0] != 2 {
		t.Fatalf("partition 0 ends at %d, want 2 (the acks=all records only): a produce behind a close was executed", ends[0])
	}
	produceKeyed(t, c.client(), topic, 10)
}
