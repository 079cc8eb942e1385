package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"strand/core/metadata"
	"strand/sim/memdisk"
)

// brokerModel is what the property test remembers of one broker process.
type brokerModel struct {
	epoch       int64 // -1 before the first registration
	incarnation byte
}

// epochKey names one leader epoch of one partition.
type epochKey struct {
	topic       metadata.TopicID
	partition   int32
	leaderEpoch int32
}

// invariantChecker holds what must hold across the whole run.
type invariantChecker struct {
	// leaders records who led each leader epoch: at most one leader per
	// partition per leader epoch.
	leaders map[epochKey]int32
	// epochs records the last seen (leader epoch, partition epoch).
	epochs map[metadata.TopicPartition][2]int32
}

func (ic *invariantChecker) check(t *rapid.T, h *harness, elr bool) {
	t.Helper()
	for _, im := range []*metadata.Image{h.c.Image(), h.c.latest} {
		im.EachPartition(func(tp metadata.TopicPartition, s metadata.PartitionState) {
			if err := s.Validate(); err != nil {
				t.Fatalf("%s-%d: %v", tp.Topic, tp.Partition, err)
			}
		})
	}
	im := h.c.Image()
	im.EachPartition(func(tp metadata.TopicPartition, s metadata.PartitionState) {
		name := fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
		if s.Leader != metadata.NoLeader {
			b, ok := im.Broker(s.Leader)
			if !ok || b.Fenced || b.InControlledShutdown {
				t.Fatalf("%s is led by broker %d, which cannot lead: %+v", name, s.Leader, b)
			}
			key := epochKey{tp.TopicID, tp.Partition, s.LeaderEpoch}
			if prev, seen := ic.leaders[key]; seen && prev != s.Leader {
				t.Fatalf("%s has two leaders in leader epoch %d: %d and %d", name, s.LeaderEpoch, prev, s.Leader)
			}
			ic.leaders[key] = s.Leader
		}
		if elr {
			for _, id := range s.ISR {
				if b, ok := im.Broker(id); !ok || b.Fenced || b.InControlledShutdown {
					t.Fatalf("%s has ineligible broker %d in its ISR %v", name, id, s.ISR)
				}
			}
		}
		key := metadata.TopicPartition{TopicID: tp.TopicID, Partition: tp.Partition}
		if prev, ok := ic.epochs[key]; ok && (s.LeaderEpoch < prev[0] || s.PartitionEpoch < prev[1]) {
			t.Fatalf("%s epochs went back from %v to (%d, %d)", name, prev, s.LeaderEpoch, s.PartitionEpoch)
		}
		ic.epochs[key] = [2]int32{s.LeaderEpoch, s.PartitionEpoch}
	})
}

