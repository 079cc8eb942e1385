package wire

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// filler fills a kmsg request with values drawn from a seeded PRNG, by
// reflection: every number, string and byte slice set, every array given
// one to three elements, every nullable structure present, and unknown
// tagged fields added to every structure. kmsg's encoder then writes only
// what the version has, so the same fill serves every version.
type filler struct {
	r *rand.Rand
}

func (f *filler) fill(v reflect.Value, name string) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(f.r.IntN(2) == 1)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.r.IntN(1000)) + 1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.r.IntN(1000)) + 1)
	case reflect.Float64:
		v.SetFloat(f.r.Float64())
	case reflect.String:
		v.SetString(strings.Repeat("x", f.r.IntN(200)))
	case reflect.Array: // uuid
		for i := range v.Len() {
			v.Index(i).SetUint(uint64(f.r.IntN(256)))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), name)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, f.r.IntN(300))
			v.SetBytes(b)
			return
		}
		n := 1 + f.r.IntN(3)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			f.fill(v.Index(i), name)
		}
	case reflect.Struct:
		f.fillStruct(v)
	default:
		panic("filler: unexpected kind " + v.Kind().String() + " in " + name)
	}
}

func (f *filler) fillStruct(v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		switch {
		case !sf.IsExported() || sf.Name == "Version":
		case sf.Type == reflect.TypeFor[kmsg.Tags]():
			tags := v.Field(i).Addr().Interface().(*kmsg.Tags)
			for n := range 1 + f.r.IntN(3) {
				tags.Set(uint32(1000+n), make([]byte, f.r.IntN(5)))
			}
		default:
			f.fill(v.Field(i), sf.Name)
		}
	}
}

// TestScanAgreesWithKmsg checks the generated schema against kmsg's
// encoder for every request and version: for requests filled with values
// (arrays, strings, bytes, nullable structures, unknown tagged fields),
// the scan must walk exactly the bytes kmsg wrote, and count the topics
// and partitions reflection finds in them. A schema out of step with kmsg
// (franz-go upgraded without running cmd/wireschema) fails here.
func TestScanAgreesWithKmsg(t *testing.T) {
	unbounded := RequestLimits{TopicsMax: 1 << 30, PartitionsMax: 1 << 30, EntriesMax: 1 << 30, TaggedFieldsMax: 1 << 30}
	var checked int
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		proto := kmsg.RequestForKey(key)
		if proto == nil {
			continue
		}
		schema, ok := requestSchemas[key]
		if !ok {
			t.Errorf("%s: no schema", kmsg.NameForKey(key))
			continue
		}
		if schema.versionMax != proto.MaxVersion() {
			t.Errorf("%s: schema describes versions up to %d, kmsg decodes up to %d", kmsg.NameForKey(key), schema.versionMax, proto.MaxVersion())
		}
		for version := int16(0); version <= proto.MaxVersion(); version++ {
			for seed := range uint64(4) {
				req := kmsg.RequestForKey(key)
				fill := &filler{r: rand.New(rand.NewPCG(seed, uint64(key)<<16|uint64(version)))}
				fill.fillStruct(reflect.ValueOf(req).Elem())
				req.SetVersion(version)
				body := req.AppendTo(nil)
				if req.IsFlexible() != schema.flexible(version) {
					t.Fatalf("%s v%d: kmsg flexible %v, schema %v", kmsg.NameForKey(key), version, req.IsFlexible(), schema.flexible(version))
				}
				counts, rest, err := scanRequest(&schema, version, body, unbounded)
				if err != nil || len(rest) != 0 {
					t.Errorf("%s v%d seed %d: scan of %d bytes: %v, %d bytes left", kmsg.NameForKey(key), version, seed, len(body), err, len(rest))
					continue
				}
				decoded := kmsg.RequestForKey(key)
				decoded.SetVersion(version)
				if err := decoded.ReadFrom(body); err != nil {
					t.Fatalf("%s v%d: kmsg cannot read what it wrote: %v", kmsg.NameForKey(key), version, err)
				}
				var want requestCounts
				countDecoded(reflect.ValueOf(decoded).Elem(), "", &want)
				if counts.topics != want.topics || counts.partitions != want.partitions {
					t.Errorf("%s v%d seed %d: scan counted %d topics and %d partitions, the decoded request has %d and %d",
						kmsg.NameForKey(key), version, seed, counts.topics, counts.partitions, want.topics, want.partitions)
				}
				if counts.entries < want.entries {
					t.Errorf("%s v%d seed %d: scan counted %d entries, the decoded request has at least %d",
						kmsg.NameForKey(key), version, seed, counts.entries, want.entries)
				}
				checked++
			}
		}
	}
	if checked < 1400 {
		t.Fatalf("checked only %d requests", checked)
	}
}

// countDecoded counts, by reflection, the array elements of a decoded
// request by what they list, and the unknown tagged fields it kept.
func countDecoded(v reflect.Value, name string, c *requestCounts) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			countDecoded(v.Elem(), name, c)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		n := int64(v.Len())
		c.entries += n
		switch listsOf(name) {
		case listTopics:
			c.topics += n
		case listPartitions:
			c.partitions += n
		}
		for i := range v.Len() {
			countDecoded(v.Index(i), name, c)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			switch {
			case !sf.IsExported():
			case sf.Type == reflect.TypeFor[kmsg.Tags]():
				tags := v.Field(i).Addr().Interface().(*kmsg.Tags)
				c.entries += int64(tags.Len())
			default:
				countDecoded(v.Field(i), sf.Name, c)
			}
		}
	}
}

