package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// frameBody checks a frame's size prefix against its length and returns the
// bytes after it, as a connection reader would.
func frameBody(t *testing.T, frame []byte) []byte {
	t.Helper()
	if len(frame) < 4 {
		t.Fatalf("frame of %d bytes has no size prefix", len(frame))
	}
	length, err := FrameLength([4]byte(frame[:4]), FrameBytesMaxDefault)
	if err != nil {
		t.Fatalf("FrameLength: %v", err)
	}
	if int(length) != len(frame)-4 {
		t.Fatalf("size prefix says %d bytes, frame has %d after it", length, len(frame)-4)
	}
	return frame[4:]
}

// TestRequestRoundTripEveryKeyAndVersion encodes a default request of every
// key and version kmsg knows, checks the bytes against kmsg's own
// RequestFormatter (the encoder kgo uses), parses them back and checks that
// the header survives and the request re-encodes to the same bytes.
func TestRequestRoundTripEveryKeyAndVersion(t *testing.T) {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("x"))
	var checked int
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		proto := kmsg.RequestForKey(key)
		if proto == nil {
			continue
		}
		for version := int16(0); version <= proto.MaxVersion(); version++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(version)
			hdr := env.RequestHeader{APIKey: key, APIVersion: version, CorrelationID: int32(key)<<16 | int32(version), ClientID: "x"}
			frame := AppendRequest([]byte("junk"), hdr, req)[len("junk"):]

			// kmsg's formatter stops after the header for
			// ControlledShutdown v0, so it is no reference there.
			if !(key == keyControlledShutdown && version == 0) {
				want := formatter.AppendRequest(nil, req, hdr.CorrelationID)
				if !bytes.Equal(frame, want) {
					t.Errorf("%s v%d: AppendRequest differs from kmsg.RequestFormatter\n got %x\nwant %x", kmsg.NameForKey(key), version, frame, want)
				}
			}

			gotHdr, gotReq, err := ParseRequest(frameBody(t, frame), nil, DefaultRequestLimits())
			if err != nil {
				t.Errorf("%s v%d: ParseRequest: %v", kmsg.NameForKey(key), version, err)
				continue
			}
			wantHdr := hdr
			if key == keyControlledShutdown && version == 0 {
				wantHdr.ClientID = "" // header v0 has no client_id
			}
			if diff := cmp.Diff(wantHdr, gotHdr); diff != "" {
				t.Errorf("%s v%d: header (-want +got):\n%s", kmsg.NameForKey(key), version, diff)
			}
			if gotReq.Key() != key || gotReq.GetVersion() != version {
				t.Errorf("%s v%d: parsed request is key %d v%d", kmsg.NameForKey(key), version, gotReq.Key(), gotReq.GetVersion())
			}
			again := AppendRequest(nil, wantHdr, gotReq)
			if !bytes.Equal(again, frame) {
				t.Errorf("%s v%d: re-encoding differs\n got %x\nwant %x", kmsg.NameForKey(key), version, again, frame)
			}
			checked++
		}
	}
	// Produce, Fetch, Metadata alone have over 30 versions between them;
	// a tiny count means the loop is not iterating what it should.
	if checked < 300 {
		t.Fatalf("checked only %d key/version pairs", checked)
	}
	t.Logf("round-tripped %d key/version pairs", checked)
}

// metadataRequest returns a Metadata request at version with one topic, so
// the body is not trivially empty.
func metadataRequest(version int16) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("orders")
	req.Topics = append(req.Topics, topic)
	return req
}

// TestRequestHeaderFlexibility checks the header bytes themselves on either
// side of a flexibility boundary: v1 headers end at client_id, v2 headers
// add an empty tag section, and client_id keeps its int16 length in both.
func TestRequestHeaderFlexibility(t *testing.T) {
	cases := []struct {
		key, version int16
		flexible     bool
	}{
		{3, 8, false}, {3, 9, true}, // Metadata
		{0, 8, false}, {0, 9, true}, // Produce
		{1, 11, false}, {1, 12, true}, // Fetch
		{18, 2, false}, {18, 3, true}, // ApiVersions
	}
	for _, c := range cases {
		req := kmsg.RequestForKey(c.key)
		req.SetVersion(c.version)
		if req.IsFlexible() != c.flexible {
			t.Fatalf("%s v%d: kmsg says flexible=%v, test expects %v", kmsg.NameForKey(c.key), c.version, req.IsFlexible(), c.flexible)
		}
		hdr := env.RequestHeader{APIKey: c.key, APIVersion: c.version, CorrelationID: 0x01020304, ClientID: "kgo"}
		want := []byte{byte(c.key >> 8), byte(c.key), byte(c.version >> 8), byte(c.version), 1, 2, 3, 4, 0, 3, 'k', 'g', 'o'}
		if c.flexible {
			want = append(want, 0)
		}
		want = req.AppendTo(want)
		got := frameBody(t, AppendRequest(nil, hdr, req))
		if !bytes.Equal(got, want) {
			t.Errorf("%s v%d:\n got %x\nwant %x", kmsg.NameForKey(c.key), c.version, got, want)
		}
	}
}

