package main

// The replication section (replication issue §6): in the simulator, without
// faults, what replication costs per acknowledged acks=all batch in frames
// and wire bytes, and how many times the leader copies each record byte per
// follower.
//
// Everything is measured from outside core/: every node's env.Network and
// env.Handler are wrapped (frameTally), so each frame simnet carries is
// seen once on a node, either as a request it receives (HandleRequest) or as
// a response it sends (Reply). A frame's size is core/wire's encoding of it,
// which is exactly what simnet puts on the wire (re-encoding costs CPU, so
// the simulator speed printed here is a lower bound).
//
// Copies on the leader path, per record byte and per follower. The broker
// answers partition Fetches with env.Frames whose record batches are file
// regions (zero-copy Fetch, SPEC.md §2.2), which the tally sees in
// ReplyFrame:
//   - counted, 1 per region byte: simnet reads each region from memdisk
//     into the frame (sim/simnet ReplyFrame), the simulator's stand-in for
//     sendfile. In the real build realnet sends the region with sendfile:
//     0 copies in user space (regions below realnet's sendfileBytesMin are
//     read and written, 1 copy).
//   - counted, 2 per record byte: a Fetch answered through Reply with
//     inline RecordBatches (a copy into the response, then kmsg's AppendTo
//     copies again). No partition Fetch does so any more; the metadata
//     log's Fetch (core/controller) does, and its records are not produced
//     bytes, so __cluster_metadata is left out of the record counts.
//   - not counted (the simulated kernel, not the leader's memory): the
//     Produce frame's receive buffer (the request owns it and the log keeps
//     it: validation stamps offsets in place, no copy), memdisk's copy in
//     env.File.Append (the page cache write), and simnet's ownFrame copy of
//     each encoded frame (the socket send buffer).

import (
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/broker"
	"strand/core/config"
	"strand/core/env"
	"strand/core/wire"
	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/simclock"
	"strand/sim/simnet"
	"strand/sim/workload"
)

// The workload of the replication section.
const (
	replBrokers            = 3
	replRF                 = 3
	replMinInsync          = 2
	replPartitions         = 3
	replRecordBytes        = 1024
	replRecordsPerBatch    = 16
	replBatchIntervalNs    = 10e6 // per partition: 100 batches/s each
	replWindowNs           = 10e9 // simulated time producing
	replDrainDeadlineNs    = 10e9
	replProduceTimeoutMs   = 2000
	replSetupDeadlineNs    = 30e9
	replControllerID       = 1
	replCopiesPerFollowMax = 1.0 // the goal: ≤ 1 copy per replica
)

// Frame labels: the API keys the section splits by. Other keys are labelled
// by their Kafka name and summed as metadata/controller traffic.
const (
	labelProduce       = "Produce"
	labelFetchReplica  = "Fetch (replica)"
	labelFetchConsumer = "Fetch (consumer)"
)

// replRepsMax caps the section's repetitions: its counts come from one
// deterministic simulation, so repeating only checks that they do not change
// and steadies the simulator speed.
const replRepsMax = 3

func runReplicationSection(e *benchEnv) (bool, error) {
	reps := min(e.reps, replRepsMax)
	var first replicationResult
	speeds := make([]float64, 0, reps)
	for i := range reps {
		m, err := measureReplication()
		if err != nil {
			return false, err
		}
		if i == 0 {
			first = m
		} else if !m.sameCounts(first) {
			return false, fmt.Errorf("run %d counted differently from run 1 with the same seed: the simulation is not deterministic", i+1)
		}
		speeds = append(speeds, m.simSecondsPerWallSecond())
	}
	sort.Float64s(speeds)
	fmt.Printf("(one deterministic simulated run, repeated %d times with identical counts; the speed is the median)\n", reps)
	return first.print(speeds[len(speeds)/2]), nil
}

// frameCount is the frames and bytes of one label.
type frameCount struct {
	frames, bytes int64
}

// frameTally counts the frames every node receives (requests) and sends
// (responses) while on is set, by label. It is shared by every node of one
// simulated run, which runs on one goroutine.
type frameTally struct {
	on      bool
	byLabel map[string]*frameCount
	// followerRecordBytes sums the record batches of replica Fetch
	// responses, consumerRecordBytes those of consumer Fetches;
	// followerCopiedBytes counts the leader's copies of the former (see the
	// file comment). The metadata log's records are left out.
	followerRecordBytes, consumerRecordBytes, followerCopiedBytes int64
	// pending labels each request a node received until it answers it.
	pending map[pendingKey]string
	scratch []byte
}

