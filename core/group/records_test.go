package group

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// byteReader reads Kafka's non-flexible primitives by hand, independently
// of records.go, to check that what the coordinator writes is Kafka's
// schema field by field.
type byteReader struct {
	t   *testing.T
	b   []byte
	pos int
}

func (r *byteReader) next(n int) []byte {
	r.t.Helper()
	if r.pos+n > len(r.b) {
		r.t.Fatalf("record ends at %d, need %d more bytes at %d", len(r.b), n, r.pos)
	}
	out := r.b[r.pos : r.pos+n]
	r.pos += n
	return out
}
func (r *byteReader) i16() int16 { return int16(binary.BigEndian.Uint16(r.next(2))) }
func (r *byteReader) i32() int32 { return int32(binary.BigEndian.Uint32(r.next(4))) }
func (r *byteReader) i64() int64 { return int64(binary.BigEndian.Uint64(r.next(8))) }
func (r *byteReader) str() string {
	n := r.i16()
	if n < 0 {
		r.t.Fatalf("null string at %d", r.pos)
	}
	return string(r.next(int(n)))
}
func (r *byteReader) nullableStr() *string {
	n := r.i16()
	if n == -1 {
		return nil
	}
	s := string(r.next(int(n)))
	return &s
}
func (r *byteReader) bytes() []byte { return r.next(int(r.i32())) }
func (r *byteReader) done() {
	r.t.Helper()
	if r.pos != len(r.b) {
		r.t.Fatalf("%d trailing bytes", len(r.b)-r.pos)
	}
}

func TestOffsetCommitRecordIsKafkasSchema(t *testing.T) {
	key := offsetKeyBytes("grp", topicPartition{"orders", 7})
	k := &byteReader{t: t, b: key}
	if v := k.i16(); v != 1 {
		t.Errorf("OffsetCommitKey version %d, want 1", v)
	}
	if g, tp, p := k.str(), k.str(), k.i32(); g != "grp" || tp != "orders" || p != 7 {
		t.Errorf("key fields %q %q %d", g, tp, p)
	}
	k.done()

	value := offsetValueBytes(offsetValue{offset: 42, leaderEpoch: 3, metadata: "meta", commitTimestampMs: 1234})
	v := &byteReader{t: t, b: value}
	if ver := v.i16(); ver != 3 {
		t.Errorf("OffsetCommitValue version %d, want 3", ver)
	}
	if off, epoch, meta, ts := v.i64(), v.i32(), v.str(), v.i64(); off != 42 || epoch != 3 || meta != "meta" || ts != 1234 {
		t.Errorf("value fields %d %d %q %d", off, epoch, meta, ts)
	}
	v.done()
}

func TestGroupMetadataRecordIsKafkasSchema(t *testing.T) {
	protocol, leader, inst := "range", "m1", "instance-2"
	gv := groupValue{
		protocolType: "consumer", generation: 5, protocol: &protocol, leader: &leader, stateTimestampMs: 99,
		members: []memberValue{
			{memberID: "m1", clientID: "c1", clientHost: "/h1", rebalanceTimeoutMs: 300, sessionTimeoutMs: 100, subscription: []byte{1, 2}, assignment: []byte{3}},
			{memberID: "m2", instanceID: &inst, clientID: "c2", clientHost: "/h2", rebalanceTimeoutMs: 301, sessionTimeoutMs: 101, subscription: []byte{}, assignment: []byte{4, 5, 6}},
		},
	}
	k := &byteReader{t: t, b: groupKeyBytes("grp")}
	if v := k.i16(); v != 2 {
		t.Errorf("GroupMetadataKey version %d, want 2", v)
	}
	if g := k.str(); g != "grp" {
		t.Errorf("key group %q", g)
	}
	k.done()

	r := &byteReader{t: t, b: groupValueBytes(&gv)}
	if v := r.i16(); v != 3 {
		t.Errorf("GroupMetadataValue version %d, want 3", v)
	}
	got := groupValue{protocolType: r.str(), generation: r.i32(), protocol: r.nullableStr(), leader: r.nullableStr(), stateTimestampMs: r.i64()}
	for n := r.i32(); n > 0; n-- {
		got.members = append(got.members, memberValue{
			memberID: r.str(), instanceID: r.nullableStr(), clientID: r.str(), clientHost: r.str(),
			rebalanceTimeoutMs: r.i32(), sessionTimeoutMs: r.i32(), subscription: r.bytes(), assignment: r.bytes(),
		})
	}
	r.done()
	if diff := cmp.Diff(gv, got, cmp.AllowUnexported(groupValue{}, memberValue{})); diff != "" {
		t.Errorf("hand-decoded GroupMetadataValue differs (-wrote +read):\n%s", diff)
	}
	parsed, err := parseGroupValue(groupValueBytes(&gv))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gv, parsed, cmp.AllowUnexported(groupValue{}, memberValue{})); diff != "" {
		t.Errorf("parseGroupValue differs (-wrote +parsed):\n%s", diff)
	}
}

