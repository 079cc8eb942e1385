package metadata

import (
	"encoding/base64"
	"fmt"

	"strand/core/acl"
)

// RecordType is the type of a metadata record: the apiKey Kafka gives the
// record of the same name in metadata/src/main/resources/common/metadata.
type RecordType int16

// Record types Strand writes. The numbers are Kafka's, so a record dump reads
// the same in both systems.
const (
	TypeRegisterBroker           RecordType = 0
	TypeUnregisterBroker         RecordType = 1
	TypeTopic                    RecordType = 2
	TypePartition                RecordType = 3
	TypeConfig                   RecordType = 4
	TypePartitionChange          RecordType = 5
	TypeAccessControlEntry       RecordType = 6
	TypeRemoveAccessControlEntry RecordType = 7
	TypeRemoveTopic              RecordType = 9
	TypeProducerIDs              RecordType = 15
	TypeBrokerRegistrationChange RecordType = 17
	TypeNoOp                     RecordType = 20
)

// String is Kafka's name for the record type.
func (t RecordType) String() string {
	switch t {
	case TypeRegisterBroker:
		return "RegisterBrokerRecord"
	case TypeUnregisterBroker:
		return "UnregisterBrokerRecord"
	case TypeTopic:
		return "TopicRecord"
	case TypePartition:
		return "PartitionRecord"
	case TypeConfig:
		return "ConfigRecord"
	case TypePartitionChange:
		return "PartitionChangeRecord"
	case TypeAccessControlEntry:
		return "AccessControlEntryRecord"
	case TypeRemoveAccessControlEntry:
		return "RemoveAccessControlEntryRecord"
	case TypeRemoveTopic:
		return "RemoveTopicRecord"
	case TypeProducerIDs:
		return "ProducerIdsRecord"
	case TypeBrokerRegistrationChange:
		return "BrokerRegistrationChangeRecord"
	case TypeNoOp:
		return "NoOpRecord"
	case TypeUserScramCredential:
		return "UserScramCredentialRecord"
	case TypeRemoveUserScramCredential:
		return "RemoveUserScramCredentialRecord"
	}
	return fmt.Sprintf("RecordType(%d)", int16(t))
}

// Sentinels of the partition state, as in Kafka's LeaderConstants.
const (
	// NoLeader is the leader of a partition that has none.
	NoLeader int32 = -1
	// NoLeaderChange in PartitionChangeRecord.Leader keeps the leader and
	// the leader epoch.
	NoLeaderChange int32 = -2
)

// TopicID is a topic's 16-byte id (Kafka's Uuid).
type TopicID [16]byte

// String is Kafka's rendering of a Uuid: URL-safe base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is the all-zero id, which Kafka reserves.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// Record is one typed metadata record. The set of implementations is closed:
// exactly the *...Record types of this package.
type Record interface {
	// Type is the record's type.
	Type() RecordType
	// appendFields appends the fields, after the type and version.
	appendFields(dst []byte) []byte
	// readFields decodes the fields; errors surface through r.
	readFields(r *fieldReader)
}

// Endpoint is one listener a broker registered.
type Endpoint struct {
	// Listener is the listener's name, e.g. PLAINTEXT.
	Listener string
	Host     string
	Port     uint16
	// SecurityProtocol is Kafka's id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT,
	// 3 SASL_SSL.
	SecurityProtocol int16
}

// RegisterBrokerRecord registers (or re-registers) a broker. BrokerEpoch is
// the offset of this very record, so epochs grow with every registration.
type RegisterBrokerRecord struct {
	BrokerID      int32
	IncarnationID [16]byte
	BrokerEpoch   int64
	// Endpoints are sorted by listener name.
	Endpoints []Endpoint
	// Fenced is true for a new registration: the broker is unfenced once it
	// has caught up with the metadata log.
	Fenced bool
	// InControlledShutdown is false for every new registration.
	InControlledShutdown bool
}

// UnregisterBrokerRecord removes a broker's registration.
type UnregisterBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
}

// FenceChange is BrokerRegistrationChangeRecord.Fenced.
type FenceChange int8

// FenceChange values, as Kafka's BrokerRegistrationFencingChange.
const (
	FenceUnfence  FenceChange = -1
	FenceNoChange FenceChange = 0
	FenceFence    FenceChange = 1
)

// BrokerRegistrationChangeRecord fences or unfences a broker, or marks it as
// in controlled shutdown.
type BrokerRegistrationChangeRecord struct {
	BrokerID    int32
	BrokerEpoch int64
	Fenced      FenceChange
	// InControlledShutdown true marks the broker as shutting down; false
	// leaves the flag unchanged (only a new registration clears it).
	InControlledShutdown bool
}

// TopicRecord creates a topic. Its partitions follow as PartitionRecords.
type TopicRecord struct {
	Name string
	ID   TopicID
}

// PartitionRecord creates a partition of an existing topic with its initial
// state. Partition ids of a topic are dense: 0, 1, 2, ... in log order.
type PartitionRecord struct {
	TopicID      TopicID
	PartitionID  int32
	Replicas     []int32
	ISR          []int32
	ELR          []int32
	LastKnownELR []int32
	Leader       int32
	LeaderEpoch  int32
	// PartitionEpoch starts at 0.
	PartitionEpoch int32
}

// IDsChange is an optional replica list in a PartitionChangeRecord: when
// Changed is false the field keeps its value (Kafka writes null).
type IDsChange struct {
	Changed bool
	IDs     []int32
}

// Change returns an IDsChange that sets the list to ids.
func Change(ids []int32) IDsChange { return IDsChange{Changed: true, IDs: ids} }

