package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/models"
	"strand/sim/sched"
	"strand/sim/simnet"
)

// errTimedOut is a request the client gave up on: no answer within its
// request timeout. The connection is closed, as real clients do.
var errTimedOut = errors.New("request timed out (client side)")

// leaderInfo is what Metadata said about a partition: its leader, leader
// epoch and replicas (the leader among them), which consumers may fetch
// from (KIP-392).
type leaderInfo struct {
	leader   int32
	epoch    int32
	replicas []int32
}

// client is one simulated client host with its connections and its
// metadata cache.
type client struct {
	w     *Workload
	index int
	proc  *sched.Node
	host  *simnet.Client
	// principal is what the client authenticates as on a secured
	// listener: a principal of its own, never a cluster member's.
	principal string
	// conns holds the connection to each broker, indexed like w.brokers.
	conns []*simnet.ClientConn
	// leaders is the client's metadata cache; it is only looked up.
	leaders         map[models.TopicPartition]leaderInfo
	metadataPending bool
	metadataWaiters []func()
	// rand, if set, is the client's own stream; otherwise it draws from
	// the workload's.
	rand *rand.Rand
}

func (w *Workload) newClient(name string) *client {
	index := len(w.clients)
	proc := w.s.NewNode(int32(clientTraceIDBase + index))
	c := &client{
		w: w, index: index, proc: proc,
		host:    w.net.AddClient(fmt.Sprintf("%s-%d", name, index), proc),
		conns:   make([]*simnet.ClientConn, len(w.cfg.Brokers)),
		leaders: map[models.TopicPartition]leaderInfo{},
	}
	c.principal = fmt.Sprintf("User:%s-%d", name, index)
	c.host.SetPrincipal(c.principal)
	w.clients = append(w.clients, c)
	return c
}

// reset forgets everything a crash of the client's process loses: its
// metadata cache and the metadata request in flight (whose answer the
// crash dropped). Connections are reset by the network itself.
func (c *client) reset() {
	c.leaders = map[models.TopicPartition]leaderInfo{}
	c.metadataPending, c.metadataWaiters = false, nil
}

// clientTraceIDBase numbers clients in the trace, above any node.id.
const clientTraceIDBase = 1000

func (c *client) r() *rand.Rand {
	if c.rand != nil {
		return c.rand
	}
	return c.w.r
}

func (c *client) brokerIndex(id int32) int {
	for i, b := range c.w.cfg.Brokers {
		if int32(b) == id {
			return i
		}
	}
	return -1
}

// send sends req to broker id and calls done exactly once: with the
// response, a connection error, or errTimedOut after timeoutNs.
func (c *client) send(id int32, req kmsg.Request, timeoutNs int64, done func(kmsg.Response, error)) {
	i := c.brokerIndex(id)
	if i < 0 {
		c.proc.Post(func() { done(nil, fmt.Errorf("broker %d unknown", id)) })
		return
	}
	cc := c.conns[i]
	if cc == nil || !cc.Open() {
		var err error
		cc, err = c.host.Dial(env.NodeID(id), nil)
		if err != nil {
			c.proc.Post(func() { done(nil, err) })
			return
		}
		c.conns[i] = cc
	}
	answered := false
	timer := c.proc.After(timeoutNs, func() {
		if answered {
			return
		}
		answered = true
		cc.Close()
		done(nil, errTimedOut)
	})
	cc.Send(req, func(resp kmsg.Response, err error) {
		if answered {
			return
		}
		answered = true
		timer.Cancel()
		done(resp, err)
	})
}

// randomBroker picks a broker to ask for metadata.
func (c *client) randomBroker() int32 {
	return int32(c.w.cfg.Brokers[c.r().IntN(len(c.w.cfg.Brokers))])
}

// refreshMetadata asks a random broker for every topic's metadata and runs
// then once an answer (or failure) is in. Concurrent calls share one
// request.
func (c *client) refreshMetadata(then func()) {
	c.metadataWaiters = append(c.metadataWaiters, then)
	if c.metadataPending {
		return
	}
	c.metadataPending = true
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, name := range c.w.cfg.allTopics() {
		t := kmsg.NewMetadataRequestTopic()
		topic := name
		t.Topic = &topic
		req.Topics = append(req.Topics, t)
	}
	c.send(c.randomBroker(), req, c.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if err == nil {
			for _, t := range resp.(*kmsg.MetadataResponse).Topics {
				if t.ErrorCode != 0 || t.Topic == nil {
					continue
				}
				for _, p := range t.Partitions {
					tp := models.TopicPartition{Topic: *t.Topic, Partition: p.Partition}
					if p.ErrorCode != 0 || p.Leader < 0 {
						delete(c.leaders, tp)
						continue
					}
					// Never go back to an older epoch a stale broker reports.
					if old, ok := c.leaders[tp]; !ok || p.LeaderEpoch >= old.epoch {
						c.leaders[tp] = leaderInfo{leader: p.Leader, epoch: p.LeaderEpoch, replicas: append([]int32(nil), p.Replicas...)}
					}
				}
			}
		}
		c.metadataPending = false
		waiters := c.metadataWaiters
		c.metadataWaiters = nil
		for _, fn := range waiters {
			fn()
		}
	})
}

// withLeader runs fn with tp's leader, refreshing metadata first if the
// cache has none; if there is still none it retries after backoffNs.
func (c *client) withLeader(tp models.TopicPartition, stopped func() bool, fn func(leaderInfo)) {
	if stopped() {
		return
	}
	if li, ok := c.leaders[tp]; ok {
		fn(li)
		return
	}
	c.refreshMetadata(func() {
		if li, ok := c.leaders[tp]; ok {
			fn(li)
			return
		}
		c.proc.After(c.w.cfg.BackoffNs, func() { c.withLeader(tp, stopped, fn) })
	})
}

// forgetLeader drops tp from the cache after an error that says the
// client's view is stale.
func (c *client) forgetLeader(tp models.TopicPartition) { delete(c.leaders, tp) }
