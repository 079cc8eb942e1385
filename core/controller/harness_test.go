package controller

import (
	"cmp"
	"reflect"
	"slices"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
	"strand/core/quorum"
	"strand/sim/memdisk"
)

// manualClock is an env.Clock that moves only when the test says so.
type manualClock struct {
	nowNs  int64
	seq    int
	timers []*manualTimer
}

type manualTimer struct {
	c          *manualClock
	deadlineNs int64
	seq        int
	fire       func()
	pending    bool
}

func (t *manualTimer) Stop() bool {
	was := t.pending
	t.pending = false
	return was
}

func (c *manualClock) MonotonicNs() int64 { return c.nowNs }
func (c *manualClock) WallMs() int64      { return 1_767_225_600_000 + c.nowNs/1e6 }

func (c *manualClock) SetTimer(delayNs int64, fire func()) env.Timer {
	c.seq++
	t := &manualTimer{c: c, deadlineNs: c.nowNs + max(delayNs, 0), seq: c.seq, fire: fire, pending: true}
	c.timers = append(c.timers, t)
	return t
}

// advance moves time forward by ms, firing due timers in deadline order
// (ties by creation order) at their deadlines; settle runs after each.
func (c *manualClock) advance(ms int64, settle func()) {
	end := c.nowNs + ms*1e6
	for {
		c.timers = slices.DeleteFunc(c.timers, func(t *manualTimer) bool { return !t.pending })
		if len(c.timers) == 0 {
			break
		}
		next := slices.MinFunc(c.timers, func(a, b *manualTimer) int {
			return cmp.Or(cmp.Compare(a.deadlineNs, b.deadlineNs), cmp.Compare(a.seq, b.seq))
		})
		if next.deadlineNs > end {
			break
		}
		c.nowNs = max(c.nowNs, next.deadlineNs)
		next.pending = false
		next.fire()
		settle()
	}
	c.nowNs = end
}

// tb is what the harness needs of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// harness runs one controller on a memdisk with a manual clock.
type harness struct {
	t       tb
	clock   *manualClock
	disk    *memdisk.Disk
	cfg     Config
	node    *quorum.Node
	c       *Controller
	idCount uint32
}

func newHarness(t tb, cfg Config) *harness {
	h := &harness{t: t, clock: &manualClock{}, disk: memdisk.New(memdisk.Options{}), cfg: cfg}
	h.start()
	return h
}

func (h *harness) newTopicID() [16]byte {
	h.idCount++
	n := h.idCount
	return [16]byte{0: 0x70, 12: byte(n >> 24), 13: byte(n >> 16), 14: byte(n >> 8), 15: byte(n)}
}

// start starts a single-voter quorum on the disk and a controller over
// it, and runs the clock until the controller is active (the voter elects
// itself after an election timeout and commits its leader-change entry).
func (h *harness) start() {
	h.t.Helper()
	c, node := h.startController()
	h.c, h.node = c, node
	for waited := 0; !c.Active(); waited += 10 {
		if waited > 10_000 {
			h.t.Fatal("the single voter did not become the active controller")
		}
		h.advance(10)
	}
}

// startController starts the quorum and the controller without waiting.
func (h *harness) startController() (*Controller, *quorum.Node) {
	h.t.Helper()
	q := quorum.NewMetadataQuorum()
	qcfg := quorum.DefaultConfig(h.cfg.NodeID, h.cfg.Voters, func(n int64) int64 { return n / 2 })
	node, err := quorum.StartNode(qcfg, h.clock, noNetwork{}, h.disk, "data/"+MetadataTopic+"-0", q)
	if err != nil {
		h.t.Fatal(err)
	}
	q.Attach(node)
	c, err := New(h.cfg, h.clock, q, h.newTopicID)
	if err != nil {
		h.t.Fatal(err)
	}
	h.settle()
	return c, node
}

// restart stops the controller (as a clean process exit) and starts a new
// one over the same disk.
func (h *harness) restart() {
	h.t.Helper()
	h.settle()
	h.stop()
	h.start()
}

// stop stops the controller and its voter.
func (h *harness) stop() {
	h.c.Close()
	h.node.Stop()
}

// noNetwork is the network of a voter with no reachable peer.
type noNetwork struct{}

func (noNetwork) Reply(env.ConnID, int32, kmsg.Response)   {}
func (noNetwork) Skip(env.ConnID, int32)                   {}
func (noNetwork) ReplyFrame(env.ConnID, int32, env.Frame)  {}
func (noNetwork) Close(env.ConnID, int32)                  {}
func (noNetwork) SetPrechecker(env.Prechecker)             {}
func (noNetwork) SetScramCredentials(env.ScramCredentials) {}
func (noNetwork) Send(env.NodeID, kmsg.Request, func(kmsg.Response, error)) {
	// Lost: a voter whose peers are unreachable never wins an election.
}

