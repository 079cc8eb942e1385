package metadata

import (
	"cmp"
	"maps"
	"slices"

	"strand/core/acl"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	TopicID   TopicID
	Partition int32
}

// Broker returns the registration of broker id.
func (im *Image) Broker(id int32) (Broker, bool) {
	b, ok := im.brokers[id]
	return b, ok
}

// BrokerIDs returns the registered brokers' ids, sorted.
func (im *Image) BrokerIDs() []int32 {
	return slices.Sorted(maps.Keys(im.brokers))
}

// BrokerEndpoint returns the endpoint broker id registered for listener.
func (im *Image) BrokerEndpoint(id int32, listener string) (Endpoint, bool) {
	b, ok := im.brokers[id]
	if !ok {
		return Endpoint{}, false
	}
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// TopicByName returns the topic called name.
func (im *Image) TopicByName(name string) (Topic, bool) {
	id, ok := im.topicsByName[name]
	if !ok {
		return Topic{}, false
	}
	return im.TopicByID(id)
}

// TopicByID returns the topic with id.
func (im *Image) TopicByID(id TopicID) (Topic, bool) {
	t, ok := im.topics[id]
	if !ok {
		return Topic{}, false
	}
	return Topic{Name: t.name, ID: t.id, Partitions: int32(len(t.partitions))}, true
}

// Topics returns every topic, sorted by name.
func (im *Image) Topics() []Topic {
	out := make([]Topic, 0, len(im.topics))
	for _, name := range slices.Sorted(maps.Keys(im.topicsByName)) {
		t, _ := im.TopicByName(name)
		out = append(out, t)
	}
	return out
}

// Partition returns the state of partition p of topic id.
func (im *Image) Partition(id TopicID, p int32) (PartitionState, bool) {
	t, ok := im.topics[id]
	if !ok || p < 0 || int(p) >= len(t.partitions) {
		return PartitionState{}, false
	}
	return t.partitions[p], true
}

// PartitionByName returns the state of partition p of the topic called name.
func (im *Image) PartitionByName(name string, p int32) (PartitionState, bool) {
	id, ok := im.topicsByName[name]
	if !ok {
		return PartitionState{}, false
	}
	return im.Partition(id, p)
}

// Leader returns the leader and leader epoch of partition p of topic name;
// ok is false if there is no such partition. The leader may be NoLeader.
func (im *Image) Leader(name string, p int32) (leader int32, leaderEpoch int32, ok bool) {
	s, ok := im.PartitionByName(name, p)
	if !ok {
		return NoLeader, -1, false
	}
	return s.Leader, s.LeaderEpoch, true
}

// PartitionsOf returns the partitions broker id is a replica of, sorted by
// topic name then partition.
func (im *Image) PartitionsOf(id int32) []TopicPartition {
	var out []TopicPartition
	im.EachPartition(func(tp TopicPartition, s PartitionState) {
		if slices.Contains(s.Replicas, id) {
			out = append(out, tp)
		}
	})
	return out
}

// EachPartition calls fn for every partition, sorted by topic name then
// partition.
func (im *Image) EachPartition(fn func(TopicPartition, PartitionState)) {
	for _, name := range slices.Sorted(maps.Keys(im.topicsByName)) {
		t := im.topics[im.topicsByName[name]]
		for i, s := range t.partitions {
			fn(TopicPartition{Topic: name, TopicID: t.id, Partition: int32(i)}, s)
		}
	}
}

// Config returns the value of key for a resource.
func (im *Image) Config(res ConfigResource, key string) (string, bool) {
	v, ok := im.configs[res][key]
	return v, ok
}

// Configs returns a copy of every key set for res.
func (im *Image) Configs(res ConfigResource) map[string]string {
	return maps.Clone(im.configs[res])
}

// ConfigResources returns every resource with a config set, sorted by type
// then name.
func (im *Image) ConfigResources() []ConfigResource {
	return slices.SortedFunc(maps.Keys(im.configs), func(a, b ConfigResource) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
	})
}

// ACLs returns every ACL, sorted by binding (acl.Compare). The slice is
// the caller's.
func (im *Image) ACLs() []acl.ACL {
	out := make([]acl.ACL, 0, len(im.acls))
	for id, b := range im.acls { // order-independent: sorted below
		out = append(out, acl.ACL{ID: id, Binding: b})
	}
	slices.SortFunc(out, func(a, b acl.ACL) int { return acl.Compare(a.Binding, b.Binding) })
	return out
}

// ACLSet is the image's ACLs as an immutable, indexed set, built anew: a
// caller that decides often keeps it until a record changes the ACLs.
func (im *Image) ACLSet() *acl.Set { return acl.NewSet(im.ACLs()) }

// ACLID is the id of the ACL b, if the image holds it.
func (im *Image) ACLID(b acl.Binding) (acl.ID, bool) {
	id, ok := im.aclIDs[b]
	return id, ok
}

// ACL is the ACL with id, if the image holds it.
func (im *Image) ACL(id acl.ID) (acl.Binding, bool) {
	b, ok := im.acls[id]
	return b, ok
}
