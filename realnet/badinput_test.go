package realnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/wire"
)

// rawConn is a bare TCP connection to a broker, for bytes no client sends.
type rawConn struct {
	t *testing.T
	c net.Conn
}

func dialRaw(t *testing.T, addr net.Addr) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// write sends bytes as they are.
func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// send encodes req as a client would.
func (r *rawConn) send(correlationID int32, req kmsg.Request) {
	r.t.Helper()
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: correlationID, ClientID: "raw"}
	r.write(wire.AppendRequest(nil, hdr, req))
}

// readFrame reads one response frame within timeout.
func (r *rawConn) readFrame(timeout time.Duration) ([]byte, error) {
	r.c.SetReadDeadline(time.Now().Add(timeout))
	var prefix [4]byte
	if _, err := io.ReadFull(r.c, prefix[:]); err != nil {
		return nil, err
	}
	length, err := wire.FrameLength(prefix, 64<<20)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, length)
	_, err = io.ReadFull(r.c, frame)
	return frame, err
}

// receive reads the response to req and checks its correlation id.
func (r *rawConn) receive(correlationID int32, req kmsg.Request) kmsg.Response {
	r.t.Helper()
	frame, err := r.readFrame(10 * time.Second)
	if err != nil {
		r.t.Fatalf("reading response to correlation id %d: %v", correlationID, err)
	}
	got, resp, err := wire.ParseResponse(frame, req)
	if err != nil {
		r.t.Fatalf("parsing response: %v", err)
	}
	if got != correlationID {
		r.t.Fatalf("response has correlation id %d, want %d", got, correlationID)
	}
	return resp
}

// expectClosed checks that the broker closes the connection without
// sending anything.
func (r *rawConn) expectClosed(what string) {
	r.t.Helper()
	frame, err := r.readFrame(5 * time.Second)
	if err == nil {
		r.t.Fatalf("%s: got a %d-byte frame, want the connection closed", what, len(frame))
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		r.t.Fatalf("%s: connection still open after 5 s", what)
	}
}

// frameOf prefixes body with its size.
func frameOf(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestBadInputClosesOnlyThatConnection sends what no client should: each
// gets a clean close (or KIP-511's answer), never a panic, and the broker
// keeps serving a well-behaved client throughout.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	c := startCluster(t, 1, map[string]string{"socket.request.max.bytes": "1048576"})
	addr := c.nodes[0].Addr("PLAINTEXT")
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return append(b, 0, 3, 'r', 'a', 'w')
	}
	closes := []struct {
		name  string
		bytes []byte
	}{
		{"unknown api key", frameOf(header(9999, 0))},
		{"produce v0 (below the advertised minimum)", frameOf(append(header(0, 0), 0, 1, 0, 0, 0, 0, 0, 0, 0, 0))},
		{"frame over socket.request.max.bytes, no body sent", binary.BigEndian.AppendUint32(nil, 1048577)},
		{"largest int32 size prefix", []byte{0x7F, 0xFF, 0xFF, 0xFF}},
		{"negative size prefix", []byte{0xFF, 0xFF, 0xFF, 0xF0}},
		{"header shorter than a correlation id", frameOf([]byte{0, 3, 0})},
		{"client_id running past the frame", frameOf([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'x'})},
		{"metadata body of garbage", frameOf(append(header(3, 4), 0x7F, 0xFF, 0xFF, 0xFF, 1, 2))},
		{"flexible header with a broken tag section", frameOf(append(header(3, 9), 5, 0, 0x7F))},
		{"garbage", frameOf(bytes.Repeat([]byte{0xDE, 0xAD, 0xBE, 0xEF}, 64))},
	}
	healthy := c.client()
	for _, tc := range closes {
		r := dialRaw(t, addr)
		r.write(tc.bytes)
		r.expectClosed(tc.name)
		if err := healthy.Ping(context.Background()); err != nil {
			t.Fatalf("after %s: a healthy client cannot reach the broker: %v", tc.name, err)
		}
	}

	// ApiVersions at a version the broker does not know: KIP-511's v0
	// answer with the broker's table, on a connection that stays open.
	r := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(req.MaxVersion()) // only the KIP-511 v0 fallback matters
	r.write(frameOf(append(header(18, 99), 0, 0, 0)))
	resp := r.receive(7, req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || resp.GetVersion() != 0 {
		t.Fatalf("ApiVersions v99: error %d version %d, want UNSUPPORTED_VERSION as v0", resp.ErrorCode, resp.GetVersion())
	}
	var key18 *kmsg.ApiVersionsResponseApiKey
	for i := range resp.ApiKeys {
		if resp.ApiKeys[i].ApiKey == 18 {
			key18 = &resp.ApiKeys[i]
		}
	}
	if key18 == nil || key18.MaxVersion < 3 {
		t.Fatalf("KIP-511 answer lacks ApiVersions v3 in its table: %+v", resp.ApiKeys)
	}
	retry := kmsg.NewPtrApiVersionsRequest()
	retry.SetVersion(key18.MaxVersion)
	retry.ClientSoftwareName, retry.ClientSoftwareVersion = "raw", "1"
	r.send(8, retry)
	if got := r.receive(8, retry).(*kmsg.ApiVersionsResponse); got.ErrorCode != 0 || len(got.ApiKeys) == 0 {
		t.Fatalf("ApiVersions retry at v%d: error %d, %d keys", key18.MaxVersion, got.ErrorCode, len(got.ApiKeys))
	}

	// The broker still serves produce and consume.
	const topic = "after-bad-input"
	c.createTopic(topic, 1, 1)
	acked := produceKeyed(t, c.client(), topic, 100)
	consumeAll(t, c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), topic, acked)
}

