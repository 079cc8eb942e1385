package realnet

import (
	"context"
	"fmt"
	"net"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/broker"
	"strand/core/wire"
)

// topicName is the name manyTopicsOfLongNames gives topic i.
func topicName(i, nameBytes int) string {
	return fmt.Sprintf("%06d-%s", i, strings.Repeat("n", nameBytes-7))
}

// manyTopicsOfLongNames creates that many single-partition topics on c's node,
// each named with nameBytes characters, so that a Metadata of all topics
// answers with about topics × (nameBytes + 60) bytes.
func manyTopicsOfLongNames(t *testing.T, c *testCluster, topics, nameBytes int) {
	t.Helper()
	cl := c.client()
	const perRequest = 500
	for first := 0; first < topics; first += perRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		for i := first; i < min(first+perRequest, topics); i++ {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = topicName(i, nameBytes)
			rt.NumPartitions, rt.ReplicationFactor = 1, 1
			req.Topics = append(req.Topics, rt)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err != nil {
			t.Fatalf("create topics from %d: %v", first, err)
		}
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 {
				t.Fatalf("create topic %s: error code %d", rt.Topic, rt.ErrorCode)
			}
		}
	}
	// The node opens the partitions' logs on its loop after the metadata
	// log commits them, for about a second of CPU: the attack begins once
	// it leads every one.
	node := c.nodes[0]
	waitUntil(t, "the node leads every partition", 60*time.Second, func() bool {
		led := 0
		node.Call(func(b *broker.Node) {
			for i := range topics {
				if r, ok := b.InspectReplica(topicName(i, nameBytes), 0); ok && r.Leader {
					led++
				}
			}
		})
		return led == topics
	})
}

// allTopicsMetadata is a Metadata request for every topic.
func allTopicsMetadata() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.Topics = nil // all topics
	return req
}

// TestHostileUnreadAnswersAreBoundedNodeWide: 30 connections each send 20
// Metadata requests of every topic of a node with 3,000 topics (0.84 MiB an
// answer) and never read; they ask the node for 500 MiB of answers. Each
// connection may hold 100 MiB (strand.connection.buffered.bytes.max), so
// what bounds them is the node-wide strand.response.buffered.bytes.max,
// here 8 MiB, and the rule that a connection whose client does not take
// its answers (sendBlocked) gets no more requests handled. The answers held
// never exceed twice the limit and one answer (connections holding none
// may use the second half), RssAnon grows less than rssAnonGrowthBytesMax,
// and every attacker is closed once its stalled write passes the write
// deadline. Meanwhile an honest client's Metadata of one topic is answered
// within honestAnswerWithin, and ApiVersions on the controller listener
// within answerWithin.
func TestHostileUnreadAnswersAreBoundedNodeWide(t *testing.T) {
	const (
		responsesMax       = 8 << 20
		writeTimeoutMs     = 2000
		topics             = 3000
		topicNameBytes     = 240
		attackers          = 30
		requestsEach       = 20
		honestAnswerWithin = 3 * time.Second
	)
	c := startCluster(t, 1, map[string]string{
		"strand.response.buffered.bytes.max": strconv.Itoa(responsesMax),
		"strand.response.write.timeout.ms":   strconv.Itoa(writeTimeoutMs),
	})
	node := c.nodes[0]
	manyTopicsOfLongNames(t, c, topics, topicNameBytes)

	// One answer's size, read whole by a client that reads.
	reader := dialRaw(t, node.Addr("PLAINTEXT"))
	var answerBytes int
	waitUntil(t, "every topic in Metadata", 30*time.Second, func() bool {
		asked := time.Now()
		reader.send(1, allTopicsMetadata())
		frame, err := reader.readFrame(10 * time.Second)
		t.Logf("all-topics Metadata answered in %s", time.Since(asked))
		if err != nil {
			t.Fatalf("Metadata of all topics: %v", err)
		}
		_, resp, err := wireParseMetadata(frame)
		if err != nil {
			t.Fatal(err)
		}
		answerBytes = len(frame) + 4
		return len(resp.Topics) == topics
	})
	t.Logf("a Metadata of all %d topics answers with %.2f MiB", topics, float64(answerBytes)/(1<<20))

	mem := watchMemory(t)
	controller := startProbes(map[string]net.Addr{"CONTROLLER": node.Addr("CONTROLLER")})
	honest := startHonestMetadata(t, node.Addr("PLAINTEXT"), topicName(0, topicNameBytes))
	var heldPeak, heapPeak atomic.Int64
	heapSample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for {
			heldPeak.Store(max(heldPeak.Load(), node.net.responses.held()))
			metrics.Read(heapSample)
			heapPeak.Store(max(heapPeak.Load(), int64(heapSample[0].Value.Uint64())))
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})

	attackStart := time.Now()
	conns := make([]*rawConn, attackers)
	for i := range conns {
		conns[i] = dialNotReading(t, node.Addr("PLAINTEXT"))
		for k := range requestsEach {
			conns[i].send(int32(k+1), allTopicsMetadata())
		}
	}
	// Every attacker is closed by the broker: its stalled write passes the
	// pressured write deadline.
	attackerAddrs := make([]string, len(conns))
	for i, rc := range conns {
		attackerAddrs[i] = rc.c.LocalAddr().String()
	}
	waitUntil(t, "the attackers closed by the broker", 60*time.Second, func() bool {
		return node.net.connsFrom(attackerAddrs) == 0
	})
	closedWithin := time.Since(attackStart)
	t.Logf("all %d attackers closed by the broker %s after the attack began", attackers, closedWithin.Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond) // the honest client keeps asking after the attack
	close(stopSampling)
	sampling.Wait()
	honestSlowest, honestAnswers := honest.stop(t)
	controller.stop(t)
	mem.stop()

	peak := heldPeak.Load()
	t.Logf("heap objects peak %.1f MiB", float64(heapPeak.Load())/(1<<20))
	t.Logf("answers held: peak %.1f MiB (bound twice %d MiB and one answer of %.2f MiB); without the bound the attack asks for %.0f MiB",
		float64(peak)/(1<<20), responsesMax>>20, float64(answerBytes)/(1<<20), float64(attackers*requestsEach*answerBytes)/(1<<20))
	if peak > 2*responsesMax+int64(answerBytes) {
		t.Errorf("answers held peaked at %d bytes, over twice strand.response.buffered.bytes.max (%d) and one answer (%d)", peak, responsesMax, answerBytes)
	}
	if held := node.net.responses.held(); held != 0 {
		t.Errorf("answers held after every attacker closed: %d bytes, want 0", held)
	}
	t.Logf("honest Metadata: %d answers, slowest %s (bound %s)", honestAnswers, honestSlowest.Round(time.Millisecond), honestAnswerWithin)
	if honestAnswers == 0 || honestSlowest > honestAnswerWithin {
		t.Errorf("honest Metadata: %d answers, slowest %s; want each within %s", honestAnswers, honestSlowest, honestAnswerWithin)
	}
}

