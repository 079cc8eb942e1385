package config

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"strand/core/env"
)

// keyDef is one server.properties key Strand implements.
type keyDef struct {
	// defaultValue is Kafka's default, as text; hasDefault is false when
	// Kafka's default is null (the key is then unset unless given).
	defaultValue string
	hasDefault   bool
	// apply parses value into the builder, or reports an *Error naming key.
	apply func(b *builder, key, value string) error
}

// builder collects parsed values, including the nullable keys whose effective
// value depends on others, until resolve derives and validates the Broker.
type builder struct {
	Broker
	explicit map[string]string
	warnings Warnings

	retentionMs      *int64
	retentionMinutes *int32
	retentionHours   int32
	rollMs           *int64
	rollHours        int32
	logDirs          []string
	logDirsSet       bool
	logDir           string
	listeners        []rawListener
	advertised       []rawListener
	advertisedSet    bool
	protocolMap      map[string]string
	// security holds the security keys given (security.go), read by
	// resolveSecurity.
	security securityProps
	// bootstrapServersSet: controller.quorum.bootstrap.servers was given,
	// which Strand does not implement; it explains a missing voters list.
	bootstrapServersSet bool
}

const (
	maxInt32 = math.MaxInt32
	maxInt64 = math.MaxInt64
	minInt32 = math.MinInt32
	minInt64 = math.MinInt64
	// segmentBytesMin is Kafka 4.0's minimum for log.segment.bytes and
	// segment.bytes (KIP-1030).
	segmentBytesMin = 1 << 20
	// segmentIndexBytesMin is Kafka's minimum for log.index.size.max.bytes
	// and segment.index.bytes: one offset index entry.
	segmentIndexBytesMin = 4
)

