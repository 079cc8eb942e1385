package wire

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// bytesAllocatedBy is what fn allocates on the heap: the least of three
// runs, since the runtime and the test framework allocate now and then
// too.
func bytesAllocatedBy(fn func()) int64 {
	least := int64(-1)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		if n := int64(after.TotalAlloc - before.TotalAlloc); least < 0 || n < least {
			least = n
		}
	}
	return least
}

// TestDecodedBytesBoundCoversKmsg: for every request and version, filled as
// TestScanAgreesWithKmsg fills them (arrays, strings, nullable structures,
// unknown tagged fields), what kmsg allocates to decode the body is at most
// the scan's DecodedBytesBound, and the bound is not wildly above it.
func TestDecodedBytesBoundCoversKmsg(t *testing.T) {
	unbounded := RequestLimits{TopicsMax: 1 << 30, PartitionsMax: 1 << 30, EntriesMax: 1 << 30, TaggedFieldsMax: 1 << 30}
	var checked int
	var allocatedTotal, boundTotal int64
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		proto := kmsg.RequestForKey(key)
		schema, ok := requestSchemas[key]
		if proto == nil || !ok {
			continue
		}
		for version := int16(0); version <= proto.MaxVersion(); version++ {
			for seed := range uint64(3) {
				req := kmsg.RequestForKey(key)
				fill := &filler{r: rand.New(rand.NewPCG(seed, uint64(key)<<16|uint64(version)))}
				fill.fillStruct(reflect.ValueOf(req).Elem())
				req.SetVersion(version)
				body := req.AppendTo(nil)
				counts, _, err := scanRequest(&schema, version, body, unbounded)
				if err != nil {
					t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
				}
				allocated := bytesAllocatedBy(func() {
					decoded := kmsg.RequestForKey(key)
					decoded.SetVersion(version)
					if err := decoded.ReadFrom(body); err != nil {
						t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
					}
				})
				if allocated > counts.decodedBytes {
					t.Errorf("%s v%d seed %d: decoding %d bytes allocated %d, over the bound %d",
						kmsg.NameForKey(key), version, seed, len(body), allocated, counts.decodedBytes)
				}
				allocatedTotal += allocated
				boundTotal += counts.decodedBytes
				checked++
			}
		}
	}
	t.Logf("%d requests: kmsg allocated %d bytes to decode them, the bounds sum to %d (%.2fx)",
		checked, allocatedTotal, boundTotal, float64(boundTotal)/float64(allocatedTotal))
	if checked < 1000 {
		t.Fatalf("checked only %d requests", checked)
	}
	if boundTotal > 4*allocatedTotal {
		t.Errorf("the bounds sum to %.1f times what kmsg allocated: too loose to count with", float64(boundTotal)/float64(allocatedTotal))
	}
}

// TestDecodedBytesBoundOfAmplifyingRequests: the requests that decode into
// many times their bytes — a Metadata naming topics of empty names, a
// Fetch of many partitions, a structure of unknown tagged fields — are
// bounded too, and the bound says how much more than the frame each costs.
func TestDecodedBytesBoundOfAmplifyingRequests(t *testing.T) {
	manyEmptyNames := binary.BigEndian.AppendUint32(nil, 100_000) // Metadata v1
	manyEmptyNames = append(manyEmptyNames, make([]byte, 2*100_000)...)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	for topic := range 100 {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t" + string(rune('a'+topic%26))
		for p := range 1000 {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition = int32(p)
			ft.Partitions = append(ft.Partitions, fp)
		}
		fetch.Topics = append(fetch.Topics, ft)
	}

	tagged := kmsg.NewPtrApiVersionsRequest()
	tagged.SetVersion(3)
	tagged.ClientSoftwareName, tagged.ClientSoftwareVersion = "c", "1"
	for tag := range 64 {
		tagged.UnknownTags.Set(uint32(100+tag), nil)
	}

	for _, c := range []struct {
		name    string
		key     int16
		version int16
		body    []byte
	}{
		{"Metadata v1 of 100,000 empty names", 3, 1, manyEmptyNames},
		{"Fetch v12 of 100 topics of 1,000 partitions", 1, 12, fetch.AppendTo(nil)},
		{"ApiVersions v3 with 64 unknown tagged fields", 18, 3, tagged.AppendTo(nil)},
	} {
		schema := requestSchemas[c.key]
		counts, _, err := scanRequest(&schema, c.version, c.body, DefaultRequestLimits())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		allocated := bytesAllocatedBy(func() {
			decoded := kmsg.RequestForKey(c.key)
			decoded.SetVersion(c.version)
			if err := decoded.ReadFrom(c.body); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		})
		t.Logf("%s: %d bytes decode into %d (%.1fx), bound %d (%.1fx)", c.name, len(c.body), allocated,
			float64(allocated)/float64(len(c.body)), counts.decodedBytes, float64(counts.decodedBytes)/float64(len(c.body)))
		if allocated > counts.decodedBytes {
			t.Errorf("%s: allocated %d, over the bound %d", c.name, allocated, counts.decodedBytes)
		}
	}
}
