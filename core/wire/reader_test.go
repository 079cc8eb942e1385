package wire

import (
	"errors"
	"strings"
	"testing"
)

// flexibleHeader is a request header (Metadata v12: api_key 3, version 12,
// correlation id 7, client id "c") followed by a tag section with two tags.
var flexibleHeader = []byte{
	0, 3, 0, 12, 0, 0, 0, 7, 0, 1, 'c',
	2,       // two tagged fields
	0, 1, 9, // tag 0, size 1
	5, 0, // tag 5, size 0
}

// A successful header parse allocates only the client id: field names for
// errors are joined only when a parse fails.
func TestHeaderParseAllocatesOnlyClientID(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_, r, err := parseRequestHeaderFixed(flexibleHeader)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.skipTags("request header", DefaultRequestLimits().TaggedFieldsMax); err != nil {
			t.Fatal(err)
		}
		if len(r.src) != 0 {
			t.Fatalf("%d bytes left after the header", len(r.src))
		}
	})
	if allocs > 1 {
		t.Errorf("header parse allocated %.0f times, want at most 1 (the client id)", allocs)
	}
}

// Errors still name the field, and for tags the section and the tag's index.
func TestHeaderErrorsNameTheField(t *testing.T) {
	cases := []struct {
		frame []byte
		want  string
	}{
		{flexibleHeader[:3], "api_version"},
		{flexibleHeader[:9], "client_id length"},
		{flexibleHeader[:11], "request header tag count"},
	}
	fixed := flexibleHeader[:11]
	tags := func(section ...byte) []byte { return append(append([]byte{}, fixed...), section...) }
	cases = append(cases, []struct {
		frame []byte
		want  string
	}{
		{tags(1, 0x80, 0x80), "request header tag[0] key: truncated varint"},
		{tags(1, 0, 0x80, 0x80), "request header tag[0] size: truncated varint"},
		{tags(1, 0, 2, 9), "request header tag[0]: truncated (size 2, 1 bytes left)"},
		{tags(2, 0, 0, 5, 0x80), "request header tag[1] size: truncated varint"},
	}...)
	for _, c := range cases {
		_, r, err := parseRequestHeaderFixed(c.frame)
		if err == nil {
			err = r.skipTags("request header", DefaultRequestLimits().TaggedFieldsMax)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errTruncated) {
			t.Errorf("%d-byte header: error %v, want one naming %q and wrapping errTruncated", len(c.frame), err, c.want)
		}
	}
}
