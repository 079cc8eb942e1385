package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"strand/core/env"
	"strand/core/wire"
)

// readExample reads one file of the repository's three-node example
// (config/examples/three-nodes), which README tells newcomers to run.
func readExample(t *testing.T, name string) []byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "config", "examples", "three-nodes", name))
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func TestThreeNodeExamplesParseWithoutWarnings(t *testing.T) {
	for i, name := range []string{"node1.properties", "node2.properties", "node3.properties"} {
		b, warnings, err := Parse(readExample(t, name), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(warnings) != 0 {
			t.Errorf("%s: unexpected warnings %v", name, warnings)
		}
		nodeID := env.NodeID(i + 1)
		if b.NodeID != nodeID {
			t.Errorf("%s: NodeID = %d, want %d", name, b.NodeID, nodeID)
		}
		if !b.Roles.Broker || !b.Roles.Controller {
			t.Errorf("%s: Roles = %v, want broker,controller", name, b.Roles)
		}
		brokerPort, controllerPort := uint16(9092+2*i), uint16(9093+2*i)
		wantListeners := []Listener{
			{Name: "PLAINTEXT", Host: "127.0.0.1", Port: brokerPort, SecurityProtocol: "PLAINTEXT"},
			{Name: "CONTROLLER", Host: "127.0.0.1", Port: controllerPort, SecurityProtocol: "PLAINTEXT"},
		}
		if diff := cmp.Diff(wantListeners, b.Listeners); diff != "" {
			t.Errorf("%s: Listeners (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantListeners[:1], b.AdvertisedListeners); diff != "" {
			t.Errorf("%s: AdvertisedListeners (-want +got):\n%s", name, diff)
		}
		if l, ok := b.ControllerListener(); !ok || l.Port != controllerPort {
			t.Errorf("%s: ControllerListener = %v, %v; want port %d", name, l, ok, controllerPort)
		}
		if l, ok := b.InterBrokerListener(); !ok || l.Name != "PLAINTEXT" {
			t.Errorf("%s: InterBrokerListener = %v, %v; want PLAINTEXT", name, l, ok)
		}
		wantVoters := []Voter{{1, "127.0.0.1", 9093}, {2, "127.0.0.1", 9095}, {3, "127.0.0.1", 9097}}
		if diff := cmp.Diff(wantVoters, b.QuorumVoters); diff != "" {
			t.Errorf("%s: QuorumVoters (-want +got):\n%s", name, diff)
		}
		if want := []string{"./data/node" + string(rune('1'+i))}; !slices.Equal(b.LogDirs, want) {
			t.Errorf("%s: LogDirs = %v, want %v", name, b.LogDirs, want)
		}
		if b.NumPartitions != 3 || b.DefaultReplicationFactor != 3 || b.MinInsyncReplicas != 2 ||
			b.OffsetsTopicReplicationFactor != 3 || !b.AutoCreateTopicsEnable {
			t.Errorf("%s: topic defaults not read: %+v", name, b)
		}
		if b.Static["min.insync.replicas"] != "2" || b.Static["log.retention.hours"] != "" {
			t.Errorf("%s: Static = %v, want the file's keys only", name, b.Static)
		}
	}
}

func TestEmbeddedDefaults(t *testing.T) {
	b, warnings, err := Parse([]byte(DefaultProperties), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %v", warnings)
	}
	if b.NodeID != 1 || !b.Roles.Broker || !b.Roles.Controller {
		t.Errorf("identity: node %d roles %v", b.NodeID, b.Roles)
	}
	if !slices.Equal(b.LogDirs, []string{"./data"}) {
		t.Errorf("LogDirs = %v", b.LogDirs)
	}
	if got := b.AdvertisedListeners; len(got) != 1 || got[0].String() != "PLAINTEXT://127.0.0.1:9092" {
		t.Errorf("AdvertisedListeners = %v", got)
	}
	if l, ok := b.ControllerListener(); !ok || l.String() != "CONTROLLER://127.0.0.1:9093" {
		t.Errorf("ControllerListener = %v %v", l, ok)
	}
	if len(b.QuorumVoters) != 1 || b.QuorumVoters[0].String() != "1@127.0.0.1:9093" {
		t.Errorf("QuorumVoters = %v", b.QuorumVoters)
	}
	if b.OffsetsTopicReplicationFactor != 1 {
		t.Errorf("OffsetsTopicReplicationFactor = %d: a single node could never create __consumer_offsets", b.OffsetsTopicReplicationFactor)
	}
	// The controller listener is PLAINTEXT without an explicit map, as in
	// Kafka's KRaft mode.
	if b.ListenerSecurityProtocols["CONTROLLER"] != "PLAINTEXT" {
		t.Errorf("protocol map = %v", b.ListenerSecurityProtocols)
	}
}

// TestKafkaDefaults pins each default to the value in Kafka's documentation.
func TestKafkaDefaults(t *testing.T) {
	// The embedded defaults set offsets.topic.replication.factor for a
	// single node; without that line every key is at Kafka's default.
	text := strings.Replace(DefaultProperties, "offsets.topic.replication.factor=1\n", "", 1)
	if text == DefaultProperties {
		t.Fatal("the embedded defaults no longer set offsets.topic.replication.factor: update this test")
	}
	b, _, err := Parse([]byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		key       string
		got, want int64
	}{
		{"num.partitions", int64(b.NumPartitions), 1},
		{"default.replication.factor", int64(b.DefaultReplicationFactor), 1},
		{"min.insync.replicas", int64(b.MinInsyncReplicas), 1},
		{"replica.lag.time.max.ms", b.ReplicaLagTimeMaxMs, 30000},
		{"log.retention.hours", b.LogRetentionMs, 168 * 3600 * 1000},
		{"log.retention.bytes", b.LogRetentionBytes, -1},
		{"log.segment.bytes", int64(b.LogSegmentBytes), 1 << 30},
		{"log.roll.hours", b.LogRollMs, 168 * 3600 * 1000},
		{"log.index.interval.bytes", int64(b.LogIndexIntervalBytes), 4096},
		{"log.index.size.max.bytes", int64(b.LogIndexSizeMaxBytes), 10 << 20},
		{"log.flush.interval.messages", b.LogFlushIntervalMessages, math.MaxInt64},
		{"log.flush.interval.ms", b.LogFlushIntervalMs, math.MaxInt64},
		{"log.retention.check.interval.ms", b.LogRetentionCheckIntervalMs, 300000},
		{"log.message.timestamp.before.max.ms", b.LogMessageTimestampBeforeMaxMs, math.MaxInt64},
		{"log.message.timestamp.after.max.ms", b.LogMessageTimestampAfterMaxMs, 3600000},
		{"message.max.bytes", int64(b.MessageMaxBytes), 1048588},
		{"max.incremental.fetch.session.cache.slots", int64(b.Limits.FetchSessionCacheSlots), 1000},
		{"socket.request.max.bytes", int64(b.SocketRequestMaxBytes), 104857600},
		{"offsets.topic.replication.factor", int64(b.OffsetsTopicReplicationFactor), 3},
		{"offsets.topic.num.partitions", int64(b.OffsetsTopicNumPartitions), 50},
		{"broker.session.timeout.ms", int64(b.BrokerSessionTimeoutMs), 9000},
		{"broker.heartbeat.interval.ms", int64(b.BrokerHeartbeatIntervalMs), 2000},
		{"controller.quorum.election.timeout.ms", int64(b.ControllerQuorumElectionTimeoutMs), 1000},
		{"controller.quorum.fetch.timeout.ms", int64(b.ControllerQuorumFetchTimeoutMs), 2000},
		{"group.initial.rebalance.delay.ms", int64(b.GroupInitialRebalanceDelayMs), 3000},
		{"offsets.retention.minutes", int64(b.OffsetsRetentionMinutes), 10080},
		{"offsets.retention.check.interval.ms", b.OffsetsRetentionCheckIntervalMs, 600000},
		{"queued.max.requests", int64(b.Limits.RequestsQueuedMax), 500},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s default = %d, want %d", c.key, c.got, c.want)
		}
	}
	if !b.AutoCreateTopicsEnable || b.UncleanLeaderElectionEnable {
		t.Errorf("boolean defaults: auto.create.topics.enable %v, unclean.leader.election.enable %v",
			b.AutoCreateTopicsEnable, b.UncleanLeaderElectionEnable)
	}
	if b.LogCleanupPolicy != (CleanupPolicy{Delete: true}) || b.LogMessageTimestampType != TimestampCreateTime || b.CompressionType != "producer" {
		t.Errorf("string defaults: %v %v %v", b.LogCleanupPolicy, b.LogMessageTimestampType, b.CompressionType)
	}
}

// TestRequestLimitDefaultsAreWires: the strand.request.* defaults are
// core/wire's, which the simulator parses with, so that simulated and real
// nodes refuse the same requests.
func TestRequestLimitDefaultsAreWires(t *testing.T) {
	b, _, err := Parse([]byte(DefaultProperties), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := wire.RequestLimits{TopicsMax: int(b.Limits.RequestTopicsMax), PartitionsMax: int(b.Limits.RequestPartitionsMax),
		EntriesMax: int(b.Limits.RequestEntriesMax), TaggedFieldsMax: int(b.Limits.RequestTaggedFieldsMax)}
	if want := wire.DefaultRequestLimits(); got != want {
		t.Errorf("strand.request.* defaults %+v, core/wire's %+v", got, want)
	}
	if b.Limits.ProduceRequestDecompressedBytesMax != 128<<20 || b.Limits.ProduceDecompressionBufferBytesMax != 64<<20 {
		t.Errorf("produce decompression defaults %d and %d, want 128 MiB and 64 MiB",
			b.Limits.ProduceRequestDecompressedBytesMax, b.Limits.ProduceDecompressionBufferBytesMax)
	}
}

// minimal is a valid single-node configuration the tests below vary.
const minimal = DefaultProperties

func parseWith(t *testing.T, overrides map[string]string) (Broker, Warnings, error) {
	t.Helper()
	return Parse([]byte(minimal), overrides)
}

func TestRetentionPrecedence(t *testing.T) {
	cases := []struct {
		overrides map[string]string
		want      int64
	}{
		{map[string]string{"log.retention.hours": "1"}, 3600 * 1000},
		{map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2"}, 2 * 60 * 1000},
		{map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "3"}, 3},
		{map[string]string{"log.retention.ms": "-5"}, -1},
		{map[string]string{"log.retention.hours": "-1"}, -1},
	}
	for _, c := range cases {
		b, _, err := parseWith(t, c.overrides)
		if err != nil {
			t.Fatalf("%v: %v", c.overrides, err)
		}
		if b.LogRetentionMs != c.want {
			t.Errorf("%v: LogRetentionMs = %d, want %d", c.overrides, b.LogRetentionMs, c.want)
		}
	}
	b, _, err := parseWith(t, map[string]string{"log.roll.hours": "2", "log.roll.ms": "77"})
	if err != nil || b.LogRollMs != 77 {
		t.Errorf("log.roll.ms over log.roll.hours: %d, %v", b.LogRollMs, err)
	}
	b, _, err = parseWith(t, map[string]string{"log.roll.hours": "2"})
	if err != nil || b.LogRollMs != 2*3600*1000 {
		t.Errorf("log.roll.hours: %d, %v", b.LogRollMs, err)
	}
}

func TestLogDirOnlyWhenLogDirsUnset(t *testing.T) {
	text := strings.Replace(minimal, "log.dirs=./data\n", "log.dir=/var/strand\n", 1)
	b, _, err := Parse([]byte(text), nil)
	if err != nil || !slices.Equal(b.LogDirs, []string{"/var/strand"}) {
		t.Errorf("log.dir alone: %v, %v", b.LogDirs, err)
	}
	b, _, err = Parse([]byte(text), map[string]string{"log.dirs": "/a, /b"})
	if err != nil || !slices.Equal(b.LogDirs, []string{"/a", "/b"}) {
		t.Errorf("log.dirs over log.dir: %v, %v", b.LogDirs, err)
	}
}

// TestMinInsyncAboveReplicationFactorIsAccepted: Kafka does not reject it;
// acks=all produce fails with NOT_ENOUGH_REPLICAS instead.
func TestMinInsyncAboveReplicationFactorIsAccepted(t *testing.T) {
	b, _, err := parseWith(t, map[string]string{"min.insync.replicas": "3", "default.replication.factor": "1"})
	if err != nil || b.MinInsyncReplicas != 3 {
		t.Errorf("got %d, %v", b.MinInsyncReplicas, err)
	}
}

func TestUnknownKeysAreSortedWarnings(t *testing.T) {
	b, warnings, err := parseWith(t, map[string]string{
		"zookeeper.connect": "localhost:2181", "num.network.threads": "3", "listener.name.plaintext.num.network.threads": "2",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"listener.name.plaintext.num.network.threads", "num.network.threads", "zookeeper.connect"}
	if !slices.Equal(warnings.Keys(), want) {
		t.Errorf("warning keys = %v, want %v", warnings.Keys(), want)
	}
	if _, ok := b.Static["zookeeper.connect"]; ok {
		t.Error("an unknown key reached Static")
	}
}

func TestHeartbeatAboveHalfSessionWarns(t *testing.T) {
	_, warnings, err := parseWith(t, map[string]string{"broker.heartbeat.interval.ms": "5000"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(warnings.Keys(), []string{"broker.heartbeat.interval.ms"}) {
		t.Errorf("warnings = %v", warnings)
	}
}

func TestOverridesWin(t *testing.T) {
	b, _, err := parseWith(t, map[string]string{"num.partitions": "7", "node.id": "1"})
	if err != nil || b.NumPartitions != 7 {
		t.Errorf("NumPartitions = %d, %v", b.NumPartitions, err)
	}
	if b.Static["num.partitions"] != "7" {
		t.Errorf("Static[num.partitions] = %q", b.Static["num.partitions"])
	}
}

// TestValidationErrorsNameTheirKey: every invalid value or combination gives
// an *Error whose Key is the key to fix, and whose message quotes the value
// where there is one.
func TestValidationErrorsNameTheirKey(t *testing.T) {
	cases := []struct {
		name      string
		text      string // replaces minimal when not empty
		overrides map[string]string
		key       string
		contains  string
	}{
		{"not an integer", "", map[string]string{"min.insync.replicas": "abc"}, "min.insync.replicas", `"abc" is not an integer`},
		{"below minimum", "", map[string]string{"min.insync.replicas": "0"}, "min.insync.replicas", "at least 1"},
		{"int32 overflow", "", map[string]string{"num.partitions": "3000000000"}, "num.partitions", "32-bit"},
		{"int16 overflow", "", map[string]string{"default.replication.factor": "40000"}, "default.replication.factor", "16-bit"},
		{"not a boolean", "", map[string]string{"auto.create.topics.enable": "yes"}, "auto.create.topics.enable", `"yes" is not a boolean`},
		{"segment too small", "", map[string]string{"log.segment.bytes": "1000"}, "log.segment.bytes", "at least 1048576"},
		{"bad timestamp type", "", map[string]string{"log.message.timestamp.type": "Now"}, "log.message.timestamp.type", "CreateTime"},
		{"bad compression", "", map[string]string{"compression.type": "brotli"}, "compression.type", `"brotli"`},
		{"bad cleanup policy", "", map[string]string{"log.cleanup.policy": "delete,shred"}, "log.cleanup.policy", "shred"},
		{"zero retention", "", map[string]string{"log.retention.ms": "0"}, "log.retention.ms", "unlimited"},
		{"zero retention minutes", "", map[string]string{"log.retention.minutes": "0"}, "log.retention.minutes", "unlimited"},
		{"zero offsets retention", "", map[string]string{"offsets.retention.minutes": "0"}, "offsets.retention.minutes", "at least 1"},
		{"zero offsets check interval", "", map[string]string{"offsets.retention.check.interval.ms": "0"}, "offsets.retention.check.interval.ms", "at least 1"},
		{"no roles", "node.id=1\n", nil, "process.roles", "required"},
		{"unknown role", "", map[string]string{"process.roles": "broker,observer"}, "process.roles", "observer"},
		{"duplicate role", "", map[string]string{"process.roles": "broker,broker"}, "process.roles", "twice"},
		{"no node id", strings.Replace(minimal, "node.id=1\n", "", 1), nil, "node.id", "required"},
		{"negative node id", "", map[string]string{"node.id": "-1"}, "node.id", "at least 0"},
		{"no voters", "", map[string]string{"controller.quorum.voters": ""}, "controller.quorum.voters", "required"},
		{"malformed voter", "", map[string]string{"controller.quorum.voters": "1-127.0.0.1:9093"}, "controller.quorum.voters", "id@host:port"},
		{"voter bad port", "", map[string]string{"controller.quorum.voters": "1@127.0.0.1:99999"}, "controller.quorum.voters", "port"},
		{"duplicate voter", "", map[string]string{"controller.quorum.voters": "1@a:1,1@b:2"}, "controller.quorum.voters", "more than once"},
		{"controller not a voter", "", map[string]string{"controller.quorum.voters": "2@127.0.0.1:9093"}, "controller.quorum.voters", "node.id 1"},
		{"broker-only is a voter", "", map[string]string{"process.roles": "broker", "listeners": "PLAINTEXT://:9092"}, "controller.quorum.voters", "only controllers"},
		{"broker-only listens for controllers", "", map[string]string{"process.roles": "broker", "controller.quorum.voters": "2@h:9093"}, "listeners", "CONTROLLER"},
		{"controller listener not in listeners", "", map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092"}, "controller.listener.names", "CONTROLLER"},
		{"no controller listener names", "", map[string]string{"controller.listener.names": ""}, "controller.listener.names", "required"},
		{"controller-only with a broker listener", "", map[string]string{"process.roles": "controller"}, "listeners", "PLAINTEXT"},
		{"listener without protocol", "", map[string]string{"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093,EXTERNAL://:9094"}, "listeners", "EXTERNAL"},
		{"malformed listener", "", map[string]string{"listeners": "PLAINTEXT:9092"}, "listeners", "NAME://host:port"},
		{"duplicate listener name", "", map[string]string{"listeners": "PLAINTEXT://:9092,plaintext://:9094,CONTROLLER://:9093"}, "listeners", "more than once"},
		{"same address twice", "", map[string]string{"listeners": "PLAINTEXT://h:9092,CONTROLLER://h:9092"}, "listeners", "same address"},
		{"bad protocol map", "", map[string]string{"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map", "TLS"},
		{"controller name unmapped", "", map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}, "listener.security.protocol.map", "CONTROLLER"},
		{"advertised not in listeners", "", map[string]string{"advertised.listeners": "OTHER://h:1", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,OTHER:PLAINTEXT"}, "advertised.listeners", "OTHER"},
		{"advertised 0.0.0.0", "", map[string]string{"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "0.0.0.0"},
		{"inter-broker is controller", "", map[string]string{"inter.broker.listener.name": "CONTROLLER"}, "inter.broker.listener.name", "controller listener"},
		{"inter-broker unknown", "", map[string]string{"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name", "REPLICATION"},
		{"empty log dirs", "", map[string]string{"log.dirs": " "}, "log.dirs", "at least one"},
		{"queued bytes below request max", "", map[string]string{"queued.max.request.bytes": "1000"}, "queued.max.request.bytes", "socket.request.max.bytes"},
		{"connection buffer below request max", "", map[string]string{"strand.connection.buffered.bytes.max": "1000"}, "strand.connection.buffered.bytes.max", "socket.request.max.bytes"},
		{"empty list item", "", map[string]string{"log.dirs": "/a,,/b"}, "log.dirs", "empty item"},
		{"listener limit of an unknown listener", "", map[string]string{"listener.name.external.max.connections": "5"}, "listener.name.external.max.connections", "EXTERNAL"},
		{"negative listener rate", "", map[string]string{"listener.name.plaintext.max.connection.creation.rate": "-1"}, "listener.name.plaintext.max.connection.creation.rate", "at least 0"},
		{"per-ip 0 without overrides", "", map[string]string{"max.connections.per.ip": "0"}, "max.connections.per.ip", "overrides"},
		{"override without count", "", map[string]string{"max.connections.per.ip.overrides": "10.0.0.1"}, "max.connections.per.ip.overrides", "host:count"},
		{"override count not a number", "", map[string]string{"max.connections.per.ip.overrides": "10.0.0.1:many"}, "max.connections.per.ip.overrides", "10.0.0.1:many"},
		{"override host twice", "", map[string]string{"max.connections.per.ip.overrides": "h:1,h:2"}, "max.connections.per.ip.overrides", "twice"},
		{"zero idle timeout", "", map[string]string{"connections.max.idle.ms": "0"}, "connections.max.idle.ms", "at least 1"},
		{"zero read timeout", "", map[string]string{"strand.request.read.timeout.ms": "0"}, "strand.request.read.timeout.ms", "at least 1"},
		{"zero write timeout", "", map[string]string{"strand.response.write.timeout.ms": "0"}, "strand.response.write.timeout.ms", "at least 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := c.text
			if text == "" {
				text = minimal
			}
			_, _, err := Parse([]byte(text), c.overrides)
			var cfgErr *Error
			if !errors.As(err, &cfgErr) {
				t.Fatalf("got %v, want a *config.Error", err)
			}
			if cfgErr.Key != c.key {
				t.Errorf("error names key %q, want %q (%v)", cfgErr.Key, c.key, err)
			}
			if !strings.Contains(err.Error(), c.contains) || !strings.HasPrefix(err.Error(), "config key "+c.key+": ") {
				t.Errorf("error %q should start with the key and contain %q", err, c.contains)
			}
		})
	}
}

// TestEveryKeyHasAValidDefault parses each key's default on its own, so a typo
// in the table fails here rather than as a panic at start-up.
func TestEveryKeyHasAValidDefault(t *testing.T) {
	for _, key := range KnownBrokerKeys() {
		def := brokerKeys[key]
		if !def.hasDefault {
			continue
		}
		b := builder{explicit: map[string]string{}}
		if err := def.apply(&b, key, def.defaultValue); err != nil {
			t.Errorf("%s default %q: %v", key, def.defaultValue, err)
		}
	}
}

// TestWarningsComeWithErrors: a misspelt key is reported next to the error
// its absence causes.
func TestWarningsComeWithErrors(t *testing.T) {
	text := strings.Replace(minimal, "node.id=1\n", "node.ids=1\n", 1)
	_, warnings, err := Parse([]byte(text), nil)
	var cfgErr *Error
	if !errors.As(err, &cfgErr) || cfgErr.Key != "node.id" {
		t.Fatalf("got %v, want the node.id error", err)
	}
	if !slices.Equal(warnings.Keys(), []string{"node.ids"}) {
		t.Errorf("warnings = %v, want node.ids", warnings)
	}
}

// TestKafkaStyleServerProperties: a file shaped like the one Kafka ships
// parses, and exactly its keys that Strand does not implement are warned
// about. The controller listener in advertised.listeners is dropped from the
// broker's advertised listeners, as in Kafka.
func TestKafkaStyleServerProperties(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "kafka-style.properties"))
	if err != nil {
		t.Fatal(err)
	}
	b, warnings, err := Parse(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
		"share.coordinator.state.topic.min.isr", "share.coordinator.state.topic.replication.factor",
		"socket.receive.buffer.bytes", "socket.send.buffer.bytes",
		"transaction.state.log.min.isr", "transaction.state.log.replication.factor",
	}
	if !slices.Equal(warnings.Keys(), want) {
		t.Errorf("warnings = %v\nwant %v", warnings.Keys(), want)
	}
	if len(b.AdvertisedListeners) != 1 || b.AdvertisedListeners[0].String() != "PLAINTEXT://localhost:9092" {
		t.Errorf("AdvertisedListeners = %v", b.AdvertisedListeners)
	}
	if b.Listeners[0].Host != "" || b.Listeners[0].Address() != ":9092" {
		t.Errorf("wildcard listener = %+v", b.Listeners[0])
	}
}

func TestBootstrapServersExplainsMissingVoters(t *testing.T) {
	_, _, err := parseWith(t, map[string]string{"controller.quorum.voters": "", "controller.quorum.bootstrap.servers": "localhost:9093"})
	if err == nil || !strings.Contains(err.Error(), "controller.quorum.bootstrap.servers") {
		t.Errorf("got %v", err)
	}
}

func TestIPv6Listener(t *testing.T) {
	b, _, err := parseWith(t, map[string]string{
		"listeners":                "PLAINTEXT://[::1]:9092,CONTROLLER://[::1]:9093",
		"controller.quorum.voters": "1@[::1]:9093",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Listeners[0].Host != "::1" || b.Listeners[0].String() != "PLAINTEXT://[::1]:9092" || b.QuorumVoters[0].String() != "1@[::1]:9093" {
		t.Errorf("listeners %v voters %v", b.Listeners, b.QuorumVoters)
	}
}

// TestConnectionLimitKeys reads Kafka's connection keys, the per-listener
// ones included, and the deadlines' defaults.
func TestConnectionLimitKeys(t *testing.T) {
	b, warnings, err := Parse([]byte(minimal), map[string]string{
		"max.connections.per.ip":                               "7",
		"max.connections.per.ip.overrides":                     "10.0.0.1:0, [::1]:50,db-host:3",
		"max.connection.creation.rate":                         "20",
		"listener.name.controller.max.connections":             "40",
		"listener.name.plaintext.max.connection.creation.rate": "5",
	})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("err %v, warnings %v", err, warnings)
	}
	l := b.Limits
	if l.ConnectionsPerIPMax != 7 || l.ConnectionCreationRateMax != 20 {
		t.Errorf("per-ip %d, rate %d", l.ConnectionsPerIPMax, l.ConnectionCreationRateMax)
	}
	if diff := cmp.Diff(map[string]int32{"10.0.0.1": 0, "::1": 50, "db-host": 3}, l.ConnectionsPerIPOverrides); diff != "" {
		t.Errorf("overrides (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int32{"CONTROLLER": 40}, l.ListenerConnectionsMax); diff != "" {
		t.Errorf("listener max (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int32{"PLAINTEXT": 5}, l.ListenerConnectionCreationRateMax); diff != "" {
		t.Errorf("listener rate (-want +got):\n%s", diff)
	}
	if b.Static["listener.name.controller.max.connections"] != "40" {
		t.Errorf("Static lacks the listener key: %v", b.Static)
	}
	d, _, err := Parse([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Limits.ConnectionsMaxIdleMs != 600_000 || d.Limits.RequestReadTimeoutMs != 30_000 || d.Limits.ResponseWriteTimeoutMs != 30_000 ||
		d.Limits.ConnectionsPerIPMax != math.MaxInt32 || d.Limits.ConnectionCreationRateMax != math.MaxInt32 {
		t.Errorf("defaults: %+v", d.Limits)
	}
}