type pendingKey struct {
	node env.NodeID
	conn env.ConnID
	corr int32
}

func newFrameTally() *frameTally {
	return &frameTally{byLabel: map[string]*frameCount{}, pending: map[pendingKey]string{}}
}

// labelOf names the traffic class of req.
func labelOf(req kmsg.Request) string {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return labelProduce
	case *kmsg.FetchRequest:
		replicaID := r.ReplicaID
		if r.GetVersion() >= 15 {
			replicaID = r.ReplicaState.ID
		}
		if replicaID >= 0 {
			return labelFetchReplica
		}
		return labelFetchConsumer
	default:
		return kmsg.NameForKey(req.Key())
	}
}

func (t *frameTally) add(label string, frameBytes int) {
	c := t.byLabel[label]
	if c == nil {
		c = &frameCount{}
		t.byLabel[label] = c
	}
	c.frames++
	c.bytes += int64(frameBytes)
}

// request counts a request node received, encoded as simnet encoded it.
func (t *frameTally) request(node env.NodeID, conn env.ConnID, header env.RequestHeader, req kmsg.Request) {
	label := labelOf(req)
	t.pending[pendingKey{node, conn, header.CorrelationID}] = label
	if t.on {
		t.scratch = wire.AppendRequest(t.scratch[:0], header, req)
		t.add(label, len(t.scratch))
	}
}

// response counts node's answer to (conn, corr).
func (t *frameTally) response(node env.NodeID, conn env.ConnID, corr int32, resp kmsg.Response) {
	label := t.answered(node, conn, corr)
	if !t.on {
		return
	}
	t.scratch = wire.AppendResponse(t.scratch[:0], corr, resp)
	t.add(label, len(t.scratch))
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		var records int64
		for _, ft := range f.Topics {
			if ft.Topic == metadataTopic {
				continue
			}
			for _, fp := range ft.Partitions {
				records += int64(len(fp.RecordBatches))
			}
		}
		t.records(label, records, 2*records) // copied into the response, then encoded
	}
}

// metadataTopic is the controller's metadata log, whose Fetches carry
// metadata records, not produced ones.
const metadataTopic = "__cluster_metadata"

// frame counts node's answer to (conn, corr) made of pieces: a partition
// Fetch, whose region bytes are its record batches. Only the tally's
// label lookup differs from response; the frame is measured, not decoded.
func (t *frameTally) frame(node env.NodeID, conn env.ConnID, corr int32, f env.Frame) {
	label := t.answered(node, conn, corr)
	if !t.on {
		return
	}
	t.add(label, int(f.Len()))
	records := f.RegionBytes()
	t.records(label, records, records) // simnet reads each region into the frame once
}

// answered takes the label of the request node answers on (conn, corr)
// off the pending set.
func (t *frameTally) answered(node env.NodeID, conn env.ConnID, corr int32) string {
	k := pendingKey{node, conn, corr}
	label, ok := t.pending[k]
	if !ok {
		panic(fmt.Sprintf("strandbench: node %d answers correlation id %d on connection %d, which it never received", node, corr, conn))
	}
	delete(t.pending, k)
	return label
}

// records adds a Fetch response's record bytes and the leader's copies of
// them.
func (t *frameTally) records(label string, records, copied int64) {
	if label == labelFetchReplica {
		t.followerRecordBytes += records
		t.followerCopiedBytes += copied
	} else {
		t.consumerRecordBytes += records
	}
}

// skipped forgets a request answered without a response frame.
func (t *frameTally) skipped(node env.NodeID, conn env.ConnID, corr int32) {
	delete(t.pending, pendingKey{node, conn, corr})
}

// countingNet is a node's env.Network with its responses counted.
type countingNet struct {
	env.Network
	node  env.NodeID
	tally *frameTally
}

func (n countingNet) Reply(conn env.ConnID, corr int32, resp kmsg.Response) {
	n.tally.response(n.node, conn, corr, resp)
	n.Network.Reply(conn, corr, resp)
}

func (n countingNet) ReplyFrame(conn env.ConnID, corr int32, f env.Frame) {
	n.tally.frame(n.node, conn, corr, f)
	n.Network.ReplyFrame(conn, corr, f)
}

