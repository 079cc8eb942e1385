package wire

import (
	"bytes"
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

			gotHdr, gotReq, err := ParseRequest(frameBody(t, frame), nil)
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
