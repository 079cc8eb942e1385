package workload

// The ACL clients (SPEC.md §6.1, §10.7): with the authorizer on, an ACL
// admin (a super user) creates the ACL probes' topics and the base ACLs
// that let the rest of the workload work, then churns ACLs on the probes'
// resources while the probes produce, fetch, ask Metadata, commit offsets
// and create topics in those resources' names. Every change and every
// probe request is recorded (models.ACLHistory) for the authorized
// checker.
//
// Namespaces keep the workload apart from the churn: the workload's topics
// (t…, c…) and groups (g…) have base ACLs allowing every user
// everything but CLUSTER_ACTION; the probes' topics (acl-t0, acl-t1, and
// the acl-n… they create) and group (acl-g) are what the churn's ACLs
// name, by LITERAL name, by PREFIXED patterns shorter, equal and longer
// than the names, and by LITERAL *. A DENY of every user never names *,
// so that the workload's own requests are never refused.

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/batch"
	"strand/models"
)

// ACLConfig switches the ACL clients on.
type ACLConfig struct {
	// Probes is the number of probe clients; 0 switches the ACL clients
	// off.
	Probes int
	// Rand is the ACL clients' own stream, so that their draws do not
	// reshuffle the workload's.
	Rand *rand.Rand
	// AdminPrincipal is the ACL admin's principal: a super user.
	AdminPrincipal string
	// Config is what the brokers' authorizer decides with besides the
	// ACLs (super users, allow.everyone.if.no.acl.found), for the checker.
	Config acl.Config
}

// Timings of the ACL clients.
const (
	aclChurnIntervalNsMin = 200e6
	aclChurnIntervalNsMax = 800e6
	aclProbeIntervalNsMin = 50e6
	aclProbeIntervalNsMax = 250e6
	// aclProbeCreatesMax bounds the topics the probes create.
	aclProbeCreatesMax = 6
	// aclChurnHeldMax bounds the churn's own ACLs: past it, the churn
	// only removes.
	aclChurnHeldMax = 12
)

// The probes' resources.
var (
	aclProbeTopics = []string{"acl-t0", "acl-t1"}
	aclProbeGroup  = "acl-g"
)

// aclClients are the ACL admin and the probes.
type aclClients struct {
	w      *Workload
	cfg    ACLConfig
	admin  *client
	probes []*client
	// leaders of the probes' topics, as the admin (a super user) last saw
	// them.
	leaders map[string]int32
	// held are the churn's own ACLs the cluster holds (after the last
	// answered change); base the base ACLs.
	held, base []acl.Binding
	// inFlight is set while a change is being committed.
	inFlight bool
	creates  int
	history  models.ACLHistory
}

func (c ACLConfig) enabled() bool { return c.Probes > 0 }

// newACLClients adds the ACL clients; they send nothing until started.
func (w *Workload) newACLClients(cfg ACLConfig) *aclClients {
	a := &aclClients{w: w, cfg: cfg, leaders: map[string]int32{}}
	a.history.Config = cfg.Config
	a.admin = w.newClient("acladmin")
	a.admin.principal = cfg.AdminPrincipal
	a.admin.host.SetPrincipal(cfg.AdminPrincipal)
	for range cfg.Probes {
		a.probes = append(a.probes, w.newClient("aclprobe"))
	}
	return a
}

// ACLHistory is what the ACL clients saw; empty without them.
func (w *Workload) ACLHistory() models.ACLHistory {
	if w.acls == nil {
		return models.ACLHistory{}
	}
	return w.acls.history
}

// baseACLs let the workload's clients do everything on their own topics
// and groups, and what they need of the cluster (InitProducerId's
// IDEMPOTENT_WRITE), never CLUSTER_ACTION; and the credential admin, if
// the run has one (its principal, else ""), what altering and describing
// SCRAM credentials requires: ALTER and DESCRIBE on the cluster.
func baseACLs(scramAdmin string) []acl.Binding {
	allow := func(t acl.ResourceType, name string, pt acl.PatternType, op acl.Operation) acl.Binding {
		return acl.Binding{Pattern: acl.Pattern{Type: t, Name: name, PatternType: pt},
			Entry: acl.Entry{Principal: acl.WildcardPrincipal, Host: acl.Wildcard, Operation: op, Permission: acl.Allow}}
	}
	base := []acl.Binding{
		allow(acl.Topic, "t", acl.Prefixed, acl.All),
		allow(acl.Topic, "c", acl.Prefixed, acl.All),
		allow(acl.Group, "g", acl.Prefixed, acl.All),
		allow(acl.Cluster, acl.ClusterName, acl.Literal, acl.IdempotentWrite),
	}
	if scramAdmin != "" {
		for _, op := range []acl.Operation{acl.Alter, acl.Describe} {
			b := allow(acl.Cluster, acl.ClusterName, acl.Literal, op)
			b.Principal = scramAdmin
			base = append(base, b)
		}
	}
	return base
}

