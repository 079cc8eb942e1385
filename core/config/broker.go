package config

import (
	"maps"
	"slices"
	"strings"

	"strand/core/env"
)

// Broker is a node's static configuration, read from server.properties keys.
// Field comments name the Kafka key; derived fields (LogRetentionMs,
// LogRollMs, LogDirs, InterBrokerListenerName, AdvertisedListeners) hold the
// effective value after Kafka's precedence rules.
type Broker struct {
	// NodeID is node.id. Required: Strand runs in KRaft mode only.
	NodeID env.NodeID
	// Roles is process.roles. Required, at least one role.
	Roles Roles

	// Listeners is listeners, each with its security protocol resolved.
	Listeners []Listener
	// AdvertisedListeners are the broker listeners given to clients in
	// Metadata: advertised.listeners if set, else listeners, without the
	// controller listeners (as Kafka's effectiveAdvertisedBrokerListeners).
	AdvertisedListeners []Listener
	// ListenerSecurityProtocols is the effective
	// listener.security.protocol.map, keyed by upper-case listener name.
	ListenerSecurityProtocols map[string]string
	// ControllerListenerNames is controller.listener.names, upper-cased.
	ControllerListenerNames []string
	// InterBrokerListenerName is inter.broker.listener.name; by default the
	// first listener that is not a controller listener (CLARIFICATIONS.md,
	// "Listeners"). Empty on a controller-only node.
	InterBrokerListenerName string
	// QuorumVoters is controller.quorum.voters.
	QuorumVoters []Voter
	// SuperUsers is super.users: the principals ("User:alice") allowed
	// everything, and until ACLs exist the only cluster members a secured
	// control plane admits (SPEC.md §10).
	SuperUsers []string
	// AuthorizerEnabled is authorizer.class.name set to Kafka's
	// StandardAuthorizer: every request is authorized against the ACLs of
	// the metadata log (SPEC.md §10.7).
	AuthorizerEnabled bool
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found: with
	// the authorizer on, a resource no ACL applies to is open to everyone
	// rather than closed.
	AllowEveryoneIfNoACLFound bool

	// LogDirs is log.dirs, or log.dir when log.dirs is unset.
	LogDirs []string
	// NumPartitions is num.partitions, for auto-created topics and
	// CreateTopics with NumPartitions -1.
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int16
	// MinInsyncReplicas is min.insync.replicas. Kafka does not require it to
	// be at most DefaultReplicationFactor; acks=all produce then fails with
	// NOT_ENOUGH_REPLICAS, and so does Strand.
	MinInsyncReplicas int32
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms.
	ReplicaLagTimeMaxMs int64
	// UncleanLeaderElectionEnable is unclean.leader.election.enable.
	UncleanLeaderElectionEnable bool

	// LogRetentionMs is the effective log.retention.ms (else .minutes, else
	// .hours); -1 keeps data forever.
	LogRetentionMs int64
	// LogRetentionBytes is log.retention.bytes; -1 means no size limit.
	LogRetentionBytes int64
	// LogSegmentBytes is log.segment.bytes.
	LogSegmentBytes int32
	// LogRollMs is the effective log.roll.ms (else log.roll.hours).
	LogRollMs int64
	// LogIndexIntervalBytes is log.index.interval.bytes.
	LogIndexIntervalBytes int32
	// LogIndexSizeMaxBytes is log.index.size.max.bytes (the topic key is
	// segment.index.bytes).
	LogIndexSizeMaxBytes int32
	// LogFlushIntervalMessages is log.flush.interval.messages.
	LogFlushIntervalMessages int64
	// LogFlushIntervalMs is log.flush.interval.ms; unset, it is Kafka's
	// log.flush.scheduler.interval.ms default, which never flushes.
	LogFlushIntervalMs int64
	// LogRetentionCheckIntervalMs is log.retention.check.interval.ms.
	LogRetentionCheckIntervalMs int64
	// LogCleanupPolicy is log.cleanup.policy.
	LogCleanupPolicy CleanupPolicy
	// LogMessageTimestampType is log.message.timestamp.type.
	LogMessageTimestampType TimestampType
	// LogMessageTimestampBeforeMaxMs is log.message.timestamp.before.max.ms.
	LogMessageTimestampBeforeMaxMs int64
	// LogMessageTimestampAfterMaxMs is log.message.timestamp.after.max.ms.
	LogMessageTimestampAfterMaxMs int64
	// CompressionType is compression.type.
	CompressionType string

	// AutoCreateTopicsEnable is auto.create.topics.enable.
	AutoCreateTopicsEnable bool
	// MessageMaxBytes is message.max.bytes: the largest record batch.
	MessageMaxBytes int32
	// SocketRequestMaxBytes is socket.request.max.bytes: a larger frame is
	// rejected before anything is allocated for it.
	SocketRequestMaxBytes int32
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor.
	OffsetsTopicReplicationFactor int16
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions.
	OffsetsTopicNumPartitions int32
	// OffsetsTopicSegmentBytes is offsets.topic.segment.bytes: the
	// segment.bytes __consumer_offsets is created with (Kafka 100 MiB,
	// smaller than log.segment.bytes so that compaction, which skips the
	// active segment, reaches old commits sooner).
	OffsetsTopicSegmentBytes int32
	// GroupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms.
	GroupInitialRebalanceDelayMs int32
	// OffsetsRetentionMinutes is offsets.retention.minutes: committed
	// offsets expire this long after their group became empty (or, for a
	// consumer that commits without a group, after the commit).
	OffsetsRetentionMinutes int32
	// OffsetsRetentionCheckIntervalMs is
	// offsets.retention.check.interval.ms: how often the coordinators look
	// for expired offsets.
	OffsetsRetentionCheckIntervalMs int64

	// BrokerSessionTimeoutMs is broker.session.timeout.ms.
	BrokerSessionTimeoutMs int32
	// BrokerHeartbeatIntervalMs is broker.heartbeat.interval.ms.
	BrokerHeartbeatIntervalMs int32
	// ControllerQuorumElectionTimeoutMs is
	// controller.quorum.election.timeout.ms.
	ControllerQuorumElectionTimeoutMs int32
	// ControllerQuorumFetchTimeoutMs is controller.quorum.fetch.timeout.ms.
	ControllerQuorumFetchTimeoutMs int32

	// Limits bound the broker's memory (CLARIFICATIONS.md, "Validation and
	// limits").
	Limits Limits

	// Security is the listeners' authentication (TLS, SASL, the principal
	// builder), which realnet carries out (SPEC.md §10.6).
	Security Security

	// Static holds the known keys the file or the overrides set, with their
	// trimmed values: DescribeConfigs reports them as STATIC_BROKER_CONFIG.
	Static map[string]string
}

