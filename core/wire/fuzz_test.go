package wire

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// FuzzParseRequest feeds arbitrary frames to ParseRequest. No frame may
// panic; every rejection must be one of the two documented error shapes;
// every accepted frame must re-encode to a frame that parses to the same
// header and re-encodes to the same bytes again.
func FuzzParseRequest(f *testing.F) {
	seeds := []kmsg.Request{
		produceRequest(3, 40), produceRequest(9, 40), produceRequest(11, 0),
		metadataRequest(1), metadataRequest(8), metadataRequest(9), metadataRequest(12),
		kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrJoinGroupRequest(),
	}
	for i, req := range seeds {
		f.Add(frameBodyOf(AppendRequest(nil, requestHeaderOf(req, int32(i)), req)))
	}
	f.Add([]byte{0, 3, 0, 9, 0, 0, 0, 42, 0xFF, 0xFF, 1, 0, 1, 'x', 0, 0, 0, 0})
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, frame []byte) {
		hdr, req, err := ParseRequest(frame, nil, DefaultRequestLimits())
		if err != nil {
			var reqErr *RequestError
			if !errors.As(err, &reqErr) && !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("error of undocumented shape: %v", err)
			}
			if reqErr != nil && reqErr.Header != hdr {
				t.Fatalf("RequestError header %+v differs from returned header %+v", reqErr.Header, hdr)
			}
			if req != nil {
				t.Fatalf("request returned alongside error %v", err)
			}
			if errors.Is(err, errBodyTruncated) {
				checkKmsgRefusesToo(t, frame, err)
			}
			return
		}
		if req.Key() != hdr.APIKey || req.GetVersion() != hdr.APIVersion {
			t.Fatalf("header %+v but request is key %d v%d", hdr, req.Key(), req.GetVersion())
		}
		encoded := AppendRequest(nil, hdr, req)
		hdr2, req2, err := ParseRequest(frameBodyOf(encoded), nil, DefaultRequestLimits())
		if err != nil {
			t.Fatalf("re-encoded frame does not parse: %v\nframe %x\nre-encoded %x", err, frame, encoded)
		}
		if hdr2 != hdr {
			t.Fatalf("header changed across re-encoding: %+v then %+v", hdr, hdr2)
		}
		if again := AppendRequest(nil, hdr2, req2); !bytes.Equal(again, encoded) {
			t.Fatalf("encoding not stable:\n first %x\nsecond %x", encoded, again)
		}
	})
}

// checkKmsgRefusesToo checks that a body the scan found truncated is one
// kmsg's decoder refuses as well: the scan must never be stricter than the
// decoder it guards, or it would close connections Kafka serves.
func checkKmsgRefusesToo(t *testing.T, frame []byte, scanErr error) {
	t.Helper()
	hdr, r, err := parseRequestHeaderFixed(frame)
	if err != nil {
		t.Fatalf("the scan ran on a frame whose header does not parse: %v", err)
	}
	req := kmsg.RequestForKey(hdr.APIKey)
	req.SetVersion(hdr.APIVersion)
	if req.IsFlexible() {
		if err := r.skipTags("request header", math.MaxInt); err != nil {
			t.Fatalf("the scan ran on a frame whose header tags do not parse: %v", err)
		}
	}
	if err := req.ReadFrom(r.src); err == nil {
		t.Fatalf("the scan refused a body kmsg decodes: %v\nframe %x", scanErr, frame)
	}
}

// frameBodyOf strips the size prefix without the checks frameBody makes,
// for use where no *testing.T is at hand.
func frameBodyOf(frame []byte) []byte { return frame[sizePrefixBytes:] }

// BenchmarkParseRequestProduce16KiB parses a Produce v9 request carrying one
// 16 KiB batch, the common case on a broker's hot path. The batch aliases
// the frame, so allocations should not grow with the batch.
func BenchmarkParseRequestProduce16KiB(b *testing.B) {
	req := produceRequest(9, 16*1024)
	frame := frameBodyOf(AppendRequest(nil, env.RequestHeader{APIKey: 0, APIVersion: 9, CorrelationID: 1, ClientID: "kgo"}, req))
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseRequest(frame, nil, DefaultRequestLimits()); err != nil {
			b.Fatal(err)
		}
	}
}
