package wire

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// streamLimits are small limits, so that the fuzzer reaches them and past
// them with small inputs.
var streamLimits = RequestLimits{TopicsMax: 8, PartitionsMax: 16, EntriesMax: 48, TaggedFieldsMax: 4}

// streamFrameBytesMax is the stream's socket.request.max.bytes.
const streamFrameBytesMax = 1 << 16

// entryBytesMax bounds what one array element or tagged field may retain
// once decoded, out of line from the frame: the element's own struct (the
// largest kmsg request element is under 200 bytes), its nullable strings'
// cells, and a tag's map entry. Strings are copies of frame bytes, and
// []byte fields alias the frame, so everything else a decoded request
// retains is bounded by the frame itself.
const entryBytesMax = 512

// FuzzRequestStream feeds whole request streams, as a connection reader
// reads them: size-prefixed frames one after another, mixed APIs, each
// checked against streamFrameBytesMax, parsed under streamLimits, and the
// stream ended at the first frame the reader would close the connection
// for. After each request it checks the memory the decode retained
// (retainedBytes, by reflection) against what the limits allow for that
// frame, its own bytes plus entryBytesMax per entry the limits admit, and
// that what was decoded is within the limits. Seeds hold streams with
// requests at and one past each limit.
func FuzzRequestStream(f *testing.F) {
	for _, stream := range streamSeeds() {
		f.Add(stream)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		var requests int
		for len(stream) >= sizePrefixBytes {
			length, err := FrameLength([4]byte(stream), streamFrameBytesMax)
			if err != nil || int(length) > len(stream)-sizePrefixBytes {
				return // the reader closes, or waits for bytes that never come
			}
			frame := stream[sizePrefixBytes : sizePrefixBytes+int(length)]
			stream = stream[sizePrefixBytes+int(length):]
			hdr, req, err := ParseRequest(frame, nil, streamLimits)
			if err != nil {
				var reqErr *RequestError
				if errors.As(err, &reqErr) && reqErr.Kind == KindUnsupportedVersion && hdr.APIKey == kmsg.ApiVersions.Int16() {
					continue // KIP-511's answer; the connection stays open
				}
				return // the connection closes: nothing after it is read
			}
			requests++
			var counts requestCounts
			countDecoded(reflect.ValueOf(req).Elem(), "", &counts)
			if counts.topics > int64(streamLimits.TopicsMax) || counts.partitions > int64(streamLimits.PartitionsMax) || counts.entries > int64(streamLimits.EntriesMax) {
				t.Fatalf("request %d (%s v%d) was decoded with %d topics, %d partitions, %d entries; the limits are %+v",
					requests, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, counts.topics, counts.partitions, counts.entries, streamLimits)
			}
			allowed := int64(len(frame)) + int64(streamLimits.EntriesMax)*entryBytesMax
			if retained := retainedBytes(reflect.ValueOf(req)); retained > allowed {
				t.Fatalf("request %d (%s v%d, %d bytes) retains %d bytes decoded; the limits allow %d",
					requests, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, len(frame), retained, allowed)
			}
		}
	})
}

// retainedBytes estimates the memory a decoded request holds beyond its
// frame: the pointed-to values and slice backing arrays it reaches, string
// bytes (kmsg copies them), and 64 bytes per unknown tagged field (its map
// entry). []byte fields alias the frame and cost nothing.
func retainedBytes(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return int64(v.Type().Elem().Size()) + retainedBytes(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return retainedBytes(v.Elem())
	case reflect.String:
		return int64(v.Len())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return 0
		}
		total := int64(v.Cap()) * int64(v.Type().Elem().Size())
		for i := range v.Len() {
			total += retainedBytes(v.Index(i))
		}
		return total
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[kmsg.Tags]() {
			tags := v.Interface().(kmsg.Tags)
			return int64(tags.Len()) * 64
		}
		var total int64
		for i := range v.NumField() {
			total += retainedBytes(v.Field(i))
		}
		return total
	}
	return 0
}

// streamSeeds are streams of several frames, mixed APIs, with requests at
// and past every limit, and bombs of each kind.
func streamSeeds() [][]byte {
	frame := func(req kmsg.Request) []byte {
		return AppendRequest(nil, env.RequestHeader{APIKey: req.Key(), APIVersion: req.GetVersion(), CorrelationID: 1, ClientID: "fuzz"}, req)
	}
	metadata := func(version int16, topics int) []byte {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(version)
		for range topics {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr("t")
			req.Topics = append(req.Topics, mt)
		}
		return frame(req)
	}
	produce := func(partitions int) []byte {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		for range partitions {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = []byte("records")
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return frame(req)
	}
	apiVersions := func(unknownTags int) []byte {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "fuzz", "1"
		for tag := range unknownTags {
			req.UnknownTags.Set(uint32(100+tag), []byte{1})
		}
		return frame(req)
	}
	groups := func(n int) []byte {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.SetVersion(5)
		for range n {
			req.Groups = append(req.Groups, "g")
		}
		return frame(req)
	}
	// A Metadata v1 naming a thousand empty topics, written by hand.
	bomb := binary.BigEndian.AppendUint32([]byte{0, 3, 0, 1, 0, 0, 0, 9, 0, 1, 'c'}, 1000)
	bomb = append(bomb, make([]byte, 2000)...)
	bomb = append(binary.BigEndian.AppendUint32(nil, uint32(len(bomb))), bomb...)
	cat := func(frames ...[]byte) []byte {
		var out []byte
		for _, f := range frames {
			out = append(out, f...)
		}
		return out
	}
	return [][]byte{
		cat(apiVersions(0), metadata(12, 8), produce(16), groups(48)),
		cat(apiVersions(4), metadata(1, 8), apiVersions(5)),
		cat(metadata(12, 9), produce(1)),
		cat(produce(16), produce(17)),
		cat(groups(49), apiVersions(0)),
		cat(apiVersions(0), bomb, metadata(12, 1)),
	}
}
