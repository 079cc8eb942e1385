package broker

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/config"
	"strand/core/env"
	"strand/sim/memdisk"
	"strand/sim/sched"
	"strand/sim/simclock"
	"strand/sim/simnet"
)

// cluster wires Nodes together on the simulator's scheduler, network,
// clocks and disks (sim/sched, sim/simnet, sim/simclock, sim/memdisk),
// with a calm network unless a test cuts links itself. Node 1 is the
// controller (and a broker); the others are brokers.
type cluster struct {
	t       *testing.T
	s       *sched.Scheduler
	streams *sched.Streams
	net     *simnet.Network
	nodes   map[int32]*testNode
	client  *simnet.Client
	conns   map[int32]*simnet.ClientConn
	nextID  uint64
	clientP *sched.Node
	// idRand, if set, draws ids (and so the quorum's election jitter)
	// from the seed instead of counting.
	idRand *rand.Rand
}

type testNode struct {
	id    int32
	proc  *sched.Node
	nn    *simnet.NodeNet
	clock *simclock.Clock
	disk  *memdisk.Disk
	cfg   Config
	node  *Node
	// logs captures every line the node logs, across restarts.
	logs *capturedLogs
}

// newCluster starts size nodes with the given extra server.properties.
func newCluster(t *testing.T, size int, extra map[string]string) *cluster {
	t.Helper()
	return newClusterRoles(t, size, "broker,controller", extra)
}

// newClusterRoles is newCluster with node 1's process.roles given.
func newClusterRoles(t *testing.T, size int, node1Roles string, extra map[string]string) *cluster {
	t.Helper()
	return newSimCluster(t, size, node1Roles, extra, 1, false)
}

// newSimCluster is the general form: seed drives every PRNG stream, and
// chaos draws the network's faults from it (otherwise the network is calm).
func newSimCluster(t *testing.T, size int, node1Roles string, extra map[string]string, seed uint64, chaos bool) *cluster {
	t.Helper()
	s := sched.New(sched.Options{})
	streams := sched.NewStreams(seed)
	faults := simnet.Calm()
	if chaos {
		faults = simnet.DrawFaults(streams.Get("net-faults"))
	}
	c := &cluster{t: t, s: s, streams: streams, net: simnet.New(s, streams.Get("net"), faults), nodes: map[int32]*testNode{}, conns: map[int32]*simnet.ClientConn{}}
	for id := int32(1); id <= int32(size); id++ {
		roles := "broker"
		if id == 1 {
			roles = node1Roles
		}
		props := map[string]string{
			"node.id":                   fmt.Sprint(id),
			"process.roles":             roles,
			"listeners":                 fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", 9000+2*id),
			"controller.listener.names": "CONTROLLER",
			"controller.quorum.voters":  "1@127.0.0.1:9003",
			"log.dirs":                  fmt.Sprintf("/data/node%d", id),
			"auto.create.topics.enable": "true",
		}
		if id == 1 && roles == "controller" {
			props["listeners"] = "CONTROLLER://127.0.0.1:9003"
			props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
		} else if id == 1 {
			props["listeners"] += ",CONTROLLER://127.0.0.1:9003"
			props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
		}
		for k, v := range extra {
			props[k] = v
		}
		c.addNode(id, props)
	}
	c.clientP = s.NewNode(100)
	c.client = c.net.AddClient("test-client", c.clientP)
	return c
}

// addNode configures node id from props and starts it on a fresh memdisk.
func (c *cluster) addNode(id int32, props map[string]string) {
	c.t.Helper()
	b, _, err := config.FromProperties(props)
	if err != nil {
		c.t.Fatalf("node %d config: %v", id, err)
	}
	proc := c.s.NewNode(id)
	nn := c.net.AddNode(env.NodeID(id), proc)
	nn.SetListeners(simnet.ListenersOf(b))
	nn.SetRoute(func(req kmsg.Request) string { return PeerListener(b, req) })
	nn.SetPrincipal(fmt.Sprintf("User:broker-%d", id))
	tn := &testNode{id: id, proc: proc, nn: nn,
		clock: simclock.New(c.s, proc, simclock.Options{MonotonicOffsetNs: int64(id) * 1e12}),
		disk:  memdisk.New(memdisk.Options{Post: proc.Post}), cfg: Config{Broker: b}, logs: &capturedLogs{}}
	tn.cfg.Log = env.NewLog(tn.logs)
	c.nodes[id] = tn
	c.start(tn)
}

