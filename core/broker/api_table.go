package broker

// The API table (SPEC.md §10): every API a node serves, on which kind of
// listener, in which versions, by which handler, and what it requires of
// the connection's principal. Adding an API is one entry here and its
// api_NN_name.go file. HandleRequest dispatches from it, ApiVersions
// answers from it per listener, and the transport's acceptance test is
// built from it (AcceptedVersions), so that what is served, advertised and
// accepted cannot drift apart.
//
// The version choices:
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
//     On the controller listener Fetch is the metadata log's: brokers
//     follow it with v12, voters replicate it with the quorum's version.
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
//     core/controller: a broker forwards them to the active controller on
//     the controller listener, where the controller serves them.
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
//     in the versions core/group serves them.
//   - DescribeLogDirs v1..v4 (disk usage in kafka-log-dirs.sh, kadm and
//     UIs), and DescribeAcls, CreateAcls and DeleteAcls v1..v3
//     (api_29_31_acls.go; SECURITY_DISABLED without an authorizer, as a
//     Kafka broker answers; v0 of all four went in Kafka 4.0, KIP-896).
//     CreateAcls and DeleteAcls are forwarded to the controller like the
//     other admin requests.
//   - SaslHandshake v0..v1 (KIP-43; v1 has SaslAuthenticate follow) and
//     SaslAuthenticate v0..v2 (v1 carries KIP-368's session lifetime, v2
//     is flexible), on every listener as Kafka lists them: realnet's
//     authentication layer answers them while a connection authenticates
//     (SPEC.md §10.6); those that reach the core come from a connection
//     without SASL or already authenticated, and get ILLEGAL_SASL_STATE
//     (sasl.go). librdkafka falls back to pre-KIP-43 framing without them.
//   - The controller RPCs brokers send (BrokerRegistration v0..v3,
//     BrokerHeartbeat v0..v1, AlterPartition v0..v3, AllocateProducerIds
//     v0) and the voters' Raft RPCs in the versions core/quorum's codec
//     speaks.
//   - DescribeQuorum v0..v2 (kafka-metadata-quorum.sh; v1 adds KIP-836's
//     timestamps, v2 KIP-853's directory ids and Nodes), on both kinds of
//     listener as Kafka serves it: a controller listener answers from its
//     node's controller (core/controller/describe_quorum.go), a broker
//     listener forwards to the active controller.
//
// Never advertise a key that is not served: clients switch behaviour on
// what they see (kgo on key 68, KIP-848).

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/env"
	"strand/core/group"
	"strand/core/quorum"
)

// listenerKind is what a listener is for (SPEC.md §10). A listener named
// in controller.listener.names is a controller listener; every other one
// is a broker listener, for clients and, on the inter-broker listener,
// for replicas. Kafka's ApiMessageType.ListenerType BROKER and CONTROLLER.
type listenerKind uint8

const (
	brokerListener listenerKind = 1 << iota
	controllerListener

	bothListeners = brokerListener | controllerListener
)

func (k listenerKind) String() string {
	switch k {
	case brokerListener:
		return "broker"
	case controllerListener:
		return "controller"
	case bothListeners:
		return "broker, controller"
	}
	return fmt.Sprintf("listenerKind(%d)", uint8(k))
}

// apiHandler serves one request; the table has checked its listener,
// version and requirements.
type apiHandler func(n *Node, conn env.ConnID, hdr env.RequestHeader, req kmsg.Request)

// apiEntry registers one API on one or both kinds of listener.
type apiEntry struct {
	key        kmsg.Key
	versionMin int16
	versionMax int16
	listeners  listenerKind
	handle     apiHandler
	// requires says what the connection's principal must be allowed
	// (authorize.go): decided before handle runs where it answers the
	// whole request, by handle through the request's grants per resource.
	// Every entry has one (TestAPITableIsWellFormed).
	requires *access
}

// serves reports whether the entry serves version on listeners of kind.
func (e *apiEntry) serves(kind listenerKind, version int16) bool {
	return e.listeners&kind != 0 && version >= e.versionMin && version <= e.versionMax
}

