package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// groupsUsage lists the groups subcommands.
const groupsUsage = `usage: strand groups <list|describe|reset> [flags]

  list                 every consumer group
  describe GROUP       per partition: current offset, log end offset, lag, member
  reset GROUP --topic T[:P,P...] (--to-earliest | --to-latest | --to-offset N) [--execute]
                       move the group's committed offsets; a dry run unless --execute

Every subcommand takes --bootstrap-server HOST:PORT (default 127.0.0.1:9092) and --timeout.
GROUP may also be given as --group GROUP.
`

// groups is `strand groups <subcommand>`, after kafka-consumer-groups.sh.
func groups(args []string, stdout, stderr io.Writer) int {
	return runSubcommand("groups", groupsUsage, []subcommand{
		{"list", groupsList},
		{"describe", groupsDescribe},
		{"reset", groupsReset},
	}, args, stdout, stderr)
}

func groupsList(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("groups list", stderr)
	cf := addClientFlags(flags)
	if err := parseNoPositional(flags, args); err != nil {
		return err
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("listing groups: %w", err)
	}
	for _, g := range listed.Groups() {
		fmt.Fprintln(stdout, g)
	}
	return nil
}

// groupArg takes the group from --group or the one positional argument.
func groupArg(flagValue string, positional []string) (string, error) {
	switch {
	case len(positional) > 1 || (len(positional) == 1 && flagValue != ""):
		return "", usageErrorf("give one group")
	case len(positional) == 1:
		return positional[0], nil
	case flagValue != "":
		return flagValue, nil
	}
	return "", usageErrorf("a group is required: strand groups <subcommand> GROUP")
}

