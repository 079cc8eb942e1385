package main

// The raw consumer of the broker section (CLARIFICATIONS.md, "Consume
// throughput"): Fetch requests on a plain TCP connection to the partition's
// leader, one at a time, each response read into one reused buffer, the
// response structure parsed with kmsg and the record batches only walked by
// their headers for the next offset, never decoded. What it measures is the
// broker's fetch path and the loopback link, not a client's decoding.

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// rawFetchVersion is the Fetch version the raw consumer speaks: the
	// newest Strand serves, and flexible (response header v1).
	rawFetchVersion = 12
	// rawFetchPartitionBytes and rawFetchBytes are the raw consumer's
	// max bytes per partition and per response.
	rawFetchPartitionBytes = 8 << 20
	rawFetchBytes          = 64 << 20
	// batchLengthOffset and lastOffsetDeltaOffset locate a record batch's
	// length and last offset delta (Kafka's RecordBatch v2 header).
	batchLengthOffset     = 8
	lastOffsetDeltaOffset = 23
	batchLogOverheadBytes = 12
	// rawFetchStallsMax is how many fetches in a row may return no whole
	// batch (each waits up to MaxWaitMillis) before the raw consumer gives up.
	rawFetchStallsMax = 20
)

// consumeRaw reads partition 0 of topic from offset 0 to endOffset with raw
// Fetch requests to its leader. bytes counts whole record batches received.
func consumeRaw(c *cluster, topic string, endOffset int64) (consumeResult, error) {
	leader, err := leaderOf(c, topic)
	if err != nil {
		return consumeResult{}, err
	}
	conn, err := net.Dial("tcp", leader)
	if err != nil {
		return consumeResult{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		return consumeResult{}, err
	}
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("strandbench-raw"))
	var request []byte
	response := make([]byte, rawFetchBytes+1<<20)
	var r consumeResult
	stalled := 0
	start := time.Now()
	for offset, correlationID := int64(0), int32(1); offset < endOffset; correlationID++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version = rawFetchVersion
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 500, 1, rawFetchBytes
		req.SessionEpoch = -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic = topic
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = 0, offset, rawFetchPartitionBytes
		p.CurrentLeaderEpoch, p.LogStartOffset = -1, -1
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		request = formatter.AppendRequest(request[:0], req, correlationID)
		if _, err := conn.Write(request); err != nil {
			return consumeResult{}, err
		}
		body, err := readResponse(conn, &response, correlationID)
		if err != nil {
			return consumeResult{}, err
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = rawFetchVersion
		if err := resp.ReadFrom(body); err != nil {
			return consumeResult{}, fmt.Errorf("raw fetch: %w", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return consumeResult{}, fmt.Errorf("raw fetch: response for %d topics", len(resp.Topics))
		}
		part := resp.Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			return consumeResult{}, fmt.Errorf("raw fetch %s at offset %d: error code %d", topic, offset, part.ErrorCode)
		}
		next, batchBytes := walkBatches(part.RecordBatches, offset)
		if next == offset {
			if stalled++; stalled > rawFetchStallsMax {
				return consumeResult{}, fmt.Errorf("raw fetch %s: no progress at offset %d (high watermark %d) in %d fetches", topic, offset, part.HighWatermark, stalled)
			}
		} else {
			stalled = 0
		}
		r.bytes += batchBytes
		offset = next
	}
	r.elapsed = time.Since(start)
	r.records = endOffset
	return r, nil
}

// readResponse reads one response frame into *buf (grown if needed) and
// returns its body after the response header v1 (correlation id, empty
// tagged fields).
func readResponse(conn net.Conn, buf *[]byte, correlationID int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n > cap(*buf) {
		*buf = make([]byte, n)
	}
	frame := (*buf)[:n]
	if _, err := io.ReadFull(conn, frame); err != nil {
		return nil, err
	}
	if n < 5 || int32(binary.BigEndian.Uint32(frame)) != correlationID || frame[4] != 0 {
		return nil, fmt.Errorf("raw fetch: unexpected response header %x", frame[:min(n, 5)])
	}
	return frame[5:], nil
}

// walkBatches returns the offset after the last whole batch in records (or
// from if there is none) and the bytes of the whole batches.
func walkBatches(records []byte, from int64) (next, wholeBytes int64) {
	next = from
	for len(records) >= batchLogOverheadBytes {
		size := batchLogOverheadBytes + int(int32(binary.BigEndian.Uint32(records[batchLengthOffset:])))
		if size > len(records) || size < lastOffsetDeltaOffset+4 {
			break // a partial batch at the end of the response
		}
		base := int64(binary.BigEndian.Uint64(records))
		next = base + int64(int32(binary.BigEndian.Uint32(records[lastOffsetDeltaOffset:]))) + 1
		wholeBytes += int64(size)
		records = records[size:]
	}
	return next, wholeBytes
}

// leaderOf is the address of the leader of partition 0 of topic.
func leaderOf(c *cluster, topic string) (string, error) {
	cl, ctx, done, err := c.adminClient(10 * time.Second)
	if err != nil {
		return "", err
	}
	defer done()
	leaders, err := partitionLeaders(ctx, cl, topic)
	if err != nil {
		return "", err
	}
	leader, ok := leaders[0]
	if !ok {
		return "", fmt.Errorf("%s partition 0 on %s has no leader", topic, c.name)
	}
	return leader, nil
}
