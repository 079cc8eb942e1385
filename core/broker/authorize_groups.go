package broker

// Authorization of the group APIs' per-resource requirements (SPEC.md
// §10.7): the topics an OffsetCommit, OffsetFetch or OffsetDelete names
// and the groups a DescribeGroups, DeleteGroups, batched OffsetFetch or
// ListGroups concerns. A request's refused parts are taken out before the
// coordinator sees it and answered with the authorization error in the
// response; what the principal may not see at all (the topics of an
// OffsetFetch of every partition, the groups ListGroups lists) is left out
// silently.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
)

// groupsAllowed decides op on each group of names.
func (g grants) groupsAllowed(op acl.Operation, names []string) (allowed []bool, any bool) {
	allowed = make([]bool, len(names))
	for i, name := range names {
		allowed[i] = g.group(op, name)
		any = any || allowed[i]
	}
	return allowed, any
}

// kept are the elements of s whose allowed entry is set.
func kept[T any](s []T, allowed []bool) []T {
	var out []T
	for i, x := range s {
		if allowed[i] {
			out = append(out, x)
		}
	}
	return out
}

// authorizedOffsetCommit takes out the topics the principal may not READ
// and returns what the coordinator gets and how its answer is completed:
// every partition of those topics TOPIC_AUTHORIZATION_FAILED.
func (g grants) authorizedOffsetCommit(req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitRequest, func(kmsg.Response) kmsg.Response) {
	allowed := make([]bool, len(req.Topics))
	all := true
	for i, t := range req.Topics {
		allowed[i] = g.topic(acl.Read, t.Topic)
		all = all && allowed[i]
	}
	if all {
		return req, func(r kmsg.Response) kmsg.Response { return r }
	}
	reduced := *req
	reduced.Topics = kept(req.Topics, allowed)
	denied := *req
	denied.Topics = kept(req.Topics, negated(allowed))
	return &reduced, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.OffsetCommitResponse)
		resp.Topics = append(resp.Topics, offsetCommitFailed(&denied, codeTopicAuthorization).Topics...)
		return resp
	}
}

func negated(b []bool) []bool {
	out := make([]bool, len(b))
	for i := range b {
		out[i] = !b[i]
	}
	return out
}

// authorizedOffsetFetchTopics decides DESCRIBE on the named topics of one
// group's OffsetFetch: named ones refused are answered
// TOPIC_AUTHORIZATION_FAILED per partition (denied); nil topics (every
// partition the group committed) are filtered from the answer instead
// (filterAll).
func (g grants) authorizedOffsetFetchTopics(names []string) (allowed []bool, all bool) {
	allowed = make([]bool, len(names))
	all = true
	for i, name := range names {
		allowed[i] = g.topic(acl.Describe, name)
		all = all && allowed[i]
	}
	return allowed, all
}

// authorizedOffsetFetch applies authorizedOffsetFetchTopics to a
// single-group OffsetFetch (v0..v7).
func (g grants) authorizedOffsetFetch(req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchRequest, func(kmsg.Response) kmsg.Response) {
	if req.Topics == nil {
		return req, func(r kmsg.Response) kmsg.Response {
			resp := r.(*kmsg.OffsetFetchResponse)
			var topics []kmsg.OffsetFetchResponseTopic
			for _, t := range resp.Topics {
				if g.allowsQuietly(acl.Describe, acl.Topic, t.Topic) {
					topics = append(topics, t)
				}
			}
			resp.Topics = topics
			return resp
		}
	}
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	allowed, all := g.authorizedOffsetFetchTopics(names)
	if all {
		return req, func(r kmsg.Response) kmsg.Response { return r }
	}
	reduced := *req
	reduced.Topics = kept(req.Topics, allowed)
	if reduced.Topics == nil {
		reduced.Topics = []kmsg.OffsetFetchRequestTopic{} // named, none left: not "every topic"
	}
	denied := kept(req.Topics, negated(allowed))
	return &reduced, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.OffsetFetchResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, codeTopicAuthorization
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}

// authorizedOffsetFetchGroup applies authorizedOffsetFetchTopics to one
// group of a batched OffsetFetch (v8+): the group as the coordinator gets
// it, and how its answer is completed.
func (g grants) authorizedOffsetFetchGroup(rg kmsg.OffsetFetchRequestGroup) (kmsg.OffsetFetchRequestGroup, func(kmsg.OffsetFetchResponseGroup) kmsg.OffsetFetchResponseGroup) {
	if rg.Topics == nil {
		return rg, func(resp kmsg.OffsetFetchResponseGroup) kmsg.OffsetFetchResponseGroup {
			var topics []kmsg.OffsetFetchResponseGroupTopic
			for _, t := range resp.Topics {
				if g.allowsQuietly(acl.Describe, acl.Topic, t.Topic) {
					topics = append(topics, t)
				}
			}
			resp.Topics = topics
			return resp
		}
	}
	names := make([]string, len(rg.Topics))
	for i, t := range rg.Topics {
		names[i] = t.Topic
	}
	allowed, all := g.authorizedOffsetFetchTopics(names)
	if all {
		return rg, func(resp kmsg.OffsetFetchResponseGroup) kmsg.OffsetFetchResponseGroup { return resp }
	}
	reduced := rg
	reduced.Topics = kept(rg.Topics, allowed)
	if reduced.Topics == nil {
		reduced.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
	}
	denied := kept(rg.Topics, negated(allowed))
	return reduced, func(resp kmsg.OffsetFetchResponseGroup) kmsg.OffsetFetchResponseGroup {
		for _, t := range denied {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, codeTopicAuthorization
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}

// offsetFetchGroupDenied is a batched OffsetFetch's answer for a group the
// principal may not DESCRIBE.
func offsetFetchGroupDenied(name string) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group, rg.ErrorCode = name, codeGroupAuthorization
	return rg
}

// describeGroupDenied is DescribeGroups' answer for a group the principal
// may not DESCRIBE.
func describeGroupDenied(name string) kmsg.DescribeGroupsResponseGroup {
	rg := kmsg.NewDescribeGroupsResponseGroup()
	rg.Group, rg.ErrorCode = name, codeGroupAuthorization
	return rg
}

// deleteGroupDenied is DeleteGroups' answer for a group the principal may
// not DELETE.
func deleteGroupDenied(name string) kmsg.DeleteGroupsResponseGroup {
	rg := kmsg.NewDeleteGroupsResponseGroup()
	rg.Group, rg.ErrorCode = name, codeGroupAuthorization
	return rg
}

// listableGroups leaves out of a ListGroups answer the groups the
// principal may not DESCRIBE, unless it may DESCRIBE the cluster.
func (g grants) listableGroups(groups []kmsg.ListGroupsResponseGroup) []kmsg.ListGroupsResponseGroup {
	if g.clusterQuietly(acl.Describe) {
		return groups
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, gr := range groups {
		if g.allowsQuietly(acl.Describe, acl.Group, gr.Group) {
			out = append(out, gr)
		}
	}
	return out
}
