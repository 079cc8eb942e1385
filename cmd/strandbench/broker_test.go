package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
	"strand/core/config"
)

func TestWalkBatches(t *testing.T) {
	build := func(base int64, records int) []byte {
		recs := make([]batch.Record, records)
		for i := range recs {
			recs[i] = batch.Record{Value: []byte("v")}
		}
		return batch.Build(batch.BuildSpec{BaseOffset: base, FirstTimestamp: 1, Records: recs})
	}
	first, second := build(10, 3), build(13, 5)
	whole := append(append([]byte(nil), first...), second...)
	if next, n := walkBatches(whole, 10); next != 18 || n != int64(len(whole)) {
		t.Errorf("two whole batches: next %d, bytes %d; want 18, %d", next, n, len(whole))
	}
	// A partial second batch, as a fetch cut at max bytes returns.
	cut := whole[:len(first)+len(second)/2]
	if next, n := walkBatches(cut, 10); next != 13 || n != int64(len(first)) {
		t.Errorf("one whole batch and a partial one: next %d, bytes %d; want 13, %d", next, n, len(first))
	}
	if next, n := walkBatches(nil, 7); next != 7 || n != 0 {
		t.Errorf("no batches: next %d, bytes %d; want 7, 0", next, n)
	}
}

func TestProcessCPUAndMemoryOfSelf(t *testing.T) {
	before, err := processCPUOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin for 150 ms of this process's CPU time (getrusage), however busy
	// the machine is.
	for spinStart := processCPU(); processCPU()-spinStart < 150*time.Millisecond; {
	}
	after, err := processCPUOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if spent := after - before; spent < 100*time.Millisecond {
		t.Errorf("/proc/self/stat: %v of CPU over 150 ms of spinning", spent)
	}
	// /proc's ticks and getrusage agree to within a few ticks.
	if diff := (processCPU() - after).Abs(); diff > 100*time.Millisecond {
		t.Errorf("/proc/<pid>/stat %v, getrusage %v", after, processCPU())
	}
	anon, err := rssAnonKiB(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	selfAnon, _, err := memoryKiB()
	if err != nil {
		t.Fatal(err)
	}
	if anon <= 0 || anon > 2*selfAnon+1024 {
		t.Errorf("RssAnon from /proc/<pid>/status %d KiB, from /proc/self/status %d KiB", anon, selfAnon)
	}
}

func TestStrandNodePropertiesParse(t *testing.T) {
	for _, voters := range []int{1, 3} {
		clientPorts, controllerPorts := []int{9001, 9002, 9003}, []int{9101, 9102, 9103}
		for id := 1; id <= 3; id++ {
			text := strandNodeProperties(id, voters, clientPorts, controllerPorts, "/tmp/data")
			b, warnings, err := config.Parse([]byte(text), nil)
			if err != nil || len(warnings) > 0 {
				t.Fatalf("node %d of %d voters: %v, warnings %v\n%s", id, voters, err, warnings, text)
			}
			if int(b.NodeID) != id || b.DefaultReplicationFactor != 3 {
				t.Errorf("node %d: node.id %d, default.replication.factor %d", id, b.NodeID, b.DefaultReplicationFactor)
			}
			if isController := strings.Contains(text, "broker,controller"); isController != (id <= voters) {
				t.Errorf("node %d of %d voters: controller %v", id, voters, isController)
			}
		}
	}
}

func TestPercentile(t *testing.T) {
	var sorted []time.Duration
	for i := 1; i <= 100; i++ {
		sorted = append(sorted, time.Duration(i))
	}
	if p50, p99 := percentile(sorted, 0.5), percentile(sorted, 0.99); p50 != 50 || p99 != 99 {
		t.Errorf("1..100: p50 %d, p99 %d; want 50, 99", p50, p99)
	}
	if p := percentile(sorted[:1], 0.99); p != 1 {
		t.Errorf("one value: p99 %d", p)
	}
}

// TestRawConsumerReadsWhatWasProduced runs the raw consumer against an
// in-process kfake: it must reach the end offset and count every batch byte.
func TestRawConsumerReadsWhatWasProduced(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	c := &cluster{name: "kfake", bootstrap: fake.ListenAddrs()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap...), kgo.DefaultProduceTopic("t"), kgo.ProducerBatchMaxBytes(16<<10),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const records = 2000
	var rs []*kgo.Record
	for range records {
		rs = append(rs, &kgo.Record{Value: recordValue(100)})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	raw, err := consumeRaw(c, "t", records)
	if err != nil {
		t.Fatal(err)
	}
	if raw.records != records || raw.bytes < records*100 {
		t.Errorf("raw consumer: %d records, %d bytes; want %d records of at least 100 bytes", raw.records, raw.bytes, records)
	}
	k, err := consumeKgo(c, "t", records)
	if err != nil {
		t.Fatal(err)
	}
	if k.records != records || k.bytes != records*100 {
		t.Errorf("kgo consumer: %d records, %d bytes; want %d of 100 bytes", k.records, k.bytes, records)
	}
}

func TestLoopbackBandwidthMovesBytes(t *testing.T) {
	r, err := loopbackBandwidth(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.bytes < loopbackWriteBytes || r.elapsed < 50*time.Millisecond {
		t.Errorf("loopback: %v", r)
	}
}

// TestRawProducerAppendsWhatItCounts runs the raw producer against an
// in-process kfake and reads back exactly the records it counted.
func TestRawProducerAppendsWhatItCounts(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	c := &cluster{name: "kfake", bootstrap: fake.ListenAddrs()}
	p, err := produceRaw(c, "t", 100, 100*time.Millisecond, rawProducer{acks: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Idempotent batches must carry consecutive sequences: kfake rejects
	// a gap (OUT_OF_ORDER_SEQUENCE_NUMBER) and a stale CRC.
	idem, err := produceRaw(c, "t", 100, 100*time.Millisecond, rawProducer{acks: -1, idempotent: true})
	if err != nil {
		t.Fatal(err)
	}
	p.records += idem.records
	if idem.records == 0 || p.records%rawProduceBatchRecords != 0 {
		t.Fatalf("raw producer: %d records, %d value bytes", p.records, p.valueBytes)
	}
	k, err := consumeKgo(c, "t", p.records)
	if err != nil {
		t.Fatal(err)
	}
	if k.records != p.records {
		t.Errorf("read back %d records of the %d produced", k.records, p.records)
	}
}

// TestBrokerGoalsTreatSupersededGoalAsInfo: with every goal met and (a)'s
// 100-byte throughput 1.2× kfake's (CLARIFICATIONS.md's ≥ 1× met, the
// issue's superseded ≥ 2× not), the goals are met and the ≥ 2× line says
// "info"; so does the line of (b)'s p99 over the null broker's median
// (1 ms over 0.5 ms), and those of (b)'s p99 at lower rates, which do not
// fail the run however high; one goal missed (CPU per record) still fails
// the run.
func TestBrokerGoalsTreatSupersededGoalAsInfo(t *testing.T) {
	goals := func(kfakeCPUSec float64) (bool, string) {
		produced := func(recordsPerSec, cpuSecPerMillion float64) []produceResult {
			p := produceResult{records: 1_000_000, elapsed: time.Duration(1e6 / recordsPerSec * float64(time.Second)),
				brokerCPU: time.Duration(cpuSecPerMillion * float64(time.Second))}
			return []produceResult{p, p, p}
		}
		consumed := func(r *caseResults) {
			for range valueSizes {
				r.rawConsume = append(r.rawConsume, []consumeResult{{bytes: 800e6, elapsed: time.Second}})
				r.loopback = append(r.loopback, []run{{bytes: 1000e6, elapsed: time.Second}})
			}
		}
		a := &caseResults{c: brokerCase{label: "(a)"}, rssAnonMaxKiB: 100 << 10, idempotenceCPURatio: 1}
		b := &caseResults{c: brokerCase{label: "(b)"}, rssAnonMaxKiB: 100 << 10, latency: latencyResult{p99: time.Millisecond},
			floorRuns:            []latencyResult{{p99: time.Millisecond / 4}, {p99: 2 * time.Millisecond}, {p99: time.Millisecond / 2}},
			latencyBelowHalfPeak: []latencyResult{{p99: 8 * time.Millisecond, ratePerSec: 250_000}, {p99: 9 * time.Millisecond, ratePerSec: 125_000}}}
		kfake := &caseResults{c: brokerCase{label: "kfake"}}
		for range valueSizes {
			a.produce = append(a.produce, produced(1_200_000, 0.4))
			kfake.produce = append(kfake.produce, produced(1_000_000, kfakeCPUSec))
			b.produce = append(b.produce, produced(500_000, 1))
		}
		consumed(a)
		consumed(b)
		var out strings.Builder
		met := printBrokerGoals(&out, []*caseResults{a, b, kfake})
		return met, out.String()
	}
	met, out := goals(1)
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "(a) produce 100 B / kfake ") && strings.Contains(l, ">= 2") {
			line = l
		}
	}
	if !met || !strings.Contains(line, "1.20") || !strings.HasSuffix(strings.TrimSpace(line), "info") || !strings.Contains(line, "superseded") {
		t.Errorf("met %v, superseded goal's line %q; want met, 1.20, info:\n%s", met, line, out)
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("a goal failed:\n%s", out)
	}
	var floorLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "(b) acks=all p99 / the null broker's") {
			floorLine = l
		}
	}
	if !strings.Contains(floorLine, "2.00 (limit p99 0.50 ms)") || !strings.HasSuffix(strings.TrimSpace(floorLine), "info") {
		t.Errorf("the latency limit's line %q; want a ratio of 2.00 to 0.50 ms, info:\n%s", floorLine, out)
	}
	for _, want := range []string{"(b) acks=all p99 at 1/4 of the peak", "(b) acks=all p99 at 1/8 of the peak"} {
		var lowerLine string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, want) {
				lowerLine = l
			}
		}
		if !strings.HasSuffix(strings.TrimSpace(lowerLine), "info") || !strings.Contains(lowerLine, " ms at ") {
			t.Errorf("the line %q: %q; want its p99 and rate, info:\n%s", want, lowerLine, out)
		}
	}
	if met, out := goals(0.5); met || !strings.Contains(out, "FAIL") {
		t.Errorf("CPU per record 0.8× kfake's reported met %v:\n%s", met, out)
	}
}