// serve adapts a handler of one of the node's parts, for one request type,
// to apiHandler: part picks the part of the node that serves the API
// (byNode, byController, ...), so the table says who serves each API.
// HandleRequest has checked that req's key is the entry's, so the type
// assertion holds for every request a Network decodes; a request of
// another type (a test's) closes the connection.
func serve[P any, R kmsg.Request](part func(*Node) P, handle func(P, env.ConnID, env.RequestHeader, R)) apiHandler {
	return func(n *Node, conn env.ConnID, hdr env.RequestHeader, req kmsg.Request) {
		r, ok := req.(R)
		if !ok {
			n.net.Close(conn, hdr.CorrelationID)
			return
		}
		handle(part(n), conn, hdr, r)
	}
}

// The parts of a node that serve APIs, for serve.
func byNode(n *Node) *Node                     { return n }
func byController(n *Node) *controllerRole     { return n.controllerRole }
func byPartitions(n *Node) *partitionManager   { return n.parts }
func byMetadata(n *Node) *metadataFollower     { return n.meta }
func byProducerIDs(n *Node) *producerIDManager { return n.producerIDs }
func byGroups(n *Node) *groupCoordinators      { return n.groups }
func byACLs(n *Node) *aclState                 { return n.acls }

// apiTable is every API Strand serves. A key may have two entries, one per
// kind of listener, when the two serve it differently (Fetch: partitions
// for clients and replicas, the metadata log for brokers and voters; the
// admin requests: from clients, or forwarded by brokers).
var apiTable = []apiEntry{
	{key: kmsg.Produce, versionMin: 3, versionMax: 11, listeners: brokerListener,
		handle: serve(byPartitions, (*partitionManager).handleProduceRequest), requires: produceAccess},
	{key: kmsg.Fetch, versionMin: 4, versionMax: fetchEncodedVersionMax, listeners: brokerListener,
		handle: serve(byPartitions, (*partitionManager).handleFetch), requires: fetchAccess},
	{key: kmsg.Fetch, versionMin: 4, versionMax: quorumVersionMax(kmsg.Fetch), listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerFetch), requires: clusterAccess},
	{key: kmsg.ListOffsets, versionMin: 1, versionMax: 7, listeners: brokerListener,
		handle: serve(byPartitions, (*partitionManager).handleListOffsets), requires: listOffsetsAccess},
	{key: kmsg.Metadata, versionMin: 0, versionMax: 12, listeners: brokerListener,
		handle: serve(byMetadata, (*metadataFollower).handleMetadata), requires: metadataAccess},
	{key: kmsg.OffsetCommit, versionMin: groupVersionMin(kmsg.OffsetCommit), versionMax: groupVersionMax(kmsg.OffsetCommit),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleOffsetCommit), requires: offsetCommitAccess},
	{key: kmsg.OffsetFetch, versionMin: groupVersionMin(kmsg.OffsetFetch), versionMax: groupVersionMax(kmsg.OffsetFetch),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleOffsetFetch), requires: offsetFetchAccess},
	{key: kmsg.FindCoordinator, versionMin: 0, versionMax: 4, listeners: brokerListener,
		handle: serve(byGroups, (*groupCoordinators).handleFindCoordinator), requires: findCoordinatorAccess},
	{key: kmsg.JoinGroup, versionMin: groupVersionMin(kmsg.JoinGroup), versionMax: groupVersionMax(kmsg.JoinGroup),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleJoinGroup), requires: groupReadAccess},
	{key: kmsg.Heartbeat, versionMin: groupVersionMin(kmsg.Heartbeat), versionMax: groupVersionMax(kmsg.Heartbeat),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleHeartbeat), requires: groupReadAccess},
	{key: kmsg.LeaveGroup, versionMin: groupVersionMin(kmsg.LeaveGroup), versionMax: groupVersionMax(kmsg.LeaveGroup),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleLeaveGroup), requires: groupReadAccess},
	{key: kmsg.SyncGroup, versionMin: groupVersionMin(kmsg.SyncGroup), versionMax: groupVersionMax(kmsg.SyncGroup),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleSyncGroup), requires: groupReadAccess},
	{key: kmsg.DescribeGroups, versionMin: groupVersionMin(kmsg.DescribeGroups), versionMax: groupVersionMax(kmsg.DescribeGroups),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleDescribeGroups), requires: describeGroupsAccess},
	{key: kmsg.ListGroups, versionMin: groupVersionMin(kmsg.ListGroups), versionMax: groupVersionMax(kmsg.ListGroups),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleListGroups), requires: listGroupsAccess},
	{key: kmsg.ApiVersions, versionMin: 0, versionMax: 4, listeners: bothListeners,
		handle: serve(byNode, (*Node).handleAPIVersions), requires: noAccess},
	{key: kmsg.CreateTopics, versionMin: 2, versionMax: 7, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleCreateTopics), requires: createTopicsAccess},
	{key: kmsg.CreateTopics, versionMin: 2, versionMax: 7, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.DeleteTopics, versionMin: 1, versionMax: 6, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleDeleteTopics), requires: deleteTopicsAccess},
	{key: kmsg.DeleteTopics, versionMin: 1, versionMax: 6, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.DeleteRecords, versionMin: 0, versionMax: 2, listeners: brokerListener,
		handle: serve(byPartitions, (*partitionManager).handleDeleteRecords), requires: deleteRecordsAccess},
	{key: kmsg.InitProducerID, versionMin: 0, versionMax: 4, listeners: brokerListener,
		handle: serve(byProducerIDs, (*producerIDManager).handleInitProducerID), requires: initProducerIDAccess},
	{key: kmsg.OffsetForLeaderEpoch, versionMin: 0, versionMax: 4, listeners: brokerListener,
		handle: serve(byPartitions, (*partitionManager).handleOffsetForLeaderEpoch), requires: offsetsForEpochAccess},
	{key: kmsg.DescribeACLs, versionMin: 1, versionMax: 3, listeners: brokerListener,
		handle: serve(byACLs, (*aclState).handleDescribeAcls), requires: describeACLsAccess},
	{key: kmsg.CreateACLs, versionMin: 1, versionMax: 3, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleCreateAcls), requires: alterACLsAccess},
	{key: kmsg.DeleteACLs, versionMin: 1, versionMax: 3, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleDeleteAcls), requires: alterACLsAccess},
	{key: kmsg.CreateACLs, versionMin: 1, versionMax: 3, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.DeleteACLs, versionMin: 1, versionMax: 3, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.DescribeConfigs, versionMin: 0, versionMax: 4, listeners: brokerListener,
		handle: serve(byMetadata, (*metadataFollower).handleDescribeConfigs), requires: describeConfigsAccess},
	{key: kmsg.AlterConfigs, versionMin: 0, versionMax: 2, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleAlterConfigs), requires: alterConfigsAccess},
	{key: kmsg.AlterConfigs, versionMin: 0, versionMax: 2, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.DescribeLogDirs, versionMin: 1, versionMax: 4, listeners: brokerListener,
		handle: serve(byPartitions, (*partitionManager).handleDescribeLogDirs), requires: describeLogDirsAccess},
	{key: kmsg.CreatePartitions, versionMin: 0, versionMax: 3, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleCreatePartitions), requires: createPartitionsAccess},
	{key: kmsg.CreatePartitions, versionMin: 0, versionMax: 3, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.DeleteGroups, versionMin: groupVersionMin(kmsg.DeleteGroups), versionMax: groupVersionMax(kmsg.DeleteGroups),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleDeleteGroups), requires: deleteGroupsAccess},
	{key: kmsg.ElectLeaders, versionMin: 0, versionMax: 2, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleElectLeaders), requires: electLeadersAccess},
	{key: kmsg.ElectLeaders, versionMin: 0, versionMax: 2, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.IncrementalAlterConfigs, versionMin: 0, versionMax: 1, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleIncrementalAlterConfigs), requires: alterConfigsAccess},
	{key: kmsg.IncrementalAlterConfigs, versionMin: 0, versionMax: 1, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.OffsetDelete, versionMin: groupVersionMin(kmsg.OffsetDelete), versionMax: groupVersionMax(kmsg.OffsetDelete),
		listeners: brokerListener, handle: serve(byGroups, (*groupCoordinators).handleOffsetDelete), requires: offsetDeleteAccess},
	{key: kmsg.Vote, versionMin: quorumVersionMin(kmsg.Vote), versionMax: quorumVersionMax(kmsg.Vote),
		listeners: controllerListener, handle: serve(byController, (*controllerRole).handleQuorumRequest), requires: clusterAccess},
	{key: kmsg.BeginQuorumEpoch, versionMin: quorumVersionMin(kmsg.BeginQuorumEpoch), versionMax: quorumVersionMax(kmsg.BeginQuorumEpoch),
		listeners: controllerListener, handle: serve(byController, (*controllerRole).handleQuorumRequest), requires: clusterAccess},
	{key: kmsg.EndQuorumEpoch, versionMin: quorumVersionMin(kmsg.EndQuorumEpoch), versionMax: quorumVersionMax(kmsg.EndQuorumEpoch),
		listeners: controllerListener, handle: serve(byController, (*controllerRole).handleQuorumRequest), requires: clusterAccess},
	{key: kmsg.AlterPartition, versionMin: 0, versionMax: 3, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.FetchSnapshot, versionMin: quorumVersionMin(kmsg.FetchSnapshot), versionMax: quorumVersionMax(kmsg.FetchSnapshot),
		listeners: controllerListener, handle: serve(byController, (*controllerRole).handleQuorumRequest), requires: clusterAccess},
	{key: kmsg.DescribeQuorum, versionMin: 0, versionMax: 2, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).forwardDescribeQuorum), requires: describeQuorumAccess},
	{key: kmsg.DescribeQuorum, versionMin: 0, versionMax: 2, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: describeQuorumOnControllerAccess},
	{key: kmsg.DescribeCluster, versionMin: 0, versionMax: 1, listeners: brokerListener,
		handle: serve(byMetadata, (*metadataFollower).handleDescribeCluster), requires: describeClusterAccess},
	{key: kmsg.BrokerRegistration, versionMin: 0, versionMax: 3, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.BrokerHeartbeat, versionMin: 0, versionMax: 1, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.AllocateProducerIDs, versionMin: 0, versionMax: 0, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.DescribeUserSCRAMCredentials, versionMin: 0, versionMax: 0, listeners: brokerListener,
		handle: serve(byMetadata, (*metadataFollower).handleDescribeUserScramCredentials), requires: describeScramAccess},
	{key: kmsg.AlterUserSCRAMCredentials, versionMin: 0, versionMax: 0, listeners: brokerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: alterScramAccess},
	{key: kmsg.AlterUserSCRAMCredentials, versionMin: 0, versionMax: 0, listeners: controllerListener,
		handle: serve(byController, (*controllerRole).handleControllerRequest), requires: clusterAccess},
	{key: kmsg.SASLHandshake, versionMin: 0, versionMax: 1, listeners: bothListeners,
		handle: serve(byNode, (*Node).handleSASLHandshake), requires: noAccess},
	{key: kmsg.SASLAuthenticate, versionMin: 0, versionMax: 2, listeners: bothListeners,
		handle: serve(byNode, (*Node).handleSASLAuthenticate), requires: noAccess},
}