// start builds the node's core from its disk, as after a process start.
func (c *cluster) start(tn *testNode) {
	node, err := New(tn.cfg, tn.clock, tn.nn, []env.Disk{tn.disk}, c.ids)
	if err != nil {
		c.t.Fatalf("node %d: New: %v", tn.id, err)
	}
	tn.node = node
	tn.nn.SetHandler(node)
}

// ids is a deterministic IDSource.
func (c *cluster) ids() [16]byte {
	if c.idRand != nil {
		var id [16]byte
		binary.BigEndian.PutUint64(id[:8], c.idRand.Uint64())
		binary.BigEndian.PutUint64(id[8:], c.idRand.Uint64())
		return id
	}
	c.nextID++ // a byte wrapped after 255 ids: topic ids collided
	var id [16]byte
	id[0] = 0xAB
	binary.BigEndian.PutUint64(id[8:], c.nextID)
	return id
}

// shutdownCleanly stops tn as SIGTERM does: a controlled shutdown, then
// Close, which flushes the logs and writes the clean-shutdown marker.
func (c *cluster) shutdownCleanly(tn *testNode) {
	c.t.Helper()
	stopped, closed := false, false
	tn.node.BeginShutdown(func() { stopped = true })
	c.waitFor("controlled shutdown", 10000, func() bool { return stopped })
	tn.node.Close(func(err error) {
		if err != nil {
			c.t.Error(err)
		}
		closed = true
	})
	c.waitFor("closed", 1000, func() bool { return closed })
}

// run advances virtual time.
func (c *cluster) run(ms int64) { c.s.RunFor(ms * 1e6) }

// conn returns the client's connection to node id, dialling if needed.
func (c *cluster) conn(id int32) *simnet.ClientConn {
	if cc := c.conns[id]; cc != nil && cc.Open() {
		return cc
	}
	cc, err := c.client.Dial(env.NodeID(id), nil)
	if err != nil {
		c.t.Fatalf("dial %d: %v", id, err)
	}
	c.conns[id] = cc
	return cc
}

// send sends req to node id and returns a function that runs the simulation
// until the answer arrives (or 60 virtual seconds pass).
func (c *cluster) send(id int32, req kmsg.Request) func() (kmsg.Response, error) {
	var resp kmsg.Response
	var err error
	done := false
	c.conn(id).Send(req, func(r kmsg.Response, e error) { resp, err, done = r, e, true })
	return func() (kmsg.Response, error) {
		deadline := c.s.NowNs() + 60e9
		for !done && c.s.NowNs() < deadline && c.s.Step() {
		}
		if !done {
			return nil, fmt.Errorf("no answer from node %d to key %d", id, req.Key())
		}
		return resp, err
	}
}

// request sends req and waits for its answer; a transport error fails.
func (c *cluster) request(id int32, req kmsg.Request) kmsg.Response {
	c.t.Helper()
	resp, err := c.send(id, req)()
	if err != nil {
		c.t.Fatalf("request key %d v%d to node %d: %v", req.Key(), req.GetVersion(), id, err)
	}
	return resp
}

// waitFor runs the simulation until cond holds, failing after maxMs.
func (c *cluster) waitFor(what string, maxMs int64, cond func() bool) {
	c.t.Helper()
	for waited := int64(0); !cond(); waited += 10 {
		if waited > maxMs {
			c.t.Fatalf("after %d ms: still waiting for %s", maxMs, what)
		}
		c.run(10)
	}
}

// deleteTopic deletes a topic through node via; callers wait for what they
// need to see gone.
func (c *cluster) deleteTopic(via int32, name string) {
	c.t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = &name
	req.Topics = append(req.Topics, t)
	if code := c.request(via, req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("delete %s: %v", name, kerr.ErrorForCode(code))
	}
}

// createTopic creates a topic through node via and waits until every
// replica's node has applied it.
func (c *cluster) createTopic(via int32, name string, partitions int32, rf int16) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, t)
	resp := c.request(via, req).(*kmsg.CreateTopicsResponse)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("create %s: error %d", name, code)
	}
	c.waitFor("topic "+name+" everywhere", 10000, func() bool {
		for _, tn := range c.nodes {
			if !tn.proc.Up() || !tn.cfg.Broker.Roles.Broker {
				continue
			}
			for p := range partitions {
				s, ok := tn.node.meta.image.PartitionByName(name, p)
				if !ok || s.Leader < 0 || c.nodes[s.Leader].node.parts.partitions[partitionKey{name, p}] == nil {
					return false
				}
			}
		}
		return true
	})
}