// setup creates the probes' topics and the base ACLs, then runs done.
func (a *aclClients) setup(done func()) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 5000
	for _, name := range aclProbeTopics {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, 1, a.w.cfg.ReplicationFactor
		req.Topics = append(req.Topics, t)
	}
	a.admin.send(a.admin.randomBroker(), req, a.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if err != nil || !allCreated(resp.(*kmsg.CreateTopicsResponse)) {
			a.admin.proc.After(a.w.cfg.BackoffNs, func() { a.setup(done) })
			return
		}
		scramAdmin := ""
		if a.w.scramAdmin != nil {
			scramAdmin = a.w.scramAdmin.principal
		}
		a.base = baseACLs(scramAdmin)
		a.commit(a.base, nil, done)
	})
}

// start begins the churn and the probes.
func (a *aclClients) start() {
	a.refreshLeaders()
	a.admin.proc.After(a.churnDelay(), a.churnStep)
	for _, p := range a.probes {
		probe := p
		probe.proc.After(a.probeDelay(), func() { a.probeStep(probe) })
	}
}

func (a *aclClients) r() *rand.Rand { return a.cfg.Rand }

func (a *aclClients) churnDelay() int64 {
	return aclChurnIntervalNsMin + a.r().Int64N(aclChurnIntervalNsMax-aclChurnIntervalNsMin)
}

func (a *aclClients) probeDelay() int64 {
	return aclProbeIntervalNsMin + a.r().Int64N(aclProbeIntervalNsMax-aclProbeIntervalNsMin)
}

// commit sends one change (a CreateAcls of add, or a DeleteAcls of exact
// filters for remove; never both), retrying it until it is answered
// without error, records it, and runs then.
func (a *aclClients) commit(add, remove []acl.Binding, then func()) {
	change := models.ACLChange{Add: add, Remove: remove, CallNs: a.w.s.NowNs(), ReturnNs: models.NeverReturnedNs}
	a.history.Changes = append(a.history.Changes, change)
	index := len(a.history.Changes) - 1
	a.inFlight = true
	var attempt func()
	attempt = func() {
		a.admin.send(a.admin.randomBroker(), aclChangeRequest(add, remove), a.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
			if err != nil || !aclChangeDone(resp) {
				a.admin.proc.After(a.w.cfg.BackoffNs, attempt)
				return
			}
			a.history.Changes[index].ReturnNs = a.w.s.NowNs()
			a.inFlight = false
			then()
		})
	}
	attempt()
}

