package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/group"
	"strand/core/quorum"
)

// apiRange is one advertised key with its version range.
type apiRange struct {
	key, min, max int16
}

// clientAPIs is the table every node with the broker role advertises
// (KAFKA-NOTES.md, "What real clients need"). The choices:
//
//   - Produce from v3, the first version that carries RecordBatch v2 (older
//     librdkafka builds switch compression off below it), to v11: v12 needs
//     KIP-890 transactions and v13 names topics by id only.
//   - Fetch from v4 (librdkafka's threshold for the v2 format) to v16:
//     v12 is the last version that names topics by name and the one replica
//     fetchers send (DivergingEpoch), v13 names topics by id (KIP-516), v15
//     carries ReplicaState, v16 NodeEndpoints (left empty). v17 (KIP-853's
//     ReplicaDirectoryId) is not served. kafka-go's Fetch v2 would need the
//     magic 0/1 message format, which Strand does not store: kafka-go then
//     picks v5 or v10, both inside the range. Sessions (KIP-227) from v7.
//   - Metadata v0..v12 (kafka-go v1, kafkajs v6, sarama v11). v0 only for
//     kafka-python 2.0 (Debian's python3-kafka): its version probe sends
//     ApiVersions v0 and, 100 ms later on the same connection, Metadata v0;
//     a connection closed for the second drops the first's answer unread
//     whenever both arrive together (the client discards the bytes it read
//     with the end of the stream), and the client then takes the broker
//     for Kafka 0.9 and refuses zstd and its admin client.
//   - ListOffsets v1..v7: v0 answers with a list of old-style offsets, v8 adds
//     KIP-405 tiered timestamps.
//   - OffsetForLeaderEpoch v0..v4 (kgo uses it from v2).
//   - CreateTopics v2..v7 (kafka-go v2, kafkajs v3), DeleteTopics v1..v6,
//     CreatePartitions v0..v3, AlterConfigs v0..v2 and
//     IncrementalAlterConfigs v0..v1, ElectLeaders v0..v2 (v2 flexible,
//     what kmsg and kadm send; kafka-leader-election.sh), served by
//     core/controller (forwarded by broker-only nodes).
//   - ApiVersions v0..v4 (v3 is KIP-511's flexible version; v4, Kafka
//     3.9's, only lets a SupportedFeatures MinVersion be 0 (KAFKA-17011),
//     and Strand lists no features: the body is v3's. sarama at its newest
//     Version asks v4 first and retries v3 on every connection otherwise).
//   - DeleteRecords v0..v2, DescribeConfigs v0..v4, DescribeCluster v0..v1:
//     admin tools (kcat -L, kgo's kadm).
//   - InitProducerId v0..v4 for the idempotent producer, kgo's and
//     librdkafka's default (transactional ids are refused:
//     api_22_init_producer_id.go).
//   - FindCoordinator v0..v4 (v4 batches keys, KIP-699) and the group APIs
//     core/group serves (groupAPIs).
//   - DescribeLogDirs v1..v4 (disk usage in kafka-log-dirs.sh, kadm and
//     UIs), and DescribeAcls, CreateAcls and DeleteAcls v1..v3 answered
//     SECURITY_DISABLED, as a Kafka broker without an authorizer answers
//     (v0 of all four went in Kafka 4.0, KIP-896).
//
// Never advertise a key that is not served: clients switch behaviour on
// what they see (kgo on key 68, KIP-848).
var clientAPIs = []apiRange{
	{kmsg.Produce.Int16(), 3, 11},
	{kmsg.Fetch.Int16(), 4, fetchEncodedVersionMax},
	{kmsg.ListOffsets.Int16(), 1, 7},
	{kmsg.Metadata.Int16(), 0, 12},
	{kmsg.ApiVersions.Int16(), 0, 4},
	{kmsg.CreateTopics.Int16(), 2, 7},
	{kmsg.DeleteTopics.Int16(), 1, 6},
	{kmsg.CreatePartitions.Int16(), 0, 3},
	{kmsg.AlterConfigs.Int16(), 0, 2},
	{kmsg.IncrementalAlterConfigs.Int16(), 0, 1},
	{kmsg.ElectLeaders.Int16(), 0, 2},
	{kmsg.OffsetForLeaderEpoch.Int16(), 0, 4},
	{kmsg.DeleteRecords.Int16(), 0, 2},
	{kmsg.DescribeConfigs.Int16(), 0, 4},
	{kmsg.DescribeCluster.Int16(), 0, 1},
	{kmsg.InitProducerID.Int16(), 0, 4},
	{kmsg.FindCoordinator.Int16(), 0, 4},
	{kmsg.DescribeLogDirs.Int16(), 1, 4},
	{kmsg.DescribeACLs.Int16(), 1, 3},
	{kmsg.CreateACLs.Int16(), 1, 3},
	{kmsg.DeleteACLs.Int16(), 1, 3},
}

