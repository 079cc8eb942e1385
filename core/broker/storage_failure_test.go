package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/log"
	"strand/core/metadata"
	"strand/core/replica"
	"strand/sim/memdisk"
)

// asyncAnswer is a request sent on a connection of its own, so that its
// answer does not wait behind another request's: done is set, with resp
// and atMs (the scheduler's time), when it arrives.
type asyncAnswer struct {
	done bool
	resp kmsg.Response
	err  error
	atMs int64
}

// sendAlone sends req to node id on a new connection.
func (c *cluster) sendAlone(id int32, req kmsg.Request) *asyncAnswer {
	c.t.Helper()
	cc, err := c.client.Dial(env.NodeID(id), nil)
	if err != nil {
		c.t.Fatalf("dial %d: %v", id, err)
	}
	a := &asyncAnswer{}
	cc.Send(req, func(r kmsg.Response, e error) { a.done, a.resp, a.err, a.atMs = true, r, e, c.s.NowNs()/1e6 })
	return a
}

// holdAcksOnNode2 pauses nodes 1 and 3 of threeNodes, so that node 2, the
// leader of r-0, appends but its HW cannot move (and, the controller
// paused, it is not fenced either: nothing but the log failure itself can
// answer what waits), then sends an acks=all produce with a 30 s timeout
// and a consumer fetch at the HW waiting up to 30 s, and checks both wait.
func holdAcksOnNode2(t *testing.T, c *cluster) (produce, fetch *asyncAnswer) {
	t.Helper()
	c.nodes[1].proc.Pause()
	c.nodes[3].proc.Pause()
	req := produceReq("r", 0, -1, recordBatch("unreplicated"))
	req.TimeoutMillis = 30000
	produce = c.sendAlone(2, req)
	fetch = c.sendAlone(2, fetchReq("r", 0, 0, 30000))
	c.run(200)
	if produce.done || fetch.done {
		t.Fatalf("test premise: acks=all (answered %v) and the fetch at the HW (answered %v) wait", produce.done, fetch.done)
	}
	if leo := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}].log.LogEndOffset(); leo != 1 {
		t.Fatalf("test premise: node 2's r-0 LEO is %d, want 1", leo)
	}
	return produce, fetch
}

