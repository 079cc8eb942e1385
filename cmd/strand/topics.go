package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicsUsage lists the topics subcommands.
const topicsUsage = `usage: strand topics <create|list|describe|delete|alter-config> [flags]

  create        --topic T [--partitions N] [--replication-factor N] [--config k=v ...] [--if-not-exists]
  list          [--exclude-internal]
  describe      [--topic T]   partitions, leader, replicas, ISR and non-default configs
  delete        --topic T [--if-exists]
  alter-config  --topic T [--add-config k=v,k2=[a,b]] [--config k=v ...] [--delete-config k ...]
                [--append-config k=v ...] [--subtract-config k=v ...]   (IncrementalAlterConfigs)

Every subcommand takes --bootstrap-server HOST:PORT (default 127.0.0.1:9092) and --timeout.
`

// topics is `strand topics <subcommand>`, after kafka-topics.sh (and
// kafka-configs.sh for alter-config).
func topics(args []string, stdout, stderr io.Writer) int {
	return runSubcommand("topics", topicsUsage, []subcommand{
		{"create", topicsCreate},
		{"list", topicsList},
		{"describe", topicsDescribe},
		{"delete", topicsDelete},
		{"alter-config", topicsAlterConfig},
	}, args, stdout, stderr)
}

func topicsCreate(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("topics create", stderr)
	cf := addClientFlags(flags)
	topic := flags.String("topic", "", "the topic to create")
	partitions := flags.Int("partitions", -1, "number of partitions (default: the broker's num.partitions)")
	replicationFactor := flags.Int("replication-factor", -1, "replicas per partition (default: the broker's default.replication.factor)")
	ifNotExists := flags.Bool("if-not-exists", false, "succeed if the topic exists already")
	var configs keyValues
	flags.Var(&configs, "config", "a topic config override, key=value (repeatable)")
	if err := parseNoPositional(flags, args); err != nil {
		return err
	}
	if *topic == "" {
		return usageErrorf("--topic is required")
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	overrides := map[string]*string{}
	for _, kv := range configs {
		if _, dup := overrides[kv.key]; dup {
			return usageErrorf("--config %s given twice", kv.key)
		}
		overrides[kv.key] = &kv.value
	}
	resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*replicationFactor), overrides, *topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		if *ifNotExists && errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return fmt.Errorf("creating topic %s: %w%s", *topic, err, detail(resp.ErrMessage))
	}
	fmt.Fprintf(stdout, "Created topic %s.\n", *topic)
	return nil
}

// detail formats a broker's error message after an error code.
func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func topicsList(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("topics list", stderr)
	cf := addClientFlags(flags)
	excludeInternal := flags.Bool("exclude-internal", false, "leave out internal topics such as __consumer_offsets")
	if err := parseNoPositional(flags, args); err != nil {
		return err
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	details, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return fmt.Errorf("listing topics: %w", err)
	}
	if *excludeInternal {
		details.FilterInternal()
	}
	for _, name := range details.Names() {
		fmt.Fprintln(stdout, name)
	}
	return nil
}

