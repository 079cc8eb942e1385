package broker

// Authorization of the admin requests a broker forwards to the controller
// (SPEC.md §10.7): the client's request is authorized here, on the broker
// listener it arrived on, and only what it may do is forwarded (the
// forwarding broker is what the controller authorizes: CLUSTER_ACTION). The
// refused topics and resources are answered with the authorization error
// in the controller's answer; a request with nothing left is answered
// without reaching the controller.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/env"
	"strand/core/metadata"
)

// authorizationFailedMessage is Kafka's message for a refused topic.
const authorizationFailedMessage = "Authorization failed."

// forwardThen forwards req to the active controller and answers with
// complete(its answer); a request with nothing left to forward (empty) is
// answered complete(an empty answer) at once.
func (cr *controllerRole) forwardThen(conn env.ConnID, hdr env.RequestHeader, req kmsg.Request, empty bool, complete func(kmsg.Response) kmsg.Response) {
	reply := func(resp kmsg.Response) { cr.net.Reply(conn, hdr.CorrelationID, complete(resp)) }
	if empty {
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		reply(resp)
		return
	}
	cr.toController(req, func(resp kmsg.Response, err error) {
		if err != nil {
			resp = timedOut(req)
		}
		reply(resp)
	})
}

// forwardCreateTopics forwards the topics the principal may CREATE (on the
// cluster, or on the topic). An existing topic it may not DESCRIBE is
// TOPIC_AUTHORIZATION_FAILED, not TOPIC_ALREADY_EXISTS, so that its
// existence does not leak; the configs of a created topic are told only
// with DESCRIBE_CONFIGS on it.
func (cr *controllerRole) forwardCreateTopics(conn env.ConnID, hdr env.RequestHeader, req *kmsg.CreateTopicsRequest) {
	g := cr.acls.current
	onCluster := g.clusterQuietly(acl.Create)
	reduced := *req
	reduced.Topics = nil
	var denied []kmsg.CreateTopicsResponseTopic
	for _, t := range req.Topics {
		if onCluster || g.topic(acl.Create, t.Topic) {
			reduced.Topics = append(reduced.Topics, t)
			continue
		}
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, codeTopicAuthorization, kmsg.StringPtr(authorizationFailedMessage)
		denied = append(denied, rt)
	}
	cr.forwardThen(conn, hdr, &reduced, len(reduced.Topics) == 0, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.CreateTopicsResponse)
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			if rt.ErrorCode == kerr.TopicAlreadyExists.Code && !g.allowsQuietly(acl.Describe, acl.Topic, rt.Topic) {
				rt.ErrorCode, rt.ErrorMessage = codeTopicAuthorization, kmsg.StringPtr(authorizationFailedMessage)
			}
			if rt.ErrorCode == 0 && !g.allowsQuietly(acl.DescribeConfigs, acl.Topic, rt.Topic) {
				rt.Configs, rt.ConfigErrorCode = nil, codeTopicAuthorization
			}
		}
		resp.Topics = append(resp.Topics, denied...)
		return resp
	})
}

