package controller

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
)

// partitionsPerRequestMax bounds the partitions one CreateTopics or
// CreatePartitions request may add, as Kafka bounds the records of one
// user operation (MAX_RECORDS_PER_USER_OP).
const partitionsPerRequestMax = 10000

// topicIDAttemptsMax bounds the draws for an unused, non-zero topic id.
const topicIDAttemptsMax = 16

// apiError is a per-item error of an admin request.
type apiError struct {
	code    int16
	message string
}

func errorf(code *kerr.Error, format string, args ...any) *apiError {
	return &apiError{code: code.Code, message: fmt.Sprintf(format, args...)}
}

// handleCreateTopics creates topics with their partitions (placed by
// placeReplicas or as assigned) and configs, one TopicRecord, ConfigRecords
// and PartitionRecords per topic, all in one batch.
func (c *Controller) handleCreateTopics(req *kmsg.CreateTopicsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	t := (*txn)(nil)
	if c.Active() {
		t = c.begin()
	}
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	partitionsLeft := partitionsPerRequestMax
	for _, rt := range req.Topics {
		out := kmsg.NewCreateTopicsResponseTopic()
		out.Topic = rt.Topic
		var err *apiError
		switch {
		case t == nil:
			err = &apiError{code: codeNotController}
		case seen[rt.Topic] > 1:
			err = errorf(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		default:
			err = c.createTopic(t, req.ValidateOnly, rt, &out, &partitionsLeft)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = err.code, &err.message
			out.NumPartitions, out.ReplicationFactor = -1, -1
		}
		resp.Topics = append(resp.Topics, out)
	}
	if t == nil {
		reply(resp)
		return
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

// collidingTopic returns an existing topic whose name differs from name only
// in '.' against '_', if there is one: Kafka refuses such a topic
// (Topic.hasCollision), since metric names replace '.' with '_' and the two
// topics' metrics would be mixed.
func collidingTopic(image *metadata.Image, name string) (string, bool) {
	if !strings.ContainsAny(name, "._") {
		return "", false
	}
	unified := strings.ReplaceAll(name, ".", "_")
	for _, t := range image.Topics() {
		if t.Name != name && strings.ReplaceAll(t.Name, ".", "_") == unified {
			return t.Name, true
		}
	}
	return "", false
}

func (c *Controller) createTopic(t *txn, validateOnly bool, rt kmsg.CreateTopicsRequestTopic, out *kmsg.CreateTopicsResponseTopic, partitionsLeft *int) *apiError {
	if err := metadata.ValidateTopicName(rt.Topic); err != nil {
		return errorf(kerr.InvalidTopicException, "%v", err)
	}
	if rt.Topic == MetadataTopic {
		return errorf(kerr.InvalidTopicException, "topic %q is reserved for the metadata log", rt.Topic)
	}
	if _, exists := c.latest.TopicByName(rt.Topic); exists {
		return errorf(kerr.TopicAlreadyExists, "topic %q already exists", rt.Topic)
	}
	if other, collides := collidingTopic(c.latest, rt.Topic); collides {
		return errorf(kerr.InvalidTopicException, "topic %q collides with existing topic %q: '.' and '_' name the same metrics", rt.Topic, other)
	}
	configs, err := topicConfigs(rt.Configs)
	if err != nil {
		return err
	}
	overrides := configMap(configs)
	if err := validateTopicOverrides(rt.Topic, overrides); err != nil {
		return err
	}
	assignment, err := c.topicAssignment(rt)
	if err != nil {
		return err
	}
	if len(assignment) > *partitionsLeft {
		return errorf(kerr.InvalidPartitions, "%d partitions: at most %d per request", len(assignment), partitionsPerRequestMax)
	}
	*partitionsLeft -= len(assignment)
	out.NumPartitions, out.ReplicationFactor = int32(len(assignment)), int16(len(assignment[0]))
	c.describeNewTopicConfigs(overrides, out)
	if validateOnly {
		return nil
	}
	id, err := c.freshTopicID()
	if err != nil {
		return err
	}
	out.TopicID = id
	c.cfg.Log.Info("creating topic", slog.String("topic", rt.Topic), slog.String("topic_id", metadata.TopicID(id).String()),
		slog.Int("partitions", len(assignment)), slog.Int("replication_factor", len(assignment[0])))
	t.add(&metadata.TopicRecord{Name: rt.Topic, ID: id})
	for _, kv := range configs {
		t.add(&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: rt.Topic, Name: kv.key, Value: &kv.value})
	}
	c.addPartitions(t, metadata.TopicID(id), 0, assignment)
	return nil
}

// describeNewTopicConfigs answers a created (or validated) topic with its
// effective configs, as Kafka's controller does for CreateTopics v5+
// (KIP-525): every topic config with its value and source, none read-only
// or sensitive. Older versions do not encode them.
func (c *Controller) describeNewTopicConfigs(overrides map[string]string, out *kmsg.CreateTopicsResponseTopic) {
	if c.cfg.DescribeTopicConfig == nil {
		return
	}
	for _, e := range c.cfg.DescribeTopicConfig(overrides) {
		rc := kmsg.NewCreateTopicsResponseTopicConfig()
		rc.Name, rc.Value, rc.Source = e.Name, e.Value, int8(e.Source)
		out.Configs = append(out.Configs, rc)
	}
}

// addPartitions adds PartitionRecords for assignment, numbered from first.
// Every assigned replica that may lead starts in the ISR; the first of them
// in assignment order leads.
func (c *Controller) addPartitions(t *txn, id metadata.TopicID, first int32, assignment [][]int32) {
	for i, replicas := range assignment {
		var isr []int32
		leader := metadata.NoLeader
		for _, r := range replicas {
			if c.acceptable(r) {
				isr = append(isr, r)
				if leader == metadata.NoLeader {
					leader = r
				}
			}
		}
		t.add(&metadata.PartitionRecord{
			TopicID: id, PartitionID: first + int32(i), Replicas: replicas,
			ISR: sortedIDs(isr), Leader: leader,
		})
	}
}

func (c *Controller) freshTopicID() ([16]byte, *apiError) {
	for range topicIDAttemptsMax {
		id := c.newTopicID()
		if _, used := c.latest.TopicByID(id); !used && !metadata.TopicID(id).IsZero() && id != MetadataTopicID {
			return id, nil
		}
	}
	return [16]byte{}, errorf(kerr.UnknownServerError, "no unused topic id after %d draws", topicIDAttemptsMax)
}

type configEntry struct{ key, value string }

// topicConfigs validates the configs of a new topic, sorted by key. Keys the
// controller interprets must hold valid values; others are stored as given.
func topicConfigs(configs []kmsg.CreateTopicsRequestTopicConfig) ([]configEntry, *apiError) {
	var out []configEntry
	for _, kv := range configs {
		if kv.Value == nil {
			return nil, errorf(kerr.InvalidConfig, "config %q: null values are not allowed for topic configs", kv.Name)
		}
		if kv.Name == "" {
			return nil, errorf(kerr.InvalidConfig, "empty config name")
		}
		switch kv.Name {
		case configMinInsyncReplicas:
			if n, err := strconv.Atoi(*kv.Value); err != nil || n < 1 {
				return nil, errorf(kerr.InvalidConfig, "config %s=%q: must be an integer of at least 1", kv.Name, *kv.Value)
			}
		case configUncleanElection:
			if _, err := strconv.ParseBool(*kv.Value); err != nil {
				return nil, errorf(kerr.InvalidConfig, "config %s=%q: must be true or false", kv.Name, *kv.Value)
			}
		}
		out = append(out, configEntry{key: kv.Name, value: *kv.Value})
	}
	slices.SortFunc(out, func(a, b configEntry) int {
		if a.key < b.key {
			return -1
		} else if a.key > b.key {
			return 1
		}
		return 0
	})
	for i := 1; i < len(out); i++ {
		if out[i].key == out[i-1].key {
			return nil, errorf(kerr.InvalidRequest, "config %q appears more than once", out[i].key)
		}
	}
	return out, nil
}

// topicAssignment returns the replicas of each partition of a new topic:
// the request's manual assignment, validated, or a balanced placement.
func (c *Controller) topicAssignment(rt kmsg.CreateTopicsRequestTopic) ([][]int32, *apiError) {
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return nil, errorf(kerr.InvalidRequest, "a replica assignment requires NumPartitions and ReplicationFactor -1")
		}
		assignment := make([][]int32, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(assignment) || assignment[a.Partition] != nil {
				return nil, errorf(kerr.InvalidReplicaAssignment, "partition ids must be 0 to %d, each once; got %d", len(assignment)-1, a.Partition)
			}
			assignment[a.Partition] = a.Replicas
		}
		return assignment, c.validateAssignment(assignment, len(assignment[0]))
	}
	partitions, rf := rt.NumPartitions, int(rt.ReplicationFactor)
	if partitions == -1 {
		partitions = c.cfg.DefaultPartitions
	}
	if rf == -1 {
		rf = int(c.cfg.DefaultReplicationFactor)
	}
	if partitions < 1 {
		return nil, errorf(kerr.InvalidPartitions, "number of partitions %d: must be at least 1", partitions)
	}
	if partitions > partitionsPerRequestMax {
		return nil, errorf(kerr.InvalidPartitions, "%d partitions: at most %d per request", partitions, partitionsPerRequestMax)
	}
	return c.placeNew(int(partitions), rf)
}

