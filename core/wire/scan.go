package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// RequestLimits bound what one request may cost to decode and to handle:
// the topics, partitions and array entries it names and the tagged fields
// it carries. ParseRequest checks them by walking the body (scanRequest)
// before kmsg decodes it, so a request over them costs no more than reading
// its bytes: kmsg allocates every array and every unknown tagged field up
// front, 20 to 40 times the bytes they take on the wire (SPEC.md §7.3). Kafka has none of these limits; each is a strand.* key
// of core/config, whose defaults DefaultRequestLimits repeats.
type RequestLimits struct {
	// TopicsMax is strand.request.topics.max: the elements of every array
	// that lists topics (or config resources), summed over the request.
	TopicsMax int
	// PartitionsMax is strand.request.partitions.max: the elements of
	// every array that lists partitions, summed over the request.
	PartitionsMax int
	// EntriesMax is strand.request.entries.max: the elements of every
	// array, and the tagged fields of every structure, summed over the
	// request, whatever they list (groups, members, configs, replicas...).
	EntriesMax int
	// TaggedFieldsMax is strand.request.tagged.fields.max: the tagged
	// fields of one structure (a tag section), known or not, the request
	// header's included.
	TaggedFieldsMax int
}

// DefaultRequestLimits are the limits' defaults: generous for any client
// (a Fetch of every partition of a large broker, a Metadata or
// DescribeConfigs of every topic of a large cluster, no unknown tagged
// fields at all from a client that speaks an advertised version), and
// small enough that a request at all of them decodes into tens of MiB and
// is handled in tens of milliseconds.
func DefaultRequestLimits() RequestLimits {
	return RequestLimits{TopicsMax: 100_000, PartitionsMax: 200_000, EntriesMax: 1_000_000, TaggedFieldsMax: 64}
}

// Limit keys, as core/config names them; a LimitError names the one
// crossed.
const (
	TopicsMaxKey       = "strand.request.topics.max"
	PartitionsMaxKey   = "strand.request.partitions.max"
	EntriesMaxKey      = "strand.request.entries.max"
	TaggedFieldsMaxKey = "strand.request.tagged.fields.max"
)

// mustBeValid panics on limits no configuration produces.
func (l RequestLimits) mustBeValid() {
	if l.TopicsMax <= 0 || l.PartitionsMax <= 0 || l.EntriesMax <= 0 || l.TaggedFieldsMax <= 0 {
		panic(fmt.Sprintf("wire: request limits must be positive: %+v", l))
	}
}

// LimitError is a request that crosses one of its RequestLimits. The
// caller closes the connection, as Kafka does for a request it cannot
// read: an answer would have to list what the request named.
type LimitError struct {
	// Key is the limit's configuration key, Max its value.
	Key string
	Max int
	// Count is how many were found when the walk stopped, at least Max+1.
	Count int64
	// Field is the structure and field where the limit was crossed.
	Field string
}

// Error names the field, the count and the limit.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %d exceed %s (%d)", e.Field, e.Count, e.Key, e.Max)
}

// errBodyTruncated is the cause when the walk runs past the body's end.
var errBodyTruncated = errors.New("truncated")

// requestCounts are what a walk has counted so far.
type requestCounts struct {
	topics, partitions, entries int64
	// decodedBytes bounds what kmsg allocates to decode the walked part
	// (DecodedBytesBound).
	decodedBytes int64
}

// allocBytes bounds what the Go heap takes for an allocation of n bytes:
// its size class or page rounding wastes less than a quarter, plus a
// little for the smallest classes.
func allocBytes(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return n + n/4 + 16
}

// unknownTagsBytes bounds the map kmsg keeps a structure's unknown tagged
// fields in (their values alias the frame): its header and first group,
// then a slot per field, with the map's doubling.
func unknownTagsBytes(tags int64) int64 {
	if tags <= 0 {
		return 0
	}
	return 512 + 192*tags
}

// bodyScanner walks one request body by its schema. It reads as kmsg's
// decoder does, and is never stricter: where kmsg accepts a length it
// accepts it, so that a body it refuses as malformed is one kmsg would
// refuse too (FuzzParseRequest checks it).
type bodyScanner struct {
	src      []byte
	version  int16
	flexible bool
	limits   RequestLimits
	counts   *requestCounts
}

// scanRequest walks body, a request of schema at version, and returns what
// it counted and the bytes after the body (kmsg ignores them); the error is
// a *LimitError if the body crosses limits, one wrapping errBodyTruncated if
// the bytes end before the layout does.
func scanRequest(schema *requestSchema, version int16, body []byte, limits RequestLimits) (requestCounts, []byte, error) {
	counts := requestCounts{decodedBytes: allocBytes(schema.body.goBytes)}
	s := bodyScanner{src: body, version: version, flexible: schema.flexible(version), limits: limits, counts: &counts}
	err := s.structure(schema.body)
	return counts, s.src, err
}

