package wire

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionsSupported turns the broker's advertised ApiVersions table into the
// supported function ParseRequest takes, so what the broker advertises and
// what it accepts cannot drift apart. The table belongs to the broker; it is
// code, not input, so a malformed table is a programming error and panics.
func VersionsSupported(advertised []kmsg.ApiVersionsResponseApiKey) func(key, version int16) bool {
	type versionRange struct {
		min, max int16
		ok       bool
	}
	var keyMax int16 = -1
	for _, k := range advertised {
		if k.ApiKey < 0 || k.MinVersion < 0 || k.MinVersion > k.MaxVersion {
			panic(fmt.Sprintf("wire: advertised key %d has versions %d..%d", k.ApiKey, k.MinVersion, k.MaxVersion))
		}
		keyMax = max(keyMax, k.ApiKey)
	}
	ranges := make([]versionRange, int(keyMax)+1)
	for _, k := range advertised {
		if ranges[k.ApiKey].ok {
			panic(fmt.Sprintf("wire: key %d advertised twice", k.ApiKey))
		}
		ranges[k.ApiKey] = versionRange{min: k.MinVersion, max: k.MaxVersion, ok: true}
	}
	return func(key, version int16) bool {
		if key < 0 || int(key) >= len(ranges) {
			return false
		}
		r := ranges[key]
		return r.ok && version >= r.min && version <= r.max
	}
}

// APIVersionsUnsupported builds the KIP-511 answer to an ApiVersions request
// whose version the broker does not support: a v0 body with
// UNSUPPORTED_VERSION and the broker's advertised keys, so the client can
// retry with the version advertised for key 18. Encode it with
// AppendResponse, which gives ApiVersions the v0 response header.
func APIVersionsUnsupported(advertised []kmsg.ApiVersionsResponseApiKey) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = slices.Clone(advertised)
	return resp
}
