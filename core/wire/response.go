package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyAPIVersions is ApiVersions, whose responses always use header v0 (no
// tag section): a client decodes them before it knows what the broker speaks.
const keyAPIVersions = 18

// ErrMalformedResponse is the cause of every ParseResponse error.
var ErrMalformedResponse = errors.New("malformed response")

// AppendResponse appends resp as a complete frame (size prefix,
// correlation id, an empty tag section if resp's version is flexible, body)
// to dst. ApiVersions responses get no tag section at any version.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	dst, start := reserveSizePrefix(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != keyAPIVersions {
		dst = append(dst, 0) // no header tags
	}
	dst = resp.AppendTo(dst)
	return fillSizePrefix(dst, start)
}

// ParseResponse decodes one response frame (the bytes after the size
// prefix) to req, the request it answers: the response takes req's key and
// version. Matching the correlation id to req is the caller's job.
//
// An ApiVersions response carrying UNSUPPORTED_VERSION is decoded as v0,
// whatever req's version: that is how a broker answers a version it does not
// know (KIP-511), and the caller then retries with the version advertised
// for key 18.
//
// The response's []byte fields alias frame (see the package comment).
func ParseResponse(frame []byte, req kmsg.Request) (int32, kmsg.Response, error) {
	r := headerReader{src: frame}
	correlationID, err := r.int32("correlation_id", "")
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
	}
	resp := req.ResponseKind()
	if resp.Key() == keyAPIVersions {
		// The error code is the body's first field at every version.
		if len(r.src) >= 2 && int16(binary.BigEndian.Uint16(r.src)) == kerr.UnsupportedVersion.Code {
			resp.SetVersion(0)
		}
	} else if resp.IsFlexible() {
		// Responses come from the peers this node connected to, not from
		// clients: their tag sections are not bounded.
		if err := r.skipTags("response header", math.MaxInt); err != nil {
			return correlationID, nil, fmt.Errorf("%w: correlation_id %d: %w", ErrMalformedResponse, correlationID, err)
		}
	}
	if err := resp.ReadFrom(r.src); err != nil {
		return correlationID, nil, fmt.Errorf("%w: %s v%d correlation_id %d body: %w",
			ErrMalformedResponse, kmsg.NameForKey(resp.Key()), resp.GetVersion(), correlationID, err)
	}
	return correlationID, resp, nil
}