func (n countingNet) Skip(conn env.ConnID, corr int32) {
	n.tally.skipped(n.node, conn, corr)
	n.Network.Skip(conn, corr)
}

// countingHandler is a node's env.Handler with its requests counted
// before the core sees (and may stamp) them.
type countingHandler struct {
	env.Handler
	node  env.NodeID
	tally *frameTally
}

func (h countingHandler) HandleRequest(conn env.ConnID, header env.RequestHeader, req kmsg.Request) {
	h.tally.request(h.node, conn, header, req)
	h.Handler.HandleRequest(conn, header, req)
}

// replicationResult is what one measurement found.
type replicationResult struct {
	byLabel                                  map[string]frameCount
	batchesAcked, batchesFailed              int64
	producedBytes                            int64 // batch bytes of acknowledged batches
	followerRecordBytes, consumerRecordBytes int64
	followerCopiedBytes                      int64
	followers                                int
	simnetFramesSent                         uint64
	simNs                                    int64
	wall                                     time.Duration
}

// sameCounts reports whether r and o counted the same frames, bytes and
// batches (everything but the wall time).
func (r replicationResult) sameCounts(o replicationResult) bool {
	if len(r.byLabel) != len(o.byLabel) {
		return false
	}
	for label, c := range r.byLabel { // order-independent: a comparison
		if o.byLabel[label] != c {
			return false
		}
	}
	r.byLabel, o.byLabel, r.wall, o.wall = nil, nil, 0, 0
	return reflect.DeepEqual(r, o)
}

func (r replicationResult) simSecondsPerWallSecond() float64 {
	return float64(r.simNs) / 1e9 / r.wall.Seconds()
}

// total sums the frames and bytes of every label.
func (r replicationResult) total() frameCount {
	var t frameCount
	for _, c := range r.byLabel { // order-independent: sums
		t.frames += c.frames
		t.bytes += c.bytes
	}
	return t
}

// copiesPerFollowerByte is the leader's in-memory copies of each produced
// byte per follower: the copies counted in replica Fetch responses (see the
// file comment) per produced byte and follower.
func (r replicationResult) copiesPerFollowerByte() float64 {
	if r.producedBytes == 0 || r.followers == 0 {
		return 0
	}
	return float64(r.followerCopiedBytes) / float64(r.producedBytes*int64(r.followers))
}

// goalMet: at most one copy per replica on the leader path, and something
// was measured at all.
func (r replicationResult) goalMet() bool {
	return r.batchesAcked > 0 && r.copiesPerFollowerByte() <= replCopiesPerFollowMax
}

func verdictOf(met bool) string {
	if met {
		return "PASS"
	}
	return "FAIL"
}