// brokerKeys are the server.properties keys Strand implements, with Kafka's
// defaults and ranges. Where Strand is stricter than Kafka or differs from it,
// the entry says so.
var brokerKeys = map[string]keyDef{
	"node.id": {apply: func(b *builder, k, v string) error {
		n, err := parseInt32(k, v, 0, maxInt32)
		b.NodeID = env.NodeID(n)
		return err
	}},
	"process.roles": {defaultValue: "", hasDefault: true, apply: func(b *builder, k, v string) error {
		return b.applyRoles(k, v)
	}},
	"listeners": {defaultValue: "PLAINTEXT://:9092", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.listeners, err = parseListeners(k, v)
		return err
	}},
	"advertised.listeners": {apply: func(b *builder, k, v string) (err error) {
		b.advertised, err = parseListeners(k, v)
		b.advertisedSet = true
		return err
	}},
	"listener.security.protocol.map": {
		defaultValue: "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", hasDefault: true,
		apply: func(b *builder, k, v string) (err error) {
			b.protocolMap, err = parseProtocolMap(k, v)
			return err
		}},
	"controller.listener.names": {apply: func(b *builder, k, v string) error {
		names, err := parseList(k, v)
		for i := range names {
			names[i] = strings.ToUpper(names[i])
		}
		b.ControllerListenerNames = names
		return err
	}},
	"inter.broker.listener.name": {apply: func(b *builder, k, v string) error {
		b.InterBrokerListenerName = strings.ToUpper(strings.TrimSpace(v))
		if b.InterBrokerListenerName == "" {
			return valueError(k, v, "is empty: name a listener, or leave the key out")
		}
		return nil
	}},
	// super.users: principals that may do everything, the cluster's
	// members until ACLs exist (SPEC.md §10). Kafka's default is empty.
	"super.users": {defaultValue: "", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.SuperUsers, err = parsePrincipals(k, v)
		return err
	}},
	// authorizer.class.name switches authorization on (SPEC.md §10.7):
	// KRaft's StandardAuthorizer, whose ACLs live in the metadata log.
	// Unset, every request its listener serves is allowed, as Kafka
	// without an authorizer.
	"authorizer.class.name": {defaultValue: "", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.AuthorizerEnabled, err = parseAuthorizer(k, v)
		return err
	}},
	"allow.everyone.if.no.acl.found": boolKey("false", func(b *Broker) *bool { return &b.AllowEveryoneIfNoACLFound }),
	"controller.quorum.voters": {defaultValue: "", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.QuorumVoters, err = parseVoters(k, v)
		return err
	}},
	"log.dirs": {apply: func(b *builder, k, v string) (err error) {
		b.logDirs, err = parseList(k, v)
		b.logDirsSet = true
		return err
	}},
	"log.dir": {defaultValue: "/tmp/kafka-logs", hasDefault: true, apply: func(b *builder, k, v string) error {
		b.logDir = strings.TrimSpace(v)
		return nil
	}},
	"num.partitions": int32Key("1", 1, maxInt32, func(b *Broker) *int32 { return &b.NumPartitions }),
	// Kafka types default.replication.factor as an unchecked INT; Strand
	// requires a valid replication factor (CreateTopics carries an int16).
	"default.replication.factor": int16Key("1", 1, math.MaxInt16, func(b *Broker) *int16 { return &b.DefaultReplicationFactor }),
	"min.insync.replicas":        int32Key("1", 1, maxInt32, func(b *Broker) *int32 { return &b.MinInsyncReplicas }),
	// Strand requires a positive lag time; Kafka does not check it.
	"replica.lag.time.max.ms":        int64Key("30000", 1, maxInt64, func(b *Broker) *int64 { return &b.ReplicaLagTimeMaxMs }),
	"unclean.leader.election.enable": boolKey("false", func(b *Broker) *bool { return &b.UncleanLeaderElectionEnable }),
	"log.retention.ms": {apply: func(b *builder, k, v string) error {
		n, err := parseInt64(k, v, minInt64, maxInt64)
		b.retentionMs = &n
		return err
	}},
	"log.retention.minutes": {apply: func(b *builder, k, v string) error {
		n, err := parseInt32(k, v, minInt32, maxInt32)
		b.retentionMinutes = &n
		return err
	}},
	"log.retention.hours": {defaultValue: "168", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.retentionHours, err = parseInt32(k, v, minInt32, maxInt32)
		return err
	}},
	"log.retention.bytes": int64Key("-1", minInt64, maxInt64, func(b *Broker) *int64 { return &b.LogRetentionBytes }),
	"log.segment.bytes":   int32Key("1073741824", segmentBytesMin, maxInt32, func(b *Broker) *int32 { return &b.LogSegmentBytes }),
	"log.roll.ms": {apply: func(b *builder, k, v string) error {
		n, err := parseInt64(k, v, 1, maxInt64)
		b.rollMs = &n
		return err
	}},
	"log.roll.hours": {defaultValue: "168", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.rollHours, err = parseInt32(k, v, 1, maxInt32)
		return err
	}},
	"log.index.interval.bytes":    int32Key("4096", 0, maxInt32, func(b *Broker) *int32 { return &b.LogIndexIntervalBytes }),
	"log.index.size.max.bytes":    int32Key("10485760", segmentIndexBytesMin, maxInt32, func(b *Broker) *int32 { return &b.LogIndexSizeMaxBytes }),
	"log.flush.interval.messages": int64Key(strconv.FormatInt(maxInt64, 10), 1, maxInt64, func(b *Broker) *int64 { return &b.LogFlushIntervalMessages }),
	// Kafka's default is null, meaning log.flush.scheduler.interval.ms,
	// whose own default (never) is what Strand uses.
	"log.flush.interval.ms":           int64Key(strconv.FormatInt(maxInt64, 10), 0, maxInt64, func(b *Broker) *int64 { return &b.LogFlushIntervalMs }),
	"log.retention.check.interval.ms": int64Key("300000", 1, maxInt64, func(b *Broker) *int64 { return &b.LogRetentionCheckIntervalMs }),
	"log.cleanup.policy": {defaultValue: "delete", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.LogCleanupPolicy, err = parseCleanupPolicy(k, v)
		return err
	}},
	"log.message.timestamp.type": {defaultValue: "CreateTime", hasDefault: true, apply: func(b *builder, k, v string) error {
		t, err := parseChoice(k, v, string(TimestampCreateTime), string(TimestampLogAppendTime))
		b.LogMessageTimestampType = TimestampType(t)
		return err
	}},
	"log.message.timestamp.before.max.ms": int64Key(strconv.FormatInt(maxInt64, 10), 0, maxInt64, func(b *Broker) *int64 { return &b.LogMessageTimestampBeforeMaxMs }),
	// Kafka 4.0 lowered this default from Long.MAX_VALUE to one hour (KIP-1030).
	"log.message.timestamp.after.max.ms": int64Key("3600000", 0, maxInt64, func(b *Broker) *int64 { return &b.LogMessageTimestampAfterMaxMs }),
	"compression.type": {defaultValue: "producer", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.CompressionType, err = parseChoice(k, v, compressionTypes...)
		return err
	}},
	"auto.create.topics.enable":        boolKey("true", func(b *Broker) *bool { return &b.AutoCreateTopicsEnable }),
	"message.max.bytes":                int32Key("1048588", 0, maxInt32, func(b *Broker) *int32 { return &b.MessageMaxBytes }),
	"socket.request.max.bytes":         int32Key("104857600", 1, maxInt32, func(b *Broker) *int32 { return &b.SocketRequestMaxBytes }),
	"offsets.topic.replication.factor": int16Key("3", 1, math.MaxInt16, func(b *Broker) *int16 { return &b.OffsetsTopicReplicationFactor }),
	"offsets.topic.num.partitions":     int32Key("50", 1, maxInt32, func(b *Broker) *int32 { return &b.OffsetsTopicNumPartitions }),
	"offsets.topic.segment.bytes":      int32Key("104857600", 1, maxInt32, func(b *Broker) *int32 { return &b.OffsetsTopicSegmentBytes }),
	"group.initial.rebalance.delay.ms": int32Key("3000", 0, maxInt32, func(b *Broker) *int32 { return &b.GroupInitialRebalanceDelayMs }),
	// Committed-offset expiry (KIP-211), Kafka's types and minimums.
	"offsets.retention.minutes":           int32Key("10080", 1, maxInt32, func(b *Broker) *int32 { return &b.OffsetsRetentionMinutes }),
	"offsets.retention.check.interval.ms": int64Key("600000", 1, maxInt64, func(b *Broker) *int64 { return &b.OffsetsRetentionCheckIntervalMs }),
	// Strand requires the four KRaft timeouts to be positive; Kafka does not
	// check them.
	"broker.session.timeout.ms":             int32Key("9000", 1, maxInt32, func(b *Broker) *int32 { return &b.BrokerSessionTimeoutMs }),
	"broker.heartbeat.interval.ms":          int32Key("2000", 1, maxInt32, func(b *Broker) *int32 { return &b.BrokerHeartbeatIntervalMs }),
	"controller.quorum.election.timeout.ms": int32Key("1000", 1, maxInt32, func(b *Broker) *int32 { return &b.ControllerQuorumElectionTimeoutMs }),
	"controller.quorum.fetch.timeout.ms":    int32Key("2000", 1, maxInt32, func(b *Broker) *int32 { return &b.ControllerQuorumFetchTimeoutMs }),

	// Limits. Kafka's max.connections default is 2147483647 and its
	// queued.max.request.bytes default is -1 (unbounded); Strand's are
	// finite because they bound memory. queued.max.request.bytes <= 0 still
	// means unbounded, as in Kafka.
	"max.connections":                             int32Key("1000", 0, maxInt32, func(b *Broker) *int32 { return &b.Limits.ConnectionsMax }),
	"queued.max.requests":                         int32Key("500", 1, maxInt32, func(b *Broker) *int32 { return &b.Limits.RequestsQueuedMax }),
	"queued.max.request.bytes":                    int64Key("134217728", minInt64, maxInt64, func(b *Broker) *int64 { return &b.Limits.RequestBytesQueuedMax }),
	"strand.connection.requests.in.flight.max":    int32Key("100", 1, maxInt32, func(b *Broker) *int32 { return &b.Limits.ConnectionRequestsInFlightMax }),
	"strand.connection.buffered.bytes.max":        int64Key("104857600", 1, maxInt64, func(b *Broker) *int64 { return &b.Limits.ConnectionBufferedBytesMax }),
	"strand.response.buffered.bytes.max":          int64Key("268435456", 1, maxInt64, func(b *Broker) *int64 { return &b.Limits.ResponseBufferedBytesMax }),
	"strand.purgatory.requests.per.partition.max": int32Key("1000", 1, maxInt32, func(b *Broker) *int32 { return &b.Limits.PurgatoryRequestsPerPartitionMax }),
	"strand.purgatory.requests.max":               int32Key("100000", 1, maxInt32, func(b *Broker) *int32 { return &b.Limits.PurgatoryRequestsMax }),
	"max.incremental.fetch.session.cache.slots":   int32Key("1000", 0, maxInt32, func(b *Broker) *int32 { return &b.Limits.FetchSessionCacheSlots }),

	// The work one request may cost (Limits). The defaults are
	// core/wire.DefaultRequestLimits, 128 MiB and 64 MiB.
	"strand.request.topics.max":                     int32Key("100000", 1, maxInt32, func(b *Broker) *int32 { return &b.Limits.RequestTopicsMax }),
	"strand.request.partitions.max":                 int32Key("200000", 1, maxInt32, func(b *Broker) *int32 { return &b.Limits.RequestPartitionsMax }),
	"strand.request.entries.max":                    int32Key("1000000", 1, maxInt32, func(b *Broker) *int32 { return &b.Limits.RequestEntriesMax }),
	"strand.request.tagged.fields.max":              int32Key("64", 1, maxInt32, func(b *Broker) *int32 { return &b.Limits.RequestTaggedFieldsMax }),
	"strand.produce.request.decompressed.bytes.max": int64Key("134217728", 1, maxInt64, func(b *Broker) *int64 { return &b.Limits.ProduceRequestDecompressedBytesMax }),
	"strand.produce.decompression.buffer.bytes.max": int64Key("67108864", 1, maxInt64, func(b *Broker) *int64 { return &b.Limits.ProduceDecompressionBufferBytesMax }),

	// Connection admission and deadlines, Kafka's keys and defaults where
	// Kafka has them; per-listener keys are listenerKeys.
	"max.connections.per.ip": int32Key("2147483647", 0, maxInt32, func(b *Broker) *int32 { return &b.Limits.ConnectionsPerIPMax }),
	"max.connections.per.ip.overrides": {defaultValue: "", hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		b.Limits.ConnectionsPerIPOverrides, err = parseHostCounts(k, v)
		return err
	}},
	"max.connection.creation.rate":     int32Key("2147483647", 0, maxInt32, func(b *Broker) *int32 { return &b.Limits.ConnectionCreationRateMax }),
	"connections.max.idle.ms":          int64Key("600000", 1, maxInt64, func(b *Broker) *int64 { return &b.Limits.ConnectionsMaxIdleMs }),
	"strand.request.read.timeout.ms":   int64Key("30000", 1, maxInt64, func(b *Broker) *int64 { return &b.Limits.RequestReadTimeoutMs }),
	"strand.response.write.timeout.ms": int64Key("30000", 1, maxInt64, func(b *Broker) *int64 { return &b.Limits.ResponseWriteTimeoutMs }),
}

