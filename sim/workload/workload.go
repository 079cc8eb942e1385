package workload

import (
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/models"
	"strand/sim/sched"
	"strand/sim/simnet"
)

// TopicReplication is a topic's replication factor and its
// min.insync.replicas (0: the brokers' default).
type TopicReplication struct {
	ReplicationFactor int16
	MinInsyncReplicas int
}

// newTopic is the CreateTopics entry for name with partitions partitions,
// replicated as the config says.
func (c Config) newTopic(name string, partitions int32) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, c.ReplicationFactor
	if tr, ok := c.TopicReplication[name]; ok {
		t.ReplicationFactor = tr.ReplicationFactor
		if tr.MinInsyncReplicas > 0 {
			config := kmsg.NewCreateTopicsRequestTopicConfig()
			config.Name, config.Value = "min.insync.replicas", kmsg.StringPtr(fmt.Sprint(tr.MinInsyncReplicas))
			t.Configs = append(t.Configs, config)
		}
	}
	return t
}

// Config shapes the clients.
type Config struct {
	// Brokers are the nodes clients may send data requests to.
	Brokers []env.NodeID
	// Topics are created at the start with Partitions partitions of
	// ReplicationFactor replicas each.
	Topics            []string
	Partitions        int32
	ReplicationFactor int16
	// TopicReplication overrides ReplicationFactor, and the brokers'
	// min.insync.replicas (as a topic config), for the topics it names.
	TopicReplication map[string]TopicReplication
	// Producers produce RecordsPerSec records per simulated second in
	// total, in batches of 1 to BatchRecordsMax records.
	Producers       int
	RecordsPerSec   int
	BatchRecordsMax int
	// IdempotentProducers of the Producers are idempotent (acks=all,
	// InitProducerId, sequence numbers).
	IdempotentProducers int
	// Consumers share the partitions between them, round robin.
	Consumers int
	// Groups consumer groups of MembersPerGroup members each consume every
	// topic; StaticPerMille of the members are static (group.instance.id).
	Groups          int
	MembersPerGroup int
	StaticPerMille  int
	// ChurnTopics topics c0, c1, … of Partitions partitions are deleted,
	// re-created and grown (to ChurnPartitionsMax) by the admin client
	// while plain producers write to them; the harness checks their
	// records per incarnation (ChurnProduces).
	ChurnTopics int
	// RequestTimeoutNs is the clients' own timeout: a request unanswered
	// for this long counts as failed, its outcome unknown.
	RequestTimeoutNs int64
	// ProduceTimeoutMs is the Produce request's TimeoutMillis (how long the
	// leader waits for acks=all).
	ProduceTimeoutMs int32
	// BackoffNs is how long a client waits before retrying.
	BackoffNs int64
	// RetriesMax bounds a producer's retries of one batch.
	RetriesMax int
	// FetchMaxWaitMs is the consumers' long-poll time.
	FetchMaxWaitMs int32
	// DeleteIntervalNs is the mean time between two DeleteRecords of the
	// deleter client (deletes.go); 0: the run deletes nothing.
	// DeleteRand is the stream the deleter draws from.
	DeleteIntervalNs int64
	DeleteRand       *rand.Rand
	// FollowerFetchOneIn: one consumer fetch in FollowerFetchOneIn, drawn
	// from FollowerFetchRand, goes to a follower of its partition instead
	// of the leader (KIP-392, consumer.go fetchFrom); 0: none does. Its
	// own stream, so that the draws do not reshuffle the workload's.
	FollowerFetchOneIn int
	FollowerFetchRand  *rand.Rand
	// RewindOneIn: after one consumer fetch in RewindOneIn, drawn from
	// RewindRand, the consumer starts again from offset 0 (the log start
	// then, through OFFSET_OUT_OF_RANGE), as a new reader of old data
	// does: old segments, their indexes and what was synced long ago are
	// read again; 0: never.
	RewindOneIn int
	RewindRand  *rand.Rand
	// Forger is the client that forges control-plane requests
	// (forger.go); its zero value sends none.
	Forger ForgerConfig
	// HostileClients attack the brokers' connection limits (hostile.go),
	// each with HostileConnsPerBroker connections per broker, half of them
	// claiming requests of HostileFrameBytes they never finish, reopened
	// HostileBackoffNs after the broker ends them; 0: none.
	HostileClients        int
	HostileConnsPerBroker int
	HostileFrameBytes     int32
	HostileBackoffNs      int64
	// ListOffsetsIntervalNs is the mean time between two rounds of the lag
	// monitor (monitor.go), which asks every partition's leader for its
	// latest offset; 0: no monitor. ListOffsetsRand is its own stream.
	ListOffsetsIntervalNs int64
	ListOffsetsRand       *rand.Rand
	// ScramIntervalNs is the mean time between two alterations of SCRAM
	// credentials by the credential admin (scram.go), which draws from
	// ScramRand; 0: the run alters none.
	ScramIntervalNs int64
	ScramRand       *rand.Rand
	// ACLs are the ACL admin and probes (acls.go); the zero value has
	// none.
	ACLs ACLConfig
}