func TestMeminfoKiBReadsTheNamedField(t *testing.T) {
	meminfo := "MemTotal:       24684152 kB\nDirty:             81236 kB\nWriteback:             0 kB\n"
	if got, err := meminfoKiB(meminfo, "Dirty"); err != nil || got != 81236 {
		t.Errorf("Dirty: %d, %v; want 81236", got, err)
	}
	if got, err := meminfoKiB(meminfo, "Writeback"); err != nil || got != 0 {
		t.Errorf("Writeback: %d, %v; want 0", got, err)
	}
	if _, err := meminfoKiB(meminfo, "Dirt"); err == nil {
		t.Error("a field name that is only a prefix of another was found")
	}
}

// TestRawProducerProducesAFixedCount: with batches set the raw producer
// produces exactly that many, however fast; awaiting the log on a partition
// whose log files never grow (kfake writes none; an empty directory stands
// in for a node's) fails by the run's time limit, naming the bytes.
func TestRawProducerProducesAFixedCount(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	c := &cluster{name: "kfake", bootstrap: fake.ListenAddrs()}
	for _, idempotent := range []bool{false, true} {
		p, err := produceRaw(c, "t", 100, 10*time.Second, rawProducer{acks: -1, idempotent: idempotent, batches: 7})
		if err != nil {
			t.Fatal(err)
		}
		if p.records != 7*rawProduceBatchRecords {
			t.Errorf("idempotent %v: %d records; want %d", idempotent, p.records, 7*rawProduceBatchRecords)
		}
	}
	c.dataDirs = []string{t.TempDir()}
	start := time.Now()
	_, err = produceRaw(c, "t", 100, 300*time.Millisecond, rawProducer{acks: -1, batches: 2, awaitWritten: true})
	if err == nil || !strings.Contains(err.Error(), "0 of the ") {
		t.Errorf("awaiting a log that never grows: %v; want the bytes written named", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("gave up after %s; want about the run's 300 ms limit", waited)
	}
}

// TestSummedCPUPerRecordRatioWeighsRunsByRecords: the ratio is of the
// sides' summed CPU over their summed records, not a mean of the runs'
// own figures, and the pairs alternate which side goes first.
func TestSummedCPUPerRecordRatioWeighsRunsByRecords(t *testing.T) {
	run := func(records int64, cpuMs int) produceResult {
		return produceResult{records: records, brokerCPU: time.Duration(cpuMs) * time.Millisecond}
	}
	// Subject: 0.3 s for 3 M records; limit: 0.1 s per M over 1 M, 0.5 s
	// per M over another 1 M, so 0.3 s for 2 M: 0.1 / 0.15.
	subject := []produceResult{run(1e6, 100), run(2e6, 200)}
	limit := []produceResult{run(1e6, 100), run(1e6, 200)}
	if got, want := summedCPUPerRecordRatio(subject, limit), 0.1/0.15; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("ratio %.6f; want %.6f", got, want)
	}
	firsts := 0
	for pair := 1; pair <= idempotencePairs; pair++ {
		order := idempotenceOrder(pair)
		if len(order) != 2 || order[0] == order[1] {
			t.Fatalf("pair %d runs %v; want one idempotent and one not", pair, order)
		}
		if order[0] {
			firsts++
		}
	}
	if firsts != idempotencePairs/2 {
		t.Errorf("idempotent first in %d of %d pairs; want half", firsts, idempotencePairs)
	}
}

// TestDeleteTopicsDeletesThem: on kfake (which speaks DeleteTopics v6,
// where topics are named in Topics, not TopicNames) the topics deleted are
// gone from the metadata, and the one kept is not.
func TestDeleteTopicsDeletesThem(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b", "kept"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	c := &cluster{name: "kfake", bootstrap: fake.ListenAddrs(), dataDirs: []string{t.TempDir()}}
	if err := c.deleteTopics("a", "b"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, topic := range resp.Topics {
		names = append(names, *topic.Topic)
	}
	if len(names) != 1 || names[0] != "kept" {
		t.Errorf("topics after deleting a and b: %v; want [kept]", names)
	}
}