// print prints the tables and the verdict; speed is the simulator speed to
// report. It returns whether the goal was met.
func (r replicationResult) print(speed float64) bool {
	fmt.Printf("workload: %d brokers (+1 controller node), RF %d, min.insync %d, %d partitions, acks=all, "+
		"%d records of %d B per batch, one batch per partition every %d ms, %d simulated s, no faults (simnet.Calm)\n",
		replBrokers, replRF, replMinInsync, replPartitions, replRecordsPerBatch, replRecordBytes,
		int64(replBatchIntervalNs/1e6), int64(replWindowNs/1e9))
	fmt.Printf("acknowledged batches: %d (failed: %d), %d batch bytes produced; one consumer tails every partition\n\n",
		r.batchesAcked, r.batchesFailed, r.producedBytes)
	acked := float64(max(r.batchesAcked, 1))
	produced := float64(max(r.producedBytes, 1))
	fmt.Printf("%-28s %10s %14s %12s %14s\n", "frames (req+resp)", "frames", "bytes", "per batch", "B per B prod")
	row := func(name string, c frameCount) {
		fmt.Printf("%-28s %10d %14d %12.2f %14.3f\n", name, c.frames, c.bytes, float64(c.frames)/acked, float64(c.bytes)/produced)
	}
	var others []string
	var other frameCount
	for label, c := range r.byLabel { // order-independent: sorted below
		if label != labelProduce && label != labelFetchReplica && label != labelFetchConsumer {
			others = append(others, label)
			other.frames += c.frames
			other.bytes += c.bytes
		}
	}
	sort.Strings(others)
	for _, label := range []string{labelProduce, labelFetchReplica, labelFetchConsumer} {
		row(label, r.byLabel[label])
	}
	row("metadata/controller, total", other)
	for _, label := range others {
		row("  "+label, r.byLabel[label])
	}
	repl := frameCount{r.byLabel[labelProduce].frames + r.byLabel[labelFetchReplica].frames,
		r.byLabel[labelProduce].bytes + r.byLabel[labelFetchReplica].bytes}
	row("replication (Produce+repl.)", repl)
	row("all", r.total())
	fmt.Printf("(simnet FramesSent over the same window: %d; the tally counts requests on arrival and responses on\n"+
		" departure, so the two differ by the frames in flight at the window's edges)\n\n", r.simnetFramesSent)

	copies := r.copiesPerFollowerByte()
	fmt.Printf("leader path, per produced byte: replica Fetch record bytes %.3f (= %d followers × %.3f), consumer %.3f\n",
		float64(r.followerRecordBytes)/produced, r.followers,
		float64(r.followerRecordBytes)/produced/float64(max(r.followers, 1)), float64(r.consumerRecordBytes)/produced)
	fmt.Println("copies counted, per follower: 1 per region byte (simnet reads the Fetch frame's file regions from memdisk,")
	fmt.Println("                            where realnet uses sendfile: 0 user-space copies), 2 per inline record byte of a")
	fmt.Println("                            Fetch answered with kmsg (none for partitions; the metadata log is left out)")
	fmt.Println("not counted (simulated kernel): Produce frame receive (that buffer is handed to env.File.Append), memdisk")
	fmt.Println("                            Append (page cache), simnet's frame buffer (socket); batch validation copies nothing")
	fmt.Printf("%-52s %8s %8s %s\n", "goal", "measured", "limit", "verdict")
	met := r.goalMet()
	fmt.Printf("%-52s %8.3f %8.3f %s\n", "leader copies per record byte per follower replica", copies, replCopiesPerFollowMax, verdictOf(met))
	fmt.Println("(the real build: 0 user-space copies per follower byte for regions of at least realnet's sendfileBytesMin,")
	fmt.Println(" sent with sendfile; see BenchmarkRegionSend)")
	fmt.Printf("\nsimulator speed, same run: %.1f simulated s per wall s (%.2f simulated s; the tally's re-encoding of every\n"+
		" frame is included, so this is a lower bound)\n", speed, float64(r.simNs)/1e9)
	return met
}

// replCluster is the simulated cluster of the section.
type replCluster struct {
	s     *sched.Scheduler
	net   *simnet.Network
	tally *frameTally
	idSeq uint64
}

// measureReplication builds the cluster, creates the topic, produces for
// replWindowNs with the tally on, and waits for every produce to finish.
func measureReplication() (replicationResult, error) {
	c := &replCluster{s: sched.New(sched.Options{}), tally: newFrameTally()}
	streams := sched.NewStreams(1)
	c.net = simnet.New(c.s, streams.Get("net"), simnet.Calm())
	var brokers []env.NodeID
	for id := int32(replControllerID); id <= replBrokers+replControllerID; id++ {
		if err := c.startNode(id); err != nil {
			return replicationResult{}, err
		}
		if id != replControllerID {
			brokers = append(brokers, env.NodeID(id))
		}
	}
	// The workload package only creates the topic and finds the leaders.
	w, err := workload.New(c.s, c.net, streams.Get("workload"), workload.Config{
		Brokers: brokers, Topics: []string{"repl"}, Partitions: replPartitions, ReplicationFactor: replRF,
		RequestTimeoutNs: 5e9, ProduceTimeoutMs: replProduceTimeoutMs, BackoffNs: 100e6, RetriesMax: 20, FetchMaxWaitMs: 200,
	})
	if err != nil {
		return replicationResult{}, err
	}
	var leaders []workload.LeaderView
	w.Start(func() { w.ProbeHighWatermarks(func(v []workload.LeaderView) { leaders = v }) })
	if err := c.runUntil(func() bool { return leaders != nil }, replSetupDeadlineNs); err != nil {
		return replicationResult{}, fmt.Errorf("setup: %w", err)
	}
	for i, v := range leaders {
		if !v.OK {
			return replicationResult{}, fmt.Errorf("setup: partition %v has no leader", w.Partitions()[i])
		}
	}

	res := replicationResult{followers: replRF - 1}
	p := &replProducer{c: c, client: c.net.AddClient("repl-producer", c.s.NewNode(100)), res: &res, stopNs: c.s.NowNs() + replWindowNs}
	cons := &replConsumer{c: c, client: c.net.AddClient("repl-consumer", c.s.NewNode(101))}
	framesBefore := c.net.Stats().FramesSent
	startNs, startWall := c.s.NowNs(), time.Now()
	c.tally.on = true
	for i, tp := range w.Partitions() {
		if err := p.start(tp.Topic, tp.Partition, leaders[i].Leader); err != nil {
			return res, err
		}
		if err := cons.start(tp.Topic, tp.Partition, leaders[i].Leader, leaders[i].LeaderEpoch); err != nil {
			return res, err
		}
	}
	err = c.runUntil(func() bool { return c.s.NowNs() >= p.stopNs && p.outstanding == 0 }, replWindowNs+replDrainDeadlineNs)
	c.tally.on = false
	res.wall, res.simNs = time.Since(startWall), c.s.NowNs()-startNs
	if err != nil {
		return res, fmt.Errorf("produce: %w", err)
	}
	if cons.err != nil {
		return res, cons.err
	}
	res.simnetFramesSent = c.net.Stats().FramesSent - framesBefore
	res.byLabel = map[string]frameCount{}
	for label, fc := range c.tally.byLabel { // order-independent: copied into a map
		res.byLabel[label] = *fc
	}
	res.followerRecordBytes, res.consumerRecordBytes = c.tally.followerRecordBytes, c.tally.consumerRecordBytes
	res.followerCopiedBytes = c.tally.followerCopiedBytes
	return res, nil
}

