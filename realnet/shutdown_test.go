package realnet

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strand/core/broker"
)

// TestControlledShutdownMovesLeadershipAndRestartRejoins shuts down a
// broker that leads partitions of an RF-3 topic: the controlled shutdown
// must complete (its leaderships move first), producing with acks=all goes
// on against the two others, and the broker, restarted on the same log
// directories, rejoins every ISR over fresh peer connections.
func TestControlledShutdownMovesLeadershipAndRestartRejoins(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	const topic, partitions = "shutdown", 3
	c.createTopic(topic, partitions, 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	before := produceKeyed(t, producer, topic, 1000)

	const victim = 2
	if !slices.Contains(c.leaders(topic, partitions), victim) {
		t.Fatalf("node %d leads none of %v; the test needs it to lead one", victim, c.leaders(topic, partitions))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := c.nodes[victim-1].Shutdown(ctx); err != nil {
		t.Fatalf("shutdown of node %d: %v", victim, err)
	}
	t.Logf("controlled shutdown took %s", time.Since(start))
	c.nodes[victim-1] = nil
	if slices.Contains(c.leaders(topic, partitions), victim) {
		t.Fatalf("node %d still leads after its controlled shutdown: %v", victim, c.leaders(topic, partitions))
	}

	during := produceKeyed(t, producer, topic, 1000)

	c.restart(victim)
	c.waitFor("node 2 back in every ISR", 30*time.Second, func() bool {
		back := true
		for p := range int32(partitions) {
			c.nodes[0].Call(func(b *broker.Node) {
				s, ok := b.Image().PartitionByName(topic, p)
				back = back && ok && slices.Contains(s.ISR, victim)
			})
		}
		return back
	})
	all := before
	for p, r := range during {
		all[p] = r
	}
	consumeAll(t, c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), topic, all)
}