// connsFrom is how many of the node's inbound connections come from
// remotes, client addresses as host:port.
func (n *Network) connsFrom(remotes []string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	open := 0
	for _, sc := range n.conns {
		if slices.Contains(remotes, sc.c.RemoteAddr().String()) {
			open++
		}
	}
	return open
}

// wireParseMetadata parses a Metadata answer frame (without its prefix).
func wireParseMetadata(frame []byte) (int32, *kmsg.MetadataResponse, error) {
	req := allTopicsMetadata()
	got, resp, err := wire.ParseResponse(frame, req)
	if err != nil {
		return 0, nil, err
	}
	return got, resp.(*kmsg.MetadataResponse), nil
}

// honestMetadata asks Metadata of one topic on a connection of its own,
// one at a time, and records the slowest answer, until stopped.
type honestMetadata struct {
	stopCh  chan struct{}
	done    chan struct{}
	slowest time.Duration
	answers int
	err     error
}

func startHonestMetadata(t *testing.T, addr net.Addr, topic string) *honestMetadata {
	r := dialRaw(t, addr)
	h := &honestMetadata{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for corr := int32(1); ; corr++ {
			select {
			case <-h.stopCh:
				return
			case <-time.After(20 * time.Millisecond):
			}
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(12)
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			start := time.Now()
			if _, err := r.c.Write(frameOfRequest(corr, req)); err != nil {
				h.err = err
				return
			}
			if _, err := r.readFrame(30 * time.Second); err != nil {
				h.err = fmt.Errorf("Metadata %d: %w", corr, err)
				return
			}
			h.slowest = max(h.slowest, time.Since(start))
			h.answers++
		}
	}()
	return h
}

// stop ends the honest client, failing t if it broke, and returns its
// slowest answer and how many it had.
func (h *honestMetadata) stop(t *testing.T) (time.Duration, int) {
	t.Helper()
	close(h.stopCh)
	<-h.done
	if h.err != nil {
		t.Errorf("honest Metadata after %d answers: %v", h.answers, h.err)
	}
	return h.slowest, h.answers
}
