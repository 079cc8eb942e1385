package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// keyControlledShutdown is the one API whose version 0 uses request header
// v0, which has no client_id. Kafka 4 no longer speaks it, but a header
// parser that misreads it would misread the body too.
const keyControlledShutdown = 7

// ErrMalformedHeader is the cause of every ParseRequest error that comes
// before the correlation id is known. There is no one to answer: the caller
// closes the connection.
var ErrMalformedHeader = errors.New("malformed request header")

// RequestErrorKind says why a request whose header parsed was rejected, and
// so what the caller does about it.
type RequestErrorKind int

const (
	// KindUnknownKey: kmsg knows no request with this api_key. Kafka
	// closes the connection.
	KindUnknownKey RequestErrorKind = iota + 1
	// KindUnsupportedVersion: the api_version is outside what kmsg can
	// decode or what the broker advertises. For ApiVersions the caller
	// answers per KIP-511 (see APIVersionsUnsupported); for any other key
	// Kafka closes the connection.
	KindUnsupportedVersion
	// KindMalformed: the header's tagged fields or the body do not decode.
	// The caller closes the connection.
	KindMalformed
	// KindOverLimit: the request names more topics, partitions or array
	// entries, or carries more tagged fields, than RequestLimits allow
	// (Err is a *LimitError). The caller closes the connection.
	KindOverLimit
)

// String names the kind for logs.
func (k RequestErrorKind) String() string {
	switch k {
	case KindUnknownKey:
		return "unknown api key"
	case KindUnsupportedVersion:
		return "unsupported version"
	case KindMalformed:
		return "malformed request"
	case KindOverLimit:
		return "request over a limit"
	}
	return fmt.Sprintf("RequestErrorKind(%d)", int(k))
}

// RequestError rejects a request whose header parsed far enough to name the
// api key, version and correlation id, so the caller can answer or log it.
type RequestError struct {
	// Header is the request header as parsed; a null client_id reads
	// as "".
	Header env.RequestHeader
	// Kind says why, and so whether the caller answers or closes.
	Kind RequestErrorKind
	// Err is the underlying cause, for KindMalformed; nil otherwise.
	Err error
}

// Error names the request and the reason.
func (e *RequestError) Error() string {
	msg := fmt.Sprintf("request %s (api_key %d) v%d correlation_id %d: %s",
		kmsg.NameForKey(e.Header.APIKey), e.Header.APIKey, e.Header.APIVersion, e.Header.CorrelationID, e.Kind)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause, so errors.Is reaches through.
func (e *RequestError) Unwrap() error { return e.Err }

// AppendRequest appends req as a complete frame (size prefix, header, body)
// to dst. The header is v2 (client_id then an empty tag section) when req's
// version is flexible, v1 otherwise; hdr.APIKey and hdr.APIVersion must
// match req. hdr.ClientID is written as a non-null string, "" included; the
// client_id keeps its int16 length even in flexible versions, because a
// client sends ApiVersions before it knows what the broker can read.
func AppendRequest(dst []byte, hdr env.RequestHeader, req kmsg.Request) []byte {
	if hdr.APIKey != req.Key() || hdr.APIVersion != req.GetVersion() {
		panic(fmt.Sprintf("wire: header says key %d v%d but request is key %d v%d",
			hdr.APIKey, hdr.APIVersion, req.Key(), req.GetVersion()))
	}
	if len(hdr.ClientID) > math.MaxInt16 {
		panic(fmt.Sprintf("wire: client_id of %d bytes exceeds the int16 length", len(hdr.ClientID)))
	}
	dst, start := reserveSizePrefix(dst)
	dst = binary.BigEndian.AppendUint16(dst, uint16(hdr.APIKey))
	dst = binary.BigEndian.AppendUint16(dst, uint16(hdr.APIVersion))
	dst = binary.BigEndian.AppendUint32(dst, uint32(hdr.CorrelationID))
	if !(hdr.APIKey == keyControlledShutdown && hdr.APIVersion == 0) {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(hdr.ClientID)))
		dst = append(dst, hdr.ClientID...)
		if req.IsFlexible() {
			dst = append(dst, 0) // no header tags
		}
	}
	dst = req.AppendTo(dst)
	return fillSizePrefix(dst, start)
}

// ParseRequest decodes one request frame (the bytes after the size
// prefix): ScanRequest, then Decode.
//
// The request's []byte fields alias frame: frame must not be reused while
// the request is referenced (see the package comment). Bytes after the body
// are ignored, as kmsg ignores them.
func ParseRequest(frame []byte, supported func(key, version int16) bool, limits RequestLimits) (env.RequestHeader, kmsg.Request, error) {
	scanned, err := ScanRequest(frame, supported, limits)
	if err != nil {
		return scanned.Header, nil, err
	}
	req, err := scanned.Decode()
	return scanned.Header, req, err
}