// placeNew places count partitions of replication factor rf.
func (c *Controller) placeNew(count, rf int) ([][]int32, *apiError) {
	usable := c.usableBrokers()
	if rf < 1 || rf > len(usable) {
		return nil, errorf(kerr.InvalidReplicationFactor,
			"replication factor %d: must be at least 1 and at most the %d unfenced brokers", rf, len(usable))
	}
	return placeReplicas(usable, placementCursor(c.latest, usable), count, rf), nil
}

// validateAssignment checks a manual assignment: each partition has rf
// distinct registered brokers, at least one of which may lead.
func (c *Controller) validateAssignment(assignment [][]int32, rf int) *apiError {
	for p, replicas := range assignment {
		if len(replicas) == 0 || len(replicas) != rf {
			return errorf(kerr.InvalidReplicaAssignment, "partition %d has %d replicas; every partition needs %d", p, len(replicas), rf)
		}
		s := sortedIDs(replicas)
		if len(slices.Compact(s)) != len(replicas) {
			return errorf(kerr.InvalidReplicaAssignment, "partition %d: replicas %v repeat a broker", p, replicas)
		}
		anyLive := false
		for _, id := range replicas {
			if _, ok := c.latest.Broker(id); !ok {
				return errorf(kerr.InvalidReplicaAssignment, "partition %d: broker %d is not registered", p, id)
			}
			anyLive = anyLive || c.acceptable(id)
		}
		if !anyLive {
			return errorf(kerr.InvalidReplicaAssignment, "partition %d: every broker of %v is fenced or shutting down", p, replicas)
		}
	}
	return nil
}

