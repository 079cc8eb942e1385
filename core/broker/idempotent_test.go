package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/producer"
	"strand/sim/memdisk"
	"strand/sim/simnet"
)

// idempotentProducer hand-builds what kgo's and librdkafka's default
// producer sends: a producer id and epoch from InitProducerId, and per
// partition a sequence counted in records.
type idempotentProducer struct {
	id    int64
	epoch int16
	seq   int32
	// timestampMs is the records' timestamp (time-based rolls follow it).
	timestampMs int64
}

// initProducerID asks node for a producer id without a transactional id.
func (c *cluster) initProducerID(node int32) *idempotentProducer {
	c.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := c.request(node, req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		c.t.Fatalf("InitProducerId on node %d: error %v, id %d epoch %d", node, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	return &idempotentProducer{id: resp.ProducerID, epoch: resp.ProducerEpoch, timestampMs: 1_767_225_600_000}
}

// next builds the producer's next batch holding values and advances the
// sequence, as a client does when it first sends a batch.
func (ip *idempotentProducer) next(values ...string) []byte {
	b := ip.batchAt(ip.seq, values...)
	ip.seq += int32(len(values))
	return b
}

// batchAt builds a batch with the given base sequence.
func (ip *idempotentProducer) batchAt(baseSequence int32, values ...string) []byte {
	var recs []batch.Record
	for _, v := range values {
		recs = append(recs, batch.Record{Key: []byte("k"), Value: []byte(v)})
	}
	return batch.Build(batch.BuildSpec{FirstTimestamp: ip.timestampMs, Records: recs,
		Idempotent: true, ProducerID: ip.id, ProducerEpoch: ip.epoch, BaseSequence: baseSequence})
}

// sent is a batch produced and acknowledged: its bytes (a retry resends
// them unchanged) and the offset the broker gave it.
type sent struct {
	records    []byte
	baseOffset int64
}

// produceIdempotent sends count batches of two records each with acks=all
// and returns them with their offsets.
func (c *cluster) produceIdempotent(node int32, topic string, ip *idempotentProducer, prefix string, count int) []sent {
	c.t.Helper()
	var out []sent
	for i := range count {
		b := ip.next(fmt.Sprintf("%s%d.a", prefix, i), fmt.Sprintf("%s%d.b", prefix, i))
		r := c.produce(node, topic, 0, -1, append([]byte(nil), b...))
		if r.ErrorCode != 0 {
			c.t.Fatalf("batch %s%d: %v", prefix, i, kerr.ErrorForCode(r.ErrorCode))
		}
		out = append(out, sent{records: b, baseOffset: r.BaseOffset})
	}
	return out
}

// retryLastFive resends the last five acknowledged batches (the window a
// client with max.in.flight 5 may retry) to node and reports, per retry,
// whether the answer was NONE with the original offset.
func (c *cluster) retryLastFive(node int32, topic string, batches []sent) []string {
	c.t.Helper()
	var problems []string
	for _, s := range batches[len(batches)-5:] {
		r := c.produce(node, topic, 0, -1, append([]byte(nil), s.records...))
		if r.ErrorCode != 0 || r.BaseOffset != s.baseOffset {
			problems = append(problems, fmt.Sprintf("retry of the batch at %d: error %v, offset %d", s.baseOffset, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset))
		}
	}
	return problems
}

// logValues reads the partition from node's log start offset (as a
// consumer, below the HW) and returns the values with the number of times
// each appears.
func (c *cluster) logValues(node int32, topic string) ([]string, map[string]int) {
	c.t.Helper()
	var all []string
	for offset := c.nodes[node].node.parts.partitions[partitionKey{topic, 0}].log.LogStartOffset(); ; {
		fp := c.fetch(node, topic, 0, offset)
		if fp.ErrorCode != 0 {
			c.t.Fatalf("fetch %s at %d from node %d: %v", topic, offset, node, kerr.ErrorForCode(fp.ErrorCode))
		}
		got := values(c.t, fp.RecordBatches)
		if len(got) == 0 {
			break
		}
		all = append(all, got...)
		offset += int64(len(got))
	}
	counts := map[string]int{}
	for _, v := range all {
		counts[v]++
	}
	return all, counts
}

// duplicatesIn lists the values held more than once, in log order.
func duplicatesIn(all []string, counts map[string]int) []string {
	var dups []string
	for _, v := range all {
		if counts[v] > 1 {
			dups = append(dups, v)
			counts[v] = 0
		}
	}
	return dups
}

// dedupScenario produces ten idempotent batches with acks=all on a
// three-node cluster, retries the last five, and returns what the retries
// answered and the values held twice. Every node runs with dedupOff.
func dedupScenario(t *testing.T, dedupOff bool) (retryProblems, duplicates []string, logLen int) {
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "2", "default.replication.factor": "3"})
	for id := int32(1); id <= 3; id++ {
		tn := c.nodes[id]
		tn.cfg.Bugs.DedupOff = dedupOff
		tn.proc.Crash() // restart with the bug, as chaosRun does
		tn.proc.Restart()
		c.start(tn)
	}
	c.waitRegistered()
	c.createTopic(1, "i", 1, 3)
	leader := c.leaderOf("i", 0)
	ip := c.initProducerID(leader)
	batches := c.produceIdempotent(leader, "i", ip, "v", 10)
	retryProblems = c.retryLastFive(leader, "i", batches)
	all, counts := c.logValues(leader, "i")
	return retryProblems, duplicatesIn(all, counts), len(all)
}