func groupsDescribe(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("groups describe", stderr)
	cf := addClientFlags(flags)
	groupFlag := flags.String("group", "", "the group to describe")
	positional, err := parseInterspersed(flags, args)
	if err != nil {
		return &usageError{err.Error()}
	}
	group, err := groupArg(*groupFlag, positional)
	if err != nil {
		return err
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return fmt.Errorf("describing group %s: %w", group, err)
	}
	lag, ok := lags[group]
	if !ok {
		return fmt.Errorf("describing group %s: no answer for it", group)
	}
	err = lag.Error()
	if errors.Is(err, kerr.GroupIDNotFound) || (err == nil && lag.State == "Dead" && len(lag.Lag) == 0) {
		return fmt.Errorf("consumer group %s does not exist", group)
	}
	if err != nil {
		return fmt.Errorf("describing group %s: %w", group, err)
	}
	if len(lag.Members) == 0 {
		fmt.Fprintf(stdout, "Consumer group '%s' has no active members.\n\n", group)
	}
	w := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
	for _, l := range lag.Lag.Sorted() {
		if l.Err != nil {
			return fmt.Errorf("group %s, %s-%d: %w", group, l.Topic, l.Partition, l.Err)
		}
		current, end, behind := "-", "-", "-"
		if l.Commit.At >= 0 {
			current = strconv.FormatInt(l.Commit.At, 10)
		}
		if l.End.Offset >= 0 {
			end = strconv.FormatInt(l.End.Offset, 10)
		}
		if l.Commit.At >= 0 && l.Lag >= 0 {
			behind = strconv.FormatInt(l.Lag, 10)
		}
		member, host, client := "-", "-", "-"
		if l.Member != nil {
			member, host, client = l.Member.MemberID, l.Member.ClientHost, l.Member.ClientID
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", group, l.Topic, l.Partition, current, end, behind, member, host, client)
	}
	return w.Flush()
}

// resetTarget is where `groups reset` moves offsets.
type resetTarget struct {
	toEarliest, toLatest bool
	toOffset             int64
}

func groupsReset(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("groups reset", stderr)
	cf := addClientFlags(flags)
	groupFlag := flags.String("group", "", "the group whose offsets to reset")
	topicSpec := flags.String("topic", "", "the topic, optionally with partitions: T or T:0,1")
	var target resetTarget
	flags.BoolVar(&target.toEarliest, "to-earliest", false, "reset to each partition's earliest offset")
	flags.BoolVar(&target.toLatest, "to-latest", false, "reset to each partition's log end offset")
	flags.Int64Var(&target.toOffset, "to-offset", -1, "reset to this offset (clamped to each partition's range)")
	execute := flags.Bool("execute", false, "commit the new offsets (default: only show them)")
	flags.Bool("dry-run", false, "only show the new offsets (the default)")
	positional, err := parseInterspersed(flags, args)
	if err != nil {
		return &usageError{err.Error()}
	}
	group, err := groupArg(*groupFlag, positional)
	if err != nil {
		return err
	}
	chosen := 0
	for _, set := range []bool{target.toEarliest, target.toLatest, target.toOffset >= 0} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return usageErrorf("give exactly one of --to-earliest, --to-latest and --to-offset")
	}
	topic, partitionsWanted, err := parseTopicPartitions(*topicSpec)
	if err != nil {
		return err
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	if err := requireInactive(ctx, adm, group); err != nil {
		return err
	}
	offsets, err := resetOffsets(ctx, adm, topic, partitionsWanted, target)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
	for _, o := range offsets.Sorted() {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", group, o.Topic, o.Partition, o.At)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !*execute {
		fmt.Fprintln(stderr, "strand groups reset: dry run; add --execute to commit these offsets")
		return nil
	}
	resps, err := adm.CommitOffsets(ctx, group, offsets)
	if err != nil {
		return fmt.Errorf("committing offsets of group %s: %w", group, err)
	}
	if err := resps.Error(); err != nil {
		return fmt.Errorf("committing offsets of group %s: %w", group, err)
	}
	return nil
}

// parseTopicPartitions splits T or T:0,1,2.
func parseTopicPartitions(spec string) (string, []int32, error) {
	topic, list, hasList := strings.Cut(spec, ":")
	if topic == "" {
		return "", nil, usageErrorf("--topic is required")
	}
	var partitions []int32
	if hasList {
		for _, s := range strings.Split(list, ",") {
			p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || p < 0 {
				return "", nil, usageErrorf("--topic %q: partition %q is not a partition number", spec, s)
			}
			partitions = append(partitions, int32(p))
		}
	}
	return topic, partitions, nil
}

// requireInactive fails unless the group has no members, as Kafka's tool
// requires: a live member would overwrite the reset with its next commit.
func requireInactive(ctx context.Context, adm *kadm.Client, group string) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describing group %s: %w", group, err)
	}
	d := described[group]
	if d.Err != nil {
		return fmt.Errorf("describing group %s: %w%s", group, d.Err, detail(d.ErrMessage))
	}
	if d.State != "Empty" && d.State != "Dead" {
		return fmt.Errorf("offsets can only be reset if group %s is inactive, but it is %s", group, d.State)
	}
	return nil
}

// resetOffsets computes the new offset of every chosen partition of topic
// (every partition when wanted is empty).
func resetOffsets(ctx context.Context, adm *kadm.Client, topic string, wanted []int32, target resetTarget) (kadm.Offsets, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	if len(ends[topic]) == 0 {
		return nil, fmt.Errorf("topic %s does not exist", topic)
	}
	if len(wanted) == 0 {
		for p := range ends[topic] { // order-independent: offsets are keyed by partition
			wanted = append(wanted, p)
		}
	}
	offsets := kadm.Offsets{}
	for _, p := range wanted {
		start, okStart := starts.Lookup(topic, p)
		end, okEnd := ends.Lookup(topic, p)
		if !okStart || !okEnd {
			return nil, fmt.Errorf("topic %s has no partition %d", topic, p)
		}
		if start.Err != nil || end.Err != nil {
			return nil, fmt.Errorf("offsets of %s-%d: %w", topic, p, firstError(start.Err, end.Err))
		}
		at := end.Offset
		switch {
		case target.toEarliest:
			at = start.Offset
		case target.toOffset >= 0:
			at = min(max(target.toOffset, start.Offset), end.Offset)
		}
		offsets.AddOffset(topic, p, at, -1)
	}
	return offsets, nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
