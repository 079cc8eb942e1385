package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceLineBytesMax bounds one input line: a longer one is an error, not
// a silently split record.
const produceLineBytesMax = 16 << 20

// produce is `strand produce --topic T`, after kafka-console-producer.sh:
// each line of stdin becomes one record. With --key-separator a line is
// key, separator, value (parse.key=true key.separator=SEP), and a line
// without the separator is an error naming its number. It exits once every
// record is acknowledged, with status 1 at the first that is not.
func produce(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := newFlagSet("produce", stderr)
	cf := addClientFlags(flags)
	topic := flags.String("topic", "", "the topic to produce to")
	keySeparator := flags.String("key-separator", "", "split each line into key and value at the first SEP (default: no keys)")
	acks := flags.String("acks", "all", "acknowledgements: all (-1), 1 or 0")
	compression := flags.String("compression", "none", "compression codec: none, gzip, snappy, lz4 or zstd")
	partition := flags.Int("partition", -1, "produce every record to this partition (default: by key hash, else sticky)")
	if err := parseNoPositional(flags, args); err != nil {
		return finish("produce", stderr, err)
	}
	return finish("produce", stderr, produceLines(cf, *topic, *keySeparator, *acks, *compression, int32(*partition), stdin))
}

func produceLines(cf *clientFlags, topic, keySeparator, acks, compression string, partition int32, stdin io.Reader) error {
	if topic == "" {
		return usageErrorf("--topic is required")
	}
	opts, err := producerOptions(acks, compression, partition)
	if err != nil {
		return err
	}
	cl, err := cf.newClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	var firstErr error
	done := func(r *kgo.Record, err error) {
		if err == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = fmt.Errorf("producing to %s: %w", topic, err)
			cancel()
		}
	}
	// A line that cannot be read stops the reading, but the lines before
	// it are still sent and acknowledged, as Kafka's console producer's
	// close sends them: the error names the first line not sent.
	var inputErr error
	scanner := bufio.NewScanner(stdin)
	scanner.Buffer(make([]byte, 64<<10), produceLineBytesMax)
	for line := 1; scanner.Scan(); line++ {
		r := &kgo.Record{Partition: partition}
		text := scanner.Text()
		if keySeparator != "" {
			key, value, ok := strings.Cut(text, keySeparator)
			if !ok {
				inputErr = fmt.Errorf("line %d has no key separator %q; reading stopped there", line, keySeparator)
				break
			}
			r.Key = []byte(key)
			text = value
		}
		r.Value = []byte(text)
		cl.Produce(ctx, r, done)
	}
	if err := scanner.Err(); err != nil {
		inputErr = fmt.Errorf("reading stdin: %w", err)
	}
	flushCtx, flushCancel := cf.deadline()
	defer flushCancel()
	if err := cl.Flush(flushCtx); err != nil {
		return errors.Join(inputErr, fmt.Errorf("waiting for acknowledgements: %w", err))
	}
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(firstErr, inputErr)
}

// producerOptions maps the tool's flags to kgo options.
func producerOptions(acks, compression string, partition int32) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, usageErrorf("--acks %q: want all, -1, 1 or 0", acks)
	}
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	codec, ok := codecs[compression]
	if !ok {
		return nil, usageErrorf("--compression %q: want none, gzip, snappy, lz4 or zstd", compression)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts, nil
}
