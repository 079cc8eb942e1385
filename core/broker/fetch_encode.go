package broker

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/log"
)

// Strand's own Fetch response encoder (CLARIFICATIONS.md, "Reads for
// Fetch"): kmsg's AppendTo would copy every record byte into the frame, so
// the broker encodes Fetch itself and leaves each partition's record batches
// as file regions that the environment sends from the segment files
// (env.Frame; realnet uses sendfile). Everything else is byte for byte what
// kmsg.FetchResponse.AppendTo writes, which TestFetchFrameMatchesKmsg checks
// on random responses.
//
// It covers the versions the broker advertises, 4 to 16: 12 is the first
// flexible one (compact lengths and tagged fields), 13 names topics by id
// (KIP-516), 16 may carry NodeEndpoints (the Brokers tag, KIP-951), which
// the broker leaves empty. Unknown tags are never set by the broker and are
// not encoded.

// fetchEncodedVersionMin and fetchEncodedVersionMax bound the versions the
// encoder writes; api_versions.go must advertise no more.
const (
	fetchEncodedVersionMin = 4
	fetchEncodedVersionMax = 16
)

// partitionRecords is the record batches of one partition of a Fetch
// response: regions of log's segment files.
type partitionRecords struct {
	log     *log.Log
	regions []log.Region
}

// bytes is the total size of the regions.
func (r partitionRecords) bytes() int64 {
	var total int64
	for _, region := range r.regions {
		total += region.Bytes
	}
	return total
}

// fetchEncoder builds a frame: encoded bytes in buf, cut into pieces
// where a partition's regions go.
type fetchEncoder struct {
	buf      []byte
	flexible bool
	// pieces are the frame's pieces so far; a bytes piece is recorded as
	// its span of buf (start, end) and sliced once buf stops growing.
	pieces []env.FramePiece
	spans  [][2]int
	// cut is where the bytes not yet in a piece start.
	cut int
	// regionBytes is the size of the regions so far.
	regionBytes int64
}

// fetchFrame encodes resp, answering correlationID, as a complete response
// frame. records holds, for each partition of resp in order, its record
// batches as file regions; a partition with regions must have empty
// RecordBatches, and one without has its RecordBatches encoded inline.
func fetchFrame(correlationID int32, resp *kmsg.FetchResponse, records []partitionRecords) env.Frame {
	v := resp.Version
	if v < fetchEncodedVersionMin || v > fetchEncodedVersionMax {
		panic(fmt.Sprintf("broker: Fetch v%d has no encoder (v%d to v%d)", v, fetchEncodedVersionMin, fetchEncodedVersionMax))
	}
	e := &fetchEncoder{flexible: resp.IsFlexible(), buf: make([]byte, 0, 256)}
	e.buf = append(e.buf, 0, 0, 0, 0) // the size prefix, filled in last
	e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(correlationID))
	if e.flexible {
		e.buf = append(e.buf, 0) // response header v1: no tags
	}
	e.int32(resp.ThrottleMillis)
	if v >= 7 {
		e.int16(resp.ErrorCode)
		e.int32(resp.SessionID)
	}
	e.arrayLen(len(resp.Topics))
	k := 0
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if v >= fetchTopicIDVersionMin {
			e.buf = append(e.buf, t.TopicID[:]...)
		} else {
			e.string(t.Topic)
		}
		e.arrayLen(len(t.Partitions))
		for j := range t.Partitions {
			if k >= len(records) {
				panic(fmt.Sprintf("broker: Fetch response has more partitions than record sets (%d)", len(records)))
			}
			e.partition(v, &t.Partitions[j], records[k])
			k++
		}
		e.tags(0)
	}
	if k != len(records) {
		panic(fmt.Sprintf("broker: Fetch response has %d partitions, %d record sets", k, len(records)))
	}
	e.brokers(resp.Brokers)
	return e.finish()
}

// brokers writes the response's tag section: the Brokers tag (0, the
// NodeEndpoints of KIP-951) when there are any, as kmsg does.
func (e *fetchEncoder) brokers(brokers []kmsg.FetchResponseBroker) {
	if !e.flexible {
		return
	}
	if len(brokers) == 0 {
		e.tags(0)
		return
	}
	e.tags(1)
	e.uvarint(0)
	// The tag's size precedes it: encode the field apart, then copy it in.
	field := &fetchEncoder{flexible: true}
	field.arrayLen(len(brokers))
	for i := range brokers {
		b := &brokers[i]
		field.int32(b.NodeID)
		field.string(b.Host)
		field.int32(b.Port)
		if b.Rack == nil {
			field.uvarint(0)
		} else {
			field.string(*b.Rack)
		}
		field.tags(0)
	}
	e.uvarint(len(field.buf))
	e.buf = append(e.buf, field.buf...)
}