// PartitionChangeRecord changes some fields of a partition. Applying it
// always increases the partition epoch by one, and increases the leader
// epoch by one unless Leader is NoLeaderChange (as Kafka does).
type PartitionChangeRecord struct {
	TopicID     TopicID
	PartitionID int32
	// Leader is the new leader, NoLeader for none, or NoLeaderChange.
	Leader       int32
	ISR          IDsChange
	ELR          IDsChange
	LastKnownELR IDsChange
}

// RemoveTopicRecord deletes a topic, its partitions and its configs.
type RemoveTopicRecord struct {
	TopicID TopicID
}

// ConfigResourceType is Kafka's resource type for configs.
type ConfigResourceType int8

// Config resource types, Kafka's ConfigResource.Type ids.
const (
	ConfigResourceTopic  ConfigResourceType = 2
	ConfigResourceBroker ConfigResourceType = 4
)

// ConfigRecord sets (Value non-nil) or deletes (Value nil) one config key.
type ConfigRecord struct {
	ResourceType ConfigResourceType
	ResourceName string
	Name         string
	Value        *string
}

// ProducerIdsRecord allocates the producer ids below NextProducerID to the
// broker that asked: the next block starts at NextProducerID.
type ProducerIdsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64
	NextProducerID int64
}

// AccessControlEntryRecord adds one ACL (SPEC.md §10.7), with Kafka's
// fields and enum ids (ResourceType, PatternType, AclOperation,
// AclPermissionType). The controller commits the ACLs of one CreateAcls
// request as one batch.
type AccessControlEntryRecord struct {
	// ID is the ACL's id: never zero, never reused while the ACL exists.
	ID           acl.ID
	ResourceType int8
	ResourceName string
	PatternType  int8
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

// Binding is the ACL the record adds.
func (r *AccessControlEntryRecord) Binding() acl.Binding {
	return acl.Binding{
		Pattern: acl.Pattern{Type: acl.ResourceType(r.ResourceType), Name: r.ResourceName, PatternType: acl.PatternType(r.PatternType)},
		Entry: acl.Entry{Principal: r.Principal, Host: r.Host, Operation: acl.Operation(r.Operation),
			Permission: acl.Permission(r.Permission)},
	}
}

// NewAccessControlEntryRecord is the record adding b with id.
func NewAccessControlEntryRecord(id acl.ID, b acl.Binding) *AccessControlEntryRecord {
	return &AccessControlEntryRecord{
		ID: id, ResourceType: int8(b.Type), ResourceName: b.Name, PatternType: int8(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int8(b.Operation), Permission: int8(b.Permission),
	}
}

// RemoveAccessControlEntryRecord removes the ACL with ID. The controller
// commits the removals of one DeleteAcls request as one batch.
type RemoveAccessControlEntryRecord struct {
	ID acl.ID
}

// NoOpRecord changes nothing; a new controller writes one to learn its
// commit offset.
type NoOpRecord struct{}

// Type is TypeRegisterBroker.
func (*RegisterBrokerRecord) Type() RecordType { return TypeRegisterBroker }

// Type is TypeUnregisterBroker.
func (*UnregisterBrokerRecord) Type() RecordType { return TypeUnregisterBroker }

// Type is TypeBrokerRegistrationChange.
func (*BrokerRegistrationChangeRecord) Type() RecordType { return TypeBrokerRegistrationChange }

// Type is TypeTopic.
func (*TopicRecord) Type() RecordType { return TypeTopic }

// Type is TypePartition.
func (*PartitionRecord) Type() RecordType { return TypePartition }

// Type is TypePartitionChange.
func (*PartitionChangeRecord) Type() RecordType { return TypePartitionChange }

// Type is TypeAccessControlEntry.
func (*AccessControlEntryRecord) Type() RecordType { return TypeAccessControlEntry }

// Type is TypeRemoveAccessControlEntry.
func (*RemoveAccessControlEntryRecord) Type() RecordType { return TypeRemoveAccessControlEntry }

// Type is TypeRemoveTopic.
func (*RemoveTopicRecord) Type() RecordType { return TypeRemoveTopic }

// Type is TypeConfig.
func (*ConfigRecord) Type() RecordType { return TypeConfig }

// Type is TypeProducerIDs.
func (*ProducerIdsRecord) Type() RecordType { return TypeProducerIDs }

// Type is TypeNoOp.
func (*NoOpRecord) Type() RecordType { return TypeNoOp }

// newRecord returns an empty record of type t, or nil for an unknown type.
func newRecord(t RecordType) Record {
	switch t {
	case TypeRegisterBroker:
		return &RegisterBrokerRecord{}
	case TypeUnregisterBroker:
		return &UnregisterBrokerRecord{}
	case TypeBrokerRegistrationChange:
		return &BrokerRegistrationChangeRecord{}
	case TypeTopic:
		return &TopicRecord{}
	case TypePartition:
		return &PartitionRecord{}
	case TypePartitionChange:
		return &PartitionChangeRecord{}
	case TypeRemoveTopic:
		return &RemoveTopicRecord{}
	case TypeAccessControlEntry:
		return &AccessControlEntryRecord{}
	case TypeRemoveAccessControlEntry:
		return &RemoveAccessControlEntryRecord{}
	case TypeConfig:
		return &ConfigRecord{}
	case TypeProducerIDs:
		return &ProducerIdsRecord{}
	case TypeNoOp:
		return &NoOpRecord{}
	case TypeUserScramCredential:
		return &UserScramCredentialRecord{}
	case TypeRemoveUserScramCredential:
		return &RemoveUserScramCredentialRecord{}
	}
	return nil
}