// TestIdempotentRetriesGetOriginalOffsets: a retry of any of a producer's
// last five batches is answered NONE with the batch's original offset and
// appends nothing, so the log holds each record once.
func TestIdempotentRetriesGetOriginalOffsets(t *testing.T) {
	problems, dups, n := dedupScenario(t, false)
	for _, p := range problems {
		t.Error(p)
	}
	if len(dups) > 0 || n != 20 {
		t.Errorf("log holds %d records, duplicates %v; want the 20 produced, once each", n, dups)
	}
}

// TestDedupOffIsCaught: with the planted bug dedup-off the same scenario
// appends every retry again, and the assertions above see it.
func TestDedupOffIsCaught(t *testing.T) {
	problems, dups, n := dedupScenario(t, true)
	if len(problems) != 5 || len(dups) != 10 || n != 30 {
		t.Fatalf("dedup-off: %d retries misanswered, %d values duplicated, %d records; want 5, 10, 30", len(problems), len(dups), n)
	}
}

// TestIdempotentSequenceErrors: a sequence gap, and a batch older than the
// five retained, get OUT_OF_ORDER_SEQUENCE_NUMBER and append nothing; a
// fenced epoch gets INVALID_PRODUCER_EPOCH.
func TestIdempotentSequenceErrors(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "s", 1, 1)
	ip := c.initProducerID(1)
	batches := c.produceIdempotent(1, "s", ip, "v", 7)
	end := batches[6].baseOffset + 2
	for _, tc := range []struct {
		what    string
		records []byte
		want    *kerr.Error
	}{
		{"a gap of one record", ip.batchAt(ip.seq+1, "gap"), kerr.OutOfOrderSequenceNumber},
		{"the sixth batch from the end again", batches[1].records, kerr.OutOfOrderSequenceNumber},
		{"a new epoch not starting at 0", (&idempotentProducer{id: ip.id, epoch: 1, seq: 5, timestampMs: ip.timestampMs}).next("x"), kerr.OutOfOrderSequenceNumber},
	} {
		r := c.produce(1, "s", 0, -1, append([]byte(nil), tc.records...))
		if r.ErrorCode != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.what, kerr.ErrorForCode(r.ErrorCode), tc.want)
		}
		if leo := c.nodes[1].node.parts.partitions[partitionKey{"s", 0}].log.LogEndOffset(); leo != end {
			t.Fatalf("%s: log end offset %d, want %d (nothing appended)", tc.what, leo, end)
		}
	}
	// The producer continues where it was.
	if r := c.produce(1, "s", 0, -1, ip.next("after")); r.ErrorCode != 0 || r.BaseOffset != end {
		t.Fatalf("in-sequence batch after the errors: %v at %d, want offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, end)
	}
	bumped := &idempotentProducer{id: ip.id, epoch: 1, timestampMs: ip.timestampMs}
	if r := c.produce(1, "s", 0, -1, bumped.next("epoch1")); r.ErrorCode != 0 {
		t.Fatalf("new epoch at sequence 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.produce(1, "s", 0, -1, ip.next("fenced")); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch after a bump: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestIdempotentFailoverDedups: followers build their producer state from
// the batches they replicate, so after the leader dies the new leader
// answers retries of batches the old leader acknowledged with the original
// offsets, and a follow-up batch is in sequence.
func TestIdempotentFailoverDedups(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "2", "default.replication.factor": "3"})
	c.waitRegistered()
	c.createTopic(2, "other", 1, 3) // moves the placement cursor, as threeNodes does
	c.createTopic(3, "f", 1, 3)
	old := c.leaderOf("f", 0)
	if old == 1 {
		t.Fatalf("the controller's node leads f-0: the test kills the leader and needs the controller")
	}
	ip := c.initProducerID(old)
	batches := c.produceIdempotent(old, "f", ip, "v", 8)
	c.nodes[old].proc.Crash()
	c.waitFor("a new leader", 30000, func() bool { l := c.leaderOf("f", 0); return l >= 0 && l != old })
	leader := c.leaderOf("f", 0)
	c.waitFor("the new leader takes over", 5000, func() bool {
		p := c.nodes[leader].node.parts.partitions[partitionKey{"f", 0}]
		return p.replica.LeaderEpoch() == c.leaderEpochOf("f", 0)
	})
	for _, p := range c.retryLastFive(leader, "f", batches) {
		t.Error(p)
	}
	if r := c.produce(leader, "f", 0, -1, ip.next("next")); r.ErrorCode != 0 || r.BaseOffset != 16 {
		t.Fatalf("next batch on the new leader: %v at %d, want offset 16", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	all, counts := c.logValues(leader, "f")
	if dups := duplicatesIn(all, counts); len(dups) > 0 || len(all) != 17 {
		t.Fatalf("new leader's log: %d records, duplicates %v; want 17 once each", len(all), dups)
	}
}

// TestIdempotentRestartDedups: a restarted broker rebuilds its producer
// state from the newest .snapshot file (taken when a segment rolled) and a
// replay of the log after it, then still answers retries with the original
// offsets; after a clean shutdown it starts from the shutdown's snapshot.
func TestIdempotentRestartDedups(t *testing.T) {
	for _, clean := range []bool{false, true} {
		t.Run(fmt.Sprint("clean=", clean), func(t *testing.T) {
			// Node 1 is the controller only: node 2, the partition's only
			// replica, restarts alone.
			c := newClusterRoles(t, 2, "controller", map[string]string{"log.roll.ms": "1000", "log.flush.interval.messages": "1", "log.retention.check.interval.ms": "5000"})
			c.waitRegistered()
			c.createTopic(2, "r", 1, 1)
			ip := c.initProducerID(2)
			batches := c.produceIdempotent(2, "r", ip, "v", 4)
			ip.timestampMs += 1500 // the next append rolls the segment (log.roll.ms): a snapshot at 8
			batches = append(batches, c.produceIdempotent(2, "r", ip, "w", 4)...)
			tn := c.nodes[2]
			dir := tn.node.parts.partitions[partitionKey{"r", 0}].log.Dir()
			c.waitFor("the roll's snapshot on disk", 1000, func() bool { return hasFile(tn.disk, dir, producer.SnapshotFileName(8)) })
			// Delete the first segment: the first four batches are then
			// known only from the snapshot, and the oldest retried batch
			// (v3, at offset 6) is recognised only if it is read.
			del := kmsg.NewPtrDeleteRecordsRequest()
			del.SetVersion(2)
			del.TimeoutMillis = 5000
			dt := kmsg.NewDeleteRecordsRequestTopic()
			dt.Topic = "r"
			dp := kmsg.NewDeleteRecordsRequestTopicPartition()
			dp.Partition, dp.Offset = 0, 8
			dt.Partitions = append(dt.Partitions, dp)
			del.Topics = append(del.Topics, dt)
			if r := c.request(2, del).(*kmsg.DeleteRecordsResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("DeleteRecords: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
			}
			p := tn.node.parts.partitions[partitionKey{"r", 0}]
			c.waitFor("the first segment deleted", 600000, func() bool { return p.log.SegmentCount() == 1 })
			if clean {
				c.shutdownCleanly(tn)
				if !hasFile(tn.disk, dir, producer.SnapshotFileName(16)) {
					t.Fatalf("no snapshot at the log end after a clean shutdown: %v", listing(tn.disk, dir))
				}
			}
			tn.proc.Crash()
			tn.disk.Crash(c.streams.Get("disk"), memdisk.CrashLoseAll) // flush.messages=1: every batch is durable
			tn.proc.Restart()
			c.start(tn)
			c.conns = map[int32]*simnet.ClientConn{}
			c.waitRegistered()
			c.waitFor("partition leads again", 10000, func() bool {
				p := tn.node.parts.partitions[partitionKey{"r", 0}]
				return p != nil && p.replica.LeaderEpoch() == c.leaderEpochOf("r", 0) && c.leaderOf("r", 0) == 2
			})
			for _, p := range c.retryLastFive(2, "r", batches) {
				t.Error(p)
			}
			all, counts := c.logValues(2, "r")
			if dups := duplicatesIn(all, counts); len(dups) > 0 || len(all) != 8 {
				t.Fatalf("after restart: %d records from offset 8, duplicates %v; want 8 once each", len(all), dups)
			}
		})
	}
}

// TestInitProducerID: ids come from the controller's blocks, so two
// brokers never hand out the same one; a transactional id is refused with
// INVALID_REQUEST (transactions are not implemented), and FindCoordinator
// for a transaction says so in its message.
func TestInitProducerID(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.waitRegistered()
	seen := map[int64]int32{}
	for i := range 6 {
		node := int32(1 + i%2)
		id := c.initProducerID(node).id
		if other, dup := seen[id]; dup {
			t.Fatalf("producer id %d handed out by node %d and node %d", id, other, node)
		}
		seen[id] = node
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	txn := "txn-1"
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = &txn, -1, -1
	if resp := c.request(2, req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.InvalidRequest.Code || resp.ProducerID != -1 {
		t.Fatalf("transactional InitProducerId: %v id %d, want INVALID_REQUEST", kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID)
	}
	for _, version := range []int16{1, 4} { // one key, and v4's batch
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.SetVersion(version)
		find.CoordinatorType, find.CoordinatorKey, find.CoordinatorKeys = 1, txn, []string{txn}
		resp := c.request(2, find).(*kmsg.FindCoordinatorResponse)
		code, msg := resp.ErrorCode, resp.ErrorMessage
		if version >= 4 {
			if len(resp.Coordinators) != 1 {
				t.Fatalf("FindCoordinator v4 for a transaction: %d coordinators, want 1", len(resp.Coordinators))
			}
			code, msg = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].ErrorMessage
		}
		if code != kerr.InvalidRequest.Code || msg == nil || !strings.Contains(*msg, "transactions are not supported") {
			t.Fatalf("FindCoordinator v%d for a transaction: %v %v, want INVALID_REQUEST saying transactions are not supported", version, kerr.ErrorForCode(code), msg)
		}
	}
}

func hasFile(d *memdisk.Disk, dir, name string) bool {
	for _, n := range listing(d, dir) {
		if n == name {
			return true
		}
	}
	return false
}

func listing(d *memdisk.Disk, dir string) []string {
	names, err := d.List(dir)
	if err != nil {
		return []string{"list: " + err.Error()}
	}
	return names
}

// TestIdempotentRetryWaitsForTheOriginalToCommit: a retry with acks=all of
// a batch the leader holds but has not committed appends nothing and is
// answered, with the original offset, only once the high watermark passes
// the original batch.
func TestIdempotentRetryWaitsForTheOriginalToCommit(t *testing.T) {
	c := threeNodes(t) // r-0 led by node 2, followers 1 and 3
	ip := c.initProducerID(2)
	c.produceIdempotent(2, "r", ip, "v", 2)
	h2, h3 := c.nodes[2].nn.Host(), c.nodes[3].nn.Host()
	c.net.Block(h2, h3)
	c.net.Block(h3, h2)
	b := ip.next("late.a", "late.b")
	first := c.produce(2, "r", 0, 1, append([]byte(nil), b...))
	if first.ErrorCode != 0 || first.BaseOffset != 4 {
		t.Fatalf("acks=1 with node 3 cut off: %v at %d, want offset 4", kerr.ErrorForCode(first.ErrorCode), first.BaseOffset)
	}
	var resp kmsg.Response
	c.conn(2).Send(produceReq("r", 0, -1, append([]byte(nil), b...)), func(r kmsg.Response, err error) {
		if err != nil {
			t.Errorf("retry: %v", err)
		}
		resp = r
	})
	c.run(1000)
	if resp != nil {
		t.Fatalf("the acks=all retry was answered before its original committed: %+v", resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0])
	}
	c.net.Unblock(h2, h3)
	c.net.Unblock(h3, h2)
	c.waitFor("the retry's answer", 10000, func() bool { return resp != nil })
	if r := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]; r.ErrorCode != 0 || r.BaseOffset != 4 {
		t.Fatalf("acks=all retry: %v at %d, want NONE at the original offset 4", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	all, counts := c.logValues(2, "r")
	if dups := duplicatesIn(all, counts); len(dups) > 0 || len(all) != 6 {
		t.Fatalf("log: %d records, duplicates %v; want 6 once each", len(all), dups)
	}
}

// TestInitProducerIDWithoutController: a broker that has no block of ids
// and cannot reach the controller answers COORDINATOR_LOAD_IN_PROGRESS,
// which clients retry, and hands out ids again once the controller
// answers.
func TestInitProducerIDWithoutController(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.waitRegistered()
	h1, h2 := c.nodes[1].nn.Host(), c.nodes[2].nn.Host()
	c.net.Block(h2, h1)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = -1, -1
	if resp := c.request(2, req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("no block, controller unreachable: %v id %d, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID)
	}
	c.net.Unblock(h2, h1)
	// The client retries, as it does for this code.
	c.waitFor("a producer id after healing", 5000, func() bool {
		resp := c.request(2, req).(*kmsg.InitProducerIDResponse)
		return resp.ErrorCode == 0 && resp.ProducerID >= 0
	})
}