// produceCode and fetchCode are the r-0 error codes of answered requests.
func produceCode(t *testing.T, a *asyncAnswer) int16 {
	t.Helper()
	if a.err != nil {
		t.Fatalf("produce: %v", a.err)
	}
	return a.resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

func fetchCode(t *testing.T, a *asyncAnswer) int16 {
	t.Helper()
	if a.err != nil {
		t.Fatalf("fetch: %v", a.err)
	}
	return a.resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
}

// TestLogDirFailureAnswersWaitingAcksAndFetches: when a log directory goes
// offline (Manager.Fail), an acks=all produce waiting for the HW and a
// long-polling fetch on one of its logs are answered KAFKA_STORAGE_ERROR
// at once, as Kafka completes an offline replica's delayed operations
// with that error, rather than waiting for their timeouts (30 s here; in
// a cluster whose controller is reachable, until the fence moves
// leadership).
func TestLogDirFailureAnswersWaitingAcksAndFetches(t *testing.T) {
	c := threeNodes(t)
	produce, fetch := holdAcksOnNode2(t, c)
	failedAtMs := c.s.NowNs() / 1e6
	c.nodes[2].node.parts.managers[0].Fail(fmt.Errorf("injected: a checkpoint sync failed: %w", env.ErrIO))
	c.run(20)
	if !produce.done || !fetch.done {
		t.Fatalf("20 ms after the directory went offline: acks=all answered %v, fetch answered %v; want both answered",
			produce.done, fetch.done)
	}
	if code := produceCode(t, produce); code != kerr.KafkaStorageError.Code {
		t.Errorf("acks=all answered %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	if code := fetchCode(t, fetch); code != kerr.KafkaStorageError.Code {
		t.Errorf("fetch answered %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	if produce.atMs-failedAtMs > 5 || fetch.atMs-failedAtMs > 5 {
		t.Errorf("answered %d ms (produce) and %d ms (fetch) after the failure, want at once", produce.atMs-failedAtMs, fetch.atMs-failedAtMs)
	}
}

// TestNoAckAfterTheLeaderLogFailed: a produce waiting for the HW when the
// leader's log fails is never acknowledged, even if the HW covers it
// later: here an ISR shrink proposed before the failure is applied right
// after it, in the same event-loop step, so the HW reaches the record.
// The records a failed leader log holds may be lost with it; the answer
// must be an error, never success.
func TestNoAckAfterTheLeaderLogFailed(t *testing.T) {
	// As threeNodes, with a short replica.lag.time.max.ms: a follower
	// caught up less than that ago holds the HW even outside the ISR.
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "2", "default.replication.factor": "3", "replica.lag.time.max.ms": "1000"})
	c.waitRegistered()
	c.createTopic(2, "other", 1, 3)
	c.createTopic(3, "r", 1, 3)
	if l := c.leaderOf("r", 0); l != 2 {
		t.Fatalf("test premise: leader of r-0 is %d, want 2", l)
	}
	c.nodes[1].proc.Pause() // the controller: nothing commits, nobody is fenced
	req := produceReq("r", 0, -1, recordBatch("on two of three"))
	req.TimeoutMillis = 30000
	produce := c.sendAlone(2, req)
	n3 := c.nodes[3].node
	c.waitFor("node 3 replicates the record", 5000, func() bool {
		p := n3.parts.partitions[partitionKey{"r", 0}]
		return p != nil && p.log.LogEndOffset() == 1
	})
	c.run(1500) // node 3's next fetch tells the leader its LEO; node 1 stops counting as caught up
	if produce.done {
		t.Fatalf("test premise: acks=all waits for node 1, in the ISR; answered %+v", produce.resp)
	}
	n2 := c.nodes[2].node
	p := n2.parts.partitions[partitionKey{"r", 0}]
	state, _ := n2.meta.image.PartitionByName("r", 0)
	if !slices.Equal(state.ISR, []int32{1, 2, 3}) || p.replica.HighWatermark() != 0 {
		t.Fatalf("test premise: ISR %v (want [1 2 3]), HW %d (want 0)", state.ISR, p.replica.HighWatermark())
	}

	n2.parts.managers[0].Fail(fmt.Errorf("injected: a checkpoint sync failed: %w", env.ErrIO))
	shrunk := state
	shrunk.ISR, shrunk.PartitionEpoch = []int32{2, 3}, state.PartitionEpoch+1
	// The shrink, committed before the failure was noticed, applied as
	// reconcilePartitions applies a pushed state.
	n2.parts.applyPartitionState(p, shrunk)
	n2.parts.setIneligibleReplicas(p)
	n2.parts.afterReplicaChange(p)
	if p.replica.HighWatermark() != 1 {
		t.Fatalf("test premise: the shrink moved the HW to %d, want 1", p.replica.HighWatermark())
	}
	c.run(20)
	if !produce.done {
		t.Fatal("acks=all not answered after its leader log failed")
	}
	if code := produceCode(t, produce); code != kerr.KafkaStorageError.Code {
		t.Fatalf("acks=all answered %v after its leader log failed, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
}

// TestFailedSyncAnswersDurableWaitAtOnce: on a topic with
// flush.messages=1 a produce waits for its leader's Sync; when that Sync
// fails, the log fails and the produce is answered KAFKA_STORAGE_ERROR
// at once, not at its request timeout (30 s here).
func TestFailedSyncAnswersDurableWaitAtOnce(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"log.flush.interval.messages": "1"})
	c.waitRegistered()
	c.createTopic(1, "d", 1, 1)
	n := c.nodes[1]
	p := n.node.parts.partitions[partitionKey{"d", 0}]
	if p == nil || !p.syncAcks {
		t.Fatal("test premise: d-0 is hosted with flush.messages=1")
	}
	if err := n.disk.FailNextSync(p.log.Dir() + "/00000000000000000000.log"); err != nil {
		t.Fatal(err)
	}
	req := produceReq("d", 0, 1, recordBatch("never synced"))
	req.TimeoutMillis = 30000
	produce := c.sendAlone(1, req)
	c.run(200)
	if p.log.Err() == nil {
		t.Fatal("test premise: the failed Sync did not fail the log")
	}
	if !produce.done {
		t.Fatal("200 ms after the failed Sync the produce waiting for it is not answered")
	}
	if code := produceCode(t, produce); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce answered %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
}

// startWithTwoLogDirs starts node tn (restarted) with two log
// directories: its own disk first, then second (a fresh one if nil).
func (c *cluster) startWithTwoLogDirs(tn *testNode, second *memdisk.Disk) error {
	c.t.Helper()
	tn.cfg.Broker.LogDirs = []string{fmt.Sprintf("/data/node%d", tn.id), fmt.Sprintf("/data2/node%d", tn.id)}
	if second == nil {
		second = memdisk.New(memdisk.Options{Post: tn.proc.Post})
	}
	node, err := New(tn.cfg, tn.clock, tn.nn, []env.Disk{tn.disk, second}, c.ids)
	if err != nil {
		return err
	}
	tn.node = node
	tn.nn.SetHandler(node)
	return nil
}

// writeDurably writes a file of content at name on disk, durably.
func writeDurably(t *testing.T, disk *memdisk.Disk, name, content string) {
	t.Helper()
	f, err := disk.Open(name, env.OpenOptions{Create: true})
	if err == nil {
		err = f.Append([]byte(content))
	}
	if err != nil {
		t.Fatal(err)
	}
	disk.Writeback()
}

// TestNewLogGoesToALiveDirectory: a partition whose log must be created
// goes to a live log directory, never to an offline one, even when the
// offline one holds fewer logs: were openPartition to choose the
// directory with the fewest logs, offline or not, CreateLog would refuse
// there, and the partition would stay unavailable on this broker though
// another directory was healthy.
func TestNewLogGoesToALiveDirectory(t *testing.T) {
	c := threeNodes(t)
	n := c.nodes[2]
	n.proc.Crash()
	n.proc.Restart()
	if err := c.startWithTwoLogDirs(n, nil); err != nil {
		t.Fatal(err)
	}
	c.waitFor("node 2 opens r-0", 20000, func() bool { return n.node.parts.partitions[partitionKey{"r", 0}] != nil })
	if n.node.parts.partitions[partitionKey{"r", 0}].manager != n.node.parts.managers[0] {
		t.Fatal("test premise: r-0's log, recovered from the first directory, is opened from it")
	}
	// The second directory, holding no log, goes offline.
	n.node.parts.managers[1].Fail(fmt.Errorf("injected: %w", env.ErrIO))
	p, err := openFresh(n.node, 0)
	if err != nil {
		t.Fatalf("openPartition with one live directory: %v", err)
	}
	if p.manager != n.node.parts.managers[0] {
		t.Fatal("the new log went to the offline directory")
	}
	if p.log.Err() != nil {
		t.Fatalf("the new log failed: %v", p.log.Err())
	}

	// No directory live: the open fails with a storage error.
	n.node.parts.managers[0].Fail(fmt.Errorf("injected: %w", env.ErrIO))
	if _, err := openFresh(n.node, 1); errorCodeOf(err) != kerr.KafkaStorageError.Code {
		t.Fatalf("openPartition with no live directory: %v, want a storage error", err)
	}
}

// TestPartitionWithoutALiveDirectoryAnswersStorageError: a partition
// assigned to a broker that cannot open its log, here because its only
// log directory is offline and holds no log for it, stays offline there:
// requests on it get KAFKA_STORAGE_ERROR, as Kafka's offline partitions
// (HostedPartition.Offline), and the failure is logged once, not at every
// metadata change. NOT_LEADER_OR_FOLLOWER would send a client looking for
// a leader elsewhere as if this broker were no replica.
func TestPartitionWithoutALiveDirectoryAnswersStorageError(t *testing.T) {
	c := threeNodes(t)
	n := c.nodes[3]
	n.proc.Crash()
	n.proc.Restart()
	// r-0's log is gone from node 3 (a new disk mounted in its place) and
	// the directory goes offline at open.
	for _, name := range mustList(t, n.disk, "r-0") {
		if err := n.disk.Remove(log.TopicPartition{Topic: "r", Partition: 0}.DirName() + "/" + name); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.disk.Remove("r-0"); err != nil {
		t.Fatal(err)
	}
	n.disk.Writeback() // the removal survives the crash below
	c.restartWithFailedOpenSync(n)
	c.run(3000)
	if n.node.parts.managers[0].Err() == nil {
		t.Fatal("test premise: the directory is not offline")
	}
	if n.node.parts.partitions[partitionKey{"r", 0}] != nil {
		t.Fatal("test premise: r-0 opened on node 3")
	}
	if f := c.fetch(3, "r", 0, 0); f.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch of r-0 from node 3: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(f.ErrorCode))
	}
	c.createTopic(2, "later", 1, 2) // metadata changes: node 3 reconciles again
	c.run(1000)
	const line = "cannot open partition; it stays offline on this broker, requests on it get KAFKA_STORAGE_ERROR"
	if got := n.logs.matching(slog.LevelError, line, map[string]string{"topic": "r"}); len(got) != 1 {
		t.Fatalf("the failed open of r-0 logged %d times, want once; log:\n%s", len(got), n.logs)
	}

	c.deleteTopic(2, "r")
	c.waitFor("node 3 forgets the deleted topic's offline partition", 10000, func() bool {
		return !n.node.parts.partitionOffline(partitionKey{"r", 0})
	})
}