func (c Config) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("workload: no brokers")
	case len(c.Topics) == 0 || c.Partitions < 1 || c.ReplicationFactor < 1:
		return fmt.Errorf("workload: topics %v × %d partitions × RF %d is empty", c.Topics, c.Partitions, c.ReplicationFactor)
	case c.Producers < 0 || c.Consumers < 0 || c.RecordsPerSec < 0 || c.Groups < 0 || c.MembersPerGroup < 0:
		return fmt.Errorf("workload: negative client counts")
	case c.IdempotentProducers < 0 || c.IdempotentProducers > c.Producers:
		return fmt.Errorf("workload: %d idempotent producers of %d", c.IdempotentProducers, c.Producers)
	case c.ChurnTopics < 0:
		return fmt.Errorf("workload: %d churn topics", c.ChurnTopics)
	case c.Groups > 0 && c.MembersPerGroup < 1:
		return fmt.Errorf("workload: %d groups with no members", c.Groups)
	case c.Producers > 0 && (c.RecordsPerSec < c.Producers || c.BatchRecordsMax < 1):
		return fmt.Errorf("workload: %d records/s over %d producers in batches of ≤%d", c.RecordsPerSec, c.Producers, c.BatchRecordsMax)
	case c.RequestTimeoutNs <= 0 || c.BackoffNs <= 0 || c.ProduceTimeoutMs <= 0:
		return fmt.Errorf("workload: RequestTimeoutNs, BackoffNs and ProduceTimeoutMs must be positive")
	case c.DeleteIntervalNs < 0 || (c.DeleteIntervalNs > 0 && c.DeleteRand == nil):
		return fmt.Errorf("workload: DeleteIntervalNs %d needs a DeleteRand and must not be negative", c.DeleteIntervalNs)
	case c.ScramIntervalNs < 0 || (c.ScramIntervalNs > 0 && c.ScramRand == nil):
		return fmt.Errorf("workload: ScramIntervalNs %d needs a ScramRand and must not be negative", c.ScramIntervalNs)
	case c.RewindOneIn < 0 || (c.RewindOneIn > 0 && c.RewindRand == nil):
		return fmt.Errorf("workload: RewindOneIn %d needs a RewindRand and must not be negative", c.RewindOneIn)
	case c.FollowerFetchOneIn < 0 || (c.FollowerFetchOneIn > 0 && c.FollowerFetchRand == nil):
		return fmt.Errorf("workload: FollowerFetchOneIn %d needs a FollowerFetchRand and must not be negative", c.FollowerFetchOneIn)
	case c.Forger.IntervalNs < 0 || (c.Forger.IntervalNs > 0 && (c.Forger.Rand == nil || c.Forger.Intel == nil || len(c.Forger.Targets) == 0)):
		return fmt.Errorf("workload: a forger every %d ns needs a Rand, Intel and Targets", c.Forger.IntervalNs)
	case c.ACLs.Probes < 0 || (c.ACLs.enabled() && (c.ACLs.Rand == nil || c.ACLs.AdminPrincipal == "")):
		return fmt.Errorf("workload: %d ACL probes need a Rand and an admin principal", c.ACLs.Probes)
	case c.HostileClients < 0 || (c.HostileClients > 0 && (c.HostileConnsPerBroker < 1 || c.HostileFrameBytes < 8 || c.HostileBackoffNs <= 0)):
		return fmt.Errorf("workload: %d hostile clients with %d connections per broker, frames of %d bytes, backoff %d ns",
			c.HostileClients, c.HostileConnsPerBroker, c.HostileFrameBytes, c.HostileBackoffNs)
	case c.ListOffsetsIntervalNs < 0 || (c.ListOffsetsIntervalNs > 0 && c.ListOffsetsRand == nil):
		return fmt.Errorf("workload: ListOffsetsIntervalNs %d needs a ListOffsetsRand and must not be negative", c.ListOffsetsIntervalNs)
	}
	return nil
}