// ScannedRequest is a request frame whose header parsed and whose body the
// walk by its schema accepted, not decoded yet.
type ScannedRequest struct {
	Header env.RequestHeader
	// DecodedBytesBound bounds the heap kmsg takes to decode the body:
	// its structs, arrays, strings and unknown tagged fields (bytes fields
	// alias the frame). A caller that counts what requests cost counts it
	// beside the frame before it calls Decode.
	DecodedBytesBound int64
	req               kmsg.Request
	body              []byte
}

// ScanRequest parses a request frame's header and walks its body.
//
// supported reports whether the broker advertises a version of a key; nil
// accepts every version kmsg can decode. The walk (scanRequest) refuses the
// request, KindOverLimit, if it crosses limits; so the decoded request,
// which may cost tens of times its bytes, is bounded by the limits, and a
// request over them costs only the walk. A rejected request whose header
// parsed returns a *RequestError carrying that header; a header too short to
// hold a correlation id or a valid client_id returns an error wrapping
// ErrMalformedHeader, with whatever header fields were read before the fault
// (for logs only: there is nothing to answer).
func ScanRequest(frame []byte, supported func(key, version int16) bool, limits RequestLimits) (ScannedRequest, error) {
	limits.mustBeValid()
	hdr, r, err := parseRequestHeaderFixed(frame)
	if err != nil {
		return ScannedRequest{Header: hdr}, err
	}
	reject := func(kind RequestErrorKind, cause error) (ScannedRequest, error) {
		return ScannedRequest{Header: hdr}, &RequestError{Header: hdr, Kind: kind, Err: cause}
	}
	req := kmsg.RequestForKey(hdr.APIKey)
	if req == nil {
		return reject(KindUnknownKey, nil)
	}
	if hdr.APIVersion < 0 || hdr.APIVersion > req.MaxVersion() ||
		(supported != nil && !supported(hdr.APIKey, hdr.APIVersion)) {
		return reject(KindUnsupportedVersion, nil)
	}
	schema, ok := requestSchemas[hdr.APIKey]
	if !ok || hdr.APIVersion > schema.versionMax {
		// TestScanAgreesWithKmsg keeps the schema in step with kmsg;
		// without one the body cannot be bounded, so it is not decoded.
		return reject(KindUnsupportedVersion, nil)
	}
	req.SetVersion(hdr.APIVersion)
	if req.IsFlexible() {
		if err := r.skipTags("request header", limits.TaggedFieldsMax); err != nil {
			var limitErr *LimitError
			if errors.As(err, &limitErr) {
				return reject(KindOverLimit, err)
			}
			return reject(KindMalformed, err)
		}
	}
	counts, _, err := scanRequest(&schema, hdr.APIVersion, r.src, limits)
	if err != nil {
		var limitErr *LimitError
		if errors.As(err, &limitErr) {
			return reject(KindOverLimit, err)
		}
		return reject(KindMalformed, fmt.Errorf("body: %w", err))
	}
	return ScannedRequest{Header: hdr, DecodedBytesBound: counts.decodedBytes, req: req, body: r.src}, nil
}

// Decode decodes the scanned body with kmsg. The request's []byte fields
// alias the frame.
func (s ScannedRequest) Decode() (kmsg.Request, error) {
	if err := s.req.ReadFrom(s.body); err != nil {
		return nil, &RequestError{Header: s.Header, Kind: KindMalformed, Err: fmt.Errorf("body: %w", err)}
	}
	return s.req, nil
}

// parseRequestHeaderFixed reads the header up to and including client_id
// and returns a reader positioned after it.
func parseRequestHeaderFixed(frame []byte) (env.RequestHeader, headerReader, error) {
	var hdr env.RequestHeader
	r := headerReader{src: frame}
	var err error
	if hdr.APIKey, err = r.int16("api_key", ""); err != nil {
		return hdr, r, fmt.Errorf("%w: %w", ErrMalformedHeader, err)
	}
	if hdr.APIVersion, err = r.int16("api_version", ""); err != nil {
		return hdr, r, fmt.Errorf("%w: %w", ErrMalformedHeader, err)
	}
	if hdr.CorrelationID, err = r.int32("correlation_id", ""); err != nil {
		return hdr, r, fmt.Errorf("%w: %w", ErrMalformedHeader, err)
	}
	if hdr.APIKey == keyControlledShutdown && hdr.APIVersion == 0 {
		return hdr, r, nil
	}
	if hdr.ClientID, err = r.nullableString("client_id"); err != nil {
		return hdr, r, fmt.Errorf("%w: %w", ErrMalformedHeader, err)
	}
	return hdr, r, nil
}
