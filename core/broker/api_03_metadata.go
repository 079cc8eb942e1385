package broker

// Metadata (key 3), versions 0..12 (v0 for kafka-python 2.0: api_table.go).
//
// Served: the unfenced brokers with their endpoint on the first advertised
// listener; the controller id (this cluster's controller node if it is also
// a broker, else the lowest-id live broker, which forwards admin requests:
// clients send admin requests there, so it must be a reachable broker);
// topics by name or (v10+) by id, with topic ids, partitions, leader,
// leader epoch, replicas, ISR and offline replicas; topics never requested
// by name (nil Topics) means all. An unknown topic is auto-created
// (LEADER_NOT_AVAILABLE while it is being created) when
// auto.create.topics.enable and the request (v4+) allow it, else
// UNKNOWN_TOPIC_OR_PARTITION; a name no topic may have (Kafka's
// Topic.validate) is INVALID_TOPIC_EXCEPTION either way, as in Kafka. Partitions without a leader answer
// LEADER_NOT_AVAILABLE. __consumer_offsets is marked internal; it is
// created by FindCoordinator, never auto-created by Metadata.
//
// The cluster id (v2+) is Config.ClusterID (clusterID).
//
// A topic named twice (by name, or by id) is answered once, as Kafka's
// KafkaApis.getTopicMetadata takes the request's topics as a set: the
// answer and the work stay bounded by the distinct topics, which
// strand.request.topics.max bounds before the request is decoded
// (core/wire).
//
// With the authorizer on (SPEC.md §10.7), every topic needs DESCRIBE: a
// request for all topics leaves out the others silently, a topic named
// without it is TOPIC_AUTHORIZATION_FAILED whether or not it exists, and
// auto-creation needs CREATE on the cluster or the topic. Authorized
// operations (v8+, cluster ones v8..v10) are told when asked.
//
// Skipped: racks.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/config"
	"strand/core/controller"
	"strand/core/env"
	"strand/core/metadata"
)

func (mf *metadataFollower) handleMetadata(conn env.ConnID, hdr env.RequestHeader, req *kmsg.MetadataRequest) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers, resp.ControllerID = mf.liveBrokers(mf.clientListener(hdr))
	clusterID := mf.clusterID()
	resp.ClusterID = &clusterID
	g := mf.acls.current
	if req.IncludeClusterAuthorizedOperations && req.Version >= 8 && req.Version <= 10 {
		resp.AuthorizedOperations = g.authorizedOperations(acl.Cluster, acl.ClusterName)
	}
	describe := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		if req.IncludeTopicAuthorizedOperations && req.Version >= 8 {
			mt.AuthorizedOperations = g.authorizedOperations(acl.Topic, *mt.Topic)
		}
		return mt
	}
	// All topics: a null list, or in v0 (which has no null) an empty one.
	// Those the principal may not DESCRIBE are left out, silently.
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, t := range mf.image.Topics() {
			if g.allowsQuietly(acl.Describe, acl.Topic, t.Name) {
				resp.Topics = append(resp.Topics, describe(mf.topicMetadata(t)))
			}
		}
		mf.net.Reply(conn, hdr.CorrelationID, resp)
		return
	}
	var create []string
	answered := map[metadataTopicKey]bool{}
	for _, rt := range req.Topics {
		key := metadataTopicKeyOf(rt)
		if answered[key] {
			continue
		}
		answered[key] = true
		t, ok := mf.lookupTopic(rt)
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
		name := t.Name
		if rt.Topic != nil {
			name = *rt.Topic
		}
		if (ok || rt.Topic != nil) && !g.topic(acl.Describe, name) {
			// Whether or not it exists: a name it may not see is refused
			// alike (by id, Kafka tells the id, which is not secret).
			mt.ErrorCode = codeTopicAuthorization
			if rt.Topic == nil {
				mt.TopicID = t.ID
			} else {
				mt.TopicID = [16]byte{}
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if ok {
			resp.Topics = append(resp.Topics, describe(mf.topicMetadata(t)))
			continue
		}
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if rt.Topic == nil {
			mt.ErrorCode = kerr.UnknownTopicID.Code
		} else if metadata.ValidateTopicName(*rt.Topic) != nil {
			// Kafka's getTopicMetadata and AutoTopicCreationManager: a name
			// no topic can have fails at once, so the client does not retry.
			mt.ErrorCode = kerr.InvalidTopicException.Code
		} else if mf.cfg.Broker.AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation) &&
			*rt.Topic != controller.MetadataTopic && *rt.Topic != offsetsTopic {
			// Auto-creation needs CREATE, on the cluster or the topic.
			if g.clusterQuietly(acl.Create) || g.topic(acl.Create, *rt.Topic) {
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
				create = append(create, *rt.Topic)
			} else {
				mt.ErrorCode = codeTopicAuthorization
			}
		}
		resp.Topics = append(resp.Topics, mt)
	}
	if len(create) > 0 {
		mf.autoCreate(create)
	}
	mf.net.Reply(conn, hdr.CorrelationID, resp)
}