// Limits are the named, configured and checked limits of CLARIFICATIONS.md.
// Kafka keys are used where Kafka has the limit; strand.* keys where it does
// not. Where Kafka's default is unbounded, Strand's is finite, because these
// limits exist to bound memory.
type Limits struct {
	// ConnectionsMax is max.connections. Kafka's default is 2147483647;
	// Strand's is 1000.
	ConnectionsMax int32
	// RequestsQueuedMax is queued.max.requests: decoded requests waiting for
	// the core, over all connections.
	RequestsQueuedMax int32
	// RequestBytesQueuedMax is queued.max.request.bytes: bytes of requests
	// read but not yet answered, over all connections. Kafka's default is -1
	// (unbounded); Strand's is 128 MiB. It must be at least
	// socket.request.max.bytes, as in Kafka.
	RequestBytesQueuedMax int64
	// ConnectionRequestsInFlightMax is strand.connection.requests.in.flight.max:
	// requests read from one connection and not yet answered. At the limit
	// the broker stops reading that connection (backpressure, not an error).
	ConnectionRequestsInFlightMax int32
	// ConnectionBufferedBytesMax is strand.connection.buffered.bytes.max:
	// bytes held for one connection (requests read, responses unsent). Must
	// be at least socket.request.max.bytes, so that one largest request fits.
	ConnectionBufferedBytesMax int64
	// ResponseBufferedBytesMax is strand.response.buffered.bytes.max: bytes
	// of responses held, over all client-plane connections, for clients
	// that have not taken them yet. At the limit client requests wait
	// before the core answers them (SPEC.md §7); Kafka has no such bound.
	ResponseBufferedBytesMax int64
	// PurgatoryRequestsPerPartitionMax is
	// strand.purgatory.requests.per.partition.max: produce (acks=all) and
	// fetch requests waiting on one partition.
	PurgatoryRequestsPerPartitionMax int32
	// PurgatoryRequestsMax is strand.purgatory.requests.max: waiting requests
	// over all partitions.
	PurgatoryRequestsMax int32
	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots:
	// the fetch sessions (KIP-227) a broker keeps (Kafka's default, 1000).
	FetchSessionCacheSlots int32

	// The work one request may cost (SPEC.md §7.3). Kafka
	// has none of these keys. The first four are checked before a request
	// is decoded (core/wire.RequestLimits): a request over one closes the
	// connection.
	//
	// RequestTopicsMax is strand.request.topics.max: topics (and config
	// resources) named in one request, over all its topic lists.
	RequestTopicsMax int32
	// RequestPartitionsMax is strand.request.partitions.max: partitions
	// named in one request, summed over its topics.
	RequestPartitionsMax int32
	// RequestEntriesMax is strand.request.entries.max: array elements and
	// tagged fields in one request, whatever they list.
	RequestEntriesMax int32
	// RequestTaggedFieldsMax is strand.request.tagged.fields.max: tagged
	// fields in one structure of a request, its header included.
	RequestTaggedFieldsMax int32
	// ProduceRequestDecompressedBytesMax is
	// strand.produce.request.decompressed.bytes.max: bytes the batches of
	// one produce request may decompress to, in all. The batch that passes
	// it and every compressed batch after it are MESSAGE_TOO_LARGE.
	ProduceRequestDecompressedBytesMax int64
	// ProduceDecompressionBufferBytesMax is
	// strand.produce.decompression.buffer.bytes.max: bytes of decompression
	// buffers the produce pre-checks hold at once, over all connections;
	// a pre-check waits for room before it decompresses a batch.
	ProduceDecompressionBufferBytesMax int64

	// Connection admission and deadlines (SPEC.md §7.2; core/admission decides with them).

	// ListenerConnectionsMax is listener.name.<l>.max.connections, by
	// upper-case listener name: connections one listener takes (Kafka's
	// default, unbounded, where unset).
	ListenerConnectionsMax map[string]int32
	// ConnectionsPerIPMax is max.connections.per.ip: connections one client
	// address may hold (Kafka's default, 2147483647).
	ConnectionsPerIPMax int32
	// ConnectionsPerIPOverrides is max.connections.per.ip.overrides: the
	// limit of particular hosts or addresses, as written (realnet resolves
	// host names at start-up).
	ConnectionsPerIPOverrides map[string]int32
	// ConnectionCreationRateMax is max.connection.creation.rate: new
	// connections accepted per second (KIP-612; Kafka's default, 2147483647);
	// a faster arrival is throttled, not refused.
	ConnectionCreationRateMax int32
	// ListenerConnectionCreationRateMax is
	// listener.name.<l>.max.connection.creation.rate, by upper-case
	// listener name.
	ListenerConnectionCreationRateMax map[string]int32
	// ConnectionsMaxIdleMs is connections.max.idle.ms: a connection with no
	// request in progress or in flight and nothing to write closes after
	// this long (Kafka's default, 10 minutes).
	ConnectionsMaxIdleMs int64
	// RequestReadTimeoutMs is strand.request.read.timeout.ms: a request
	// whose first byte has arrived must arrive whole within this long, or
	// its connection closes. Kafka has no such key (its idle timeout alone
	// ends a stalled request); the default is a client's request.timeout.ms.
	RequestReadTimeoutMs int64
	// ResponseWriteTimeoutMs is strand.response.write.timeout.ms: the
	// responses a connection's writer starts on must be taken by the client
	// within this long, or the connection closes and its Fetch file regions
	// are released. Kafka has no such key; the default is a client's
	// request.timeout.ms, past which the client has given up anyway.
	ResponseWriteTimeoutMs int64
}