// structure walks a structure's fields in line, then its tag section.
func (s *bodyScanner) structure(st *schemaStruct) error {
	for i := range st.fields {
		f := &st.fields[i]
		if f.tag >= 0 || !f.inVersion(s.version) {
			continue
		}
		if err := s.value(st, f, f.kind); err != nil {
			return err
		}
	}
	if s.flexible {
		return s.tagSection(st)
	}
	return nil
}

// value walks one value of kind k: field f itself, or one element of the
// array f.
func (s *bodyScanner) value(st *schemaStruct, f *schemaField, k fieldKind) error {
	switch k {
	case kindInt8:
		return s.skip(1, st, f)
	case kindInt16:
		return s.skip(2, st, f)
	case kindInt32:
		return s.skip(4, st, f)
	case kindInt64:
		return s.skip(8, st, f)
	case kindUUID:
		return s.skip(16, st, f)
	case kindVarint, kindVarlong:
		return s.skipVarint(st, f)
	case kindString:
		return s.lengthPrefixed(2, st, f, true)
	case kindBytes:
		return s.lengthPrefixed(4, st, f, false)
	case kindVarintBytes:
		length, err := s.varint(st, f)
		if err != nil {
			return err
		}
		return s.skip(max(length, 0), st, f)
	case kindStruct:
		return s.structure(f.body)
	case kindNullableStruct:
		if len(s.src) < 1 {
			return s.truncated(st, f)
		}
		present := int8(s.src[0])
		s.src = s.src[1:]
		if present == -1 {
			return nil
		}
		s.counts.decodedBytes += allocBytes(f.body.goBytes)
		return s.structure(f.body)
	case kindArray:
		return s.array(st, f)
	}
	panic(fmt.Sprintf("wire: field %s.%s has kind %d", st.name, f.name, k))
}

// array walks an array: its length, counted against the limits before
// any element is walked (kmsg allocates them all at once), then each
// element.
func (s *bodyScanner) array(st *schemaStruct, f *schemaField) error {
	var length int64
	if s.flexible {
		u, err := s.uvarint(st, f)
		if err != nil {
			return err
		}
		length = int64(int32(u) - 1)
	} else {
		if len(s.src) < 4 {
			return s.truncated(st, f)
		}
		length = int64(int32(binary.BigEndian.Uint32(s.src)))
		s.src = s.src[4:]
	}
	if length > int64(len(s.src)) {
		// Every element takes at least a byte, so kmsg refuses it too.
		return fmt.Errorf("%s.%s: array of %d elements in %d bytes: %w", st.name, f.name, length, len(s.src), errBodyTruncated)
	}
	if length <= 0 {
		return nil
	}
	if err := s.count(st, f, length); err != nil {
		return err
	}
	elementBytes := goValueBytes(f.elem)
	if f.elem == kindStruct {
		elementBytes = f.body.goBytes
	}
	s.counts.decodedBytes += allocBytes(length * elementBytes)
	for range length {
		if err := s.value(st, f, f.elem); err != nil {
			return err
		}
	}
	return nil
}

// count adds an array's elements to the counts it falls under and checks
// them against the limits, the specific ones (topics, partitions) first.
func (s *bodyScanner) count(st *schemaStruct, f *schemaField, elements int64) error {
	c := s.counts
	switch listsOf(f.name) {
	case listTopics:
		c.topics += elements
		if c.topics > int64(s.limits.TopicsMax) {
			return s.overLimit(TopicsMaxKey, s.limits.TopicsMax, c.topics, st, f)
		}
	case listPartitions:
		c.partitions += elements
		if c.partitions > int64(s.limits.PartitionsMax) {
			return s.overLimit(PartitionsMaxKey, s.limits.PartitionsMax, c.partitions, st, f)
		}
	}
	c.entries += elements
	if c.entries > int64(s.limits.EntriesMax) {
		return s.overLimit(EntriesMaxKey, s.limits.EntriesMax, c.entries, st, f)
	}
	return nil
}

// tagSection walks a structure's tagged fields: the count, checked against
// the limits before any field is read (kmsg keeps every unknown one in a
// map), then each field, a known one's value walked by its schema (it may
// hold arrays and tag sections of its own), an unknown one skipped.
func (s *bodyScanner) tagSection(st *schemaStruct) error {
	section := &schemaField{name: "(tagged fields)"}
	count, err := s.uvarint(st, section)
	if err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	if int64(count) > int64(s.limits.TaggedFieldsMax) {
		return s.overLimit(TaggedFieldsMaxKey, s.limits.TaggedFieldsMax, int64(count), st, section)
	}
	s.counts.entries += int64(count)
	if s.counts.entries > int64(s.limits.EntriesMax) {
		return s.overLimit(EntriesMaxKey, s.limits.EntriesMax, s.counts.entries, st, section)
	}
	unknown := int64(0)
	defer func() { s.counts.decodedBytes += unknownTagsBytes(unknown) }()
	for range count {
		tag, err := s.uvarint(st, section)
		if err != nil {
			return err
		}
		size, err := s.uvarint(st, section)
		if err != nil {
			return err
		}
		if int64(size) > int64(len(s.src)) {
			return s.truncated(st, section)
		}
		payload := s.src[:size]
		s.src = s.src[size:]
		if f := taggedField(st, tag); f != nil {
			inner := bodyScanner{src: payload, version: s.version, flexible: s.flexible, limits: s.limits, counts: s.counts}
			if err := inner.value(st, f, f.kind); err != nil {
				return err
			}
		} else {
			unknown++
		}
	}
	return nil
}