// TestScanRefusesBeforeDecoding checks each limit at and past its value:
// at it the request parses; one past it is refused KindOverLimit with a
// *LimitError naming the key, and nothing is decoded.
func TestScanRefusesBeforeDecoding(t *testing.T) {
	limits := RequestLimits{TopicsMax: 3, PartitionsMax: 5, EntriesMax: 12, TaggedFieldsMax: 2}
	metadata := func(topics int) kmsg.Request {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		for range topics {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr("t")
			req.Topics = append(req.Topics, mt)
		}
		return req
	}
	produce := func(topics, partitionsEach int) kmsg.Request {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		for range topics {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "t"
			for range partitionsEach {
				rt.Partitions = append(rt.Partitions, kmsg.NewProduceRequestTopicPartition())
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	fetchTags := func(tags int) kmsg.Request {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		rt := kmsg.NewFetchRequestTopic()
		rp := kmsg.NewFetchRequestTopicPartition()
		for tag := range tags {
			rp.UnknownTags.Set(uint32(100+tag), nil)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	groups := func(n int) kmsg.Request {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.SetVersion(5)
		for range n {
			req.Groups = append(req.Groups, "g")
		}
		return req
	}
	cases := []struct {
		name   string
		at     kmsg.Request
		past   kmsg.Request
		key    string
		inside string
	}{
		{"topics", metadata(3), metadata(4), TopicsMaxKey, "MetadataRequest.Topics"},
		{"topics over two arrays", produce(3, 1), produce(4, 1), TopicsMaxKey, "ProduceRequest.Topics"},
		{"partitions summed over topics", produce(1, 5), produce(2, 3), PartitionsMaxKey, "ProduceRequestTopics.Partitions"},
		{"tagged fields of one structure", fetchTags(2), fetchTags(3), TaggedFieldsMaxKey, "FetchRequestTopicsPartitions.(tagged fields)"},
		{"entries of any array", groups(12), groups(13), EntriesMaxKey, "DescribeGroupsRequest.Groups"},
	}
	for _, c := range cases {
		parse := func(req kmsg.Request) error {
			frame := AppendRequest(nil, env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: 1}, req)
			_, _, err := ParseRequest(frameBody(t, frame), nil, limits)
			return err
		}
		if err := parse(c.at); err != nil {
			t.Errorf("%s: at the limit: %v", c.name, err)
		}
		err := parse(c.past)
		var reqErr *RequestError
		var limitErr *LimitError
		if !errors.As(err, &reqErr) || reqErr.Kind != KindOverLimit || !errors.As(err, &limitErr) {
			t.Errorf("%s: past the limit: %v, want KindOverLimit with a *LimitError", c.name, err)
			continue
		}
		if limitErr.Key != c.key || limitErr.Field != c.inside || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: %v names %s at %s, want %s at %s", c.name, err, limitErr.Key, limitErr.Field, c.key, c.inside)
		}
	}
}

// TestScanRefusesHeaderTagBomb: the request header's tag section counts
// against strand.request.tagged.fields.max too.
func TestScanRefusesHeaderTagBomb(t *testing.T) {
	frame := []byte{0, 18, 0, 3, 0, 0, 0, 1, 0, 1, 'c'}
	frame = binary.AppendUvarint(frame, 3)
	frame = append(frame, 0, 0, 1, 0, 2, 0)
	_, _, err := ParseRequest(frame, nil, RequestLimits{TopicsMax: 1, PartitionsMax: 1, EntriesMax: 1, TaggedFieldsMax: 2})
	var limitErr *LimitError
	if !errors.As(err, &limitErr) || limitErr.Key != TaggedFieldsMaxKey || limitErr.Field != "request header" {
		t.Fatalf("header with 3 tags, limit 2: %v", err)
	}
}

// TestScanOfBombAllocatesNothing: the walk that
// refuses a tag bomb, or a Metadata naming millions of topics, allocates
// nothing, however large the request; decoding it would allocate tens of
// times its size.
func TestScanOfBombAllocatesNothing(t *testing.T) {
	tagBomb := []byte{0, 18, 0, 3, 0, 0, 0, 1, 0, 1, 'c', 0, 2, 'x', 2, '1'}
	tagBomb = binary.AppendUvarint(tagBomb, 1_000_000)
	for tag := range uint64(1_000_000) {
		tagBomb = append(binary.AppendUvarint(tagBomb, tag), 0)
	}
	topicBomb := binary.BigEndian.AppendUint32([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 1, 'c'}, 2_000_000)
	topicBomb = append(topicBomb, make([]byte, 4_000_000)...)
	for name, frame := range map[string][]byte{"tag bomb": tagBomb, "topic bomb": topicBomb} {
		allocs := testing.AllocsPerRun(5, func() {
			if _, _, err := ParseRequest(frame, nil, DefaultRequestLimits()); err == nil {
				t.Fatalf("%s parsed", name)
			}
		})
		// The header's client id and the error value.
		if allocs > 8 {
			t.Errorf("%s: refusing it allocated %.0f times", name, allocs)
		}
	}
}
