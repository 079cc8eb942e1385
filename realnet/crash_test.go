package realnet

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKillLeaderDuringAcksAll kills (without any shutdown) a broker that
// leads partitions of an RF-3 topic while a kgo producer writes with
// acks=all. Every acknowledged record must be read back afterwards at the
// position its acknowledgement gave; records written more than once because
// the client retried are allowed (idempotence is off) and reported.
func TestKillLeaderDuringAcksAll(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	const topic, partitions = "crash", 3
	c.createTopic(topic, partitions, 3)
	victim := 0
	for _, l := range c.leaders(topic, partitions) {
		if l != 1 { // node 1 is the only controller: killing it stops the cluster
			victim = int(l)
		}
	}
	if victim == 0 {
		t.Fatalf("no partition led by a broker other than the controller: %v", c.leaders(topic, partitions))
	}

	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(40*time.Second))
	const total, killAfter = 6000, 2000
	var mu sync.Mutex
	acked := map[position]producedRecord{}
	failed := 0
	killNow := make(chan struct{})
	var wg sync.WaitGroup
	ctx := context.Background()
	for i := range total {
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "value-%d", i)}
		wg.Add(1)
		producer.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			acked[position{r.Partition, r.Offset}] = producedRecord{key: r.Key, value: r.Value}
			if len(acked) == killAfter {
				close(killNow)
			}
		})
		if i%100 == 99 {
			time.Sleep(5 * time.Millisecond) // keep production going across the kill
		}
		if i == total/2 {
			<-killNow
			c.nodes[victim-1].Kill()
			c.nodes[victim-1] = nil
			t.Logf("killed node %d after %d acknowledged records", victim, killAfter)
		}
	}
	wg.Wait()
	t.Logf("%d acknowledged, %d failed after retries", len(acked), failed)
	if len(acked) < total/2 {
		t.Fatalf("only %d of %d records acknowledged: the cluster did not recover from the kill", len(acked), total)
	}

	// Every acknowledged record is at its position; count duplicates.
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	readCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	found := 0
	copies := map[string]int{}
	for found < len(acked) {
		fetches := consumer.PollFetches(readCtx)
		if readCtx.Err() != nil {
			t.Fatalf("read %d of %d acknowledged records before the deadline", found, len(acked))
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("consume: partition %d: %v", fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			copies[string(r.Key)]++
			w, ok := acked[position{r.Partition, r.Offset}]
			if !ok {
				return // written but not acknowledged, or a retried copy
			}
			if !bytes.Equal(w.key, r.Key) || !bytes.Equal(w.value, r.Value) {
				t.Fatalf("partition %d offset %d: read %q=%q, acknowledged %q=%q", r.Partition, r.Offset, r.Key, r.Value, w.key, w.value)
			}
			found++
		})
	}
	duplicates := 0
	for _, n := range copies { // order-independent: a sum
		duplicates += n - 1
	}
	t.Logf("every acknowledged record read back; %d duplicate copies from client retries", duplicates)
}