// taggedField is st's field with tag, or nil if the schema knows none.
func taggedField(st *schemaStruct, tag uint32) *schemaField {
	for i := range st.fields {
		if f := &st.fields[i]; f.tag >= 0 && uint32(f.tag) == tag {
			return f
		}
	}
	return nil
}

// lengthPrefixed skips a string (prefixBytes 2) or bytes (4) value. A
// negative length (null, or one kmsg refuses) takes no bytes. kmsg copies
// a string (into a new string, and a nullable one behind a new pointer)
// and leaves bytes aliasing the frame: copied says which.
func (s *bodyScanner) lengthPrefixed(prefixBytes int, st *schemaStruct, f *schemaField, copied bool) error {
	var length int64
	if s.flexible {
		u, err := s.uvarint(st, f)
		if err != nil {
			return err
		}
		length = int64(u) - 1
	} else {
		if len(s.src) < prefixBytes {
			return s.truncated(st, f)
		}
		if prefixBytes == 2 {
			length = int64(int16(binary.BigEndian.Uint16(s.src)))
		} else {
			length = int64(int32(binary.BigEndian.Uint32(s.src)))
		}
		s.src = s.src[prefixBytes:]
	}
	if copied && length >= 0 {
		s.counts.decodedBytes += allocBytes(length) + 16
	}
	return s.skip(max(length, 0), st, f)
}

func (s *bodyScanner) skip(n int64, st *schemaStruct, f *schemaField) error {
	if n > int64(len(s.src)) {
		return s.truncated(st, f)
	}
	s.src = s.src[n:]
	return nil
}

// uvarint reads an unsigned varint as kmsg does: at most five bytes, the
// last at most 0x0f.
func (s *bodyScanner) uvarint(st *schemaStruct, f *schemaField) (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(s.src) {
			return 0, s.truncated(st, f)
		}
		b := s.src[i]
		if i == 4 && b > 0x0f {
			return 0, fmt.Errorf("%s.%s: varint overflows 32 bits: %w", st.name, f.name, errBodyTruncated)
		}
		v |= uint32(b&0x7f) << (7 * i)
		if b < 0x80 {
			s.src = s.src[i+1:]
			return v, nil
		}
	}
	panic("unreachable: the fifth byte either ends the varint or overflows")
}

// varint reads a zigzag varint of up to 32 bits.
func (s *bodyScanner) varint(st *schemaStruct, f *schemaField) (int64, error) {
	u, err := s.uvarint(st, f)
	if err != nil {
		return 0, err
	}
	return int64(int32(u>>1) ^ -int32(u&1)), nil
}

// skipVarint skips a zigzag varint or varlong (up to ten bytes).
func (s *bodyScanner) skipVarint(st *schemaStruct, f *schemaField) error {
	for i := 0; i < 10 && i < len(s.src); i++ {
		if s.src[i] < 0x80 {
			s.src = s.src[i+1:]
			return nil
		}
	}
	return s.truncated(st, f)
}

func (s *bodyScanner) truncated(st *schemaStruct, f *schemaField) error {
	return fmt.Errorf("%s.%s: %w (%d bytes left)", st.name, f.name, errBodyTruncated, len(s.src))
}

func (s *bodyScanner) overLimit(key string, limit int, count int64, st *schemaStruct, f *schemaField) error {
	return &LimitError{Key: key, Max: limit, Count: count, Field: st.name + "." + f.name}
}

// listKind is what an array lists, for the limits it counts against.
type listKind int

const (
	listOther listKind = iota
	listTopics
	listPartitions
)

// listsOf says what an array lists from its field name, as the protocol
// definitions name them: "Topics", "TopicNames", "ForgottenTopics", the
// streams groups' "...Topics", "TopicStates" and the config requests'
// "Resources" list topics; "Partitions" (of records, offsets, indexes) and
// "PartitionStates" list partitions.
func listsOf(name string) listKind {
	switch {
	case strings.HasSuffix(name, "Topics") || strings.HasSuffix(name, "TopicNames") ||
		name == "ForgottenTopicsData" || name == "TopicStates" || name == "Resources":
		return listTopics
	case strings.HasSuffix(name, "Partitions") || name == "PartitionStates":
		return listPartitions
	}
	return listOther
}