// openFresh opens partition index of a topic "fresh" the image does not
// know, as reconcilePartitions opens an assigned one.
func openFresh(n *Node, index int32) (*partition, error) {
	return n.parts.openPartition(metadata.TopicPartition{Topic: "fresh", Partition: index, TopicID: metadata.TopicID{1}})
}

func mustList(t *testing.T, disk env.Disk, dir string) []string {
	t.Helper()
	names, err := disk.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestStartsWithoutABrokenSecondLogDir: a broker whose second log
// directory cannot be opened (here its high-watermark checkpoint is
// garbage; Kafka too takes the directory offline then) starts on the first, as Kafka's LogManager starts without the
// directories it cannot load: the broken one is offline, logged once at
// ERROR with its path and the cause; the broker asks to be fenced; the
// restart counts as unclean though the last shutdown was clean (the
// offline directory's logs were not recovered, as Kafka reads no
// clean-shutdown epoch then); and no log is created while a directory
// whose logs were never read might hold it. The broker starts, its
// controller role with it, rather than failing in New.
func TestStartsWithoutABrokenSecondLogDir(t *testing.T) {
	c := threeNodes(t)
	n := c.nodes[2]
	c.shutdownCleanly(n)
	n.proc.Crash()
	n.proc.Restart()
	if f, err := n.disk.Open(cleanShutdownFile, env.OpenOptions{}); err != nil {
		t.Fatalf("test premise: the clean shutdown wrote no marker: %v", err)
	} else {
		_ = f.Close()
	}
	second := memdisk.New(memdisk.Options{Post: n.proc.Post})
	writeDurably(t, second, log.ReplicationCheckpointName, "garbage\n")
	if err := c.startWithTwoLogDirs(n, second); err != nil {
		t.Fatalf("a broker with one healthy and one broken log dir did not start: %v", err)
	}
	if n.node.meta.previousBrokerEpoch != -1 {
		t.Errorf("restart with an offline log dir registers as clean (epoch %d)", n.node.meta.previousBrokerEpoch)
	}
	c.waitFor("node 2 registers", 20000, func() bool { return n.node.meta.brokerEpoch >= 0 })
	c.run(3000)
	if n.node.parts.managers[0].Err() != nil || n.node.parts.managers[1].Err() == nil {
		t.Fatalf("log dirs' errors: %v, %v; want the first online, the second offline", n.node.parts.managers[0].Err(), n.node.parts.managers[1].Err())
	}
	const offline = "storage failure: the log directory is offline until the broker restarts; requests on its partitions get KAFKA_STORAGE_ERROR"
	lines := n.logs.matching(slog.LevelError, offline, map[string]string{"log_dir": "/data2/node2"})
	if len(lines) != 1 || !strings.Contains(lines[0].attrs["err"], log.ReplicationCheckpointName) {
		t.Fatalf("the broken log dir logged %d times (want once, naming the checkpoint); log:\n%s", len(lines), n.logs)
	}
	if b, _ := c.nodes[1].node.Image().Broker(2); !b.Fenced {
		t.Error("broker 2, with an offline log dir, is not fenced")
	}
	if p := n.node.parts.partitions[partitionKey{"r", 0}]; p == nil || p.manager != n.node.parts.managers[0] || p.log.Err() != nil {
		t.Error("r-0, in the healthy log dir, is not open from it")
	}
	_, err := openFresh(n.node, 0)
	if errorCodeOf(err) != kerr.KafkaStorageError.Code {
		t.Errorf("a log created while a log dir's logs are unknown: %v, want a storage error", err)
	}
}

// TestBrokenFirstLogDirRefusesTheStart: the first log directory holds the
// metadata log and the clean-shutdown marker; a broker that cannot open it
// refuses to start, as Kafka stops when its metadata log directory fails,
// with an error naming it.
func TestBrokenFirstLogDirRefusesTheStart(t *testing.T) {
	c := threeNodes(t)
	n := c.nodes[2]
	n.proc.Crash()
	n.proc.Restart()
	writeDurably(t, n.disk, log.ReplicationCheckpointName, "garbage\n")
	err := c.startWithTwoLogDirs(n, nil)
	if err == nil || !strings.Contains(err.Error(), "first log dir") {
		t.Fatalf("New with a broken first log dir: %v, want a refusal naming it", err)
	}
}

// TestFailedLeaderLogProposesNoISRShrink: a leader whose log has failed
// proposes no ISR shrink, as Kafka's maybeShrinkIsr visits online
// partitions only: its LEO no longer says what its followers must reach,
// and shrinking the ISR to itself would let its HW pass records only it
// held. Here both followers stop fetching after the leader appended a
// record they lack, and the controller is paused (the fence that would
// move leadership never commits), so the periodic check runs on the failed
// leader for well over replica.lag.time.max.ms: it must not propose the
// ISR {2}.
func TestFailedLeaderLogProposesNoISRShrink(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"min.insync.replicas": "1", "default.replication.factor": "3",
		"replica.lag.time.max.ms": "2000"})
	c.waitRegistered()
	c.createTopic(2, "other", 1, 3)
	c.createTopic(3, "r", 1, 3)
	if l := c.leaderOf("r", 0); l != 2 {
		t.Fatalf("test premise: leader of r-0 is %d, want 2", l)
	}
	if r := c.produce(2, "r", 0, -1, recordBatch("a")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.nodes[1].proc.Pause()
	c.nodes[3].proc.Pause()
	if r := c.produce(2, "r", 0, 1, recordBatch("b")); r.ErrorCode != 0 {
		t.Fatalf("acks=1: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.nodes[2].node.parts.managers[0].Fail(fmt.Errorf("injected: a segment write failed: %w", env.ErrIO))
	c.run(10000)
	p := c.nodes[2].node.parts.partitions[partitionKey{"r", 0}]
	if !p.storageFailed() || p.replica.Role() != replica.RoleLeader {
		t.Fatalf("test premise: node 2 still leads r-0 (role %v) with a failed log (%v)", p.replica.Role(), p.storageFailed())
	}
	if shrinks := c.nodes[2].logs.matching(slog.LevelInfo, "shrinking ISR", map[string]string{"topic": "r"}); len(shrinks) != 0 {
		t.Fatalf("the leader with a failed log proposed %d ISR shrinks of r-0, want none; its log:\n%s", len(shrinks), c.nodes[2].logs)
	}
}

// TestFollowerLogFailureAnswersAParkedConsumerFetch: a consumer's Fetch
// v12 long-polling on a follower (KIP-392) at the follower's HW is
// answered KAFKA_STORAGE_ERROR as soon as the follower's log directory
// goes offline, as on a leader, not at its MaxWait; and a new one is
// refused at once. The follower's parked fetch is woken by the failure
// listener's re-check, which the role check alone would not do.
func TestFollowerLogFailureAnswersAParkedConsumerFetch(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	key := partitionKey{"r", 0}
	follower := c.nodes[1].node.parts.partitions[key]
	c.waitFor("follower 1 learns HW 2", 5000, func() bool { return follower.replica.HighWatermark() == 2 })
	if follower.replica.Role() != replica.RoleFollower {
		t.Fatalf("test premise: node 1 is not a follower of r-0")
	}
	fetch := c.sendAlone(1, fetchReq("r", 0, 2, 30000))
	c.run(200)
	if fetch.done {
		t.Fatalf("test premise: a fetch at the follower's HW waits; answered %v", fetch.resp)
	}
	failedAtMs := c.s.NowNs() / 1e6
	c.nodes[1].node.parts.managers[0].Fail(fmt.Errorf("injected: a checkpoint sync failed: %w", env.ErrIO))
	c.run(20)
	if !fetch.done {
		t.Fatalf("20 ms after the follower's directory went offline, its parked consumer fetch is not answered")
	}
	if code := fetchCode(t, fetch); code != kerr.KafkaStorageError.Code || fetch.atMs-failedAtMs > 5 {
		t.Errorf("parked fetch answered %v after %d ms, want KAFKA_STORAGE_ERROR at once", kerr.ErrorForCode(code), fetch.atMs-failedAtMs)
	}
	again := c.sendAlone(1, fetchReq("r", 0, 0, 30000))
	c.run(20)
	if !again.done || fetchCode(t, again) != kerr.KafkaStorageError.Code {
		t.Errorf("a new consumer fetch on the failed follower: answered %v, want KAFKA_STORAGE_ERROR at once", again.done)
	}
}

// TestOfflineDirWritesNoCleanShutdownMarker: a log directory taken offline
// by a failed write of a file other than the HW and log-start-offset
// checkpoints (here the sync of its parent at open) must not let a
// controlled shutdown write the clean-shutdown marker: its logs are not
// flushed at shutdown (they failed), so the marker's "every log is
// durable" would be false, and SPEC §3.5 says an offline directory's
// clean shutdown writes no marker. Before the fix the directory's other
// checkpoint writers were still healthy, went on writing the offline
// directory every interval, and Close succeeded with the marker written.
func TestOfflineDirWritesNoCleanShutdownMarker(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("kept")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	n := c.nodes[2]
	c.restartWithFailedOpenSync(n)
	c.run(2 * hwCheckpointIntervalMs)
	if err := n.node.parts.managers[0].Err(); err == nil {
		t.Fatal("test premise: the failed sync at open did not take the directory offline")
	}
	if b, _ := c.nodes[1].node.Image().Broker(2); !b.Fenced {
		t.Fatal("broker 2 with an offline log directory is not fenced")
	}

	stopped := false
	n.node.BeginShutdown(func() { stopped = true })
	c.waitFor("controlled shutdown of the broker with an offline directory", 20000, func() bool { return stopped })
	var closeErr error
	closed := false
	n.node.Close(func(err error) { closeErr, closed = err, true })
	c.waitFor("closed", 5000, func() bool { return closed })
	f, err := n.disk.Open(cleanShutdownFile, env.OpenOptions{})
	if err == nil {
		_ = f.Close()
		t.Fatalf("the clean-shutdown marker was written though the log directory is offline (Close: %v)", closeErr)
	}
	if !errors.Is(err, env.ErrNotExist) {
		t.Fatalf("open %s: %v", cleanShutdownFile, err)
	}
	if closeErr == nil {
		t.Fatal("Close of a broker with an offline log directory reported no error")
	}
}

// TestFailedLogWritesNoCleanShutdownMarker: a broker one of whose logs
// failed (here a Sync of its segment: the records on it may not be
// durable, and the log never syncs again) must not write the
// clean-shutdown marker at a controlled shutdown. Close flushes every log
// before the marker ("every log is durable"); a failed log cannot be
// flushed, and Kafka, whose LogDirFailureChannel takes the log's whole
// directory offline on its IOException, writes no marker in an offline
// directory and reads none at start (LogManager
// .readBrokerEpochFromCleanShutdownFiles: any offline directory, no
// broker epoch). Were Close to skip the failed log's flush and write the
// marker, the restarted broker would register as clean and keep its ELR
// eligibility with a log whose tail was never synced.
func TestFailedLogWritesNoCleanShutdownMarker(t *testing.T) {
	c := threeNodes(t)
	for range 3 {
		if r := c.produce(2, "r", 0, -1, recordBatch("unsynced")); r.ErrorCode != 0 {
			t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	n := c.nodes[3]
	p := n.node.parts.partitions[partitionKey{"r", 0}]
	if p == nil || p.log.LogEndOffset() != 3 || p.log.RecoveryPoint() != 0 {
		t.Fatalf("test premise: node 3's r-0 holds 3 unsynced records")
	}
	if err := n.disk.FailNextSync(p.log.Dir() + "/00000000000000000000.log"); err != nil {
		t.Fatal(err)
	}
	flushed := false
	p.log.Flush(p.log.LogEndOffset(), func(error) { flushed = true }) // as log.flush.interval.ms would
	c.waitFor("the failed flush", 1000, func() bool { return flushed })
	if p.log.Err() == nil {
		t.Fatal("test premise: the failed Sync did not fail the log")
	}

	stopped := false
	n.node.BeginShutdown(func() { stopped = true })
	c.waitFor("controlled shutdown of the broker with a failed log", 20000, func() bool { return stopped })
	var closeErr error
	closed := false
	n.node.Close(func(err error) { closeErr, closed = err, true })
	c.waitFor("closed", 5000, func() bool { return closed })
	if f, err := n.disk.Open(cleanShutdownFile, env.OpenOptions{}); err == nil {
		_ = f.Close()
		t.Fatalf("the clean-shutdown marker was written though r-0's log failed unsynced (Close: %v)", closeErr)
	}
	if closeErr == nil {
		t.Fatal("Close of a broker with a failed log reported no error")
	}
}

// TestOfflineEmptyDirFencesTheBroker: a log directory that goes offline
// while it holds no log (here a new broker's directory, whose sync at
// open fails) refuses every new log, so the broker cannot host any
// partition: it must ask to be fenced like one with failed logs, and the
// controller then places no replica, and no leadership, on it. Were it to
// ask only when a hosted log had failed, it would stay unfenced, take its
// share of a new topic's partitions and lead some of them, and those
// partitions could not be produced to.
func TestOfflineEmptyDirFencesTheBroker(t *testing.T) {
	c := newCluster(t, 4, map[string]string{"default.replication.factor": "1"})
	c.waitRegistered()
	n := c.nodes[4]
	c.restartWithFailedOpenSync(n)
	c.run(3000)
	if n.node.parts.managers[0].Err() == nil {
		t.Fatal("test premise: the failed sync at open did not take the directory offline")
	}
	if len(n.node.parts.managers[0].Partitions()) != 0 {
		t.Fatal("test premise: the offline directory holds logs")
	}
	if b, ok := c.nodes[1].node.controllerRole.ctrl.Image().Broker(4); !ok || !b.Fenced {
		t.Fatal("broker 4, whose only log directory is offline, is not fenced")
	}

	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fresh", 8, 1
	req.Topics = append(req.Topics, rt)
	if code := c.request(1, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create fresh: %v", kerr.ErrorForCode(code))
	}
	c.run(3000)
	for p := range int32(8) {
		leader := c.leaderOf("fresh", p)
		if leader < 0 {
			t.Fatalf("fresh-%d has no leader", p)
		}
		if r := c.produce(leader, "fresh", p, -1, recordBatch("x")); r.ErrorCode != 0 {
			t.Errorf("produce to fresh-%d on its leader %d: %v", p, leader, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// restartWithFailedOpenSync crashes and restarts n with the first sync of
// its disk's root failing: that sync is the Manager's (OpenManager syncs
// the parent of its directory), so the directory starts offline. It
// returns once n has registered.
func (c *cluster) restartWithFailedOpenSync(n *testNode) {
	c.t.Helper()
	n.proc.Crash()
	n.proc.Restart()
	if err := n.disk.FailNextSync("."); err != nil {
		c.t.Fatal(err)
	}
	c.start(n)
	c.waitFor("the restarted broker registers", 20000, func() bool { return n.node.meta.brokerEpoch >= 0 })
}

// TestReadErrorOnFetchAnswersStorageErrorAndFences: a read error of the
// device under a fetch (a latent sector error in the leader's segment)
// fails the log as a failed write does: the fetch gets
// KAFKA_STORAGE_ERROR, and leadership moves to another ISR member, which
// serves what was acknowledged. Kafka's LogDirFailureChannel does the same
// on an IOException from a read.
func TestReadErrorOnFetchAnswersStorageErrorAndFences(t *testing.T) {
	c := threeNodes(t)
	if r := c.produce(2, "r", 0, -1, recordBatch("kept")); r.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	segment := log.TopicPartition{Topic: "r", Partition: 0}.DirName() + "/00000000000000000000.log"
	if err := c.nodes[2].disk.FailReads(segment, 0, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	if f := c.fetch(2, "r", 0, 0); f.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch over a read error: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(f.ErrorCode))
	}
	c.waitFor("leadership moves", 10000, func() bool { l := c.leaderOf("r", 0); return l != 2 && l >= 0 })
	leader := c.leaderOf("r", 0)
	c.waitFor("new leader takes over", 5000, func() bool {
		p := c.nodes[leader].node.parts.partitions[partitionKey{"r", 0}].replica
		return p.LeaderEpoch() == 1 && p.HighWatermark() == 1
	})
	if got := joined(values(t, c.fetch(leader, "r", 0, 0).RecordBatches)); got != "kept" {
		t.Fatalf("new leader serves %q, want kept", got)
	}
}

// TestEveryLogDirHoldsTheCleanShutdownMarker: a clean shutdown writes the
// marker, with the broker epoch, in every log directory, and a restart is
// clean only when every directory holds it: a second directory without
// its marker (swapped, or restored from a backup, since the shutdown) makes
// the restart unclean, as Kafka reads no broker epoch when any directory
// lacks its .kafka_cleanshutdown. Each restart takes the markers it read.
func TestEveryLogDirHoldsTheCleanShutdownMarker(t *testing.T) {
	c := threeNodes(t)
	n := c.nodes[2]
	second := memdisk.New(memdisk.Options{Post: n.proc.Post})
	restart := func() {
		t.Helper()
		n.proc.Crash()
		n.proc.Restart()
		if err := c.startWithTwoLogDirs(n, second); err != nil {
			t.Fatalf("start with two log dirs: %v", err)
		}
	}
	runAndStop := func() int64 {
		t.Helper()
		c.waitFor("node 2 registers", 20000, func() bool { return n.node.meta.brokerEpoch >= 0 })
		epoch := n.node.meta.brokerEpoch
		c.shutdownCleanly(n)
		for i, disk := range []*memdisk.Disk{n.disk, second} {
			content, err := disk.ReadFile(cleanShutdownFile)
			if err != nil || string(content) != fmt.Sprint(epoch) {
				t.Fatalf("log dir %d's marker after a clean shutdown in epoch %d: %q, %v", i, epoch, content, err)
			}
		}
		return epoch
	}
	restart()
	epoch := runAndStop()
	restart()
	if got := n.node.meta.previousBrokerEpoch; got != epoch {
		t.Errorf("restart after a clean shutdown with both markers: previous epoch %d, want %d", got, epoch)
	}
	for i, disk := range []*memdisk.Disk{n.disk, second} {
		if _, err := disk.ReadFile(cleanShutdownFile); !errors.Is(err, env.ErrNotExist) {
			t.Errorf("log dir %d's marker not taken at the restart: %v", i, err)
		}
	}
	runAndStop()
	if err := second.Remove(cleanShutdownFile); err != nil {
		t.Fatal(err)
	}
	second.Writeback()
	restart()
	if got := n.node.meta.previousBrokerEpoch; got != -1 {
		t.Errorf("restart with the second log dir's marker gone registers as clean (previous epoch %d)", got)
	}
	if _, err := n.disk.ReadFile(cleanShutdownFile); !errors.Is(err, env.ErrNotExist) {
		t.Errorf("the first log dir's marker not taken at the unclean restart: %v", err)
	}
}