// TestControllerProperties drives the controller with random registrations,
// heartbeats, time, topic changes, AlterPartitions, restarts and crashes,
// and checks the image invariants, at most one leader per partition per
// leader epoch, epochs that never decrease, and that a broker following the
// log rebuilds exactly the committed image.
func TestControllerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig(100)
		cfg.MinInsyncReplicas = rapid.IntRange(1, 3).Draw(t, "minISR")
		cfg.UncleanLeaderElectionEnable = rapid.Bool().Draw(t, "unclean")
		cfg.ELRDisabled = rapid.IntRange(0, 4).Draw(t, "elrOff") == 0
		h := newHarness(t, cfg)
		const brokerCount = 4
		brokers := make([]brokerModel, brokerCount)
		for i := range brokers {
			brokers[i].epoch = -1
		}
		ic := &invariantChecker{leaders: map[epochKey]int32{}, epochs: map[metadata.TopicPartition][2]int32{}}
		follower := metadata.NewImage()
		topics := []string{"a", "b", "c"}

		for step := range rapid.IntRange(1, 80).Draw(t, "steps") {
			_ = step
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0: // a broker (re)starts and registers
				id := rapid.Int32Range(0, brokerCount-1).Draw(t, "broker")
				b := &brokers[id]
				b.incarnation++
				previous := int64(-1)
				if rapid.Bool().Draw(t, "clean") {
					previous = b.epoch
				}
				resp := h.registerRaw(id, b.incarnation, previous)
				if resp.ErrorCode == 0 {
					b.epoch = resp.BrokerEpoch
				}
			case 1, 2, 3: // a registered broker heartbeats
				id := rapid.Int32Range(0, brokerCount-1).Draw(t, "broker")
				if brokers[id].epoch < 0 {
					continue
				}
				offset := h.c.Image().Offset()
				if rapid.IntRange(0, 3).Draw(t, "lagging") == 0 {
					offset = -1
				}
				h.heartbeatAt(id, brokers[id].epoch, offset, rapid.IntRange(0, 9).Draw(t, "shutdown") == 0)
			case 4: // time passes
				h.advance(rapid.Int64Range(0, 6000).Draw(t, "ms"))
			case 5: // create a topic
				name := rapid.SampledFrom(topics).Draw(t, "topic")
				configs := map[string]string{}
				if rapid.Bool().Draw(t, "topicMinISR") {
					configs["min.insync.replicas"] = fmt.Sprint(rapid.IntRange(1, 3).Draw(t, "minISRValue"))
				}
				h.createTopic(name, rapid.Int32Range(1, 3).Draw(t, "partitions"), int16(rapid.IntRange(1, 3).Draw(t, "rf")), configs)
			case 6: // delete a topic
				name := rapid.SampledFrom(topics).Draw(t, "topic")
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.Version = 5
				req.TopicNames = []string{name}
				h.send(req)
			case 7, 8: // a leader (or an impostor) changes the ISR
				alterRandomISR(t, h, brokers)
			case 9: // the controller restarts, cleanly or after a power loss
				if rapid.Bool().Draw(t, "crash") {
					h.settle()
					h.stop()
					h.disk.Crash(nil, memdisk.CrashLoseAll)
					h.start()
				} else {
					h.restart()
				}
				// A new controller starts from its log; the broker's
				// image is a prefix of it.
			}
			ic.check(t, h, !cfg.ELRDisabled)
			follower = catchUp(t, h, follower)
			if diff := imageDiff(h.c.Image(), follower); diff != "" {
				t.Fatalf("follower image differs from the committed one:\n%s", diff)
			}
		}
	})
}

// alterRandomISR sends an AlterPartition for a random partition, mostly from
// its leader with its current epochs, sometimes stale or from another broker.
func alterRandomISR(t *rapid.T, h *harness, brokers []brokerModel) {
	var all []metadata.TopicPartition
	h.c.Image().EachPartition(func(tp metadata.TopicPartition, _ metadata.PartitionState) { all = append(all, tp) })
	if len(all) == 0 {
		return
	}
	tp := rapid.SampledFrom(all).Draw(t, "partition")
	s := h.partition(tp.Topic, tp.Partition)
	from := s.Leader
	if from == metadata.NoLeader || rapid.IntRange(0, 5).Draw(t, "impostor") == 0 {
		from = rapid.SampledFrom(s.Replicas).Draw(t, "from")
	}
	if brokers[from].epoch < 0 {
		return
	}
	leaderEpoch, partitionEpoch := s.LeaderEpoch, s.PartitionEpoch
	if rapid.IntRange(0, 5).Draw(t, "stale") == 0 {
		leaderEpoch -= rapid.Int32Range(0, 1).Draw(t, "leaderEpochBack")
		partitionEpoch -= rapid.Int32Range(0, 1).Draw(t, "partitionEpochBack")
	}
	var isr []int32
	for _, id := range s.Replicas {
		if id == from || rapid.Bool().Draw(t, "inISR") {
			isr = append(isr, id)
		}
	}
	slices.Sort(isr)
	h.alterISR(tp.Topic, tp.Partition, from, brokers[from].epoch, leaderEpoch, partitionEpoch, isr)
}

// catchUp fetches what im lacks of the committed log. A follower ahead of
// the log (impossible: only committed records are served) fails the test.
func catchUp(t *rapid.T, h *harness, im *metadata.Image) *metadata.Image {
	for im.Offset()+1 < h.c.CommittedOffset() {
		p := fetchedPartition(t, h.send(metadataFetch(12, im.Offset()+1, 0, 1<<20)))
		if p.ErrorCode != 0 {
			t.Fatalf("follower fetch at %d: error %d", im.Offset()+1, p.ErrorCode)
		}
		batches, err := metadata.DecodeBatches(p.RecordBatches)
		if err != nil {
			t.Fatal(err)
		}
		if len(batches) == 0 {
			t.Fatalf("follower fetch at %d below the commit offset %d returned nothing", im.Offset()+1, h.c.CommittedOffset())
		}
		for _, b := range batches {
			if err := im.ApplyBatch(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	return im
}
