package main

// The null broker: the physical limit of produce latency. It speaks just
// enough of the Kafka protocol for kgo's producer (ApiVersions, Metadata,
// InitProducerID, Produce) and answers every Produce at once with offsets
// that count the records, storing nothing and replicating nothing. The
// latency a client measures against it is what the client, the loopback
// network and the machine cost at that rate: no broker can answer faster.
// It runs as a process of its own, as kfake does (this binary again, with
// -serve-null), so that its CPU time is apart from the client's.
//
// What it must not do: validate, store, or write to disk; panic on any
// input (a request it does not serve closes the connection, as Kafka does
// for a version it does not know).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// nullServeFlag makes strandbench itself the null broker process.
var nullServeFlag = flag.Int("serve-null", 0, "internal: run the null broker (the produce latency limit) on this port until SIGTERM (the broker section's peer process)")

const (
	// nullNodeID is the null broker's node id, leader and controller of
	// everything.
	nullNodeID = 1
	// nullFrameBytesMax bounds a request frame; a larger size closes the
	// connection.
	nullFrameBytesMax = 64 << 20
	// nullBufferBytes sizes each connection's read and write buffers.
	nullBufferBytes = 64 << 10
	// recordBatchHeaderBytes is a RecordBatch v2 header's length, and
	// recordsCountOffset where its int32 record count sits.
	recordBatchHeaderBytes = 61
	recordsCountOffset     = 57
)

// nullAPIs are the keys the null broker serves, in the version ranges
// Strand advertises for them (core/broker's clientAPIs), so that kgo
// encodes the same versions against either.
var nullAPIs = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: kmsg.Produce.Int16(), MinVersion: 3, MaxVersion: 11},
	{ApiKey: kmsg.Metadata.Int16(), MinVersion: 1, MaxVersion: 12},
	{ApiKey: kmsg.ApiVersions.Int16(), MinVersion: 0, MaxVersion: 4},
	{ApiKey: kmsg.InitProducerID.Int16(), MinVersion: 0, MaxVersion: 4},
}

// nullBroker is the null broker's state, shared by its connections: the
// topics it has been asked about and each partition's next offset.
type nullBroker struct {
	host string
	port int32
	// partitions is every topic's partition count.
	partitions int32

	mu             sync.Mutex
	topics         map[string][16]byte // name to topic id
	topicNames     []string            // in order of first mention
	nextOffset     map[nullPartition]int64
	nextProducerID int64
}

// nullPartition names one partition.
type nullPartition struct {
	topic     string
	partition int32
}

// newNullBroker is a null broker that names l's address as its own and
// gives every topic partitions partitions.
func newNullBroker(l net.Listener, partitions int32) *nullBroker {
	address := l.Addr().(*net.TCPAddr)
	return &nullBroker{host: address.IP.String(), port: int32(address.Port), partitions: partitions,
		topics: map[string][16]byte{}, nextOffset: map[nullPartition]int64{}, nextProducerID: 1000}
}

// serve accepts connections until l is closed, each on a goroutine of its
// own that answers its requests in order.
func (b *nullBroker) serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			if err := b.serveConn(conn); !errors.Is(err, io.EOF) { // it returns only errors
				fmt.Fprintln(os.Stderr, "null broker: closing a connection:", err)
			}
		}()
	}
}

// serveConn reads request frames and writes their responses until the
// client closes or sends a request the null broker does not serve. It
// flushes its responses whenever no whole request is waiting, so that
// requests that arrive together are answered with one write.
func (b *nullBroker) serveConn(conn net.Conn) error {
	in, out := bufio.NewReaderSize(conn, nullBufferBytes), bufio.NewWriterSize(conn, nullBufferBytes)
	var sizeBytes [4]byte
	var frame, response []byte
	for {
		if !wholeFrameBuffered(in) {
			if err := out.Flush(); err != nil {
				return err
			}
		}
		if _, err := io.ReadFull(in, sizeBytes[:]); err != nil {
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBytes[:]))
		if size < 0 || size > nullFrameBytesMax {
			return fmt.Errorf("request frame of %d bytes", size)
		}
		if cap(frame) < int(size) {
			frame = make([]byte, size)
		}
		frame = frame[:size]
		if _, err := io.ReadFull(in, frame); err != nil {
			return err
		}
		var err error
		if response, err = b.answer(frame, response[:0]); err != nil {
			return err
		}
		if _, err := out.Write(response); err != nil {
			return err
		}
	}
}

// wholeFrameBuffered reports whether in already holds a whole request.
func wholeFrameBuffered(in *bufio.Reader) bool {
	if in.Buffered() < 4 {
		return false // and Peek would block
	}
	head, err := in.Peek(4)
	return err == nil && in.Buffered()-4 >= int(int32(binary.BigEndian.Uint32(head)))
}

