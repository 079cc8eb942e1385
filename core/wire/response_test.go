package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestResponseRoundTripEveryKeyAndVersion encodes the default response to
// every request key and version kmsg knows, checks the header bytes, parses
// it back against the request and checks it re-encodes to the same bytes.
func TestResponseRoundTripEveryKeyAndVersion(t *testing.T) {
	var checked int
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		proto := kmsg.RequestForKey(key)
		if proto == nil {
			continue
		}
		for version := int16(0); version <= proto.MaxVersion(); version++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(version)
			resp := req.ResponseKind()
			correlationID := int32(key)<<16 | int32(version)
			frame := AppendResponse(nil, correlationID, resp)
			body := frameBody(t, frame)

			header := binary.BigEndian.AppendUint32(nil, uint32(correlationID))
			if resp.IsFlexible() && key != keyAPIVersions {
				header = append(header, 0)
			}
			if want := resp.AppendTo(header); !bytes.Equal(body, want) {
				t.Errorf("%s v%d response:\n got %x\nwant %x", kmsg.NameForKey(key), version, body, want)
			}

			gotID, got, err := ParseResponse(body, req)
			if err != nil {
				t.Errorf("%s v%d: ParseResponse: %v", kmsg.NameForKey(key), version, err)
				continue
			}
			if gotID != correlationID || got.Key() != key || got.GetVersion() != version {
				t.Errorf("%s v%d: parsed correlation_id %d key %d v%d", kmsg.NameForKey(key), version, gotID, got.Key(), got.GetVersion())
			}
			if again := AppendResponse(nil, gotID, got); !bytes.Equal(again, frame) {
				t.Errorf("%s v%d: re-encoding differs\n got %x\nwant %x", kmsg.NameForKey(key), version, again, frame)
			}
			checked++
		}
	}
	if checked < 300 {
		t.Fatalf("checked only %d key/version pairs", checked)
	}
}

// TestAPIVersionsResponseHeaderIsV0 checks the exception by hand at a
// flexible version: ApiVersions v3 has no tag byte, Metadata v9 has one.
func TestAPIVersionsResponseHeaderIsV0(t *testing.T) {
	apiVersions := kmsg.NewPtrApiVersionsResponse()
	apiVersions.SetVersion(3)
	if !apiVersions.IsFlexible() {
		t.Fatal("kmsg says ApiVersions v3 is not flexible; this test is stale")
	}
	got := frameBody(t, AppendResponse(nil, 9, apiVersions))
	if want := apiVersions.AppendTo([]byte{0, 0, 0, 9}); !bytes.Equal(got, want) {
		t.Errorf("ApiVersions v3 response\n got %x\nwant %x", got, want)
	}

	metadata := kmsg.NewPtrMetadataResponse()
	metadata.SetVersion(9)
	got = frameBody(t, AppendResponse(nil, 9, metadata))
	if want := metadata.AppendTo([]byte{0, 0, 0, 9, 0}); !bytes.Equal(got, want) {
		t.Errorf("Metadata v9 response\n got %x\nwant %x", got, want)
	}
}

// TestParseResponseSkipsHeaderTags gives a flexible response header a
// tagged field.
func TestParseResponseSkipsHeaderTags(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.ThrottleMillis = 77
	frame := resp.AppendTo([]byte{0, 0, 0, 3, 1, 5, 2, 'h', 'i'})
	id, got, err := ParseResponse(frame, req)
	if err != nil {
		t.Fatalf("ParseResponse: %v", err)
	}
	if id != 3 || got.(*kmsg.MetadataResponse).ThrottleMillis != 77 {
		t.Errorf("got correlation_id %d throttle %d, want 3 and 77", id, got.(*kmsg.MetadataResponse).ThrottleMillis)
	}
}

// TestAPIVersionsUnsupportedKIP511 follows the KIP-511 exchange: a client
// sends an ApiVersions version the broker does not know, the broker answers
// at v0 with UNSUPPORTED_VERSION and its table, and the client, which still
// believes it sent v3, decodes that answer.
func TestAPIVersionsUnsupportedKIP511(t *testing.T) {
	advertised := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 3, MaxVersion: 9},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 2},
	}
	clientReq := kmsg.NewPtrApiVersionsRequest()
	clientReq.SetVersion(3)
	clientReq.ClientSoftwareName = "kgo"
	clientReq.ClientSoftwareVersion = "1"
	frame := frameBody(t, AppendRequest(nil, requestHeaderOf(clientReq, 21), clientReq))

	hdr, _, err := ParseRequest(frame, VersionsSupported(advertised), DefaultRequestLimits())
	var reqErr *RequestError
	if !errors.As(err, &reqErr) || reqErr.Kind != KindUnsupportedVersion {
		t.Fatalf("ParseRequest: got %v, want KindUnsupportedVersion", err)
	}
	answer := APIVersionsUnsupported(advertised)
	advertised[0].MaxVersion = 99 // the answer must not alias the caller's table
	responseFrame := frameBody(t, AppendResponse(nil, hdr.CorrelationID, answer))

	// kgo recognises the downgrade from the second body byte.
	if responseFrame[4] != 0 || responseFrame[5] != byte(kerr.UnsupportedVersion.Code) {
		t.Fatalf("body does not start with UNSUPPORTED_VERSION: %x", responseFrame)
	}
	id, resp, err := ParseResponse(responseFrame, clientReq)
	if err != nil {
		t.Fatalf("ParseResponse: %v", err)
	}
	got := resp.(*kmsg.ApiVersionsResponse)
	if id != 21 || got.GetVersion() != 0 || got.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("got correlation_id %d v%d error %d, want 21 v0 error 35", id, got.GetVersion(), got.ErrorCode)
	}
	if len(got.ApiKeys) != 2 || got.ApiKeys[1].ApiKey != 18 || got.ApiKeys[1].MaxVersion != 2 || got.ApiKeys[0].MaxVersion != 9 {
		t.Errorf("ApiKeys %+v, want the advertised table", got.ApiKeys)
	}
}

// TestVersionsSupported checks the lookup built from an advertised table.
func TestVersionsSupported(t *testing.T) {
	supported := VersionsSupported([]kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 1, MinVersion: 4, MaxVersion: 12},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 3},
	})
	cases := []struct {
		key, version int16
		want         bool
	}{
		{1, 3, false}, {1, 4, true}, {1, 12, true}, {1, 13, false},
		{0, 0, false}, {18, 0, true}, {18, 4, false}, {19, 0, false}, {-1, 0, false}, {1000, 0, false},
	}
	for _, c := range cases {
		if got := supported(c.key, c.version); got != c.want {
			t.Errorf("supported(%d, %d) = %v, want %v", c.key, c.version, got, c.want)
		}
	}
}

// TestParseResponseMalformed cuts a response at every length.
func TestParseResponseMalformed(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	broker := kmsg.NewMetadataResponseBroker()
	broker.Host = "localhost"
	resp.Brokers = append(resp.Brokers, broker)
	body := frameBody(t, AppendResponse(nil, 4, resp))
	for n := range len(body) {
		if _, got, err := ParseResponse(body[:n], req); !errors.Is(err, ErrMalformedResponse) {
			t.Errorf("response cut to %d of %d bytes: got (%v, %v), want ErrMalformedResponse", n, len(body), got, err)
		}
	}
}
