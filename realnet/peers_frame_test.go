package realnet

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/quorum"
)

// TestFrameForPoolsOnlyReplicaFetchAnswers: on the broker plane, a replica
// Fetch's answer is read into a recycled frame, and a metadata-log Fetch's
// (which route sends there to a peer missing from the voters) or any other
// answer into a fresh one, since the metadata follower keeps referring to
// the records it decoded. Fails if frameFor pools by API key alone.
func TestFrameForPoolsOnlyReplicaFetchAnswers(t *testing.T) {
	pc := newPeerConn(nil, peerKey{id: 2, plane: planeBroker})
	replicaFetch := kmsg.NewPtrFetchRequest()
	replicaFetch.SetVersion(12)
	replicaFetch.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}
	metadataFetch := kmsg.NewPtrFetchRequest()
	metadataFetch.SetVersion(12)
	metadataFetch.Topics = []kmsg.FetchRequestTopic{{Topic: quorum.MetadataTopic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}
	metadataRequest := kmsg.NewPtrMetadataRequest()
	metadataRequest.SetVersion(12)
	for _, c := range []struct {
		name   string
		req    kmsg.Request
		pooled bool
	}{
		{"replica Fetch", replicaFetch, true},
		{"metadata-log Fetch", metadataFetch, false},
		{"Metadata", metadataRequest, false},
	} {
		pc.enqueue(c.req, func(kmsg.Response, error) {})
		out := pc.queue[len(pc.queue)-1]
		fb := pc.frameFor(out, 1024)
		if fb.pooled != c.pooled || len(fb.buf) != 1024 {
			t.Errorf("%s: frame pooled=%v, %d bytes; want pooled=%v, 1024 bytes", c.name, fb.pooled, len(fb.buf), c.pooled)
		}
		if fb.pooled {
			replicaFetchFrames.release(fb)
		}
	}
	onQuorumPlane := newPeerConn(nil, peerKey{id: 2, plane: planeQuorum})
	onQuorumPlane.enqueue(replicaFetch, func(kmsg.Response, error) {})
	if fb := onQuorumPlane.frameFor(onQuorumPlane.queue[0], 64); fb.pooled {
		t.Error("an answer on the quorum plane got a recycled frame")
	}
}