func aclChangeRequest(add, remove []acl.Binding) kmsg.Request {
	if len(add) > 0 {
		req := kmsg.NewPtrCreateACLsRequest()
		req.SetVersion(3)
		for _, b := range add {
			req.Creations = append(req.Creations, acl.Creation(b))
		}
		return req
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	req.SetVersion(3)
	for _, b := range remove {
		req.Filters = append(req.Filters, acl.DeleteFilter(acl.ExactFilter(b)))
	}
	return req
}

// aclChangeDone reports whether every creation or filter succeeded.
func aclChangeDone(resp kmsg.Response) bool {
	switch r := resp.(type) {
	case *kmsg.CreateACLsResponse:
		for _, x := range r.Results {
			if x.ErrorCode != 0 {
				return false
			}
		}
		return true
	case *kmsg.DeleteACLsResponse:
		for _, x := range r.Results {
			if x.ErrorCode != 0 {
				return false
			}
		}
		return true
	}
	return false
}

// churnStep adds one or two ACLs, or removes one, then schedules the next
// once answered. It stops with the producers, so the cluster goes quiet.
func (a *aclClients) churnStep() {
	if a.w.stopped {
		return
	}
	next := func() { a.admin.proc.After(a.churnDelay(), a.churnStep) }
	if len(a.held) > 0 && (len(a.held) >= aclChurnHeldMax || a.r().IntN(100) < 40) {
		gone := a.held[a.r().IntN(len(a.held))]
		a.commit(nil, []acl.Binding{gone}, func() {
			a.held = slices.DeleteFunc(a.held, func(b acl.Binding) bool { return b == gone })
			next()
		})
		return
	}
	var add []acl.Binding
	for range 1 + a.r().IntN(2) {
		if b := a.drawBinding(); !slices.Contains(add, b) && !slices.Contains(a.held, b) {
			add = append(add, b)
		}
	}
	if len(add) == 0 {
		next()
		return
	}
	a.commit(add, nil, func() {
		a.held = append(a.held, add...)
		next()
	})
}

// drawBinding draws one ACL on the probes' resources.
func (a *aclClients) drawBinding() acl.Binding {
	r := a.r()
	type pattern struct {
		t    acl.ResourceType
		name string
		pt   acl.PatternType
	}
	patterns := []pattern{
		{acl.Topic, "acl-t0", acl.Literal}, {acl.Topic, "acl-t1", acl.Literal},
		{acl.Topic, "acl-", acl.Prefixed}, {acl.Topic, "acl-t", acl.Prefixed}, {acl.Topic, "acl-t0", acl.Prefixed},
		{acl.Topic, "acl-t0-x", acl.Prefixed}, {acl.Topic, "acl-n", acl.Prefixed}, {acl.Topic, acl.Wildcard, acl.Literal},
		{acl.Group, aclProbeGroup, acl.Literal}, {acl.Group, "acl-", acl.Prefixed}, {acl.Group, "acl-g-x", acl.Prefixed},
	}
	p := patterns[r.IntN(len(patterns))]
	principals := []string{acl.WildcardPrincipal}
	for _, probe := range a.probes {
		principals = append(principals, probe.principal)
	}
	principal := principals[r.IntN(len(principals))]
	permission := acl.Allow
	if r.IntN(100) < 35 {
		permission = acl.Deny
	}
	if permission == acl.Deny && principal == acl.WildcardPrincipal && p.name == acl.Wildcard {
		principal = principals[1+r.IntN(len(principals)-1)] // never deny everyone everything
	}
	host := acl.Wildcard
	if r.IntN(100) < 15 {
		probe := a.probes[r.IntN(len(a.probes))]
		host = probe.host.IP()
	}
	ops := []acl.Operation{acl.All, acl.Read, acl.Write, acl.Describe, acl.Create, acl.Delete}
	if p.t == acl.Group {
		ops = []acl.Operation{acl.All, acl.Read, acl.Describe}
	}
	return acl.Binding{Pattern: acl.Pattern{Type: p.t, Name: p.name, PatternType: p.pt},
		Entry: acl.Entry{Principal: principal, Host: host, Operation: ops[r.IntN(len(ops))], Permission: permission}}
}

// aclProbeBatch is one record for a probe's Produce.
func aclProbeBatch() []byte {
	return batch.Build(batch.BuildSpec{FirstTimestamp: 1_767_225_600_000, Records: []batch.Record{{Value: []byte("acl-probe")}}})
}

// refreshLeaders asks, as the admin, where the probes' topics are led,
// every second while the run lasts.
func (a *aclClients) refreshLeaders() {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, name := range aclProbeTopics {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(name)})
	}
	a.admin.send(a.admin.randomBroker(), req, a.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if err == nil {
			for _, t := range resp.(*kmsg.MetadataResponse).Topics {
				if t.Topic != nil && t.ErrorCode == 0 && len(t.Partitions) > 0 && t.Partitions[0].Leader >= 0 {
					a.leaders[*t.Topic] = t.Partitions[0].Leader
				}
			}
		}
		if !a.w.stopped {
			a.admin.proc.After(1e9, a.refreshLeaders)
		}
	})
}

