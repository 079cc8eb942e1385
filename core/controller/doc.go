// Package controller is Strand's metadata controller: the state machine that
// owns the cluster metadata (brokers, topics, partition leaders, ISR and ELR,
// producer id blocks, ACLs), as Kafka's KRaft QuorumController does.
//
// # What it does
//
// Inputs are controller requests (kmsg) and time:
//
//	BrokerRegistration (62)  a broker starts: it is registered, fenced
//	BrokerHeartbeat (63)     liveness; unfence once caught up; controlled shutdown
//	AlterPartition (56)      ISR changes from partition leaders
//	CreateTopics (19), DeleteTopics (20), CreatePartitions (37)
//	AllocateProducerIds (67) a block of producer ids per call
//	AlterConfigs (33), IncrementalAlterConfigs (44)  topic configs (configs.go)
//	ElectLeaders (43)        preferred and unclean elections an operator asks for
//	CreateAcls (30), DeleteAcls (31)  ACLs, one batch per request (acls.go)
//	Fetch (1) of __cluster_metadata-0: brokers following the metadata log
//	timers                   a broker silent for broker.session.timeout.ms is fenced
//
// Outputs are metadata records (core/metadata) appended, as one batch per
// decision, to the metadata log through a quorum, and responses. A request is
// answered only once the records it caused are committed. Elections and
// ISR/ELR bookkeeping use the pure functions of core/replica (elr.go), so the
// replication proof does not depend on which controller drives it.
//
// Elections run whenever a leader leaves the ISR (fencing, controlled
// shutdown, AlterPartition) and, for leaderless partitions, whenever one of
// their replicas is unfenced. The rule is replica.Elect's: the ISR, then the
// ELR when the ISR is empty, then, when ISR and ELR are both empty (every
// replica that held the committed records restarted uncleanly, over the
// fault budget), the last known leader (LastKnownELR) once it is unfenced,
// then any live replica if unclean.leader.election.enable. So a partition
// whose only replica, or whose every ISR member, was killed and restarted
// gets its leader back as soon as its last leader re-registers and catches
// up.
//
// A restarted broker (new incarnation id) cannot register while its old
// session is alive (DUPLICATE_BROKER_REGISTRATION, as Kafka's
// ClusterControlManager.registerBroker); it retries until the session
// expires (broker.session.timeout.ms). A controller that becomes active
// grants every unfenced broker a full session, so after a single-node
// restart the broker waits one session timeout, as in Kafka.
//
// # Two images
//
// The active controller keeps the image of everything it appended (latest),
// from which it decides, and the image of what is committed (committed).
// Records are applied to latest as they are generated; committed is built
// by every voter, active or not, from the committed decisions the quorum
// hands back, in order; only then are the waiting requests answered and
// fetches served. Brokers see only committed records.
//
// # The quorum
//
// Quorum (quorum.go) is core/quorum's MetadataQuorum over the node's Raft
// voter among controller.quorum.voters. One decision is one Append, which
// the quorum makes visible whole or never. The controller follows
// leadership:
//
//   - it becomes active when its voter leads and the epoch's leader-change
//     entry has committed (so everything before it has), starting latest
//     from the committed image and giving every unfenced broker a fresh
//     session, as Kafka's controller does on failover;
//   - when its voter stops leading that epoch it resigns: latest and the
//     uncommitted records are dropped (the new leader's log decides whether
//     they survive), requests waiting for a commit are answered
//     NOT_CONTROLLER so brokers retry at the new controller, and held
//     metadata fetches are answered NOT_LEADER_OR_FOLLOWER with the leader
//     in CurrentLeader;
//   - a node that is not active answers NOT_CONTROLLER.
//
// Snapshots are not taken yet: the quorum's log is the whole history, and a
// snapshot arriving from a leader stops the controller (it cannot load one).
//
// # API for the node
//
//	q := quorum.NewMetadataQuorum()
//	node, err := quorum.StartNode(qcfg, clock, net, disk, dir, q)
//	q.Attach(node)
//	c, err := controller.New(cfg, clock, q, newTopicID)
//	if controller.Handles(req) { c.HandleRequest(req, reply) }
//	c.Close(); node.Stop() // when the node stops
//
// reply is called at most once per request, on the event loop, possibly
// later (after a commit or a long poll). It is not called if the controller
// stops first (Close, or a failed quorum): the client's request timeout
// decides, as with a crashed controller. Image() returns the committed
// image (for tests and for a node running both roles; do not modify it).
// LeaderID() names the quorum leader this voter knows.
//
// What brokers must send: BrokerRegistration v3+ with PreviousBrokerEpoch =
// the epoch it held when it last shut down cleanly, -1 otherwise (an
// unclean restart drops it from every ELR, KIP-966); BrokerHeartbeat with
// CurrentMetadataOffset = the offset of the last metadata record it applied
// (metadata.Image.Offset); Fetch of __cluster_metadata-0 from
// Image.Offset()+1 (records come in whole batches: metadata.Image.ApplyBatch
// skips those already applied). A fetch at or above the commit offset waits
// (MaxWaitMs) for new commits; one beyond the end of the controller's log
// gets OFFSET_OUT_OF_RANGE. The node's log manager must not load the
// quorum's directory as a partition log.
//
// # What it must not do
//
// It is part of core/: no goroutines, no real clock (time comes from
// env.Clock), no randomness (topic ids come from the injected source), no
// map order reaching records or responses. It never panics on a request;
// it panics only if its own invariants break (a record it generated does not
// apply to its own image).
package controller