// settle runs disk completions until none are left.
func (h *harness) settle() {
	for h.disk.RunPending() > 0 {
	}
}

// send hands req to the controller and returns its response once settled,
// failing if there is none or more than one.
func (h *harness) send(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	replies := h.sendAsync(req)
	h.settle()
	if len(*replies) != 1 {
		h.t.Fatalf("%T got %d responses, want 1", req, len(*replies))
	}
	return (*replies)[0]
}

// sendAsync hands req to the controller and returns where its responses go.
func (h *harness) sendAsync(req kmsg.Request) *[]kmsg.Response {
	var replies []kmsg.Response
	h.c.HandleRequest(req, func(r kmsg.Response) { replies = append(replies, r) })
	return &replies
}

func (h *harness) advance(ms int64) { h.clock.advance(ms, h.settle) }

func (h *harness) register(id int32, incarnation byte) int64 {
	h.t.Helper()
	resp := h.registerRaw(id, incarnation, -1)
	if resp.ErrorCode != 0 {
		h.t.Fatalf("register broker %d: error %d", id, resp.ErrorCode)
	}
	return resp.BrokerEpoch
}

func (h *harness) registerRaw(id int32, incarnation byte, previousEpoch int64) *kmsg.BrokerRegistrationResponse {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = 4
	req.BrokerID = id
	req.IncarnationID = [16]byte{0: byte(id), 1: incarnation}
	req.PreviousBrokerEpoch = previousEpoch
	req.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "BROKER", Host: "localhost", Port: uint16(9092 + id)}}
	return h.send(req).(*kmsg.BrokerRegistrationResponse)
}

// heartbeat sends a heartbeat as a broker caught up with the committed log.
func (h *harness) heartbeat(id int32, epoch int64, wantShutdown bool) *kmsg.BrokerHeartbeatResponse {
	h.t.Helper()
	return h.heartbeatAt(id, epoch, h.c.Image().Offset(), wantShutdown)
}

func (h *harness) heartbeatAt(id int32, epoch, offset int64, wantShutdown bool) *kmsg.BrokerHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version = 1
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset, req.WantShutdown = id, epoch, offset, wantShutdown
	return h.send(req).(*kmsg.BrokerHeartbeatResponse)
}

// startBrokers registers and unfences brokers 0..n-1 and returns their epochs.
func (h *harness) startBrokers(n int) []int64 {
	h.t.Helper()
	epochs := make([]int64, n)
	for i := range epochs {
		epochs[i] = h.register(int32(i), 1)
	}
	for i, e := range epochs {
		if resp := h.heartbeat(int32(i), e, false); resp.ErrorCode != 0 || resp.IsFenced {
			h.t.Fatalf("broker %d still fenced after catching up: %+v", i, resp)
		}
	}
	return epochs
}

func (h *harness) createTopic(name string, partitions int32, rf int16, configs map[string]string) *kmsg.CreateTopicsResponseTopic {
	h.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for _, k := range slices.Sorted(mapsKeys(configs)) {
		v := configs[k]
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: &v})
	}
	req.Topics = append(req.Topics, rt)
	resp := h.send(req).(*kmsg.CreateTopicsResponse)
	return &resp.Topics[0]
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m { // order-independent: sorted by the caller
			if !yield(k) {
				return
			}
		}
	}
}

func (h *harness) partition(topic string, p int32) metadata.PartitionState {
	h.t.Helper()
	s, ok := h.c.Image().PartitionByName(topic, p)
	if !ok {
		h.t.Fatalf("no partition %s-%d", topic, p)
	}
	return s
}

// alterISR sends an AlterPartition (v3) from the partition's leader with
// the epochs it knows.
func (h *harness) alterISR(topic string, p int32, from int32, brokerEpoch int64, leaderEpoch, partitionEpoch int32, isr []int32) kmsg.AlterPartitionResponseTopicPartition {
	h.t.Helper()
	tp, _ := h.c.Image().TopicByName(topic)
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = from, brokerEpoch
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = tp.ID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = p, leaderEpoch, partitionEpoch
	for _, id := range isr {
		b, _ := h.c.Image().Broker(id)
		rp.NewEpochISR = append(rp.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: b.Epoch})
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := h.send(req).(*kmsg.AlterPartitionResponse)
	if resp.ErrorCode != 0 {
		h.t.Fatalf("AlterPartition: top-level error %d", resp.ErrorCode)
	}
	return resp.Topics[0].Partitions[0]
}

// imageDiff compares two images field by field.
func imageDiff(a, b *metadata.Image) string {
	return gocmp.Diff(a, b, gocmp.Exporter(func(reflect.Type) bool { return true }))
}