// TestParseRequestSkipsHeaderTags crafts a flexible header that carries
// tagged fields, as a newer client may send, and checks they are skipped
// and the body still decodes.
func TestParseRequestSkipsHeaderTags(t *testing.T) {
	req := metadataRequest(9)
	frame := []byte{0, 3, 0, 9, 0, 0, 0, 42, 0xFF, 0xFF} // null client_id
	frame = append(frame,
		2,                   // two tagged fields
		0, 3, 'a', 'b', 'c', // tag 0, 3 bytes
		0x80, 0x01, 1, 'z', // tag 128 (two-byte varint), 1 byte
	)
	frame = req.AppendTo(frame)
	hdr, got, err := ParseRequest(frame, nil, DefaultRequestLimits())
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	if want := (env.RequestHeader{APIKey: 3, APIVersion: 9, CorrelationID: 42}); hdr != want {
		t.Errorf("header %+v, want %+v", hdr, want)
	}
	// kmsg structs hold unexported tag state, so compare encodings.
	if want, gotBytes := req.AppendTo(nil), got.AppendTo(nil); !bytes.Equal(gotBytes, want) {
		t.Errorf("request body re-encodes as %x, want %x", gotBytes, want)
	}

	// A tag whose size runs past the frame is malformed, not a panic.
	bad := []byte{0, 3, 0, 9, 0, 0, 0, 42, 0, 0, 1, 0, 0x7F}
	_, _, err = ParseRequest(bad, nil, DefaultRequestLimits())
	var reqErr *RequestError
	if !errors.As(err, &reqErr) || reqErr.Kind != KindMalformed || reqErr.Header.CorrelationID != 42 {
		t.Errorf("oversized header tag: got %v, want a KindMalformed RequestError for correlation_id 42", err)
	}
}

// TestParseRequestRejectionsCarryHeader checks that a request the broker
// cannot serve comes back as a RequestError whose header lets the caller
// answer it.
func TestParseRequestRejectionsCarryHeader(t *testing.T) {
	advertised := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 3, MinVersion: 1, MaxVersion: 12},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 3},
	}
	supported := VersionsSupported(advertised)
	header := func(key, version int16, correlationID int32) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
		return append(b, 0, 2, 'c', 'l')
	}
	cases := []struct {
		name      string
		frame     []byte
		supported func(key, version int16) bool
		kind      RequestErrorKind
	}{
		{"unknown key", header(kmsg.MaxKey+1, 0, 7), nil, KindUnknownKey},
		{"negative key", header(-1, 0, 8), nil, KindUnknownKey},
		{"version beyond kmsg", header(3, 999, 9), nil, KindUnsupportedVersion},
		{"negative version", header(3, -1, 10), nil, KindUnsupportedVersion},
		{"version below advertised", header(3, 0, 11), supported, KindUnsupportedVersion},
		{"key not advertised", header(0, 9, 12), supported, KindUnsupportedVersion},
		{"ApiVersions too new", header(18, 4, 13), supported, KindUnsupportedVersion},
		{"ApiVersions far too new", header(18, 200, 14), supported, KindUnsupportedVersion},
		{"body truncated", header(3, 8, 15), supported, KindMalformed},
	}
	for _, c := range cases {
		hdr, req, err := ParseRequest(c.frame, c.supported, DefaultRequestLimits())
		var reqErr *RequestError
		if !errors.As(err, &reqErr) {
			t.Errorf("%s: got %v, want a *RequestError", c.name, err)
			continue
		}
		if req != nil {
			t.Errorf("%s: got a request alongside the error", c.name)
		}
		wantHdr := env.RequestHeader{
			APIKey:        int16(binary.BigEndian.Uint16(c.frame)),
			APIVersion:    int16(binary.BigEndian.Uint16(c.frame[2:])),
			CorrelationID: int32(binary.BigEndian.Uint32(c.frame[4:])),
			ClientID:      "cl",
		}
		if reqErr.Kind != c.kind || reqErr.Header != wantHdr || hdr != wantHdr {
			t.Errorf("%s: got kind %v header %+v (returned %+v), want kind %v header %+v",
				c.name, reqErr.Kind, reqErr.Header, hdr, c.kind, wantHdr)
		}
	}

	// An advertised version parses.
	frame := AppendRequest(nil, env.RequestHeader{APIKey: 3, APIVersion: 12, CorrelationID: 1}, metadataRequest(12))
	if _, _, err := ParseRequest(frameBody(t, frame), supported, DefaultRequestLimits()); err != nil {
		t.Errorf("advertised Metadata v12: %v", err)
	}
}