// Workload is the set of simulated clients of one run and the history they
// record.
type Workload struct {
	s   *sched.Scheduler
	net *simnet.Network
	r   *rand.Rand
	cfg Config

	// tps lists every partition of the workload's topics.
	tps       []models.TopicPartition
	clients   []*client
	producers []*producer
	consumers []*consumer
	members   []*member
	hostiles  []*hostile
	admin     *client
	// deleter sends the DeleteRecords requests; nil in a run without.
	deleter *client
	// forger forges control-plane requests; nil in a run without.
	forger *forger
	// monitor asks for the partitions' latest offsets (monitor.go); nil
	// in a run without. monitorAsking says, by partition, that its
	// request is out.
	monitor       *client
	monitorAsking []bool
	// scramAdmin alters SCRAM credentials, scramOps records it; nil in a
	// run without (scram.go).
	scramAdmin *client
	scramOps   []models.ScramOp
	// acls are the ACL admin and probes; nil in a run without.
	acls *aclClients
	// observedHW is the highest HW a fetch of each partition returned;
	// deleteFloor the highest offset a DeleteRecords asked for.
	observedHW  map[models.TopicPartition]int64
	deleteFloor map[models.TopicPartition]int64
	// offsetResets counts consumers moved to the log start after
	// OFFSET_OUT_OF_RANGE.
	offsetResets int
	// followerFetches counts fetches sent to a follower,
	// followerFetchesRead those that returned records, and
	// followerRetriesOnLeader those retried on the leader after an
	// OFFSET_OUT_OF_RANGE (fetchFromReplica).
	followerFetches, followerFetchesRead, followerRetriesOnLeader int
	// rewinds counts the consumers' rewinds to offset 0 (RewindOneIn).
	rewinds int
	// offsetsNotAvailable counts the monitor's OFFSET_NOT_AVAILABLE
	// answers (a new leader's HW behind its epoch's start, KIP-207).
	offsetsNotAvailable int
	// groups names the consumer groups.
	groups []string

	history      models.History
	groupHistory models.GroupHistory
	// idempotentSends lists every batch idempotent producers sent.
	idempotentSends []models.IdempotentSend
	// churn is the admin client's view of the churn topics, adminOps its
	// operations on them, churnProduces the produces sent to them (kept
	// out of history: see churn.go).
	churn         []*churnState
	adminOps      []models.AdminOp
	churnProduces []ChurnProduce
	churnTopic    map[string]bool
	// stopped: producers send no new batch and retry nothing.
	stopped bool
	// outstanding counts produce requests sent and not yet answered or
	// timed out.
	outstanding int
	// decodeErrors are fetched batches the consumers could not decode:
	// the harness reports each as a violation, unless it damaged that
	// replica's bytes itself.
	decodeErrors []DecodeError
	// acksDrawn counts producers per acks setting, for the header line;
	// idempotentDrawn the idempotent ones.
	acksDrawn       [3]int
	idempotentDrawn int
	staticDrawn     int
}

