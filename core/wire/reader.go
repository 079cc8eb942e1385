package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errTruncated is the cause when a header field runs past the frame's end.
var errTruncated = errors.New("truncated")

// headerReader reads the few primitive types a Kafka header holds. kmsg's own
// reader is internal, and headers are all it is needed for here. Every read
// checks bounds and reports failure as an error naming the field; nothing
// panics on bad input. A field's name is passed in parts (field, part) and
// joined only when an error names it: a header is parsed for every frame,
// and a successful parse allocates nothing but the client id.
type headerReader struct {
	src []byte
}

func (r *headerReader) int16(field, part string) (int16, error) {
	if len(r.src) < 2 {
		return 0, fmt.Errorf("%s%s: %w (%d bytes left, need 2)", field, part, errTruncated, len(r.src))
	}
	v := int16(binary.BigEndian.Uint16(r.src))
	r.src = r.src[2:]
	return v, nil
}

func (r *headerReader) int32(field, part string) (int32, error) {
	if len(r.src) < 4 {
		return 0, fmt.Errorf("%s%s: %w (%d bytes left, need 4)", field, part, errTruncated, len(r.src))
	}
	v := int32(binary.BigEndian.Uint32(r.src))
	r.src = r.src[4:]
	return v, nil
}

// nullableString reads an int16-length string; length -1 is null, which
// reads as "".
func (r *headerReader) nullableString(field string) (string, error) {
	length, err := r.int16(field, " length")
	if err != nil {
		return "", err
	}
	if length == -1 {
		return "", nil
	}
	if length < 0 {
		return "", fmt.Errorf("%s: length %d is negative and not -1 (null)", field, length)
	}
	if int(length) > len(r.src) {
		return "", fmt.Errorf("%s: %w (length %d, %d bytes left)", field, errTruncated, length, len(r.src))
	}
	s := string(r.src[:length])
	r.src = r.src[length:]
	return s, nil
}

// uvarint reads a Kafka unsigned varint, which encodes a uint32 in at most
// five bytes.
func (r *headerReader) uvarint(field, part string) (uint32, error) {
	v, n := binary.Uvarint(r.src)
	if n == 0 {
		return 0, fmt.Errorf("%s%s: %w varint", field, part, errTruncated)
	}
	if n < 0 || n > 5 || v > 0xFFFFFFFF {
		return 0, fmt.Errorf("%s%s: varint overflows uint32", field, part)
	}
	r.src = r.src[n:]
	return uint32(v), nil
}

// skipTags skips a tagged-field section: a uvarint count, then per field a
// uvarint tag, a uvarint size and that many bytes. The header defines no
// tags Strand needs, so their contents are ignored, as Kafka ignores unknown
// tags. More than tagsMax fields is a *LimitError
// (strand.request.tagged.fields.max), found before any is read.
func (r *headerReader) skipTags(section string, tagsMax int) error {
	count, err := r.uvarint(section, " tag count")
	if err != nil {
		return err
	}
	if int64(count) > int64(tagsMax) {
		return &LimitError{Key: TaggedFieldsMaxKey, Max: tagsMax, Count: int64(count), Field: section}
	}
	// Each field takes at least two bytes (tag and size), so a count
	// larger than that bound is corrupt however the loop would fare.
	if int64(count) > int64(len(r.src)/2) {
		return fmt.Errorf("%s tag count %d: %w (%d bytes left)", section, count, errTruncated, len(r.src))
	}
	for i := range count {
		if _, err := r.uvarint("key", ""); err != nil {
			return fmt.Errorf("%s tag[%d] %w", section, i, err)
		}
		size, err := r.uvarint("size", "")
		if err != nil {
			return fmt.Errorf("%s tag[%d] %w", section, i, err)
		}
		if int64(size) > int64(len(r.src)) {
			return fmt.Errorf("%s tag[%d]: %w (size %d, %d bytes left)", section, i, errTruncated, size, len(r.src))
		}
		r.src = r.src[size:]
	}
	return nil
}