// Roles is process.roles.
type Roles struct {
	// Broker: the node serves clients and hosts partitions.
	Broker bool
	// Controller: the node is a KRaft controller (a voter).
	Controller bool
}

// String returns the roles as process.roles lists them.
func (r Roles) String() string {
	var roles []string
	if r.Broker {
		roles = append(roles, "broker")
	}
	if r.Controller {
		roles = append(roles, "controller")
	}
	return strings.Join(roles, ",")
}

// CleanupPolicy is cleanup.policy / log.cleanup.policy.
type CleanupPolicy struct {
	// Delete removes whole segments past retention.
	Delete bool
	// Compact keeps the latest record per key.
	Compact bool
}

// String returns the policy as Kafka lists it.
func (p CleanupPolicy) String() string {
	var policies []string
	if p.Compact {
		policies = append(policies, "compact")
	}
	if p.Delete {
		policies = append(policies, "delete")
	}
	return strings.Join(policies, ",")
}

// TimestampType is message.timestamp.type.
type TimestampType string

// The two timestamp types.
const (
	TimestampCreateTime    TimestampType = "CreateTime"
	TimestampLogAppendTime TimestampType = "LogAppendTime"
)

// DefaultProperties is the configuration `make run` and a bare `strand serve`
// use: one node that is both broker and controller, on localhost.
const DefaultProperties = `# Strand's embedded defaults: a single node on localhost.
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
log.dirs=./data
# One node: the internal topics get one replica, as in Kafka's shipped
# config/server.properties (Kafka's built-in default, 3, needs three brokers).
offsets.topic.replication.factor=1
`