// listenerKeys are the listener.name.<l>.<key> keys Strand implements, each
// the listener's own value of a broker-wide limit (Kafka's
// ListenerConnectionQuota).
var listenerKeys = map[string]func(l *Limits, listener string, n int32){
	"max.connections": func(l *Limits, listener string, n int32) {
		l.ListenerConnectionsMax = mapWith(l.ListenerConnectionsMax, listener, n)
	},
	"max.connection.creation.rate": func(l *Limits, listener string, n int32) {
		l.ListenerConnectionCreationRateMax = mapWith(l.ListenerConnectionCreationRateMax, listener, n)
	},
}

// listenerLimitKey splits listener.name.<l>.<key> into the upper-cased listener
// name and the key, for the keys of listenerKeys.
func listenerLimitKey(key string) (listener, name string, ok bool) {
	rest, found := strings.CutPrefix(key, "listener.name.")
	if !found {
		return "", "", false
	}
	for name := range listenerKeys { // order-independent: at most one suffix matches a whole key after a dot
		if l, found := strings.CutSuffix(rest, "."+name); found && l != "" && !strings.Contains(l, ".") {
			return strings.ToUpper(l), name, true
		}
	}
	return "", "", false
}

// applyListenerKeys parses the listener.name.<l>.<key> keys given, in sorted
// order; resolve checks that each names a listener.
func (b *builder) applyListenerKeys(props map[string]string) error {
	for _, key := range slices.Sorted(maps.Keys(props)) {
		listener, name, ok := listenerLimitKey(key)
		if !ok {
			continue
		}
		n, err := parseInt32(key, props[key], 0, maxInt32)
		if err != nil {
			return err
		}
		listenerKeys[name](&b.Limits, listener, n)
	}
	return nil
}