// startNode starts node id (the controller for replControllerID) with its
// network and handler counted.
func (c *replCluster) startNode(id int32) error {
	b, err := replBrokerConfig(id)
	if err != nil {
		return err
	}
	proc := c.s.NewNode(id)
	nn := c.net.AddNode(env.NodeID(id), proc)
	clock := simclock.New(c.s, proc, simclock.Options{MonotonicOffsetNs: int64(id) * 1e12})
	disk := memdisk.New(memdisk.Options{Post: proc.Post})
	core, err := broker.New(broker.Config{Broker: b}, clock, countingNet{Network: nn, node: env.NodeID(id), tally: c.tally},
		[]env.Disk{disk}, c.newID)
	if err != nil {
		return fmt.Errorf("node %d: %w", id, err)
	}
	nn.SetHandler(countingHandler{Handler: core, node: env.NodeID(id), tally: c.tally})
	return nil
}

// newID is the cluster's broker.IDSource: deterministic, distinct ids.
func (c *replCluster) newID() [16]byte {
	c.idSeq++
	var id [16]byte
	id[0] = 1
	for i := 0; i < 8; i++ {
		id[8+i] = byte(c.idSeq >> (8 * i))
	}
	return id
}

// runUntil steps the scheduler until done holds, for at most limitNs.
func (c *replCluster) runUntil(done func() bool, limitNs int64) error {
	deadlineNs := c.s.NowNs() + limitNs
	for !done() {
		if c.s.NowNs() > deadlineNs {
			return fmt.Errorf("not done within %d simulated s", limitNs/1e9)
		}
		if h := c.s.Halted(); h != "" {
			return fmt.Errorf("simulation halted: %s", h)
		}
		if !c.s.Step() {
			return fmt.Errorf("the event queue ran dry")
		}
	}
	return nil
}

// replBrokerConfig is node id's server.properties: sim/cluster's, without
// its scaled-down timeouts (nothing fails here).
func replBrokerConfig(id int32) (config.Broker, error) {
	props := map[string]string{
		"node.id":                        fmt.Sprint(id),
		"process.roles":                  "broker",
		"listeners":                      fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", 9000+2*id),
		"controller.listener.names":      "CONTROLLER",
		"controller.quorum.voters":       fmt.Sprintf("%d@127.0.0.1:9003", replControllerID),
		"log.dirs":                       fmt.Sprintf("/data/node%d", id),
		"auto.create.topics.enable":      "false",
		"min.insync.replicas":            fmt.Sprint(replMinInsync),
		"default.replication.factor":     fmt.Sprint(replRF),
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
	}
	if id == replControllerID {
		props["process.roles"] = "controller"
		props["listeners"] = "CONTROLLER://127.0.0.1:9003"
	}
	b, _, err := config.FromProperties(props)
	if err != nil {
		return b, fmt.Errorf("node %d config: %w", id, err)
	}
	return b, nil
}