// Parse reads server.properties text, applies overrides on top (as
// `--override key=value` does), fills in Kafka's defaults and validates the
// result. Type and range errors, and invalid combinations, are *Error values
// naming the key; a properties syntax error (a malformed \uXXXX escape) names
// the line. Keys Strand does not know come back as Warnings, sorted, even
// when there is an error: a misspelt key is often why a required one is
// missing.
func Parse(text []byte, overrides map[string]string) (Broker, Warnings, error) {
	props, err := ParseProperties(text)
	if err != nil {
		return Broker{}, nil, err
	}
	// order-independent: a plain copy into a map.
	for k, v := range overrides {
		props[k] = v
	}
	return FromProperties(props)
}

// FromProperties is Parse on already-split key/value pairs.
func FromProperties(props map[string]string) (Broker, Warnings, error) {
	b := builder{explicit: map[string]string{}, security: newSecurityProps()}
	props = maps.Clone(props)
	if err := expandShorthand(props); err != nil {
		return Broker{}, nil, err
	}
	_, b.bootstrapServersSet = props["controller.quorum.bootstrap.servers"]
	var unknown []string
	for _, key := range slices.Sorted(maps.Keys(props)) {
		if _, _, known := listenerLimitKey(key); known {
			b.explicit[key] = strings.TrimSpace(props[key])
			continue
		}
		if _, known := brokerKeys[key]; known {
			b.explicit[key] = strings.TrimSpace(props[key])
			continue
		}
		lk, known, err := classifyAuthenticationKey(key)
		if err != nil {
			return Broker{}, b.sortedWarnings(), err
		}
		if known {
			b.security.add(lk, key, props[key])
			continue
		}
		unknown = append(unknown, key)
		if !IsSecurityKey(key) {
			b.warnings = append(b.warnings, Warning{Key: key, Message: "not implemented by Strand (or not a Kafka key); ignored"})
		}
	}
	if err := refuseUnimplementedSecurity(unknown); err != nil {
		return Broker{}, b.sortedWarnings(), err
	}
	if err := b.applyAll(props); err != nil {
		return Broker{}, b.sortedWarnings(), err
	}
	if err := b.applyListenerKeys(props); err != nil {
		return Broker{}, b.sortedWarnings(), err
	}
	if err := b.resolve(); err != nil {
		return Broker{}, b.sortedWarnings(), err
	}
	b.Broker.Static = b.explicit
	return b.Broker, b.sortedWarnings(), nil
}

// applyAll parses every known key, given or defaulted, in sorted order so
// that the first error reported is always the same one.
func (b *builder) applyAll(props map[string]string) error {
	for _, key := range brokerKeyNames {
		def := brokerKeys[key]
		value, explicit := props[key]
		if !explicit {
			if !def.hasDefault {
				continue
			}
			value = def.defaultValue
		}
		if err := def.apply(b, key, value); err != nil {
			if !explicit {
				panic("config: Kafka default of " + key + " does not parse: " + err.Error())
			}
			return err
		}
	}
	return nil
}

// sortedWarnings returns the warnings sorted by key, then message.
func (b *builder) sortedWarnings() Warnings {
	slices.SortFunc(b.warnings, func(x, y Warning) int {
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		return strings.Compare(x.Message, y.Message)
	})
	return b.warnings
}

// ControllerListener returns the listener controllers talk on: the first of
// controller.listener.names that this node listens on. ok is false on a
// broker-only node, which does not listen for controller traffic.
func (b Broker) ControllerListener() (l Listener, ok bool) {
	for _, name := range b.ControllerListenerNames {
		for _, l := range b.Listeners {
			if l.Name == name {
				return l, true
			}
		}
	}
	return Listener{}, false
}

// InterBrokerListener returns the listener named by inter.broker.listener.name,
// which replication fetches use. ok is false on a controller-only node.
func (b Broker) InterBrokerListener() (l Listener, ok bool) {
	for _, l := range b.Listeners {
		if l.Name == b.InterBrokerListenerName {
			return l, true
		}
	}
	return Listener{}, false
}
