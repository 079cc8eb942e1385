package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeOptions are the flags of `strand consume`.
type consumeOptions struct {
	topic         string
	fromBeginning bool
	offset        int64
	timestampMs   int64
	partition     int
	maxMessages   int
	group         string
	printKey      bool
	keySeparator  string
	idleTimeout   time.Duration
}

// consume is `strand consume --topic T`, after kafka-console-consumer.sh:
// it prints each record's value (with --print-key, key TAB value) on its
// own line, starting at the end of each partition unless --from-beginning,
// --offset or --timestamp says otherwise, and stops after --max-messages
// records, after --timeout-ms without one, or on SIGINT/SIGTERM. With
// --group it consumes as a member of that group and commits what it
// printed; its start position then comes from the group's commits, and
// --from-beginning picks where a group without commits starts.
func consume(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return consumeUntil(ctx, args, stdout, stderr)
}

// consumeUntil is consume with the stop signal given as ctx.
func consumeUntil(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("consume", stderr)
	cf := addClientFlags(flags)
	var o consumeOptions
	flags.StringVar(&o.topic, "topic", "", "the topic to consume")
	flags.BoolVar(&o.fromBeginning, "from-beginning", false, "start at the earliest offset")
	flags.Int64Var(&o.offset, "offset", -1, "start at this offset (in --partition, or in every partition)")
	flags.Int64Var(&o.timestampMs, "timestamp", -1, "start at the first record with a timestamp at or after this many ms since the epoch")
	flags.IntVar(&o.partition, "partition", -1, "consume only this partition")
	flags.IntVar(&o.maxMessages, "max-messages", 0, "stop after this many records (default: no limit)")
	flags.StringVar(&o.group, "group", "", "consume as a member of this consumer group, committing offsets")
	flags.BoolVar(&o.printKey, "print-key", false, "print each record's key before its value")
	flags.StringVar(&o.keySeparator, "key-separator", "\t", "what --print-key puts between key and value")
	timeoutMs := flags.Int64("timeout-ms", 0, "stop when no record arrives for this many ms (default: wait forever)")
	if err := parseNoPositional(flags, args); err != nil {
		return finish("consume", stderr, err)
	}
	o.idleTimeout = time.Duration(*timeoutMs) * time.Millisecond
	printed, err := consumeRecords(ctx, cf, o, stdout)
	if err == nil {
		fmt.Fprintf(stderr, "Processed a total of %d messages\n", printed)
	}
	return finish("consume", stderr, err)
}

// startOffset is where a consumer without a group starts.
func (o consumeOptions) startOffset() (kgo.Offset, error) {
	chosen := 0
	for _, set := range []bool{o.fromBeginning, o.offset >= 0, o.timestampMs >= 0} {
		if set {
			chosen++
		}
	}
	if chosen > 1 {
		return kgo.Offset{}, usageErrorf("give at most one of --from-beginning, --offset and --timestamp")
	}
	switch {
	case o.fromBeginning:
		return kgo.NewOffset().AtStart(), nil
	case o.offset >= 0:
		return kgo.NewOffset().At(o.offset), nil
	case o.timestampMs >= 0:
		return kgo.NewOffset().AfterMilli(o.timestampMs), nil
	}
	return kgo.NewOffset().AtEnd(), nil
}

// consumeRecords prints records as consume describes and returns how many
// it printed.
func consumeRecords(ctx context.Context, cf *clientFlags, o consumeOptions, stdout io.Writer) (int, error) {
	if o.topic == "" {
		return 0, usageErrorf("--topic is required")
	}
	start, err := o.startOffset()
	if err != nil {
		return 0, err
	}
	// A group member's --timeout-ms idle clock starts at its first
	// assignment: joining takes a rebalance (and the coordinator's
	// group.initial.rebalance.delay.ms for a new group).
	var assigned atomic.Bool
	assigned.Store(o.group == "")
	var opts []kgo.Opt
	switch {
	case o.group != "":
		if o.partition >= 0 || o.offset >= 0 || o.timestampMs >= 0 {
			return 0, usageErrorf("--group cannot be combined with --partition, --offset or --timestamp (use `strand groups reset`)")
		}
		opts = append(opts, kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(o.topic),
			kgo.ConsumeResetOffset(start), kgo.AutoCommitMarks(),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned.Store(true) }))
	case o.partition >= 0:
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: {int32(o.partition): start}}))
	default:
		partitions, err := partitionsOf(ctx, cf, o.topic)
		if err != nil {
			return 0, err
		}
		offsets := map[int32]kgo.Offset{}
		for _, p := range partitions {
			offsets[p] = start
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: offsets}))
	}
	cl, err := cf.newClient(opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	printed, startedAt := 0, time.Now()
	for o.maxMessages <= 0 || printed < o.maxMessages {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if o.idleTimeout > 0 {
			pollCtx, cancel = context.WithTimeout(ctx, o.idleTimeout)
		}
		fetches := cl.PollRecords(pollCtx, o.maxMessages-printed)
		cancel()
		if fetches.IsClientClosed() {
			break
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && fetchErr == nil {
				fetchErr = fmt.Errorf("fetching %s-%d: %w", topic, p, err)
			}
		})
		if fetchErr != nil {
			return printed, fetchErr
		}
		records := fetches.Records()
		for _, r := range records {
			if o.maxMessages > 0 && printed == o.maxMessages {
				break
			}
			if o.printKey {
				out.Write(r.Key)
				out.WriteString(o.keySeparator)
			}
			out.Write(r.Value)
			out.WriteByte('\n')
			printed++
			if o.group != "" {
				cl.MarkCommitRecords(r)
			}
		}
		if ctx.Err() != nil {
			break // stopped
		}
		if len(records) == 0 && pollCtx.Err() != nil {
			if !assigned.Load() {
				if time.Since(startedAt) < cf.timeout {
					continue
				}
				return printed, fmt.Errorf("group %s: no partitions assigned within --timeout %v", o.group, cf.timeout)
			}
			break // idle for --timeout-ms
		}
	}
	if err := out.Flush(); err != nil {
		return printed, fmt.Errorf("writing stdout: %w", err)
	}
	if o.group != "" {
		commitCtx, cancel := cf.deadline()
		defer cancel()
		if err := cl.CommitMarkedOffsets(commitCtx); err != nil {
			return printed, fmt.Errorf("committing offsets of group %s: %w", o.group, err)
		}
	}
	return printed, nil
}

// partitionsOf lists a topic's partitions, failing if it does not exist.
func partitionsOf(ctx context.Context, cf *clientFlags, topic string) ([]int32, error) {
	cl, err := cf.newClient()
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	metaCtx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	details, err := adm.ListTopicsWithInternal(metaCtx, topic)
	if err != nil {
		return nil, fmt.Errorf("looking up topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok {
		return nil, fmt.Errorf("topic %s does not exist", topic)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, d.Err)
	}
	var partitions []int32
	for _, p := range d.Partitions.Sorted() {
		partitions = append(partitions, p.Partition)
	}
	return partitions, nil
}
