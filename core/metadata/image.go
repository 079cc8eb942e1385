package metadata

import (
	"fmt"
	"slices"

	"strand/core/acl"
)

// Broker is a broker's registration as the image holds it.
type Broker struct {
	ID            int32
	IncarnationID [16]byte
	// Epoch is the offset of the broker's RegisterBrokerRecord.
	Epoch int64
	// Endpoints are sorted by listener name.
	Endpoints            []Endpoint
	Fenced               bool
	InControlledShutdown bool
}

// PartitionState is the controller's state of one partition, as Kafka's
// PartitionRegistration.
type PartitionState struct {
	// Replicas is the assignment, preferred leader first.
	Replicas []int32
	// ISR, ELR and LastKnownELR are sorted.
	ISR          []int32
	ELR          []int32
	LastKnownELR []int32
	// Leader is the leader's broker id or NoLeader.
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// Topic is a topic's identity and size.
type Topic struct {
	Name       string
	ID         TopicID
	Partitions int32
}

// ConfigResource names the owner of a config: a topic or a broker.
type ConfigResource struct {
	Type ConfigResourceType
	Name string
}

type topicState struct {
	name string
	id   TopicID
	// partitions[i] is partition i; the slice only grows.
	partitions []PartitionState
}

// Image is the cluster metadata after applying a prefix of the metadata log.
// The zero value is not usable; use NewImage.
type Image struct {
	// offset is the offset of the last record applied, -1 for none.
	offset         int64
	brokers        map[int32]Broker
	topics         map[TopicID]*topicState
	topicsByName   map[string]TopicID
	configs        map[ConfigResource]map[string]string
	nextProducerID int64
	// scram is replaced, never changed, by a SCRAM record (scram.go).
	scram *ScramCredentials
	// acls are the ACLs by id; aclIDs the same, by binding: one binding
	// is held at most once.
	acls   map[acl.ID]acl.Binding
	aclIDs map[acl.Binding]acl.ID
}

// NewImage returns the image of the empty log.
func NewImage() *Image {
	return &Image{
		offset:       -1,
		brokers:      map[int32]Broker{},
		topics:       map[TopicID]*topicState{},
		topicsByName: map[string]TopicID{},
		configs:      map[ConfigResource]map[string]string{},
		acls:         map[acl.ID]acl.Binding{},
		aclIDs:       map[acl.Binding]acl.ID{},
	}
}

// Offset is the offset of the last record applied, -1 if none: a broker
// following the log fetches from Offset()+1.
func (im *Image) Offset() int64 { return im.offset }

// NextProducerID is the first producer id not yet allocated.
func (im *Image) NextProducerID() int64 { return im.nextProducerID }

// Clone returns a deep copy that shares only immutable slices.
func (im *Image) Clone() *Image {
	out := NewImage()
	out.offset = im.offset
	out.nextProducerID = im.nextProducerID
	out.scram = im.scram // immutable: shared

	for id, b := range im.brokers { // order-independent: copying a map
		out.brokers[id] = b
	}
	for id, t := range im.topics { // order-independent: copying a map
		out.topics[id] = &topicState{name: t.name, id: t.id, partitions: slices.Clone(t.partitions)}
		out.topicsByName[t.name] = id
	}
	for res, kv := range im.configs { // order-independent: copying a map
		c := make(map[string]string, len(kv))
		for k, v := range kv { // order-independent: copying a map
			c[k] = v
		}
		out.configs[res] = c
	}
	for id, b := range im.acls { // order-independent: copying a map
		out.acls[id], out.aclIDs[b] = b, id
	}
	return out
}

// Apply applies rec, the record at offset, which must be after Offset().
// A record that does not fit the image is an error naming the field, and
// leaves the image unchanged.
func (im *Image) Apply(offset int64, rec Record) error {
	if offset <= im.offset {
		return fmt.Errorf("apply %v at offset %d: image is already at offset %d", rec.Type(), offset, im.offset)
	}
	var err error
	switch r := rec.(type) {
	case *RegisterBrokerRecord:
		err = im.applyRegisterBroker(r)
	case *UnregisterBrokerRecord:
		err = im.applyUnregisterBroker(r)
	case *BrokerRegistrationChangeRecord:
		err = im.applyBrokerChange(r)
	case *TopicRecord:
		err = im.applyTopic(r)
	case *PartitionRecord:
		err = im.applyPartition(r)
	case *PartitionChangeRecord:
		err = im.applyPartitionChange(r)
	case *RemoveTopicRecord:
		err = im.applyRemoveTopic(r)
	case *ConfigRecord:
		err = im.applyConfig(r)
	case *ProducerIdsRecord:
		err = im.applyProducerIDs(r)
	case *UserScramCredentialRecord:
		err = im.applyUserScramCredential(r)
	case *RemoveUserScramCredentialRecord:
		err = im.applyRemoveUserScramCredential(r)
	case *AccessControlEntryRecord:
		err = im.applyAccessControlEntry(r)
	case *RemoveAccessControlEntryRecord:
		err = im.applyRemoveAccessControlEntry(r)
	case *NoOpRecord:
	default:
		err = fmt.Errorf("unknown record type %T", rec)
	}
	if err != nil {
		return fmt.Errorf("apply %v at offset %d: %w", rec.Type(), offset, err)
	}
	im.offset = offset
	return nil
}

// ApplyBatch applies every record of b at its offset, skipping records at
// or below Offset(): a fetch returns whole batches, so it may start before
// the next record to apply. It stops at the first error: the records
// before it stay applied.
func (im *Image) ApplyBatch(b Batch) error {
	for i, rec := range b.Records {
		offset := b.BaseOffset + int64(i)
		if offset <= im.offset {
			continue
		}
		if err := im.Apply(offset, rec); err != nil {
			return err
		}
	}
	return nil
}

func (im *Image) applyRegisterBroker(r *RegisterBrokerRecord) error {
	if r.BrokerID < 0 {
		return fmt.Errorf("BrokerID %d is negative", r.BrokerID)
	}
	if old, ok := im.brokers[r.BrokerID]; ok && r.BrokerEpoch <= old.Epoch {
		return fmt.Errorf("BrokerEpoch %d of broker %d is not above its current epoch %d", r.BrokerEpoch, r.BrokerID, old.Epoch)
	}
	names := make([]string, len(r.Endpoints))
	for i, e := range r.Endpoints {
		names[i] = e.Listener
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		return fmt.Errorf("field Endpoints of broker %d: listener names %v are not sorted and unique", r.BrokerID, names)
	}
	im.brokers[r.BrokerID] = Broker{
		ID: r.BrokerID, IncarnationID: r.IncarnationID, Epoch: r.BrokerEpoch,
		Endpoints: slices.Clone(r.Endpoints), Fenced: r.Fenced, InControlledShutdown: r.InControlledShutdown,
	}
	return nil
}

// registered returns the broker if it is registered with exactly epoch.
func (im *Image) registered(id int32, epoch int64) (Broker, error) {
	b, ok := im.brokers[id]
	if !ok {
		return Broker{}, fmt.Errorf("BrokerID %d is not registered", id)
	}
	if b.Epoch != epoch {
		return Broker{}, fmt.Errorf("BrokerEpoch %d of broker %d, registered with epoch %d", epoch, id, b.Epoch)
	}
	return b, nil
}

func (im *Image) applyUnregisterBroker(r *UnregisterBrokerRecord) error {
	if _, err := im.registered(r.BrokerID, r.BrokerEpoch); err != nil {
		return err
	}
	delete(im.brokers, r.BrokerID)
	return nil
}

func (im *Image) applyBrokerChange(r *BrokerRegistrationChangeRecord) error {
	b, err := im.registered(r.BrokerID, r.BrokerEpoch)
	if err != nil {
		return err
	}
	switch r.Fenced {
	case FenceFence:
		b.Fenced = true
	case FenceUnfence:
		b.Fenced = false
	case FenceNoChange:
	default:
		return fmt.Errorf("field Fenced %d: must be -1, 0 or 1", r.Fenced)
	}
	if r.InControlledShutdown {
		b.InControlledShutdown = true
	}
	im.brokers[r.BrokerID] = b
	return nil
}

func (im *Image) applyTopic(r *TopicRecord) error {
	if err := ValidateTopicName(r.Name); err != nil {
		return err
	}
	if r.ID.IsZero() {
		return fmt.Errorf("ID of topic %q is the zero id", r.Name)
	}
	if _, ok := im.topicsByName[r.Name]; ok {
		return fmt.Errorf("field Name %q: topic exists", r.Name)
	}
	if _, ok := im.topics[r.ID]; ok {
		return fmt.Errorf("ID %v: topic id in use", r.ID)
	}
	im.topics[r.ID] = &topicState{name: r.Name, id: r.ID}
	im.topicsByName[r.Name] = r.ID
	return nil
}

func (im *Image) topic(id TopicID) (*topicState, error) {
	t, ok := im.topics[id]
	if !ok {
		return nil, fmt.Errorf("TopicID %v: no such topic", id)
	}
	return t, nil
}

func (im *Image) applyPartition(r *PartitionRecord) error {
	t, err := im.topic(r.TopicID)
	if err != nil {
		return err
	}
	if int(r.PartitionID) != len(t.partitions) {
		return fmt.Errorf("PartitionID %d of topic %q: the next partition is %d", r.PartitionID, t.name, len(t.partitions))
	}
	p := PartitionState{
		Replicas: slices.Clone(r.Replicas), ISR: sorted(r.ISR), ELR: sorted(r.ELR), LastKnownELR: sorted(r.LastKnownELR),
		Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("partition %s-%d: %w", t.name, r.PartitionID, err)
	}
	t.partitions = append(t.partitions, p)
	return nil
}

func (im *Image) applyPartitionChange(r *PartitionChangeRecord) error {
	t, err := im.topic(r.TopicID)
	if err != nil {
		return err
	}
	if r.PartitionID < 0 || int(r.PartitionID) >= len(t.partitions) {
		return fmt.Errorf("PartitionID %d: topic %q has %d partitions", r.PartitionID, t.name, len(t.partitions))
	}
	old := t.partitions[r.PartitionID]
	p, err := old.WithChange(r)
	if err != nil {
		return fmt.Errorf("partition %s-%d: %w", t.name, r.PartitionID, err)
	}
	t.partitions[r.PartitionID] = p
	return nil
}

func (im *Image) applyRemoveTopic(r *RemoveTopicRecord) error {
	t, err := im.topic(r.TopicID)
	if err != nil {
		return err
	}
	delete(im.topics, r.TopicID)
	delete(im.topicsByName, t.name)
	delete(im.configs, ConfigResource{Type: ConfigResourceTopic, Name: t.name})
	return nil
}

func (im *Image) applyConfig(r *ConfigRecord) error {
	res := ConfigResource{Type: r.ResourceType, Name: r.ResourceName}
	switch r.ResourceType {
	case ConfigResourceTopic:
		if _, ok := im.topicsByName[r.ResourceName]; !ok {
			return fmt.Errorf("ResourceName %q: no such topic", r.ResourceName)
		}
	case ConfigResourceBroker:
	default:
		return fmt.Errorf("ResourceType %d: only topics (2) and brokers (4) have configs", r.ResourceType)
	}
	if r.Name == "" {
		return fmt.Errorf("field Name: empty config key")
	}
	if r.Value == nil {
		delete(im.configs[res], r.Name)
		if len(im.configs[res]) == 0 {
			delete(im.configs, res)
		}
		return nil
	}
	if im.configs[res] == nil {
		im.configs[res] = map[string]string{}
	}
	im.configs[res][r.Name] = *r.Value
	return nil
}

func (im *Image) applyProducerIDs(r *ProducerIdsRecord) error {
	if _, err := im.registered(r.BrokerID, r.BrokerEpoch); err != nil {
		return err
	}
	if r.NextProducerID <= im.nextProducerID {
		return fmt.Errorf("NextProducerID %d is not above the current %d", r.NextProducerID, im.nextProducerID)
	}
	im.nextProducerID = r.NextProducerID
	return nil
}

// applyAccessControlEntry adds an ACL: a valid binding (acl.Binding.Validate)
// under a new, non-zero id, not already held under another id (Kafka's
// controller refuses to replay a duplicate too).
func (im *Image) applyAccessControlEntry(r *AccessControlEntryRecord) error {
	b := r.Binding()
	if err := b.Validate(); err != nil {
		return fmt.Errorf("ACL %x: %w", r.ID, err)
	}
	if r.ID.IsZero() {
		return fmt.Errorf("ID of ACL %v is the zero id", b)
	}
	if _, ok := im.acls[r.ID]; ok {
		return fmt.Errorf("ID %x: ACL id in use", r.ID)
	}
	if id, ok := im.aclIDs[b]; ok {
		return fmt.Errorf("ACL %v is already held, with id %x", b, id)
	}
	im.acls[r.ID], im.aclIDs[b] = b, r.ID
	return nil
}

func (im *Image) applyRemoveAccessControlEntry(r *RemoveAccessControlEntryRecord) error {
	b, ok := im.acls[r.ID]
	if !ok {
		return fmt.Errorf("ID %x: no such ACL", r.ID)
	}
	delete(im.acls, r.ID)
	delete(im.aclIDs, b)
	return nil
}

// topicNameBytesMax is Kafka's limit on a topic name's length.
const topicNameBytesMax = 249

// ValidateTopicName applies Kafka's rules for topic names (Topic.validate):
// 1 to 249 characters from [a-zA-Z0-9._-], and not "." or "..".
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > topicNameBytesMax:
		return fmt.Errorf("topic name of %d characters: at most %d", len(name), topicNameBytesMax)
	}
	for _, c := range []byte(name) {
		legal := c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !legal {
			return fmt.Errorf("topic name %q holds %q: only ASCII letters, digits, '.', '_' and '-' are allowed", name, c)
		}
	}
	return nil
}