func mapWith(m map[string]int32, k string, v int32) map[string]int32 {
	if m == nil {
		m = map[string]int32{}
	}
	m[k] = v
	return m
}

// parseHostCounts parses max.connections.per.ip.overrides: comma-separated
// host:count pairs (the count after the last colon, so that an IPv6
// address may be written as is), each count at least 0.
func parseHostCounts(key, value string) (map[string]int32, error) {
	items, err := parseList(key, value)
	if err != nil {
		return nil, err
	}
	counts := map[string]int32{}
	for _, item := range items {
		at := strings.LastIndex(item, ":")
		if at <= 0 {
			return nil, valueError(key, value, "has %q, which is not host:count", item)
		}
		host := strings.Trim(item[:at], "[]")
		n, err := parseInt32(key, item[at+1:], 0, maxInt32)
		if err != nil {
			return nil, valueError(key, value, "has %q, whose count is not an integer of at least 0", item)
		}
		if _, dup := counts[host]; dup {
			return nil, valueError(key, value, "names host %s twice", host)
		}
		counts[host] = n
	}
	return counts, nil
}

// brokerKeyNames lists brokerKeys sorted, so that parsing visits keys in a
// fixed order and the first error reported is always the same one.
var brokerKeyNames = slices.Sorted(maps.Keys(brokerKeys))