func topicsDescribe(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("topics describe", stderr)
	cf := addClientFlags(flags)
	topic := flags.String("topic", "", "the topic to describe (default: every topic)")
	if err := parseNoPositional(flags, args); err != nil {
		return err
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	var details kadm.TopicDetails
	if *topic != "" {
		details, err = adm.ListTopicsWithInternal(ctx, *topic)
	} else {
		details, err = adm.ListTopics(ctx)
	}
	if err != nil {
		return fmt.Errorf("describing topics: %w", err)
	}
	for _, d := range details.Sorted() {
		if d.Err != nil {
			return fmt.Errorf("topic %s: %w", d.Topic, d.Err)
		}
	}
	configs, err := adm.DescribeTopicConfigs(ctx, details.Names()...)
	if err != nil {
		return fmt.Errorf("describing topic configs: %w", err)
	}
	configsOf := map[string]string{}
	for _, rc := range configs {
		if rc.Err != nil {
			return fmt.Errorf("configs of topic %s: %w%s", rc.Name, rc.Err, detail(rc.ErrMessage))
		}
		configsOf[rc.Name] = nonDefaultConfigs(rc.Configs)
	}
	for _, d := range details.Sorted() {
		partitions := d.Partitions.Sorted()
		rf := 0
		if len(partitions) > 0 {
			rf = len(partitions[0].Replicas)
		}
		// TopicId as Kafka prints a Uuid: URL-safe base64 without padding.
		fmt.Fprintf(stdout, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			d.Topic, base64.RawURLEncoding.EncodeToString(d.ID[:]), len(partitions), rf, configsOf[d.Topic])
		for _, p := range partitions {
			fmt.Fprintf(stdout, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\n",
				d.Topic, p.Partition, leaderText(p.Leader), ids(p.Replicas), ids(p.ISR))
		}
	}
	return nil
}

// nonDefaultConfigs formats the configs not at Kafka's default as
// kafka-topics.sh --describe does: key=value, comma-separated, sorted.
func nonDefaultConfigs(configs []kadm.Config) string {
	var parts []string
	for _, c := range configs {
		if c.Source != kmsg.ConfigSourceDefaultConfig && c.Value != nil {
			parts = append(parts, c.Key+"="+*c.Value)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func leaderText(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

// ids formats broker ids as kafka-topics.sh does: 1,2,3.
func ids(list []int32) string {
	parts := make([]string, len(list))
	for i, id := range list {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

func topicsDelete(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("topics delete", stderr)
	cf := addClientFlags(flags)
	topic := flags.String("topic", "", "the topic to delete")
	ifExists := flags.Bool("if-exists", false, "succeed if the topic does not exist")
	if err := parseNoPositional(flags, args); err != nil {
		return err
	}
	if *topic == "" {
		return usageErrorf("--topic is required")
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	resp, err := adm.DeleteTopic(ctx, *topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		if *ifExists && errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil
		}
		return fmt.Errorf("deleting topic %s: %w%s", *topic, err, detail(resp.ErrMessage))
	}
	fmt.Fprintf(stdout, "Deleted topic %s.\n", *topic)
	return nil
}

func topicsAlterConfig(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("topics alter-config", stderr)
	cf := addClientFlags(flags)
	topic := flags.String("topic", "", "the topic to alter")
	var addConfig, deleteConfig stringList
	var set, appendKV, subtractKV keyValues
	flags.Var(&addConfig, "add-config", "configs to set, kafka-configs.sh style: k1=v1,k2=[a,b] (repeatable)")
	flags.Var(&set, "config", "a config to set, key=value (repeatable)")
	flags.Var(&deleteConfig, "delete-config", "config keys to remove, comma-separated (repeatable)")
	flags.Var(&appendKV, "append-config", "append to a list config, key=value (repeatable)")
	flags.Var(&subtractKV, "subtract-config", "remove from a list config, key=value (repeatable)")
	if err := parseNoPositional(flags, args); err != nil {
		return err
	}
	if *topic == "" {
		return usageErrorf("--topic is required")
	}
	var alters []kadm.AlterConfig
	for _, spec := range addConfig {
		kvs, err := parseAddConfig(spec)
		if err != nil {
			return err
		}
		set = append(set, kvs...)
	}
	for _, kv := range set {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv.key, Value: &kv.value})
	}
	for _, list := range deleteConfig {
		for _, key := range strings.Split(list, ",") {
			if key = strings.TrimSpace(key); key != "" {
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: key})
			}
		}
	}
	for _, kv := range appendKV {
		alters = append(alters, kadm.AlterConfig{Op: kadm.AppendConfig, Name: kv.key, Value: &kv.value})
	}
	for _, kv := range subtractKV {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SubtractConfig, Name: kv.key, Value: &kv.value})
	}
	if len(alters) == 0 {
		return usageErrorf("nothing to alter: give --add-config, --config, --delete-config, --append-config or --subtract-config")
	}
	adm, ctx, closeAdmin, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer closeAdmin()
	resps, err := adm.AlterTopicConfigs(ctx, alters, *topic)
	if err != nil {
		return fmt.Errorf("altering configs of topic %s: %w", *topic, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("altering configs of topic %s: %w%s", r.Name, r.Err, detail(r.ErrMessage))
		}
	}
	fmt.Fprintf(stdout, "Completed updating config for topic %s.\n", *topic)
	return nil
}

// parseAddConfig splits kafka-configs.sh's --add-config syntax,
// k1=v1,k2=[v1,v2]: commas inside brackets belong to the value, and the
// brackets are dropped.
func parseAddConfig(spec string) (keyValues, error) {
	var out keyValues
	depth, start := 0, 0
	flush := func(part string) error {
		if strings.TrimSpace(part) == "" {
			return nil
		}
		key, value, ok := strings.Cut(part, "=")
		if key = strings.TrimSpace(key); !ok || key == "" {
			return usageErrorf("--add-config %q: %q is not key=value", spec, part)
		}
		value = strings.TrimSpace(value)
		if strings.HasPrefix(value, "[") && strings.HasSuffix(value, "]") {
			value = value[1 : len(value)-1]
		}
		out = append(out, keyValue{key, value})
		return nil
	}
	for i, r := range spec {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				if err := flush(spec[start:i]); err != nil {
					return nil, err
				}
				start = i + 1
			}
		}
		if depth < 0 {
			return nil, usageErrorf("--add-config %q: unbalanced ]", spec)
		}
	}
	if depth != 0 {
		return nil, usageErrorf("--add-config %q: unbalanced [", spec)
	}
	if err := flush(spec[start:]); err != nil {
		return nil, err
	}
	return out, nil
}