// probeStep sends one request that needs an ACL decision and records it.
func (a *aclClients) probeStep(p *client) {
	if a.w.stopped {
		return
	}
	next := func(kmsg.Response) { p.proc.After(a.probeDelay(), func() { a.probeStep(p) }) }
	topic := aclProbeTopics[a.r().IntN(len(aclProbeTopics))]
	leader, known := a.leaders[topic]
	if !known {
		leader = p.randomBroker()
	}
	switch k := a.r().IntN(10); {
	case k < 3:
		a.probe(p, leader, fmt.Sprintf("Produce %s-0", topic), produceOne(topic), next,
			[]acl.Action{{Operation: acl.Write, Type: acl.Topic, Name: topic}},
			func(resp kmsg.Response) bool {
				return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode == 0
			})
	case k < 6:
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
		req.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{
			{Partition: 0, FetchOffset: 0, LogStartOffset: -1, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}}}
		a.probe(p, leader, fmt.Sprintf("Fetch %s-0", topic), req, next,
			[]acl.Action{{Operation: acl.Read, Type: acl.Topic, Name: topic}},
			func(resp kmsg.Response) bool {
				r := resp.(*kmsg.FetchResponse)
				return r.ErrorCode == 0 && r.Topics[0].Partitions[0].ErrorCode == 0
			})
	case k < 8:
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		a.probe(p, p.randomBroker(), "Metadata "+topic, req, next,
			[]acl.Action{{Operation: acl.Describe, Type: acl.Topic, Name: topic}},
			func(resp kmsg.Response) bool {
				t := resp.(*kmsg.MetadataResponse).Topics[0]
				return t.ErrorCode == 0 || t.ErrorCode == kerr.LeaderNotAvailable.Code
			})
	case k < 9 || a.creates >= aclProbeCreatesMax:
		a.probeCommit(p, topic, next)
	default:
		a.creates++
		name := fmt.Sprintf("acl-n%d", a.creates)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		req.TimeoutMillis = 5000
		req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: name, NumPartitions: 1, ReplicationFactor: 1}}
		a.probe(p, p.randomBroker(), "CreateTopics "+name, req, next,
			[]acl.Action{{Operation: acl.Create, Type: acl.Topic, Name: name}},
			func(resp kmsg.Response) bool { return resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode == 0 })
	}
}

// probeCommit finds the probe group's coordinator, then commits an offset
// of topic: READ on the group and on the topic.
func (a *aclClients) probeCommit(p *client, topic string, next func(kmsg.Response)) {
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.SetVersion(4)
	find.CoordinatorKeys = []string{aclProbeGroup}
	found := func(resp kmsg.Response) bool {
		return resp.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode == 0
	}
	a.probe(p, p.randomBroker(), "FindCoordinator "+aclProbeGroup, find, func(resp kmsg.Response) {
		if resp == nil || !found(resp) {
			next(resp)
			return
		}
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.SetVersion(8)
		commit.Group, commit.Generation = aclProbeGroup, -1
		commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic,
			Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0, LeaderEpoch: -1}}}}
		coordinator := resp.(*kmsg.FindCoordinatorResponse).Coordinators[0].NodeID
		a.probe(p, coordinator, fmt.Sprintf("OffsetCommit %s %s-0", aclProbeGroup, topic), commit, next,
			[]acl.Action{{Operation: acl.Read, Type: acl.Group, Name: aclProbeGroup}, {Operation: acl.Read, Type: acl.Topic, Name: topic}},
			func(resp kmsg.Response) bool {
				r := resp.(*kmsg.OffsetCommitResponse)
				return len(r.Topics) == 1 && r.Topics[0].Partitions[0].ErrorCode == 0
			})
	}, []acl.Action{{Operation: acl.Describe, Type: acl.Group, Name: aclProbeGroup}}, found)
}

// produceOne is an acks=1 Produce of one record to partition 0 of topic.
func produceOne(topic string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 2000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic,
		Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: aclProbeBatch()}}}}
	return req
}

// probe sends req to node, records it with what it needed and whether
// succeeded says its answer succeeded, and runs then (with the answer, nil
// if none came).
func (a *aclClients) probe(p *client, node int32, what string, req kmsg.Request, then func(kmsg.Response), needs []acl.Action, succeeded func(kmsg.Response) bool) {
	r := models.ACLRequest{Client: p.index, What: what, Principal: p.principal, Host: p.host.IP(), Needs: needs,
		CallNs: a.w.s.NowNs(), ReturnNs: models.NeverReturnedNs}
	p.send(node, req, a.w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if err != nil {
			resp = nil
		} else {
			r.ReturnNs = a.w.s.NowNs()
			r.Succeeded = succeeded(resp)
		}
		a.history.Requests = append(a.history.Requests, r)
		then(resp)
	})
}

// Describe says how the ACL clients were drawn, for the run's header.
func (a *aclClients) describe() string {
	return fmt.Sprintf(" acl_probes=%d", len(a.probes))
}

// stats counts the ACL clients' work, for the run's stats line.
func (a *aclClients) stats() string {
	succeeded := 0
	for _, r := range a.history.Requests {
		if r.Succeeded {
			succeeded++
		}
	}
	return fmt.Sprintf(" acl_changes=%d acl_probe_requests=%d acl_probe_successes=%d",
		len(a.history.Changes), len(a.history.Requests), succeeded)
}