// fetchRequest is a consumer Fetch of partition 0 of topic at offset that
// waits up to maxWaitMs for one byte.
func fetchRequest(topic string, offset int64, maxWaitMs int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWaitMs, 1, 1<<20
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, offset, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// TestResponsesInRequestOrder pipelines a long-polling Fetch, an
// ApiVersions, an acks=0 Produce and a Metadata on one connection: the
// core answers ApiVersions and Metadata first, but they must arrive after
// the Fetch, and the acks=0 Produce gets no response at all.
func TestResponsesInRequestOrder(t *testing.T) {
	c := startCluster(t, 1, nil)
	const topic = "ordering"
	c.createTopic(topic, 1, 1)
	r := dialRaw(t, c.nodes[0].Addr("PLAINTEXT"))

	fetch := fetchRequest(topic, 0, 400)
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.SetVersion(3)
	versions.ClientSoftwareName, versions.ClientSoftwareVersion = "raw", "1"
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks, produce.TimeoutMillis = 0, 1000
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.SetVersion(12)

	start := time.Now()
	r.send(1, fetch)
	r.send(2, versions)
	r.send(3, produce)
	r.send(4, metadata)
	fetchResp := r.receive(1, fetch).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("fetch of an empty partition answered after %s; it should long-poll for 400 ms", waited)
	}
	if fetchResp.ErrorCode != 0 || len(fetchResp.Topics) != 1 || fetchResp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("fetch: %+v", fetchResp)
	}
	r.receive(2, versions)
	r.receive(4, metadata) // correlation id 3 (acks=0) is skipped
}

// TestInFlightLimitStopsReading sets strand.connection.requests.in.flight.max
// to 1 and pipelines three long-polling fetches: the broker reads the next
// only after answering the previous, so they take three waits, not one.
func TestInFlightLimitStopsReading(t *testing.T) {
	c := startCluster(t, 1, map[string]string{"strand.connection.requests.in.flight.max": "1"})
	const topic = "backpressure"
	c.createTopic(topic, 1, 1)
	r := dialRaw(t, c.nodes[0].Addr("PLAINTEXT"))
	const waitMs = 300
	start := time.Now()
	for i := int32(1); i <= 3; i++ {
		r.send(i, fetchRequest(topic, 0, waitMs))
	}
	for i := int32(1); i <= 3; i++ {
		r.receive(i, fetchRequest(topic, 0, waitMs))
	}
	if took := time.Since(start); took < 3*waitMs*time.Millisecond*9/10 {
		t.Fatalf("three pipelined %d ms long polls took %s: the broker read past the in-flight limit", waitMs, took)
	}
}

// TestMaxConnections refuses connections beyond max.connections, and
// admits again once one closes.
func TestMaxConnections(t *testing.T) {
	c := startCluster(t, 1, map[string]string{"max.connections": "2"})
	addr := c.nodes[0].Addr("PLAINTEXT")
	versions := kmsg.NewPtrApiVersionsRequest()
	first, second := dialRaw(t, addr), dialRaw(t, addr)
	for i, r := range []*rawConn{first, second} {
		r.send(int32(i), versions)
		r.receive(int32(i), versions)
	}
	third := dialRaw(t, addr)
	third.send(3, versions)
	third.expectClosed("third connection at max.connections=2")

	first.c.Close()
	c.waitFor("a connection slot freed", 5*time.Second, func() bool {
		r := dialRaw(t, addr)
		r.send(4, versions)
		_, err := r.readFrame(time.Second)
		r.c.Close()
		return err == nil
	})
}