// TestParseOlderAndFlexibleValues reads value versions Kafka wrote before
// (v1 offsets with an expire timestamp, v0 groups) and the flexible v4,
// built by hand here.
func TestParseOlderAndFlexibleValues(t *testing.T) {
	v1 := appendInt16(nil, 1)
	v1 = appendInt64(v1, 10)
	v1 = appendString(v1, "md")
	v1 = appendInt64(v1, 111)
	v1 = appendInt64(v1, 222)
	got, err := parseOffsetValue(v1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (offsetValue{offset: 10, leaderEpoch: -1, metadata: "md", commitTimestampMs: 111, hasExpireTimestamp: true, expireTimestampMs: 222}); got != want {
		t.Errorf("v1 offset value = %+v, want %+v", got, want)
	}

	// OffsetCommitValue v4: compact string (uvarint len+1) and an empty
	// tagged-field section.
	v4 := appendInt16(nil, 4)
	v4 = appendInt64(v4, 77)
	v4 = appendInt32(v4, 2)
	v4 = append(v4, 3, 'x', 'y')
	v4 = appendInt64(v4, 5)
	v4 = append(v4, 1, 9, 2, 0xAA, 0xBB) // one unknown tag 9 of 2 bytes
	got, err = parseOffsetValue(v4)
	if err != nil {
		t.Fatal(err)
	}
	if want := (offsetValue{offset: 77, leaderEpoch: 2, metadata: "xy", commitTimestampMs: 5}); got != want {
		t.Errorf("v4 offset value = %+v, want %+v", got, want)
	}

	g0 := appendInt16(nil, 0)
	g0 = appendString(g0, "consumer")
	g0 = appendInt32(g0, 3)
	g0 = appendString(g0, "range")
	g0 = appendString(g0, "m")
	g0 = appendInt32(g0, 1)
	g0 = appendString(g0, "m")
	g0 = appendString(g0, "c")
	g0 = appendString(g0, "h")
	g0 = appendInt32(g0, 500)
	g0 = appendBytes(g0, []byte{1})
	g0 = appendBytes(g0, []byte{2})
	gv, err := parseGroupValue(g0)
	if err != nil {
		t.Fatal(err)
	}
	if gv.generation != 3 || len(gv.members) != 1 || gv.members[0].rebalanceTimeoutMs != 500 || gv.stateTimestampMs != -1 {
		t.Errorf("v0 group value = %+v", gv)
	}

	for _, bad := range [][]byte{v1[:len(v1)-1], append(append([]byte{}, v1...), 0), appendInt16(nil, 9)} {
		if _, err := parseOffsetValue(bad); err == nil {
			t.Errorf("parseOffsetValue(%x) accepted a malformed value", bad)
		}
	}
}

// TestLoadRefusesMalformedRecords: bad bytes in the log are an error that
// names the record, never a panic; unknown record types are skipped.
func TestLoadRefusesMalformedRecords(t *testing.T) {
	members := groupValue{protocolType: "consumer", generation: 1, members: []memberValue{{memberID: "m", subscription: []byte{}, assignment: []byte{}}}}
	cases := []struct {
		name string
		rec  LogRecord
		ok   bool
	}{
		{"short key", LogRecord{Key: []byte{0}}, false},
		{"truncated offset key", LogRecord{Key: offsetKeyBytes("g", topicPartition{"t", 0})[:5]}, false},
		{"bad offset value", LogRecord{Key: offsetKeyBytes("g", topicPartition{"t", 0}), Value: []byte{0, 3, 1}}, false},
		{"members without a protocol", LogRecord{Key: groupKeyBytes("g"), Value: groupValueBytes(&members)}, false},
		{"KIP-848 record type", LogRecord{Key: appendString(appendInt16(nil, 3), "g"), Value: []byte{1}}, true},
		{"offset tombstone of an unknown group", LogRecord{Key: offsetKeyBytes("g", topicPartition{"t", 0})}, true},
	}
	for _, c := range cases {
		co, err := New(testConfig(), &manualClock{}, &memStore{}, counterIDs())
		if err != nil {
			t.Fatal(err)
		}
		co.BeginLoad()
		err = co.Load([]LogRecord{c.rec})
		if (err == nil) != c.ok {
			t.Errorf("%s: Load error %v, want ok=%v", c.name, err, c.ok)
		}
		co.FinishLoad()
	}
}