// answer decodes one request frame and appends its response frame to dst:
// nothing for acks=0 Produce, an error for a request it does not serve.
func (b *nullBroker) answer(frame, dst []byte) ([]byte, error) {
	header := kbin.Reader{Src: frame}
	key, version, correlationID := header.Int16(), header.Int16(), header.Int32()
	header.NullableString() // client id
	if !header.Ok() {
		return nil, errors.New("short request header")
	}
	req := kmsg.RequestForKey(key)
	if req == nil || !nullServes(key, version) {
		if key == kmsg.ApiVersions.Int16() {
			// A newer client's ApiVersions: answered at v0 with the
			// versions served, so that it retries within them.
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.ErrorCode, resp.ApiKeys = kerr.UnsupportedVersion.Code, nullAPIs
			return appendResponseFrame(dst, correlationID, false, resp), nil
		}
		return nil, fmt.Errorf("request key %d version %d is not served", key, version)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		skipTags(&header)
	}
	if !header.Ok() {
		return nil, errors.New("short request header tags")
	}
	if err := req.ReadFrom(header.Src); err != nil {
		return nil, fmt.Errorf("request key %d version %d: %w", key, version, err)
	}
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		v := kmsg.NewPtrApiVersionsResponse()
		v.ApiKeys = nullAPIs
		resp = v
	case *kmsg.MetadataRequest:
		resp = b.metadata(r)
	case *kmsg.InitProducerIDRequest:
		resp = b.initProducerID()
	case *kmsg.ProduceRequest:
		if r.Acks == 0 {
			b.produce(r) // counted, unanswered
			return dst, nil
		}
		resp = b.produce(r)
	}
	resp.SetVersion(version)
	// ApiVersions responses have header v0 at every version (KIP-511).
	flexibleHeader := req.IsFlexible() && key != kmsg.ApiVersions.Int16()
	return appendResponseFrame(dst, correlationID, flexibleHeader, resp), nil
}

// nullServes reports whether key at version is in nullAPIs.
func nullServes(key, version int16) bool {
	for _, api := range nullAPIs {
		if api.ApiKey == key {
			return version >= api.MinVersion && version <= api.MaxVersion
		}
	}
	return false
}

// skipTags reads past a flexible request header's tagged fields.
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
}

// appendResponseFrame appends a size-prefixed response frame to dst.
func appendResponseFrame(dst []byte, correlationID int32, flexibleHeader bool, resp kmsg.Response) []byte {
	start := len(dst)
	dst = kbin.AppendInt32(dst, 0) // the size, set below
	dst = kbin.AppendInt32(dst, correlationID)
	if flexibleHeader {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// metadata names the null broker as the only broker and the controller,
// and as the leader of every partition of the topics asked for (all it
// knows if none are named).
func (b *nullBroker) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	broker := kmsg.NewMetadataResponseBroker()
	broker.NodeID, broker.Host, broker.Port = nullNodeID, b.host, b.port
	resp.Brokers, resp.ControllerID = append(resp.Brokers, broker), nullNodeID
	b.mu.Lock()
	defer b.mu.Unlock()
	names := b.topicNames
	if req.Topics != nil {
		names = nil
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			} else if name, ok := b.topicByID(t.TopicID); ok {
				names = append(names, name)
			} else {
				unknown := kmsg.NewMetadataResponseTopic()
				unknown.TopicID, unknown.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, unknown)
			}
		}
	}
	for _, name := range names {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID = kmsg.StringPtr(name), b.topicID(name)
		for i := range b.partitions {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader, p.LeaderEpoch = i, nullNodeID, 0
			p.Replicas, p.ISR = []int32{nullNodeID}, []int32{nullNodeID}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// topicID is name's id, made up at its first mention. b.mu is held.
func (b *nullBroker) topicID(name string) [16]byte {
	id, ok := b.topics[name]
	if !ok {
		binary.BigEndian.PutUint64(id[8:], uint64(len(b.topicNames)+1))
		b.topics[name] = id
		b.topicNames = append(b.topicNames, name)
	}
	return id
}

// topicByID is the name of the topic with id. b.mu is held.
func (b *nullBroker) topicByID(id [16]byte) (string, bool) {
	for _, name := range b.topicNames {
		if b.topics[name] == id {
			return name, true
		}
	}
	return "", false
}

// initProducerID hands out a new producer id at epoch 0.
func (b *nullBroker) initProducerID() *kmsg.InitProducerIDResponse {
	resp := kmsg.NewPtrInitProducerIDResponse()
	b.mu.Lock()
	resp.ProducerID = b.nextProducerID
	b.nextProducerID++
	b.mu.Unlock()
	return resp
}

// produce gives each partition's records the next offsets: the response's
// base offset is the partition's count of records before them.
func (b *nullBroker) produce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.BaseOffset = p.Partition, -1
			records, ok := countRecords(p.Records)
			switch {
			case p.Partition < 0 || p.Partition >= b.partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !ok:
				rp.ErrorCode = kerr.CorruptMessage.Code
			default:
				at := nullPartition{t.Topic, p.Partition}
				rp.BaseOffset = b.nextOffset[at]
				b.nextOffset[at] += records
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// countRecords sums the record counts of the RecordBatch v2 headers in
// records; ok is false if they do not tile it or a count is below 1.
func countRecords(records []byte) (count int64, ok bool) {
	if len(records) == 0 {
		return 0, false
	}
	for len(records) > 0 {
		if len(records) < recordBatchHeaderBytes {
			return 0, false
		}
		size := batchLogOverheadBytes + int64(int32(binary.BigEndian.Uint32(records[batchLengthOffset:])))
		n := int32(binary.BigEndian.Uint32(records[recordsCountOffset:]))
		if size < recordBatchHeaderBytes || size > int64(len(records)) || n < 1 {
			return 0, false
		}
		count += int64(n)
		records = records[size:]
	}
	return count, true
}

// serveNull runs the null broker on port until SIGTERM or SIGINT.
func serveNull(port int) int {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "strandbench: null broker:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go newNullBroker(l, 1).serve(l)
	fmt.Fprintln(os.Stderr, "null broker listening on", l.Addr())
	<-ctx.Done()
	l.Close()
	return 0
}

// startNull starts the null broker in a process of its own: this binary
// again, with -serve-null.
func startNull(dir string) (*cluster, error) {
	return startSelf(dir, "null broker", "-serve-null")
}