func (e *fetchEncoder) partition(v int16, p *kmsg.FetchResponseTopicPartition, records partitionRecords) {
	e.int32(p.Partition)
	e.int16(p.ErrorCode)
	e.int64(p.HighWatermark)
	e.int64(p.LastStableOffset)
	if v >= 5 {
		e.int64(p.LogStartOffset)
	}
	aborted := p.AbortedTransactions
	e.nullableArrayLen(len(aborted), aborted == nil)
	for _, a := range aborted {
		e.int64(a.ProducerID)
		e.int64(a.FirstOffset)
		e.tags(0)
	}
	if v >= 11 {
		e.int32(p.PreferredReadReplica)
	}
	if len(records.regions) == 0 {
		e.nullableBytes(p.RecordBatches)
	} else {
		if len(p.RecordBatches) != 0 {
			panic("broker: a Fetch partition has both inline record batches and regions")
		}
		e.bytesLen(records.bytes())
		for _, r := range records.regions {
			e.region(r)
		}
	}
	if !e.flexible {
		return
	}
	diverging := p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1
	leader := p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1
	snapshot := p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1
	e.tags(count(diverging) + count(leader) + count(snapshot))
	// Each tagged field: tag, size, fields, the struct's own (empty) tags.
	if diverging {
		e.uvarint(0)
		e.uvarint(4 + 8 + 1)
		e.int32(p.DivergingEpoch.Epoch)
		e.int64(p.DivergingEpoch.EndOffset)
		e.tags(0)
	}
	if leader {
		e.uvarint(1)
		e.uvarint(4 + 4 + 1)
		e.int32(p.CurrentLeader.LeaderID)
		e.int32(p.CurrentLeader.LeaderEpoch)
		e.tags(0)
	}
	if snapshot {
		e.uvarint(2)
		e.uvarint(8 + 4 + 1)
		e.int64(p.SnapshotID.EndOffset)
		e.int32(p.SnapshotID.Epoch)
		e.tags(0)
	}
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (e *fetchEncoder) int16(x int16) { e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(x)) }
func (e *fetchEncoder) int32(x int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(x)) }
func (e *fetchEncoder) int64(x int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(x)) }
func (e *fetchEncoder) uvarint(x int) { e.buf = binary.AppendUvarint(e.buf, uint64(x)) }

// tags writes a tag section's count, in flexible versions only; the tagged
// fields follow.
func (e *fetchEncoder) tags(n int) {
	if e.flexible {
		e.uvarint(n)
	}
}

func (e *fetchEncoder) arrayLen(n int) {
	if e.flexible {
		e.uvarint(n + 1)
	} else {
		e.int32(int32(n))
	}
}

func (e *fetchEncoder) nullableArrayLen(n int, isNil bool) {
	switch {
	case !isNil:
		e.arrayLen(n)
	case e.flexible:
		e.uvarint(0)
	default:
		e.int32(-1)
	}
}

func (e *fetchEncoder) string(s string) {
	if e.flexible {
		e.uvarint(len(s) + 1)
	} else {
		e.int16(int16(len(s)))
	}
	e.buf = append(e.buf, s...)
}

// bytesLen writes the length of a non-null bytes field.
func (e *fetchEncoder) bytesLen(n int64) {
	if e.flexible {
		e.uvarint(int(n) + 1)
	} else {
		e.int32(int32(n))
	}
}

func (e *fetchEncoder) nullableBytes(b []byte) {
	switch {
	case b != nil:
		e.bytesLen(int64(len(b)))
		e.buf = append(e.buf, b...)
	case e.flexible:
		e.uvarint(0)
	default:
		e.int32(-1)
	}
}

// region ends the current bytes piece and adds r as a piece of its own.
func (e *fetchEncoder) region(r log.Region) {
	e.endBytes()
	e.spans = append(e.spans, [2]int{-1, -1})
	e.pieces = append(e.pieces, env.FramePiece{Region: env.FileRegion{File: r.File, Position: r.Position, Bytes: r.Bytes}})
	e.regionBytes += r.Bytes
}

func (e *fetchEncoder) endBytes() {
	if e.cut < len(e.buf) {
		e.spans = append(e.spans, [2]int{e.cut, len(e.buf)})
		e.pieces = append(e.pieces, env.FramePiece{})
		e.cut = len(e.buf)
	}
}

// finish fills in the size prefix and slices the bytes pieces out of the
// final buffer.
func (e *fetchEncoder) finish() env.Frame {
	e.endBytes()
	size := int64(len(e.buf)) - 4 + e.regionBytes
	if size > int64(^uint32(0)>>1) {
		panic(fmt.Sprintf("broker: Fetch response of %d bytes does not fit its size prefix", size))
	}
	binary.BigEndian.PutUint32(e.buf, uint32(size))
	for i, s := range e.spans {
		if s[0] >= 0 {
			e.pieces[i].Bytes = e.buf[s[0]:s[1]:s[1]]
		}
	}
	return env.Frame{Pieces: e.pieces}
}