// groupVersionMin and groupVersionMax are the versions core/group serves
// key in.
func groupVersionMin(key kmsg.Key) int16 { return groupVersions(key).Min }
func groupVersionMax(key kmsg.Key) int16 { return groupVersions(key).Max }

func groupVersions(key kmsg.Key) group.VersionRange {
	for _, v := range group.Versions() {
		if v.Key == key.Int16() {
			return v
		}
	}
	panic(fmt.Sprintf("broker: core/group serves no versions of %v", key))
}

// quorumVersionMin and quorumVersionMax are the versions core/quorum's
// codec speaks key in.
func quorumVersionMin(key kmsg.Key) int16 { return quorumVersions(key).Min }
func quorumVersionMax(key kmsg.Key) int16 { return quorumVersions(key).Max }

func quorumVersions(key kmsg.Key) quorum.VersionRange {
	for _, v := range quorum.Versions() {
		if v.Key == key.Int16() {
			return v
		}
	}
	panic(fmt.Sprintf("broker: core/quorum speaks no versions of %v", key))
}

// apiFor finds the entry serving key on listeners of kind, or nil. With
// the planted bug OpenControlPlane it finds an entry on any listener, as
// a node that does not keep its listeners' API sets apart would.
func (n *Node) apiFor(kind listenerKind, key int16) *apiEntry {
	var other *apiEntry
	for i := range apiTable {
		e := &apiTable[i]
		if e.key.Int16() != key {
			continue
		}
		if e.listeners&kind != 0 {
			return e
		}
		other = e
	}
	if n.cfg.Bugs.OpenControlPlane {
		return other
	}
	return nil
}