// New builds the clients on net; nothing is sent until Start. r is the
// "workload" stream.
func New(s *sched.Scheduler, net *simnet.Network, r *rand.Rand, cfg Config) (*Workload, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Workload{s: s, net: net, r: r, cfg: cfg, churnTopic: map[string]bool{},
		observedHW: map[models.TopicPartition]int64{}, deleteFloor: map[models.TopicPartition]int64{}}
	for _, name := range cfg.churnTopicNames() {
		w.churnTopic[name] = true
	}
	for _, t := range cfg.Topics {
		for p := int32(0); p < cfg.Partitions; p++ {
			w.tps = append(w.tps, models.TopicPartition{Topic: t, Partition: p})
		}
	}
	w.admin = w.newClient("admin")
	if cfg.DeleteIntervalNs > 0 {
		w.deleter = w.newClient("deleter")
	}
	if cfg.Forger.IntervalNs > 0 {
		w.forger = w.newForger(cfg.Forger)
	}
	for i := 0; i < cfg.Producers; i++ {
		w.producers = append(w.producers, w.newProducer(i < cfg.IdempotentProducers))
	}
	tps := w.Partitions()
	for i := 0; i < cfg.Consumers; i++ {
		c := &consumer{w: w, client: w.newClient("consumer")}
		for j := i; j < len(tps); j += cfg.Consumers {
			c.tps = append(c.tps, tps[j])
		}
		w.consumers = append(w.consumers, c)
	}
	for g := 0; g < cfg.Groups; g++ {
		name := fmt.Sprintf("g%d", g)
		w.groups = append(w.groups, name)
		for i := 0; i < cfg.MembersPerGroup; i++ {
			static := w.r.IntN(1000) < cfg.StaticPerMille
			if static {
				w.staticDrawn++
			}
			w.members = append(w.members, w.newMember(name, static))
		}
	}
	for range cfg.HostileClients {
		w.hostiles = append(w.hostiles, w.newHostile())
	}
	// Last, so that the other clients keep their indices (and record
	// values) whether or not the run has a monitor or a credential admin.
	if cfg.ListOffsetsIntervalNs > 0 {
		w.monitor = w.newClient("monitor")
		w.monitor.rand = cfg.ListOffsetsRand
	}
	if cfg.ScramIntervalNs > 0 {
		w.scramAdmin = w.newClient("scram")
	}
	if cfg.ACLs.enabled() {
		w.acls = w.newACLClients(cfg.ACLs)
	}
	return w, nil
}

// Partitions lists every partition of the workload's topics. Callers must
// not modify it.
func (w *Workload) Partitions() []models.TopicPartition { return w.tps }

// Start creates the topics, then starts producing and consuming; ready
// runs once the topics exist. With ACL clients, the base ACLs the others
// need are committed first.
func (w *Workload) Start(ready func()) {
	if w.acls != nil {
		w.acls.setup(func() { w.start(ready) })
		return
	}
	w.start(ready)
}

func (w *Workload) start(ready func()) {
	w.createTopics(func() {
		for _, p := range w.producers {
			p.start()
		}
		for _, c := range w.consumers {
			c.start()
		}
		for _, m := range w.members {
			m.start()
		}
		w.startChurn()
		w.startDeletes()
		w.startScram()
		if w.forger != nil {
			w.forger.start()
		}
		for _, h := range w.hostiles {
			h.start()
		}
		w.startMonitor()
		if w.acls != nil {
			w.acls.start()
		}
		ready()
	})
}

// StopProducing ends production and group membership: no new batch, no
// retry, members stop (without leaving). Requests in flight still complete
// and are recorded.
func (w *Workload) StopProducing() { w.stopped = true }

// Outstanding counts produce requests awaiting an answer.
func (w *Workload) Outstanding() int { return w.outstanding }

// DecodeError is data a client could not decode: a fetched batch whose
// CRC fails or that is no batch (kgo's check), or a group assignment.
type DecodeError struct {
	// TP and Replica are the partition and the broker that served the
	// fetch; Replica is -1 for what no replica served.
	TP      models.TopicPartition
	Replica int32
	// AtNs is when the client found it.
	AtNs   int64
	Detail string
}

// DecodeErrors lists fetched data the consumers could not decode.
func (w *Workload) DecodeErrors() []DecodeError { return w.decodeErrors }

// History returns what the clients did so far.
func (w *Workload) History() models.History { return w.history }

// GroupHistory returns what the group members did so far.
func (w *Workload) GroupHistory() models.GroupHistory { return w.groupHistory }

// IdempotentSends lists every batch the idempotent producers sent.
func (w *Workload) IdempotentSends() []models.IdempotentSend { return w.idempotentSends }

// ChurnProduce is a produce to a churn topic and the broker it was sent
// to: the harness attributes it to the topic's incarnation that broker
// answered for (Produce names a topic, not an incarnation).
type ChurnProduce struct {
	models.Produce
	Leader int32
}

// ChurnProduces lists the produces sent to the churn topics.
func (w *Workload) ChurnProduces() []ChurnProduce { return w.churnProduces }

// AdminOps lists the admin client's operations on the churn topics.
func (w *Workload) AdminOps() []models.AdminOp { return w.adminOps }

