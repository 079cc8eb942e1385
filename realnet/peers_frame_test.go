package realnet

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/quorum"
	"strand/core/wire"
)

// TestFrameForPoolsOnlyReplicaFetchAnswers: on the broker plane, a replica
// Fetch's answer is read into a recycled frame, and a metadata-log Fetch's
// (which route sends there to a peer missing from the voters) or any other
// answer into a fresh one, since the metadata follower keeps referring to
// the records it decoded. Fails if frameFor pools by API key alone.
func TestFrameForPoolsOnlyReplicaFetchAnswers(t *testing.T) {
	pc := newPeerConn(nil, peerKey{id: 2, plane: planeBroker})
	replicaFetch := kmsg.NewPtrFetchRequest()
	replicaFetch.SetVersion(12)
	replicaFetch.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}
	metadataFetch := kmsg.NewPtrFetchRequest()
	metadataFetch.SetVersion(12)
	metadataFetch.Topics = []kmsg.FetchRequestTopic{{Topic: quorum.MetadataTopic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}
	metadataRequest := kmsg.NewPtrMetadataRequest()
	metadataRequest.SetVersion(12)
	for _, c := range []struct {
		name   string
		req    kmsg.Request
		pooled bool
	}{
		{"replica Fetch", replicaFetch, true},
		{"metadata-log Fetch", metadataFetch, false},
		{"Metadata", metadataRequest, false},
	} {
		pc.enqueue(c.req, func(kmsg.Response, error) {})
		out := pc.queue[len(pc.queue)-1]
		fb := pc.frameFor(out, 1024)
		if fb.pooled != c.pooled || len(fb.buf) != 1024 {
			t.Errorf("%s: frame pooled=%v, %d bytes; want pooled=%v, 1024 bytes", c.name, fb.pooled, len(fb.buf), c.pooled)
		}
		if fb.pooled {
			replicaFetchFrames.release(fb)
		}
	}
	onQuorumPlane := newPeerConn(nil, peerKey{id: 2, plane: planeQuorum})
	onQuorumPlane.enqueue(replicaFetch, func(kmsg.Response, error) {})
	if fb := onQuorumPlane.frameFor(onQuorumPlane.queue[0], 64); fb.pooled {
		t.Error("an answer on the quorum plane got a recycled frame")
	}
}

// TestPeerRequestsStayInOrder sends many pipelined requests of up to
// 30 KiB to one peer that reads in bursts, so that the loop's direct writes
// find the socket full and leave the rest to the writer: the peer must see
// every request whole and in correlation order, and every callback must
// get its answer, once, in send order.
func TestPeerRequestsStayInOrder(t *testing.T) {
	cfg := networkTestConfig(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const requests = 3000
	peerErr := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			peerErr <- err
			return
		}
		defer c.Close()
		for i := range int32(requests) {
			if i%200 == 0 {
				time.Sleep(20 * time.Millisecond) // let the node's socket fill
			}
			var prefix [4]byte
			if _, err := io.ReadFull(c, prefix[:]); err != nil {
				peerErr <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(prefix[:]))
			if _, err := io.ReadFull(c, frame); err != nil {
				peerErr <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			hdr, req, err := wire.ParseRequest(frame, func(int16, int16) bool { return true }, wire.DefaultRequestLimits())
			if err != nil {
				peerErr <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			if hdr.CorrelationID != i {
				peerErr <- fmt.Errorf("request %d arrived where %d was due", hdr.CorrelationID, i)
				return
			}
			if name := req.(*kmsg.ApiVersionsRequest).ClientSoftwareName; name != peerSoftwareName(i) {
				peerErr <- fmt.Errorf("request %d: body of %d bytes corrupt", i, len(name))
				return
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.SetVersion(3)
			resp.ThrottleMillis = i
			if _, err := c.Write(wire.AppendResponse(nil, i, resp)); err != nil {
				peerErr <- err
				return
			}
		}
		peerErr <- nil
	}()
	loop := NewLoop()
	go loop.Run()
	defer func() { loop.Stop(); loop.Wait() }()
	n := testNetwork(t, loop, cfg)
	defer n.Shutdown()
	n.peers.brokerAddress = func(env.NodeID) (string, bool) { return l.Addr().String(), true }
	answered := make(chan int32, requests)
	next := int32(0) // loop only
	for start := int32(0); start < requests; start += 50 {
		loop.Call(func() {
			for i := start; i < start+50; i++ {
				req := kmsg.NewPtrApiVersionsRequest()
				req.SetVersion(3)
				req.ClientSoftwareName = peerSoftwareName(i)
				req.ClientSoftwareVersion = "1"
				n.Send(3, req, func(resp kmsg.Response, err error) {
					got := int32(-1)
					if err == nil {
						got = resp.(*kmsg.ApiVersionsResponse).ThrottleMillis
					}
					if got != next {
						t.Errorf("callback %d got answer %d (err %v)", next, got, err)
					}
					next++
					answered <- got
				})
			}
		})
	}
	peerDone := peerErr
	for got := 0; got < requests; {
		select {
		case <-answered:
			got++
		case err := <-peerDone:
			if err != nil {
				t.Fatalf("peer: %v", err)
			}
			peerDone = nil // answered everything; the callbacks follow
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d requests answered", got, requests)
		}
	}
}

// peerSoftwareName is request i's ClientSoftwareName: up to 30 KiB, so that
// requests fill the socket.
func peerSoftwareName(i int32) string {
	size := int(i*7919) % (30 << 10)
	b := make([]byte, size)
	for k := range b {
		b[k] = 'a' + byte((int(i)+k)%26)
	}
	return string(b)
}