// listenerKinds are the kinds of listener a node has: broker listeners
// with the broker role, controller listeners with the controller role
// (core/config keeps the two apart: a broker-only node never listens for
// controllers, a controller-only node only does).
func listenerKindsOf(brokerRole, controllerRole bool) []listenerKind {
	var kinds []listenerKind
	if brokerRole {
		kinds = append(kinds, brokerListener)
	}
	if controllerRole {
		kinds = append(kinds, controllerListener)
	}
	return kinds
}

// versionsTable is the ApiVersions table of the given listener kinds:
// every entry serving one of them, one row per key (the union of its
// ranges), sorted by key as Kafka sends it.
func versionsTable(kinds ...listenerKind) []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, e := range apiTable {
		if !slices.ContainsFunc(kinds, func(k listenerKind) bool { return e.listeners&k != 0 }) {
			continue
		}
		i := slices.IndexFunc(out, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == e.key.Int16() })
		if i >= 0 {
			out[i].MinVersion, out[i].MaxVersion = min(out[i].MinVersion, e.versionMin), max(out[i].MaxVersion, e.versionMax)
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = e.key.Int16(), e.versionMin, e.versionMax
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return out
}

// AdvertisedVersions is the table ApiVersions answers with on the listener
// named listener (Kafka answers per listener): nil for a listener this node
// does not have. realnet gives it to KIP-511's answer to an unsupported
// ApiVersions.
func (n *Node) AdvertisedVersions(listener string) []kmsg.ApiVersionsResponseApiKey {
	kind, ok := n.listenerKind(listener)
	if !ok {
		return nil
	}
	return n.advertised[kind]
}