// forwardDeleteTopics forwards the topics the principal may DELETE. One it
// may not is TOPIC_AUTHORIZATION_FAILED, unless it may DESCRIBE it and it
// does not exist (UNKNOWN_TOPIC_OR_PARTITION), as Kafka answers: a topic
// it may not see is refused alike whether or not it exists.
func (cr *controllerRole) forwardDeleteTopics(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DeleteTopicsRequest) {
	g := cr.acls.current
	refusal := func(name string) (int16, bool) {
		if g.topic(acl.Delete, name) {
			return 0, false
		}
		if _, exists := cr.meta.image.TopicByName(name); !exists && g.allowsQuietly(acl.Describe, acl.Topic, name) {
			return kerr.UnknownTopicOrPartition.Code, true
		}
		return codeTopicAuthorization, true
	}
	reduced := *req
	reduced.TopicNames, reduced.Topics = nil, nil
	var denied []kmsg.DeleteTopicsResponseTopic
	deny := func(name *string, id [16]byte, code int16) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = name, id, code
		denied = append(denied, rt)
	}
	for _, name := range req.TopicNames {
		if code, refused := refusal(name); refused {
			deny(kmsg.StringPtr(name), [16]byte{}, code)
			continue
		}
		reduced.TopicNames = append(reduced.TopicNames, name)
	}
	for _, t := range req.Topics {
		name := t.Topic
		if name == nil {
			if known, ok := cr.meta.image.TopicByID(metadata.TopicID(t.TopicID)); ok {
				name = &known.Name
			}
		}
		if name != nil {
			if code, refused := refusal(*name); refused {
				deny(t.Topic, t.TopicID, code)
				continue
			}
		}
		reduced.Topics = append(reduced.Topics, t)
	}
	empty := len(reduced.TopicNames) == 0 && len(reduced.Topics) == 0
	cr.forwardThen(conn, hdr, &reduced, empty, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.DeleteTopicsResponse)
		resp.Topics = append(resp.Topics, denied...)
		return resp
	})
}

// forwardCreatePartitions forwards the topics the principal may ALTER.
func (cr *controllerRole) forwardCreatePartitions(conn env.ConnID, hdr env.RequestHeader, req *kmsg.CreatePartitionsRequest) {
	g := cr.acls.current
	reduced := *req
	reduced.Topics = nil
	var denied []kmsg.CreatePartitionsResponseTopic
	for _, t := range req.Topics {
		if g.topic(acl.Alter, t.Topic) {
			reduced.Topics = append(reduced.Topics, t)
			continue
		}
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, codeTopicAuthorization, kmsg.StringPtr(authorizationFailedMessage)
		denied = append(denied, rt)
	}
	cr.forwardThen(conn, hdr, &reduced, len(reduced.Topics) == 0, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.CreatePartitionsResponse)
		resp.Topics = append(resp.Topics, denied...)
		return resp
	})
}

// configAccess decides op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource: a topic's on the topic, a broker's on the cluster. It returns
// the error code of a refusal, 0 if allowed.
func (g grants) configAccess(op acl.Operation, t kmsg.ConfigResourceType, name string) int16 {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		if !g.topic(op, name) {
			return codeTopicAuthorization
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !g.cluster(op) {
			return codeClusterAuthorization
		}
	}
	return 0
}

// forwardAlterConfigs forwards the resources the principal may
// ALTER_CONFIGS.
func (cr *controllerRole) forwardAlterConfigs(conn env.ConnID, hdr env.RequestHeader, req *kmsg.AlterConfigsRequest) {
	g := cr.acls.current
	reduced := *req
	reduced.Resources = nil
	var denied []kmsg.AlterConfigsResponseResource
	for _, r := range req.Resources {
		if code := g.configAccess(acl.AlterConfigs, r.ResourceType, r.ResourceName); code != 0 {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			denied = append(denied, rr)
			continue
		}
		reduced.Resources = append(reduced.Resources, r)
	}
	cr.forwardThen(conn, hdr, &reduced, len(reduced.Resources) == 0, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.AlterConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
		return resp
	})
}

// forwardIncrementalAlterConfigs forwards the resources the principal may
// ALTER_CONFIGS.
func (cr *controllerRole) forwardIncrementalAlterConfigs(conn env.ConnID, hdr env.RequestHeader, req *kmsg.IncrementalAlterConfigsRequest) {
	g := cr.acls.current
	reduced := *req
	reduced.Resources = nil
	var denied []kmsg.IncrementalAlterConfigsResponseResource
	for _, r := range req.Resources {
		if code := g.configAccess(acl.AlterConfigs, r.ResourceType, r.ResourceName); code != 0 {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			denied = append(denied, rr)
			continue
		}
		reduced.Resources = append(reduced.Resources, r)
	}
	cr.forwardThen(conn, hdr, &reduced, len(reduced.Resources) == 0, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
		return resp
	})
}
