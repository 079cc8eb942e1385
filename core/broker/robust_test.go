package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// TestEveryAdvertisedVersionAnswersEmptyRequest sends each (key, version)
// each listener advertises with an empty body: the node answers (or skips
// an acks=0 produce) and never panics.
func TestEveryAdvertisedVersionAnswersEmptyRequest(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	f := c.newForger("User:ANONYMOUS")
	for _, listener := range []string{"PLAINTEXT", "CONTROLLER"} {
		for _, k := range c.nodes[1].node.AdvertisedVersions(listener) {
			for v := k.MinVersion; v <= k.MaxVersion; v++ {
				req := kmsg.RequestForKey(k.ApiKey)
				req.SetVersion(v)
				resp, err := f.send(1, listener, req)
				if err != nil {
					t.Errorf("%s listener, key %d v%d: %v", listener, k.ApiKey, v, err)
					continue
				}
				if resp == nil && k.ApiKey != 0 { // an empty Produce has acks 0
					t.Errorf("%s listener, key %d v%d: no response", listener, k.ApiKey, v)
				}
			}
		}
	}
}

// TestRandomRequestsNeverPanic throws produce, fetch, list-offsets,
// offset-for-leader-epoch and metadata requests with arbitrary field values
// at a node; every one must be answered, and the node must keep serving.
func TestRandomRequestsNeverPanic(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := newCluster(t, 1, nil)
		c.waitRegistered()
		c.createTopic(1, "t", 2, 1)
		topic := rapid.SampledFrom([]string{"t", "nope", "", "__cluster_metadata"})
		partition := rapid.Int32Range(-2, 3)
		offset := rapid.Int64Range(-3, 5)
		epoch := rapid.Int32Range(-2, 2)
		for i := range rapid.IntRange(1, 8).Draw(rt, "requests") {
			var req kmsg.Request
			switch rapid.IntRange(0, 4).Draw(rt, "kind") {
			case 0:
				records := rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(rt, "records")
				if rapid.Bool().Draw(rt, "valid batch") {
					records = recordBatch("v")
					if n := rapid.IntRange(0, len(records)).Draw(rt, "cut"); n < len(records) {
						records[n] ^= rapid.Byte().Draw(rt, "flip")
					}
				}
				p := produceReq(topic.Draw(rt, "topic"), partition.Draw(rt, "p"), int16(rapid.IntRange(-2, 2).Draw(rt, "acks")), records)
				p.TimeoutMillis = rapid.Int32Range(-1, 100).Draw(rt, "timeout")
				p.SetVersion(int16(rapid.IntRange(3, 11).Draw(rt, "produce version")))
				req = p
			case 1:
				f := fetchReq(topic.Draw(rt, "topic"), partition.Draw(rt, "p"), offset.Draw(rt, "offset"), rapid.Int32Range(-1, 50).Draw(rt, "wait"))
				f.ReplicaID = rapid.Int32Range(-2, 2).Draw(rt, "replica")
				f.MaxBytes = rapid.Int32Range(-1, 200).Draw(rt, "max bytes")
				f.MinBytes = rapid.Int32Range(-1, 200).Draw(rt, "min bytes")
				f.Topics[0].Partitions[0].PartitionMaxBytes = rapid.Int32Range(-1, 200).Draw(rt, "partition max")
				f.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch.Draw(rt, "epoch")
				f.Topics[0].Partitions[0].LastFetchedEpoch = epoch.Draw(rt, "last epoch")
				f.SetVersion(int16(rapid.IntRange(4, 12).Draw(rt, "fetch version")))
				req = f
			case 2:
				l := kmsg.NewPtrListOffsetsRequest()
				l.SetVersion(int16(rapid.IntRange(1, 7).Draw(rt, "list version")))
				lt := kmsg.NewListOffsetsRequestTopic()
				lt.Topic = topic.Draw(rt, "topic")
				lp := kmsg.NewListOffsetsRequestTopicPartition()
				lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = partition.Draw(rt, "p"), offset.Draw(rt, "ts"), epoch.Draw(rt, "epoch")
				lt.Partitions = append(lt.Partitions, lp)
				l.Topics = append(l.Topics, lt)
				req = l
			case 3:
				o := kmsg.NewPtrOffsetForLeaderEpochRequest()
				o.SetVersion(int16(rapid.IntRange(0, 4).Draw(rt, "ofle version")))
				o.ReplicaID = rapid.Int32Range(-2, 2).Draw(rt, "replica")
				ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
				ot.Topic = topic.Draw(rt, "topic")
				op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				op.Partition, op.LeaderEpoch, op.CurrentLeaderEpoch = partition.Draw(rt, "p"), epoch.Draw(rt, "epoch"), epoch.Draw(rt, "current")
				ot.Partitions = append(ot.Partitions, op)
				o.Topics = append(o.Topics, ot)
				req = o
			default:
				m := kmsg.NewPtrMetadataRequest()
				m.SetVersion(int16(rapid.IntRange(1, 12).Draw(rt, "metadata version")))
				name := topic.Draw(rt, "topic")
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = &name
				m.Topics = append(m.Topics, mt)
				m.AllowAutoTopicCreation = rapid.Bool().Draw(rt, "auto")
				req = m
			}
			resp, err := c.send(1, req)()
			if err != nil {
				rt.Fatalf("request %d (key %d): %v", i, req.Key(), err)
			}
			if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
				// A failed acks=0 produce closes the connection (as in
				// Kafka): let the news arrive, so the next request dials
				// afresh.
				c.run(50)
				continue
			}
			if resp == nil {
				rt.Fatalf("request %d (key %d): no response", i, req.Key())
			}
		}
		// Still serving.
		if r := c.produce(1, "t", 0, 1, recordBatch("after")); r.ErrorCode != 0 {
			rt.Fatalf("after random requests: produce error %d", r.ErrorCode)
		}
	})
}
