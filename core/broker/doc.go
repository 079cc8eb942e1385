// Package broker is Strand's node: the env.Handler that a Network delivers
// Kafka requests to, and the glue between the pieces of core/ that decide
// things. It owns the partitions hosted on this node (each a core/log Log
// driven by a core/replica Partition, with the idempotent producers' state
// of core/producer beside it: producer_state.go), the replica fetchers that
// copy records from leaders, the metadata follower that keeps this node's
// metadata.Image current, and, when process.roles includes controller, the
// controller role.
//
// # Parts
//
// A Node is the composition of parts, each a type with the state it owns,
// sharing the configuration and the environment's handles (nodeEnv):
//
//   - partitionManager (partition_manager.go; Kafka's ReplicaManager): the
//     log directories and hosted partitions, what waits on the partitions
//     (produces, parked fetches, DeleteRecords), and the partition APIs;
//     each hosted partition owns its leader's append (leader_append.go);
//   - replicaFetchers (fetcher.go; Kafka's ReplicaFetcherManager): one
//     fetcher per leader, copying what this node follows;
//   - metadataFollower (metadata_follower.go): the applied metadata image,
//     the broker's registration, heartbeats and controlled shutdown, and
//     the APIs answered from the image;
//   - controllerRole (controller_role.go): the metadata quorum's voter and
//     core/controller with the controller role, and the way to the active
//     controller on every node;
//   - groupCoordinators (coordinators.go): the __consumer_offsets
//     coordinators and the group APIs;
//   - producerIDManager (api_22_init_producer_id.go): producer ids.
//
// Node itself routes each request through the API table to the part that
// serves it, answers ApiVersions and the ACL APIs, and owns start-up and
// Close.
//
// # Layout
//
// Each Kafka API the node serves has one file, api_NN_name.go, opening with a
// comment that lists the versions served and what is deliberately skipped
// (a test holds the comment to the table). api_table.go registers every
// API once: the kinds of listener that serve it (broker or controller),
// its versions, its handler and what it requires of the connection's
// principal (authorize.go). HandleRequest dispatches from it;
// AdvertisedVersions, which ApiVersions answers with on each listener, and
// AcceptedVersions, which the networks give to wire.VersionsSupported, are
// built from it, so that what is served, advertised and accepted cannot
// drift apart.
//
// # Lifecycle
//
// New opens the log directories (log.Manager recovers every partition log
// and its checkpoints) and, with the controller role, a core/quorum Raft
// voter over the metadata log in <first log dir>/metadata and
// core/controller following it. The broker registers with the active
// controller (the quorum leader: controller_role.go says how a broker finds
// it and moves on after NOT_CONTROLLER or a timeout), in process when it is
// one, and follows __cluster_metadata-0 with Fetch, loading the controller's
// snapshot when it is behind the log start; it acts on partition
// metadata only once its own registration is applied, so a restarted
// broker never leads on behalf of its previous incarnation. BeginShutdown
// is Kafka's controlled shutdown; Close after it writes the clean-shutdown
// marker that the next start registers with (PreviousBrokerEpoch, KIP-966).
//
// # Consumer groups
//
// The broker hosts a core/group Coordinator for each __consumer_offsets
// partition it leads (coordinators.go): on becoming leader it reads the
// partition's log up to its LEO into the coordinator, in bounded steps, and
// lets it serve once the high watermark has passed what it read (meanwhile
// COORDINATOR_LOAD_IN_PROGRESS); on losing leadership it unloads it. The
// coordinator's records go through the produce path with acks=all. The
// first FindCoordinator creates __consumer_offsets (compacted, internal)
// through the controller. Group requests go to the coordinator of the
// group's partition, NOT_COORDINATOR when this broker does not lead it.
// Each loaded coordinator expires committed offsets every
// offsets.retention.check.interval.ms. Compacted logs are cleaned in
// bounded steps on a timer (cleaner.go).
//
// # Effects at the edges
//
// Decisions are made by pure code elsewhere (core/replica for replication,
// core/batch for validation, core/metadata for metadata); this package
// performs them: appends, truncations, network sends, replies, timers.
//
// # What it must not do
//
// It is part of core/ (SPEC.md, the hard rule): time, network and disk only
// through core/env, no goroutines, no select, no map iteration order in
// output. It answers bad input with Kafka error codes or by closing the
// connection, and panics only when one of its own invariants breaks.
package broker
