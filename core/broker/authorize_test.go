package broker

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/config"
	"strand/core/env"
	"strand/core/metadata"
	"strand/sim/simnet"
)

// aclCluster is three nodes with every listener SASL_PLAINTEXT and the
// authorizer on: the nodes (User:broker-N) and the test client
// (User:admin) are super users. It holds topic "t" (3 replicas) and
// "secret" (1 partition).
func aclCluster(t *testing.T, extra map[string]string) *cluster {
	t.Helper()
	props := map[string]string{"default.replication.factor": "3",
		"listener.security.protocol.map":   "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
		"super.users":                      "User:broker-1;User:broker-2;User:broker-3;User:admin",
		"authorizer.class.name":            config.StandardAuthorizer,
		"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
		"group.initial.rebalance.delay.ms": "0",
	}
	for k, v := range extra {
		props[k] = v
	}
	c := newCluster(t, 3, props)
	c.client.SetPrincipal("User:admin")
	c.waitRegistered()
	c.createTopic(2, "t", 1, 3)
	c.createTopic(2, "secret", 1, 3)
	return c
}

// grant commits bindings through node via, as one CreateAcls, and waits
// until every broker decides with them.
func (c *cluster) grant(via int32, bindings ...acl.Binding) {
	c.t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.SetVersion(3)
	for _, b := range bindings {
		req.Creations = append(req.Creations, acl.Creation(b))
	}
	for _, r := range c.request(via, req).(*kmsg.CreateACLsResponse).Results {
		if r.ErrorCode != 0 {
			c.t.Fatalf("CreateAcls: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
	c.waitACLs(len(bindings))
}

// waitACLs waits until every running broker holds at least count ACLs.
func (c *cluster) waitACLs(count int) {
	c.t.Helper()
	c.waitFor("the ACLs on every broker", 10000, func() bool {
		for _, tn := range c.nodes {
			if tn.proc.Up() && len(tn.node.EffectiveACLs()) < count {
				return false
			}
		}
		return true
	})
}

func topicACL(principal, topic string, op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.Pattern{Type: acl.Topic, Name: topic, PatternType: acl.Literal},
		Entry: acl.Entry{Principal: principal, Host: acl.Wildcard, Operation: op, Permission: acl.Allow}}
}

func groupACL(principal, group string, op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.Pattern{Type: acl.Group, Name: group, PatternType: acl.Literal},
		Entry: acl.Entry{Principal: principal, Host: acl.Wildcard, Operation: op, Permission: acl.Allow}}
}

func clusterACL(principal string, op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.Pattern{Type: acl.Cluster, Name: acl.ClusterName, PatternType: acl.Literal},
		Entry: acl.Entry{Principal: principal, Host: acl.Wildcard, Operation: op, Permission: acl.Allow}}
}

// ask sends req as f to node's client listener and fails on a transport
// error.
func (f *forger) ask(node int32, req kmsg.Request) kmsg.Response {
	f.c.t.Helper()
	resp, err := f.send(node, "PLAINTEXT", req)
	if err != nil {
		f.c.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func createTopicsReq(names ...string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	for _, name := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, t)
	}
	return req
}

func metadataReq(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	if topics == nil {
		return req // every topic
	}
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	return req
}

func metadataErrors(resp kmsg.Response) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		out[*t.Topic] = t.ErrorCode
	}
	return out
}