// replProducer sends one acks=all batch per partition every
// replBatchIntervalNs (or as soon as the previous one is answered, if
// later) until stopNs.
type replProducer struct {
	c           *replCluster
	client      *simnet.Client
	res         *replicationResult
	stopNs      int64
	outstanding int
	conns       map[int32]*simnet.ClientConn
}

func (p *replProducer) start(topic string, partition, leader int32) error {
	if p.conns == nil {
		p.conns = map[int32]*simnet.ClientConn{}
	}
	conn := p.conns[leader]
	if conn == nil {
		var err error
		conn, err = p.client.Dial(env.NodeID(leader), nil)
		if err != nil {
			return err
		}
		p.conns[leader] = conn
	}
	value := make([]byte, replRecordBytes)
	for i := range value {
		value[i] = byte(i*7 + int(partition))
	}
	records := make([]batch.Record, replRecordsPerBatch)
	for i := range records {
		records[i] = batch.Record{Value: value}
	}
	var send func()
	send = func() {
		nowNs := p.c.s.NowNs()
		if nowNs >= p.stopNs {
			return
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = -1, replProduceTimeoutMs
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = partition
		rp.Records = batch.Build(batch.BuildSpec{FirstTimestamp: simclock.WallEpochMsDefault + nowNs/1e6, Records: records})
		batchBytes := int64(len(rp.Records))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p.outstanding++
		conn.Send(req, func(resp kmsg.Response, err error) {
			p.outstanding--
			if err == nil && produceAcked(resp) {
				p.res.batchesAcked++
				p.res.producedBytes += batchBytes
			} else {
				p.res.batchesFailed++
			}
			p.c.s.After(max(0, nowNs+replBatchIntervalNs-p.c.s.NowNs()), send)
		})
	}
	send()
	return nil
}

// produceAcked reports whether a one-partition Produce response has no
// error.
func produceAcked(resp kmsg.Response) bool {
	r, ok := resp.(*kmsg.ProduceResponse)
	return ok && len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 &&
		r.Topics[0].Partitions[0].ErrorCode == 0
}

// replConsumer tails each partition from its leader with long-polling
// consumer fetches, so that the section also shows what a reader costs.
type replConsumer struct {
	c      *replCluster
	client *simnet.Client
	err    error
}

func (r *replConsumer) start(topic string, partition, leader, epoch int32) error {
	conn, err := r.client.Dial(env.NodeID(leader), nil)
	if err != nil {
		return err
	}
	var next int64
	var fetch func()
	fetch = func() {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 500, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = partition, next, 1<<20, epoch
		rt.Partitions = append(rt.Partitions, fp)
		req.Topics = append(req.Topics, rt)
		conn.Send(req, func(resp kmsg.Response, err error) {
			if err != nil {
				r.fail(fmt.Errorf("consumer fetch %s-%d: %w", topic, partition, err))
				return
			}
			f := resp.(*kmsg.FetchResponse)
			if len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 1 {
				r.fail(fmt.Errorf("consumer fetch %s-%d: response for %d topics", topic, partition, len(f.Topics)))
				return
			}
			fr := f.Topics[0].Partitions[0]
			if fr.ErrorCode != 0 {
				r.fail(fmt.Errorf("consumer fetch %s-%d: %w", topic, partition, kerr.ErrorForCode(fr.ErrorCode)))
				return
			}
			end, err := nextOffset(fr.RecordBatches, next)
			if err != nil {
				r.fail(fmt.Errorf("consumer fetch %s-%d: %w", topic, partition, err))
				return
			}
			next = end
			fetch()
		})
	}
	fetch()
	return nil
}

func (r *replConsumer) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// nextOffset returns the offset after the last whole batch in records, or
// from if there is none.
func nextOffset(records []byte, from int64) (int64, error) {
	next := from
	for len(records) >= batch.LogOverheadBytes {
		h, err := batch.ParseHeader(records)
		if err != nil {
			return next, err
		}
		if int64(len(records)) < h.TotalBytes() {
			break // a partial batch at the end: fetched again next time
		}
		next = h.LastOffset() + 1
		records = records[h.TotalBytes():]
	}
	return next, nil
}