// handleDeleteTopics removes topics (by name before v6, by name or id from
// v6), one RemoveTopicRecord each.
func (c *Controller) handleDeleteTopics(req *kmsg.DeleteTopicsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	targets := req.Topics
	if req.Version < 6 {
		targets = nil
		for _, name := range req.TopicNames {
			targets = append(targets, kmsg.DeleteTopicsRequestTopic{Topic: &name})
		}
	}
	if !c.Active() {
		for _, rt := range targets {
			out := kmsg.NewDeleteTopicsResponseTopic()
			out.Topic, out.TopicID, out.ErrorCode = rt.Topic, rt.TopicID, codeNotController
			resp.Topics = append(resp.Topics, out)
		}
		reply(resp)
		return
	}
	t := c.begin()
	for _, rt := range targets {
		out := kmsg.NewDeleteTopicsResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		var topic metadata.Topic
		var found bool
		if rt.Topic != nil {
			topic, found = c.latest.TopicByName(*rt.Topic)
			out.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else {
			topic, found = c.latest.TopicByID(rt.TopicID)
			out.ErrorCode = kerr.UnknownTopicID.Code
		}
		if found {
			out.ErrorCode = 0
			name := topic.Name
			out.Topic, out.TopicID = &name, topic.ID
			c.cfg.Log.Info("deleting topic", slog.String("topic", name), slog.String("topic_id", metadata.TopicID(topic.ID).String()))
			t.add(&metadata.RemoveTopicRecord{TopicID: topic.ID})
		}
		resp.Topics = append(resp.Topics, out)
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

// handleCreatePartitions adds partitions to existing topics, with the
// replication factor of partition 0.
func (c *Controller) handleCreatePartitions(req *kmsg.CreatePartitionsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	t := (*txn)(nil)
	if c.Active() {
		t = c.begin()
	}
	partitionsLeft := partitionsPerRequestMax
	for _, rt := range req.Topics {
		out := kmsg.NewCreatePartitionsResponseTopic()
		out.Topic = rt.Topic
		var err *apiError
		switch {
		case t == nil:
			err = &apiError{code: codeNotController}
		case seen[rt.Topic] > 1:
			err = errorf(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		default:
			err = c.createPartitions(t, req.ValidateOnly, rt, &partitionsLeft)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = err.code, &err.message
		}
		resp.Topics = append(resp.Topics, out)
	}
	if t == nil {
		reply(resp)
		return
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

func (c *Controller) createPartitions(t *txn, validateOnly bool, rt kmsg.CreatePartitionsRequestTopic, partitionsLeft *int) *apiError {
	topic, ok := c.latest.TopicByName(rt.Topic)
	if !ok {
		return errorf(kerr.UnknownTopicOrPartition, "topic %q does not exist", rt.Topic)
	}
	if rt.Count <= topic.Partitions {
		return errorf(kerr.InvalidPartitions, "topic %q has %d partitions; the new count %d must be larger", rt.Topic, topic.Partitions, rt.Count)
	}
	adding := int(rt.Count - topic.Partitions)
	if adding > *partitionsLeft {
		return errorf(kerr.InvalidPartitions, "%d new partitions: at most %d per request", adding, partitionsPerRequestMax)
	}
	first, _ := c.latest.Partition(topic.ID, 0)
	rf := len(first.Replicas)
	var assignment [][]int32
	if rt.Assignment != nil {
		if len(rt.Assignment) != adding {
			return errorf(kerr.InvalidReplicaAssignment, "%d assignments for %d new partitions", len(rt.Assignment), adding)
		}
		for _, a := range rt.Assignment {
			assignment = append(assignment, a.Replicas)
		}
		if err := c.validateAssignment(assignment, rf); err != nil {
			return err
		}
	} else {
		var err *apiError
		if assignment, err = c.placeNew(adding, rf); err != nil {
			return err
		}
	}
	*partitionsLeft -= adding
	if !validateOnly {
		c.addPartitions(t, topic.ID, topic.Partitions, assignment)
	}
	return nil
}

// handleAllocateProducerIDs hands the next block of producer ids to a
// broker (Kafka's ProducerIdControlManager).
func (c *Controller) handleAllocateProducerIDs(req *kmsg.AllocateProducerIDsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	if code := c.brokerRequestError(req.BrokerID, req.BrokerEpoch); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	b, _ := c.latest.Broker(req.BrokerID)
	start := c.latest.NextProducerID()
	t := c.begin()
	t.add(&metadata.ProducerIdsRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, NextProducerID: start + int64(c.cfg.ProducerIDBlockSize)})
	resp.ProducerIDStart, resp.ProducerIDLen = start, c.cfg.ProducerIDBlockSize
	t.commit(func() { reply(resp) }, notController(req, reply))
}