// groupAPIs are the group requests the coordinators serve, in the versions
// core/group serves them.
func groupAPIs() []apiRange {
	var out []apiRange
	for _, v := range group.Versions() {
		out = append(out, apiRange{v.Key, v.Min, v.Max})
	}
	return out
}

// controllerAPIs are served only by a node with the controller role: the
// RPCs brokers send their controller (design-broker.md, controller RPCs),
// the admin requests brokers forward, the brokers' metadata-log Fetch
// (v12), and the voters' Raft RPCs (quorumAPIs), as Kafka's controller
// listener advertises them. DescribeQuorum (55) is not served.
var controllerAPIs = []apiRange{
	{kmsg.Fetch.Int16(), 4, 12},
	{kmsg.ApiVersions.Int16(), 0, 4},
	{kmsg.CreateTopics.Int16(), 2, 7},
	{kmsg.DeleteTopics.Int16(), 1, 6},
	{kmsg.CreatePartitions.Int16(), 0, 3},
	{kmsg.AlterConfigs.Int16(), 0, 2},
	{kmsg.IncrementalAlterConfigs.Int16(), 0, 1},
	{kmsg.ElectLeaders.Int16(), 0, 2},
	{kmsg.AlterPartition.Int16(), 0, 3},
	{kmsg.BrokerRegistration.Int16(), 0, 3},
	{kmsg.BrokerHeartbeat.Int16(), 0, 1},
	{kmsg.AllocateProducerIDs.Int16(), 0, 0},
}

// quorumAPIs are the Raft RPCs between voters (Vote, BeginQuorumEpoch,
// EndQuorumEpoch, FetchSnapshot, and Fetch v15+), in the versions
// core/quorum's codec speaks.
func quorumAPIs() []apiRange {
	var out []apiRange
	for _, v := range quorum.Versions() {
		out = append(out, apiRange{v.Key, v.Min, v.Max})
	}
	return out
}

// advertisedVersions builds the ApiVersions table for a node's roles,
// sorted by key as Kafka sends it. A key in several tables gets the union
// of their ranges, with one exception: Kafka answers ApiVersions per
// listener, Strand with one table per node, so on a node that is a broker
// too the clients' range of a shared key (Fetch: v4..v16; the voters'
// Fetch is routed to the quorum before the table is consulted) is what it
// advertises. With accepted set the table is what the node
// accepts instead: the union always (AcceptedVersions).
func advertisedVersions(brokerRole, controllerRole, accepted bool) []kmsg.ApiVersionsResponseApiKey {
	byKey := map[int16]apiRange{}
	merge := func(ranges []apiRange, wins bool) {
		for _, r := range ranges {
			if prev, ok := byKey[r.key]; ok && (!wins || accepted) {
				r = apiRange{r.key, min(prev.min, r.min), max(prev.max, r.max)}
			}
			byKey[r.key] = r
		}
	}
	if controllerRole {
		merge(controllerAPIs, false)
		merge(quorumAPIs(), false)
	}
	if brokerRole {
		merge(clientAPIs, true)
		merge(groupAPIs(), true)
	}
	keys := make([]int16, 0, len(byKey))
	for k := range byKey { // order-independent: sorted below
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, key := range keys {
		r := byKey[key]
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = r.key, r.min, r.max
		out = append(out, k)
	}
	return out
}

// AdvertisedVersions is the table this node answers ApiVersions with. Give
// it to wire.VersionsSupported so the transport refuses exactly what is not
// advertised.
func (n *Node) AdvertisedVersions() []kmsg.ApiVersionsResponseApiKey {
	return n.advertised
}

// AcceptedVersions is the table of what this node accepts: what it
// advertises, plus, on a node that is broker and controller, the voters'
// Fetch v15+ that its client-facing table leaves out. Give this one to the
// transport's acceptance test (wire.VersionsSupported): a voter's Raft
// traffic must get through; the node's own check (versionAdvertised)
// routes Raft traffic to the quorum before it looks at the table.
func (n *Node) AcceptedVersions() []kmsg.ApiVersionsResponseApiKey {
	b := n.cfg.Broker
	return advertisedVersions(b.Roles.Broker, b.Roles.Controller, true)
}

// versionAdvertised reports whether (key, version) is in the table.
func (n *Node) versionAdvertised(key, version int16) bool {
	for _, k := range n.advertised {
		if k.ApiKey == key {
			return version >= k.MinVersion && version <= k.MaxVersion
		}
	}
	return false
}