// TestRequestsWithoutACLsAreRefused: a principal no ACL names is refused by
// every API it tries, with Kafka's error in Kafka's place, and nothing
// changes: no record appended, no topic created, no existence leaked.
func TestRequestsWithoutACLsAreRefused(t *testing.T) {
	c := aclCluster(t, nil)
	leader := c.leaderOf("t", 0)
	alice := c.newForger("User:alice")
	taf, gaf, caf := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code

	if code := alice.ask(leader, produceReq("t", 0, -1, recordBatch("x"))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != taf {
		t.Errorf("Produce: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if end := c.nodes[leader].node.parts.partitions[partitionKey{"t", 0}].log.LogEndOffset(); end != 0 {
		t.Errorf("a refused produce appended: log ends at %d", end)
	}
	fetch := fetchReq("t", 0, 0, 5000) // a long wait: refused at once, never parked
	at := c.s.NowNs()
	if code := alice.ask(leader, fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; code != taf {
		t.Errorf("Fetch: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if waited := (c.s.NowNs() - at) / 1e6; waited >= 5000 {
		t.Errorf("a refused fetch waited %d ms in the purgatory", waited)
	}
	if got := metadataErrors(alice.ask(1, metadataReq())); len(got) != 0 {
		t.Errorf("Metadata of every topic shows %v, want none", got)
	}
	named := metadataErrors(alice.ask(1, metadataReq("t", "no-such-topic")))
	if named["t"] != taf || named["no-such-topic"] != taf {
		t.Errorf("Metadata of a topic and of a missing one: %v, want TOPIC_AUTHORIZATION_FAILED for both", named)
	}
	if _, ok := c.nodes[1].node.controllerRole.ctrl.Image().TopicByName("no-such-topic"); ok {
		t.Error("Metadata auto-created a topic for a principal without CREATE")
	}
	if code := alice.ask(1, createTopicsReq("new")).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != taf {
		t.Errorf("CreateTopics: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(6)
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("t")}}
	if code := alice.ask(1, del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != taf {
		t.Errorf("DeleteTopics: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if _, ok := c.nodes[1].node.controllerRole.ctrl.Image().TopicByName("t"); !ok {
		t.Fatal("a refused DeleteTopics deleted the topic")
	}
	pid := kmsg.NewPtrInitProducerIDRequest()
	pid.SetVersion(4)
	if code := alice.ask(1, pid).(*kmsg.InitProducerIDResponse).ErrorCode; code != caf {
		t.Errorf("InitProducerId: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(5)
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if code := alice.ask(1, join).(*kmsg.JoinGroupResponse).ErrorCode; code != gaf {
		t.Errorf("JoinGroup: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.SetVersion(4)
	find.CoordinatorKeys = []string{"g"}
	if code := alice.ask(1, find).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode; code != gaf {
		t.Errorf("FindCoordinator: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	describeACLs := acl.DescribeRequest(acl.MatchAll)
	if code := alice.ask(1, describeACLs).(*kmsg.DescribeACLsResponse).ErrorCode; code != caf {
		t.Errorf("DescribeAcls: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	create := kmsg.NewPtrCreateACLsRequest()
	create.SetVersion(3)
	create.Creations = []kmsg.CreateACLsRequestCreation{acl.Creation(topicACL("User:alice", "t", acl.All))}
	if code := alice.ask(1, create).(*kmsg.CreateACLsResponse).Results[0].ErrorCode; code != caf {
		t.Errorf("CreateAcls: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if n := len(c.nodes[1].node.EffectiveACLs()); n != 0 {
		t.Errorf("a refused CreateAcls left %d ACLs", n)
	}
	configs := kmsg.NewPtrDescribeConfigsRequest()
	configs.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	if code := alice.ask(1, configs).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode; code != taf {
		t.Errorf("DescribeConfigs: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	logDirs := kmsg.NewPtrDescribeLogDirsRequest()
	logDirs.SetVersion(4)
	if code := alice.ask(1, logDirs).(*kmsg.DescribeLogDirsResponse).ErrorCode; code != caf {
		t.Errorf("DescribeLogDirs: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	list := kmsg.NewPtrListGroupsRequest()
	if resp := alice.ask(1, list).(*kmsg.ListGroupsResponse); resp.ErrorCode != 0 || len(resp.Groups) != 0 {
		t.Errorf("ListGroups: %+v, want no groups and no error", resp)
	}
}

// TestGrantedRequestsAreServed: once ACLs allow, the same principal
// produces, fetches, sees the topic and commits as a group consumer,
// which needs READ on the group and on the topic. ACLs created on one
// broker reach every broker.
func TestGrantedRequestsAreServed(t *testing.T) {
	c := aclCluster(t, nil)
	leader := c.leaderOf("t", 0)
	alice := c.newForger("User:alice")
	c.grant(3, topicACL("User:alice", "t", acl.Write), topicACL("User:alice", "t", acl.Read))
	if r := alice.ask(leader, produceReq("t", 0, -1, recordBatch("x"))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; r.ErrorCode != 0 {
		t.Fatalf("Produce with WRITE: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := alice.ask(leader, fetchReq("t", 0, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; r.ErrorCode != 0 || len(r.RecordBatches) == 0 {
		t.Fatalf("Fetch with READ: %v, %d bytes", kerr.ErrorForCode(r.ErrorCode), len(r.RecordBatches))
	}
	all := metadataErrors(alice.ask(1, metadataReq()))
	if _, ok := all["t"]; !ok || len(all) != 1 {
		t.Errorf("Metadata of every topic with READ on t (which implies DESCRIBE): %v, want t alone", all)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8)
	commit.Group, commit.Generation = "g", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
		{Topic: "secret", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
	}
	coordinator := c.coordinatorOf(t, "g")
	if code := alice.ask(coordinator, commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("OffsetCommit without READ on the group: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	c.grant(1, groupACL("User:alice", "g", acl.Read))
	resp := alice.ask(coordinator, commit).(*kmsg.OffsetCommitResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["t"] != 0 || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetCommit with READ on the group and on t alone: %v, want t committed and secret TOPIC_AUTHORIZATION_FAILED", codes)
	}
}

// coordinatorOf finds the coordinator of group as the admin client.
func (c *cluster) coordinatorOf(t *testing.T, group string) int32 {
	t.Helper()
	var id int32
	c.waitFor("a coordinator for "+group, 10000, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(4)
		req.CoordinatorKeys = []string{group}
		got := c.request(1, req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
		id = got.NodeID
		return got.ErrorCode == 0
	})
	return id
}

// TestCreateTopicsDoesNotLeakExistence: with CREATE on the cluster but not
// DESCRIBE on an existing topic, creating it again is
// TOPIC_AUTHORIZATION_FAILED, not TOPIC_ALREADY_EXISTS; with DESCRIBE it
// is TOPIC_ALREADY_EXISTS.
func TestCreateTopicsDoesNotLeakExistence(t *testing.T) {
	c := aclCluster(t, nil)
	alice := c.newForger("User:alice")
	c.grant(1, clusterACL("User:alice", acl.Create))
	codes := map[string]int16{}
	for _, rt := range alice.ask(2, createTopicsReq("secret", "fresh")).(*kmsg.CreateTopicsResponse).Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	if codes["secret"] != kerr.TopicAuthorizationFailed.Code || codes["fresh"] != 0 {
		t.Errorf("CreateTopics with CREATE on the cluster: %v, want secret TOPIC_AUTHORIZATION_FAILED and fresh created", codes)
	}
	c.grant(1, topicACL("User:alice", "secret", acl.Describe))
	if code := alice.ask(2, createTopicsReq("secret")).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != kerr.TopicAlreadyExists.Code {
		t.Errorf("with DESCRIBE on secret: %v, want TOPIC_ALREADY_EXISTS", kerr.ErrorForCode(code))
	}
}

// TestACLChangesAreOneBatchOnEveryBroker: the creations of one CreateAcls
// are applied together by every broker, and DescribeAcls on any broker
// lists them; a DeleteAcls removes them everywhere.
func TestACLChangesAreOneBatchOnEveryBroker(t *testing.T) {
	c := aclCluster(t, nil)
	c.grant(2, topicACL("User:alice", "t", acl.Read), topicACL("User:bob", "t", acl.Write), groupACL("User:alice", "g", acl.Read))
	for id := int32(1); id <= 3; id++ {
		resp := c.request(id, acl.DescribeRequest(acl.MatchAll)).(*kmsg.DescribeACLsResponse)
		if got := acl.BindingsOfDescribe(resp.Resources); resp.ErrorCode != 0 || len(got) != 3 {
			t.Errorf("DescribeAcls on node %d: error %d, %v", id, resp.ErrorCode, got)
		}
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.SetVersion(3)
	alice := "User:alice"
	f := acl.MatchAll
	f.Principal = &alice
	del.Filters = []kmsg.DeleteACLsRequestFilter{acl.DeleteFilter(f)}
	if r := c.request(3, del).(*kmsg.DeleteACLsResponse).Results[0]; r.ErrorCode != 0 || len(r.MatchingACLs) != 2 {
		t.Fatalf("DeleteAcls: %v, %d matched", kerr.ErrorForCode(r.ErrorCode), len(r.MatchingACLs))
	}
	c.waitFor("the removal on every broker", 10000, func() bool {
		for _, tn := range c.nodes {
			if len(tn.node.EffectiveACLs()) != 1 {
				return false
			}
		}
		return true
	})
}

// TestPrecheckNeverDecompressesForbiddenProduce: the pre-check leaves the
// batches of a topic the principal may not write unexamined, so nothing is
// decompressed for them, while a super user's are checked.
func TestPrecheckNeverDecompressesForbiddenProduce(t *testing.T) {
	c := aclCluster(t, nil)
	leader := c.nodes[c.leaderOf("t", 0)].node
	view := leader.parts.precheckView
	if view == nil || view.authorizer == nil {
		t.Fatal("the pre-check view has no authorizer")
	}
	req := produceReq("t", 0, -1, recordBatch("x"))
	hdr := env.RequestHeader{APIKey: req.Key(), APIVersion: req.Version, Listener: "PLAINTEXT", Principal: "User:alice", ClientHost: "/10.0.0.9"}
	if got := view.Precheck(hdr, req, nil).(*PrecheckedProduce); got.verdicts[0][0].checked {
		t.Error("the pre-check examined a batch its principal may not write")
	}
	hdr.Principal = "User:admin"
	if got := view.Precheck(hdr, req, nil).(*PrecheckedProduce); !got.verdicts[0][0].checked {
		t.Error("the pre-check left a super user's batch to the loop")
	}
}

// TestDenialsAreAuditedOncePerInterval: a refused request is logged with
// its principal, host, operation and resource, once per
// auditIntervalMs for the same ones.
func TestDenialsAreAuditedOncePerInterval(t *testing.T) {
	c := aclCluster(t, nil)
	leader := c.leaderOf("t", 0)
	alice := c.newForger("User:alice")
	logs := c.nodes[leader].logs
	want := map[string]string{"principal": "User:alice", "operation": "WRITE", "resource": "TOPIC:LITERAL:t", "api": "Produce"}
	for range 3 {
		alice.ask(leader, produceReq("t", 0, 1, recordBatch("x")))
	}
	lines := logs.matching(slog.LevelInfo, "authorization denied", want)
	if len(lines) != 1 || lines[0].attrs["host"] == "" {
		t.Fatalf("three refusals logged %d times (%v), want once with the host", len(lines), lines)
	}
	c.run(auditIntervalMs + 1000)
	alice.ask(leader, produceReq("t", 0, 1, recordBatch("x")))
	if n := len(logs.matching(slog.LevelInfo, "authorization denied", want)); n != 2 {
		t.Fatalf("after the interval: logged %d times, want 2", n)
	}
}

// TestBrokerCutOffFromTheControllerFailsClosed: a broker that cannot
// confirm its ACLs are current for broker.session.timeout.ms closes the
// connection of a request needing an ACL decision, so that a revoked
// permission does not outlive its revocation there; super users are still
// served.
func TestBrokerCutOffFromTheControllerFailsClosed(t *testing.T) {
	c := aclCluster(t, nil)
	c.grant(1, topicACL("User:alice", "t", acl.Read))
	alice := c.newForger("User:alice")
	if r := alice.ask(3, fetchReq("t", 0, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; r.ErrorCode != 0 && r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch while connected: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.net.Partition([]simnet.HostID{c.nodes[3].nn.Host()}, []simnet.HostID{c.nodes[1].nn.Host(), c.nodes[2].nn.Host()}, true)
	c.run(int64(c.nodes[3].cfg.Broker.BrokerSessionTimeoutMs) + 1000)
	if _, err := alice.send(3, "PLAINTEXT", fetchReq("t", 0, 0, 0)); err == nil {
		t.Error("a broker cut off from the controller past the session timeout answered a request needing its ACLs")
	}
	if resp := c.request(3, metadataReq("t")).(*kmsg.MetadataResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Errorf("a super user's Metadata on the cut-off broker: %+v", resp.Topics)
	}
}

// TestScramCredentialRequestsNeedClusterACLs: DescribeUserScramCredentials
// needs DESCRIBE on the cluster and AlterUserScramCredentials ALTER, as in
// Kafka: without them both are CLUSTER_AUTHORIZATION_FAILED, for the whole
// answer and every user, and nothing is altered; with them they are served.
func TestScramCredentialRequestsNeedClusterACLs(t *testing.T) {
	c := aclCluster(t, nil)
	alice := c.newForger("User:alice")
	caf := kerr.ClusterAuthorizationFailed.Code
	describe := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	describe.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "bob"}}
	if d := alice.ask(3, describe).(*kmsg.DescribeUserSCRAMCredentialsResponse); d.ErrorCode != caf ||
		len(d.Results) != 1 || d.Results[0].User != "bob" || d.Results[0].ErrorCode != caf {
		t.Errorf("describe without DESCRIBE on the cluster: %v %+v, want CLUSTER_AUTHORIZATION_FAILED for the answer and bob",
			kerr.ErrorForCode(d.ErrorCode), d.Results)
	}
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Upsertions = append(alter.Upsertions, scramUpsertion("bob", metadata.ScramSHA256, 4096))
	if r := alice.ask(3, alter).(*kmsg.AlterUserSCRAMCredentialsResponse); len(r.Results) != 1 || r.Results[0].ErrorCode != caf {
		t.Errorf("alter without ALTER on the cluster: %+v, want CLUSTER_AUTHORIZATION_FAILED", r.Results)
	}
	if n := c.nodes[1].node.controllerRole.ctrl.Image().ScramCredentials().Len(); n != 0 {
		t.Fatalf("a refused alter committed %d credentials", n)
	}
	c.grant(1, clusterACL("User:alice", acl.Alter), clusterACL("User:alice", acl.Describe))
	if r := alice.ask(3, alter).(*kmsg.AlterUserSCRAMCredentialsResponse); len(r.Results) != 1 || r.Results[0].ErrorCode != 0 {
		t.Fatalf("alter with ALTER on the cluster: %+v", r.Results)
	}
	c.waitFor("bob's credential on broker 3", 5000, func() bool {
		return c.nodes[3].node.Image().ScramCredentials().Len() == 1
	})
	if d := alice.ask(3, describe).(*kmsg.DescribeUserSCRAMCredentialsResponse); d.ErrorCode != 0 || len(d.Results) != 1 ||
		d.Results[0].ErrorCode != 0 || len(d.Results[0].CredentialInfos) != 1 {
		t.Errorf("describe with DESCRIBE on the cluster: %v %+v", kerr.ErrorForCode(d.ErrorCode), d.Results)
	}
}