// AcceptedVersions is what the node accepts on any of its listeners: give
// it to the transport's acceptance test (wire.VersionsSupported), which
// refuses what no listener serves; HandleRequest then refuses what the
// request's own listener does not serve.
func (n *Node) AcceptedVersions() []kmsg.ApiVersionsResponseApiKey {
	b := n.cfg.Broker
	return versionsTable(listenerKindsOf(b.Roles.Broker, b.Roles.Controller)...)
}

// listenerServes reports whether the node's listener named listener serves
// key. It reads only what New fixed, so PrecheckRequest may call it on any
// goroutine.
func (n *Node) listenerServes(listener string, key int16) bool {
	kind, ok := n.listenerKind(listener)
	return ok && n.apiFor(kind, key) != nil
}

// listenerKind is the kind of the node's listener named name; false for a
// name the node does not listen on.
func (n *Node) listenerKind(name string) (listenerKind, bool) {
	kind, ok := n.listenerKinds[name]
	return kind, ok
}

// listenerKindsByName maps each of the node's listeners to its kind.
func listenerKindsByName(b config.Broker) map[string]listenerKind {
	kinds := map[string]listenerKind{}
	for _, l := range b.Listeners {
		kind := brokerListener
		if slices.Contains(b.ControllerListenerNames, l.Name) {
			kind = controllerListener
		}
		kinds[l.Name] = kind
	}
	return kinds
}
