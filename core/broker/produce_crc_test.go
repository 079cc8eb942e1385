package broker

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/batch"
)

// TestProducedBatchesKeepValidCRCs guards the produce path's single CRC
// pass (log.AppendCheckedAsLeader trusts the CRC that CheckProduced or the
// pre-check verified and that SetMaxTimestamp recomputed): on a CreateTime
// topic and a LogAppendTime one, both checked on the loop (the simulator's
// way) and pre-checked (realnet's), it produces a batch whose header claims
// a wrong MaxTimestamp under a valid CRC (the broker rewrites the header and
// recomputes the CRC) and one with a flipped CRC. The second must be refused
// as CORRUPT_MESSAGE on every path; SetMaxTimestamp's recompute would
// otherwise bless it, and a LogAppendTime topic always rewrites. Every batch
// fetched back must pass the full batch.Verify, carry the timestamp type and
// MaxTimestamp the topic demands, and hold the records produced.
func TestProducedBatchesKeepValidCRCs(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopicWith("createtime", nil)
	c.createTopicWith("appendtime", map[string]string{"message.timestamp.type": "LogAppendTime"})
	tn := c.nodes[1]
	wrapper := &prechecking{node: tn.node}
	const firstTimestampMs = 1_767_225_600_000 // the sim clock's start
	build := func(value string) []byte {
		recs := make([]batch.Record, 5)
		for i := range recs {
			recs[i] = batch.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint(value, i)), TimestampDelta: int64(i)}
		}
		b := batch.Build(batch.BuildSpec{FirstTimestamp: firstTimestampMs, Records: recs})
		// A producer's wrong MaxTimestamp claim, under a valid CRC.
		binary.BigEndian.PutUint64(b[35:], uint64(firstTimestampMs+1000))
		binary.BigEndian.PutUint32(b[17:], batch.ComputeCRC(b))
		return b
	}
	wantValues := map[string][]string{}
	for _, topic := range []string{"createtime", "appendtime"} {
		for _, prechecked := range []bool{false, true} {
			if prechecked {
				tn.nn.SetHandler(wrapper)
			} else {
				tn.nn.SetHandler(tn.node)
			}
			value := fmt.Sprintf("%s-prechecked-%v-", topic, prechecked)
			if a := c.produce(1, topic, 0, 1, build(value)); a.ErrorCode != 0 {
				t.Fatalf("%s: the batch with a wrong MaxTimestamp claim: %v", value, kerr.ErrorForCode(a.ErrorCode))
			}
			for i := range 5 {
				wantValues[topic] = append(wantValues[topic], fmt.Sprint(value, i))
			}
			corrupt := build(value + "corrupt")
			corrupt[len(corrupt)-3] ^= 0x40 // a record byte: the CRC no longer matches
			if a := c.produce(1, topic, 0, 1, corrupt); a.ErrorCode != kerr.CorruptMessage.Code {
				t.Errorf("%s: a batch with a bad CRC answered %v, want CORRUPT_MESSAGE", value, kerr.ErrorForCode(a.ErrorCode))
			}
		}
	}
	tn.nn.SetHandler(tn.node)
	if wrapper.prechecked != 4 {
		t.Fatalf("%d produces reached the node pre-checked, want 4", wrapper.prechecked)
	}
	for _, topic := range []string{"createtime", "appendtime"} {
		fetched := c.fetch(1, topic, 0, 0).RecordBatches
		var got []string
		for rest := fetched; len(rest) > 0; {
			h, err := batch.ParseHeader(rest)
			if err != nil {
				t.Fatalf("%s: fetched bytes: %v", topic, err)
			}
			one := rest[:h.TotalBytes()]
			rest = rest[h.TotalBytes():]
			if _, err := batch.Verify(one); err != nil {
				t.Errorf("%s: stored batch at offset %d fails Verify: %v", topic, h.BaseOffset, err)
			}
			logAppendTime := h.Attributes&batch.AttrLogAppendTime != 0
			if logAppendTime != (topic == "appendtime") {
				t.Errorf("%s: stored batch at offset %d has the LogAppendTime attribute %v", topic, h.BaseOffset, logAppendTime)
			}
			if topic == "createtime" && h.MaxTimestamp != firstTimestampMs+4 {
				t.Errorf("%s: stored batch at offset %d has MaxTimestamp %d, want the records' largest %d", topic, h.BaseOffset, h.MaxTimestamp, firstTimestampMs+4)
			}
			got = append(got, values(t, one)...)
		}
		if !slices.Equal(got, wantValues[topic]) {
			t.Errorf("%s: fetched values %q, want %q", topic, got, wantValues[topic])
		}
	}
}
