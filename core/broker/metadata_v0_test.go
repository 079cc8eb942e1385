package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataV0EmptyListMeansAllTopics: Metadata v0 has no null topic
// list, so an empty one asks for every topic (kafka-python 2.0's version
// probe sends it); from v1 an empty list asks for none. A named topic is
// answered in every version.
func TestMetadataV0EmptyListMeansAllTopics(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "a", 1, 1)
	c.createTopic(1, "b", 2, 1)
	topics := func(version int16, names ...string) []string {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(version)
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, name := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp := c.request(1, req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 {
			t.Fatalf("Metadata v%d: %d brokers, want 1", version, len(resp.Brokers))
		}
		var got []string
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 {
				t.Fatalf("Metadata v%d: topic %v error %d", version, rt.Topic, rt.ErrorCode)
			}
			got = append(got, *rt.Topic)
		}
		slices.Sort(got)
		return got
	}
	if got := topics(0); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Metadata v0, empty list: topics %v, want [a b]", got)
	}
	if got := topics(1); len(got) != 0 {
		t.Fatalf("Metadata v1, empty list: topics %v, want none", got)
	}
	for _, v := range []int16{0, 1, 12} {
		if got := topics(v, "b"); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("Metadata v%d naming b: topics %v, want [b]", v, got)
		}
	}
}