// KnownBrokerKeys returns the server.properties keys Strand implements,
// sorted.
func KnownBrokerKeys() []string { return slices.Clone(brokerKeyNames) }

// compressionTypes are the values of compression.type.
var compressionTypes = []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}

func int32Key(def string, min, max int32, field func(*Broker) *int32) keyDef {
	return keyDef{defaultValue: def, hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		*field(&b.Broker), err = parseInt32(k, v, min, max)
		return err
	}}
}

func int16Key(def string, min, max int16, field func(*Broker) *int16) keyDef {
	return keyDef{defaultValue: def, hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		*field(&b.Broker), err = parseInt16(k, v, min, max)
		return err
	}}
}

func int64Key(def string, min, max int64, field func(*Broker) *int64) keyDef {
	return keyDef{defaultValue: def, hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		*field(&b.Broker), err = parseInt64(k, v, min, max)
		return err
	}}
}

func boolKey(def string, field func(*Broker) *bool) keyDef {
	return keyDef{defaultValue: def, hasDefault: true, apply: func(b *builder, k, v string) (err error) {
		*field(&b.Broker), err = parseBool(k, v)
		return err
	}}
}

// applyRoles parses process.roles: broker, controller, or both, once each.
func (b *builder) applyRoles(key, value string) error {
	roles, err := parseList(key, value)
	if err != nil {
		return err
	}
	for _, role := range roles {
		switch {
		case role == "broker" && !b.Roles.Broker:
			b.Roles.Broker = true
		case role == "controller" && !b.Roles.Controller:
			b.Roles.Controller = true
		case role == "broker" || role == "controller":
			return valueError(key, value, "lists role %s twice", role)
		default:
			return valueError(key, value, "has unknown role %q: want broker, controller or both", role)
		}
	}
	return nil
}

// parseCleanupPolicy parses a non-empty list of delete and compact.
func parseCleanupPolicy(key, value string) (CleanupPolicy, error) {
	items, err := parseList(key, value)
	if err != nil {
		return CleanupPolicy{}, err
	}
	if len(items) == 0 {
		return CleanupPolicy{}, valueError(key, value, "is empty: want delete, compact or both")
	}
	var p CleanupPolicy
	for _, item := range items {
		switch item {
		case "delete":
			p.Delete = true
		case "compact":
			p.Compact = true
		default:
			return CleanupPolicy{}, valueError(key, value, "has unknown policy %q: want delete, compact or both", item)
		}
	}
	return p, nil
}
