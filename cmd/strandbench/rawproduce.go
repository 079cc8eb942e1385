package main

// The raw producer of the broker section: Produce requests of one prebuilt
// record batch each, pipelined on a plain TCP connection to the partition's
// leader; idempotent or not. It costs the client almost nothing per record, so its
// figure is the broker's capacity where kgo's is the client's (one kgo
// producer spends about twice the broker's CPU per record). Informational:
// the goals are on kgo.

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

const (
	// rawProduceVersion is the Produce version the raw producer speaks
	// (flexible, response header v1).
	rawProduceVersion = 9
	// rawProduceBatchRecords is the records per batch, about what kgo's
	// 10 ms linger gathers at a few hundred thousand records/s.
	rawProduceBatchRecords = 1000
	// rawProduceInFlight is the requests in flight, kgo's idempotent
	// maximum.
	rawProduceInFlight = 5
)

// rawProducer says how the raw producer produces.
type rawProducer struct {
	// acks is the Produce request's acks: 1, or -1 for all.
	acks int16
	// idempotent gets a producer id (InitProducerId) and numbers each
	// batch's records on from the last (which needs acks=-1).
	idempotent bool
	// batches, if above zero, is how many batches the run produces: the
	// run's duration is then its time limit, and a run past it fails.
	// Zero produces for the duration.
	batches int
	// awaitWritten ends the run, and reads the broker's CPU, only once the
	// broker has written every acknowledged batch to the partition's log
	// files: a Strand leader acknowledges a batch once it is queued for its
	// write worker, whose pwritev of the run's last batches would otherwise
	// be billed to the next run. One-node Strand clusters only
	// (cluster.logBytes adds up every node's replica), and a partition
	// nothing else writes to.
	awaitWritten bool
}

// Kafka's RecordBatch v2 layout: where the CRC-32C and the base sequence
// lie. The CRC covers the base sequence, so each idempotent batch gets its
// sequence and then its CRC written in place.
const (
	crcOffset          = 17
	baseSequenceOffset = 53
)

// produceRaw produces batches of rawProduceBatchRecords records of
// valueBytes to partition 0 of topic for duration, or how.batches of them
// within it.
func produceRaw(c *cluster, topic string, valueBytes int, duration time.Duration, how rawProducer) (produceResult, error) {
	leader, err := leaderOf(c, topic)
	if err != nil {
		return produceResult{}, err
	}
	spec := batch.BuildSpec{FirstTimestamp: time.Now().UnixMilli()}
	if how.idempotent {
		if spec.ProducerID, spec.ProducerEpoch, err = initProducerID(c); err != nil {
			return produceResult{}, err
		}
		spec.Idempotent = true
	}
	conn, err := net.Dial("tcp", leader)
	if err != nil {
		return produceResult{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(duration + time.Minute)); err != nil {
		return produceResult{}, err
	}
	records := make([]batch.Record, rawProduceBatchRecords)
	value := recordValue(valueBytes)
	for i := range records {
		records[i] = batch.Record{Value: value}
	}
	spec.Records = records
	recordBatch := batch.Build(spec)
	sequence := int32(0)

	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("strandbench-raw"))
	var request []byte
	response := make([]byte, 64<<10)
	send := func(correlationID int32) error {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = rawProduceVersion, how.acks, 30000
		if how.idempotent {
			binary.BigEndian.PutUint32(recordBatch[baseSequenceOffset:], uint32(sequence))
			binary.BigEndian.PutUint32(recordBatch[crcOffset:], batch.ComputeCRC(recordBatch))
			sequence += rawProduceBatchRecords
		}
		t := kmsg.NewProduceRequestTopic()
		t.Topic = topic
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = 0, recordBatch
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		// AppendRequest copies the batch: the next one may change it.
		request = formatter.AppendRequest(request[:0], req, correlationID)
		_, err := conn.Write(request)
		return err
	}
	receive := func(correlationID int32) error {
		body, err := readResponse(conn, &response, correlationID)
		if err != nil {
			return err
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = rawProduceVersion
		if err := resp.ReadFrom(body); err != nil {
			return fmt.Errorf("raw produce: %w", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("raw produce: response for %d topics", len(resp.Topics))
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			return fmt.Errorf("raw produce to %s on %s: error code %d", topic, c.name, code)
		}
		return nil
	}
	var loggedBefore int64
	if how.awaitWritten {
		if loggedBefore, err = c.logBytes(topic); err != nil {
			return produceResult{}, err
		}
	}
	brokerCPUStart, err := c.cpu()
	if err != nil {
		return produceResult{}, err
	}
	start, clientCPUStart := time.Now(), processCPU()
	deadline := start.Add(duration)
	var sent, received int32
	more := func() bool {
		if how.batches > 0 {
			return int(sent) < how.batches
		}
		return time.Now().Before(deadline)
	}
	for more() || received < sent {
		if how.batches > 0 && time.Now().After(deadline) {
			return produceResult{}, fmt.Errorf("raw produce to %s on %s: %d of %d batches acknowledged in %s", topic, c.name, received, how.batches, duration)
		}
		if sent-received < rawProduceInFlight && more() {
			sent++
			if err := send(sent); err != nil {
				return produceResult{}, err
			}
			continue
		}
		received++
		if err := receive(received); err != nil {
			return produceResult{}, err
		}
	}
	elapsed, clientCPU := time.Since(start), processCPU()-clientCPUStart
	if how.awaitWritten {
		if err := awaitLogged(c, topic, loggedBefore+int64(received)*int64(len(recordBatch)), deadline); err != nil {
			return produceResult{}, err
		}
	}
	brokerCPUEnd, err := c.cpu()
	if err != nil {
		return produceResult{}, err
	}
	n := int64(received) * rawProduceBatchRecords
	return produceResult{records: n, valueBytes: n * int64(valueBytes), elapsed: elapsed,
		brokerCPU: brokerCPUEnd - brokerCPUStart, clientCPU: clientCPU}, nil
}

// awaitLogged waits until topic's log files on c hold at least bytes, and
// fails if they do not by deadline.
func awaitLogged(c *cluster, topic string, bytes int64, deadline time.Time) error {
	for {
		logged, err := c.logBytes(topic)
		if err != nil {
			return err
		}
		if logged >= bytes {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raw produce to %s on %s: %d of the %d bytes acknowledged are in its log files", topic, c.name, logged, bytes)
		}
		time.Sleep(time.Millisecond)
	}
}

// initProducerID gets a producer id and epoch for an idempotent producer.
func initProducerID(c *cluster) (int64, int16, error) {
	cl, ctx, done, err := c.adminClient(10 * time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil {
		return 0, 0, fmt.Errorf("InitProducerId on %s: %w", c.name, err)
	}
	if resp.ErrorCode != 0 {
		return 0, 0, fmt.Errorf("InitProducerId on %s: error code %d", c.name, resp.ErrorCode)
	}
	return resp.ProducerID, resp.ProducerEpoch, nil
}