// metadataTopicKey is a requested topic as Metadata deduplicates it: by
// name, or by id when no name is given (v10+).
type metadataTopicKey struct {
	byName bool
	name   string
	id     [16]byte
}

func metadataTopicKeyOf(rt kmsg.MetadataRequestTopic) metadataTopicKey {
	if rt.Topic != nil {
		return metadataTopicKey{byName: true, name: *rt.Topic}
	}
	return metadataTopicKey{id: rt.TopicID}
}

// clientListener is the listener whose endpoints a request's answer names
// (Metadata, FindCoordinator, DescribeCluster): the one the request came
// in on when it is an advertised broker listener, as Kafka answers with
// the endpoints of the request's listener (a client of an SSL listener
// must be sent to SSL listeners); else the first advertised one (a request
// with no listener, or on the controller listener).
func (e *nodeEnv) clientListener(hdr env.RequestHeader) string {
	advertised := e.cfg.Broker.AdvertisedListeners
	for _, l := range advertised {
		if l.Name == hdr.Listener {
			return l.Name
		}
	}
	if len(advertised) > 0 {
		return advertised[0].Name
	}
	return ""
}

// liveBrokers lists the unfenced brokers with their endpoint on listener,
// and the id to give clients as the controller: the controller node if it
// is a broker, else the lowest-id live broker, which forwards admin
// requests (clients send admin requests to the id they get, so it must be
// a reachable broker). A broker without that listener is left out, as in
// Kafka.
func (mf *metadataFollower) liveBrokers(listener string) ([]kmsg.MetadataResponseBroker, int32) {
	var brokers []kmsg.MetadataResponseBroker
	controllerID := int32(-1)
	for _, id := range mf.image.BrokerIDs() {
		b, _ := mf.image.Broker(id)
		e, ok := mf.image.BrokerEndpoint(id, listener)
		if b.Fenced || !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = id, e.Host, int32(e.Port)
		brokers = append(brokers, mb)
		if controllerID == -1 || id == mf.controllerRole.controllerTarget() {
			controllerID = id
		}
	}
	return brokers, controllerID
}

// clusterID is the id Metadata and DescribeCluster report: Config.ClusterID,
// else the one derived from the quorum voters, as `strand serve` formats
// directories when given none.
func (mf *metadataFollower) clusterID() string {
	if mf.cfg.ClusterID != "" {
		return mf.cfg.ClusterID
	}
	return config.DeriveClusterID(mf.cfg.Broker.QuorumVoters)
}

// lookupTopic finds a requested topic by name, or by id when no name is
// given (v10+).
func (mf *metadataFollower) lookupTopic(rt kmsg.MetadataRequestTopic) (metadata.Topic, bool) {
	if rt.Topic != nil {
		return mf.image.TopicByName(*rt.Topic)
	}
	return mf.image.TopicByID(metadata.TopicID(rt.TopicID))
}

func (mf *metadataFollower) topicMetadata(t metadata.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID = &name, t.ID
	mt.IsInternal = name == offsetsTopic
	for p := range t.Partitions {
		s, ok := mf.image.Partition(t.ID, p)
		if !ok {
			continue
		}
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, s.Leader, s.LeaderEpoch
		mp.Replicas, mp.ISR = slices.Clone(s.Replicas), slices.Clone(s.ISR)
		for _, r := range s.Replicas {
			if b, ok := mf.image.Broker(r); !ok || b.Fenced {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if s.Leader == metadata.NoLeader {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// autoCreate asks the controller to create topics with the defaults.
// The outcome is not awaited: the client retries Metadata.
func (mf *metadataFollower) autoCreate(names []string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 30000
	for _, name := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, -1, -1
		req.Topics = append(req.Topics, t)
	}
	mf.controllerRole.toController(req, func(kmsg.Response, error) {})
}