// TestParseRequestMalformedHeader feeds headers too short or too strange to
// carry a usable correlation id and client_id.
func TestParseRequestMalformedHeader(t *testing.T) {
	cases := map[string][]byte{
		"empty":                      {},
		"key only":                   {0, 3},
		"no correlation id":          {0, 3, 0, 9, 0, 0},
		"no client id length":        {0, 3, 0, 9, 0, 0, 0, 1},
		"client id length -2":        {0, 3, 0, 9, 0, 0, 0, 1, 0xFF, 0xFE},
		"client id length min int16": {0, 3, 0, 9, 0, 0, 0, 1, 0x80, 0x00},
		"client id past end":         {0, 3, 0, 9, 0, 0, 0, 1, 0x7F, 0xFF, 'a'},
	}
	for name, frame := range cases {
		_, req, err := ParseRequest(frame, nil, DefaultRequestLimits())
		if !errors.Is(err, ErrMalformedHeader) || req != nil {
			t.Errorf("%s: got (%v, %v), want ErrMalformedHeader", name, req, err)
		}
	}
}

// TestParseRequestTruncatedAnywhere cuts real frames at every length and
// demands an error, never a panic and never a silently short request.
func TestParseRequestTruncatedAnywhere(t *testing.T) {
	produce := produceRequest(9, 300)
	frames := [][]byte{
		AppendRequest(nil, env.RequestHeader{APIKey: 0, APIVersion: 9, CorrelationID: 5, ClientID: "p"}, produce),
		AppendRequest(nil, env.RequestHeader{APIKey: 3, APIVersion: 12, CorrelationID: 6, ClientID: "m"}, metadataRequest(12)),
		AppendRequest(nil, env.RequestHeader{APIKey: 3, APIVersion: 4, CorrelationID: 7, ClientID: "m"}, metadataRequest(4)),
	}
	for _, full := range frames {
		body := frameBody(t, full)
		if _, _, err := ParseRequest(body, nil, DefaultRequestLimits()); err != nil {
			t.Fatalf("untruncated frame: %v", err)
		}
		for n := range len(body) {
			if _, req, err := ParseRequest(body[:n], nil, DefaultRequestLimits()); err == nil {
				t.Errorf("frame %x cut to %d of %d bytes parsed as %+v", body[:8], n, len(body), req)
			}
		}
	}
}

// produceRequest returns a Produce request at version carrying one
// partition whose records field holds recordBytes opaque bytes.
func produceRequest(version int16, recordBytes int) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = -1
	req.TimeoutMillis = 30000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "orders"
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Partition = 3
	partition.Records = bytes.Repeat([]byte{0xAB}, recordBytes)
	topic.Partitions = append(topic.Partitions, partition)
	req.Topics = append(req.Topics, topic)
	return req
}

// TestParseRequestAliasesFrame pins down the aliasing the package comment
// warns about, so a kmsg change that starts copying is noticed (and the
// warning can go).
func TestParseRequestAliasesFrame(t *testing.T) {
	frame := frameBody(t, AppendRequest(nil, env.RequestHeader{APIKey: 0, APIVersion: 9}, produceRequest(9, 16)))
	_, req, err := ParseRequest(frame, nil, DefaultRequestLimits())
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	records := req.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records
	i := bytes.Index(frame, records)
	frame[i] = 0xCD
	if records[0] != 0xCD {
		t.Errorf("records no longer alias the frame; update the package comment")
	}
}

// TestFrameLength checks the size prefix limits, at and around each edge.
func TestFrameLength(t *testing.T) {
	prefix := func(n uint32) [4]byte { return [4]byte(binary.BigEndian.AppendUint32(nil, n)) }
	cases := []struct {
		prefix [4]byte
		max    int32
		want   int32
		ok     bool
	}{
		{prefix(0), FrameBytesMaxDefault, 0, true},
		{prefix(FrameBytesMaxDefault), FrameBytesMaxDefault, FrameBytesMaxDefault, true},
		{prefix(FrameBytesMaxDefault + 1), FrameBytesMaxDefault, 0, false},
		{prefix(0x7FFFFFFF), FrameBytesMaxDefault, 0, false},
		{prefix(0x80000000), FrameBytesMaxDefault, 0, false},
		{prefix(0xFFFFFFFF), FrameBytesMaxDefault, 0, false},
		{prefix(1000), 999, 0, false},
	}
	for _, c := range cases {
		got, err := FrameLength(c.prefix, c.max)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("FrameLength(%x, %d) = %d, %v; want %d, ok=%v", c.prefix, c.max, got, err, c.want, c.ok)
		}
		if err != nil && !bytes.Contains([]byte(err.Error()), []byte("socket.request.max.bytes")) {
			t.Errorf("error %q does not name socket.request.max.bytes", err)
		}
	}
}

// requestHeaderOf is the header AppendRequest needs for req.
func requestHeaderOf(req kmsg.Request, correlationID int32) env.RequestHeader {
	return env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: correlationID, ClientID: "test"}
}