// Groups names the consumer groups.
func (w *Workload) Groups() []string { return w.groups }

// Describe summarises the drawn workload for the run's header line.
func (w *Workload) Describe() string {
	s := fmt.Sprintf("workload{producers=%d (acks=all %d, acks=1 %d, acks=0 %d) records_per_s=%d consumers=%d",
		len(w.producers), w.acksDrawn[0], w.acksDrawn[1], w.acksDrawn[2], w.cfg.RecordsPerSec, len(w.consumers))
	if w.idempotentDrawn > 0 {
		s += fmt.Sprintf(" idempotent=%d", w.idempotentDrawn)
	}
	if len(w.groups) > 0 {
		s += fmt.Sprintf(" groups=%d members=%d (static %d)", len(w.groups), len(w.members), w.staticDrawn)
	}
	if w.cfg.ChurnTopics > 0 {
		s += fmt.Sprintf(" churn_topics=%d", w.cfg.ChurnTopics)
	}
	if w.deleter != nil {
		s += fmt.Sprintf(" delete_interval_ms=%d", w.cfg.DeleteIntervalNs/1e6)
	}
	if w.forger != nil {
		s += fmt.Sprintf(" forger_interval_ms=%d forger=%s", w.cfg.Forger.IntervalNs/1e6, w.cfg.Forger.Principal)
	}
	if len(w.hostiles) > 0 {
		s += fmt.Sprintf(" hostile=%d×%d/broker frames=%dB", len(w.hostiles), w.cfg.HostileConnsPerBroker, w.cfg.HostileFrameBytes)
	}
	if w.scramAdmin != nil {
		s += fmt.Sprintf(" scram_interval_ms=%d", w.cfg.ScramIntervalNs/1e6)
	}
	if w.acls != nil {
		s += w.acls.describe()
	}
	return s + "}"
}

// Stats counts the operations recorded.
func (w *Workload) Stats() string {
	acked := 0
	for _, p := range w.history.Produces {
		if p.Acked && p.Acks == -1 {
			acked++
		}
	}
	records := 0
	for _, f := range w.history.Fetches {
		records += len(f.Records)
	}
	s := fmt.Sprintf("produces=%d acked_all=%d fetches=%d records_read=%d follower_fetches=%d follower_reads=%d follower_oor_retries=%d rewinds=%d",
		len(w.history.Produces), acked, len(w.history.Fetches), records, w.followerFetches, w.followerFetchesRead, w.followerRetriesOnLeader, w.rewinds)
	if w.cfg.ChurnTopics > 0 {
		s += fmt.Sprintf(" admin_ops=%d churn_produces=%d", len(w.adminOps), len(w.churnProduces))
	}
	if w.monitor != nil {
		s += fmt.Sprintf(" list_offsets=%d offsets_not_available=%d", len(w.history.ListOffsets), w.offsetsNotAvailable)
	}
	if w.deleter != nil {
		completed := 0
		for _, d := range w.history.DeleteRecords {
			if d.Completed {
				completed++
			}
		}
		s += fmt.Sprintf(" deletes=%d completed=%d offset_resets=%d", len(w.history.DeleteRecords), completed, w.offsetResets)
	}
	if w.forger != nil {
		var outcomes [3]int
		for _, op := range w.forger.ops {
			outcomes[op.Outcome]++
		}
		s += fmt.Sprintf(" forged=%d closed=%d answered=%d unknown=%d", len(w.forger.ops),
			outcomes[models.ForgeryClosed], outcomes[models.ForgeryAnswered], outcomes[models.ForgeryUnknown])
	}
	if len(w.groups) > 0 {
		accepted := 0
		for _, c := range w.groupHistory.Commits {
			if c.Outcome == models.CommitAccepted {
				accepted++
			}
		}
		s += fmt.Sprintf(" group_ops=%d assignments=%d commits=%d accepted=%d offset_fetches=%d",
			len(w.groupHistory.Ops), len(w.groupHistory.Assignments), len(w.groupHistory.Commits), accepted, len(w.groupHistory.Fetches))
	}
	if w.scramAdmin != nil {
		s += fmt.Sprintf(" scram_alterations=%d scram_unauthorized=%d", len(w.scramOps), w.scramUnauthorized())
	}
	if w.acls != nil {
		s += w.acls.stats()
	}
	return s + w.hostileStats()
}