// leaderOf returns the leader of a partition as the controller's
// committed image says.
func (c *cluster) leaderOf(topic string, p int32) int32 {
	s, ok := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName(topic, p)
	if !ok {
		c.t.Fatalf("no partition %s-%d", topic, p)
	}
	return s.Leader
}

// leaderEpochOf returns a partition's leader epoch as the controller's
// committed image says.
func (c *cluster) leaderEpochOf(topic string, p int32) int32 {
	s, _ := c.nodes[1].node.controllerRole.ctrl.Image().PartitionByName(topic, p)
	return s.LeaderEpoch
}

// waitRegistered waits until every broker is registered and unfenced.
func (c *cluster) waitRegistered() {
	c.t.Helper()
	c.waitFor("brokers unfenced", 10000, func() bool {
		im := c.nodes[1].node.controllerRole.ctrl.Image()
		for id, tn := range c.nodes {
			if !tn.cfg.Broker.Roles.Broker {
				continue
			}
			if b, ok := im.Broker(id); !ok || b.Fenced {
				return false
			}
		}
		return true
	})
}

// recordBatch builds one uncompressed batch holding values.
func recordBatch(values ...string) []byte {
	var recs []batch.Record
	for i, v := range values {
		recs = append(recs, batch.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(v)})
	}
	return batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Records: recs})
}

// produceReq builds a Produce v9 request for one partition.
func produceReq(topic string, p int32, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	tp := kmsg.NewProduceRequestTopicPartition()
	tp.Partition, tp.Records = p, records
	t.Partitions = append(t.Partitions, tp)
	req.Topics = append(req.Topics, t)
	return req
}

// produce sends one batch and returns the partition's answer.
func (c *cluster) produce(node int32, topic string, p int32, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	resp := c.request(node, produceReq(topic, p, acks, records)).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

// fetchReq builds a consumer Fetch v12 for one partition.
func fetchReq(topic string, p int32, offset int64, maxWaitMs int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWaitMs, 1, 1<<20
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, offset, 1<<20
	t.Partitions = append(t.Partitions, fp)
	req.Topics = append(req.Topics, t)
	return req
}

// fetch fetches one partition as a consumer.
func (c *cluster) fetch(node int32, topic string, p int32, offset int64) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	resp := c.request(node, fetchReq(topic, p, offset, 0)).(*kmsg.FetchResponse)
	return resp.Topics[0].Partitions[0]
}

// values decodes the record values of fetched batches, in offset order.
func values(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil {
			t.Fatalf("fetched bytes: %v", err)
		}
		size := int(h.Length) + 12
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:size]); err != nil {
			t.Fatalf("fetched batch: %v", err)
		}
		recs, err := decodeRecords(rb)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
		b = b[size:]
	}
	return out
}

func decodeRecords(rb kmsg.RecordBatch) ([]string, error) {
	var out []string
	raw := rb.Records
	for i := int32(0); i < rb.NumRecords; i++ {
		var r kmsg.Record
		n, err := readVarint(raw)
		if err != nil {
			return nil, err
		}
		if err := r.ReadFrom(raw[:n.end+int(n.v)]); err != nil {
			return nil, err
		}
		out = append(out, string(r.Value))
		raw = raw[n.end+int(n.v):]
	}
	return out, nil
}

type varint struct {
	v   int64
	end int
}

func readVarint(b []byte) (varint, error) {
	var ux uint64
	for i := 0; i < len(b) && i < 10; i++ {
		ux |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return varint{int64(ux>>1) ^ -int64(ux&1), i + 1}, nil
		}
	}
	return varint{}, fmt.Errorf("bad varint")
}

func joined(v []string) string { return strings.Join(v, ",") }

// createAssigned creates a one-partition topic with the given replicas
// (the first leads) and configs.
func (c *cluster) createAssigned(name string, replicas []int32, configs map[string]string) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v := configs[k]
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, &v
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	if code := c.request(1, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("create %s: %v", name, kerr.ErrorForCode(code))
	}
	c.waitFor(name+" on every replica", 10000, func() bool {
		for _, id := range replicas {
			if c.nodes[id].node.parts.partitions[partitionKey{name, 0}] == nil {
				return false
			}
		}
		return true
	})
}
