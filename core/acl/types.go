package acl

import (
	"fmt"
	"strings"
)

// ResourceType is what an ACL protects, with Kafka's ids (ResourceType).
type ResourceType int8

// Resource types. AnyResource appears only in filters.
const (
	AnyResource     ResourceType = 1
	Topic           ResourceType = 2
	Group           ResourceType = 3
	Cluster         ResourceType = 4
	TransactionalID ResourceType = 5
	DelegationToken ResourceType = 6
	User            ResourceType = 7
)

// ResourceTypes are the concrete resource types, in id order.
var ResourceTypes = []ResourceType{Topic, Group, Cluster, TransactionalID, DelegationToken, User}

// PatternType says how an ACL's resource name matches (KIP-290).
type PatternType int8

// Pattern types. AnyPattern and Match appear only in filters: AnyPattern
// matches either pattern type with exactly the filter's name; Match
// matches every pattern that would apply to a resource of the filter's
// name (LITERAL equal, LITERAL "*", PREFIXED a prefix of it).
const (
	AnyPattern PatternType = 1
	Match      PatternType = 2
	Literal    PatternType = 3
	Prefixed   PatternType = 4
)

// Operation is what a request does to a resource, with Kafka's ids
// (AclOperation).
type Operation int8

// Operations. AnyOperation appears only in filters; All in an ACL stands
// for every operation.
const (
	AnyOperation    Operation = 1
	All             Operation = 2
	Read            Operation = 3
	Write           Operation = 4
	Create          Operation = 5
	Delete          Operation = 6
	Alter           Operation = 7
	Describe        Operation = 8
	ClusterAction   Operation = 9
	DescribeConfigs Operation = 10
	AlterConfigs    Operation = 11
	IdempotentWrite Operation = 12
	CreateTokens    Operation = 13
	DescribeTokens  Operation = 14
)

// Permission is an ACL's verdict, with Kafka's ids (AclPermissionType).
type Permission int8

// Permissions. AnyPermission appears only in filters.
const (
	AnyPermission Permission = 1
	Deny          Permission = 2
	Allow         Permission = 3
)

// Names Kafka gives special meaning.
const (
	// Wildcard is the resource name (LITERAL) and host that match any.
	Wildcard = "*"
	// WildcardPrincipal is the ACL principal that matches every user.
	WildcardPrincipal = "User:*"
	// ClusterName is the only name of the CLUSTER resource.
	ClusterName = "kafka-cluster"
)

var resourceTypeNames = map[ResourceType]string{
	AnyResource: "ANY", Topic: "TOPIC", Group: "GROUP", Cluster: "CLUSTER",
	TransactionalID: "TRANSACTIONAL_ID", DelegationToken: "DELEGATION_TOKEN", User: "USER",
}

var patternTypeNames = map[PatternType]string{
	AnyPattern: "ANY", Match: "MATCH", Literal: "LITERAL", Prefixed: "PREFIXED",
}

var operationNames = map[Operation]string{
	AnyOperation: "ANY", All: "ALL", Read: "READ", Write: "WRITE", Create: "CREATE", Delete: "DELETE",
	Alter: "ALTER", Describe: "DESCRIBE", ClusterAction: "CLUSTER_ACTION", DescribeConfigs: "DESCRIBE_CONFIGS",
	AlterConfigs: "ALTER_CONFIGS", IdempotentWrite: "IDEMPOTENT_WRITE", CreateTokens: "CREATE_TOKENS",
	DescribeTokens: "DESCRIBE_TOKENS",
}

var permissionNames = map[Permission]string{AnyPermission: "ANY", Deny: "DENY", Allow: "ALLOW"}

// String is Kafka's name, e.g. TOPIC.
func (t ResourceType) String() string { return nameOr(resourceTypeNames, t, "ResourceType") }

// String is Kafka's name, e.g. PREFIXED.
func (t PatternType) String() string { return nameOr(patternTypeNames, t, "PatternType") }

// String is Kafka's name, e.g. DESCRIBE_CONFIGS.
func (o Operation) String() string { return nameOr(operationNames, o, "Operation") }

// String is Kafka's name, e.g. ALLOW.
func (p Permission) String() string { return nameOr(permissionNames, p, "Permission") }

func nameOr[K ~int8](names map[K]string, k K, kind string) string {
	if name, ok := names[k]; ok {
		return name
	}
	return fmt.Sprintf("%s(%d)", kind, int8(k))
}

// parseName finds the value named name in names, ignoring case and
// underscores, so that Kafka's enum names (DESCRIBE_CONFIGS) and
// kafka-acls.sh's (DescribeConfigs) both parse.
func parseName[K ~int8](names map[K]string, name, kind string) (K, error) {
	fold := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", "")) }
	for k, n := range names { // order-independent: at most one name folds equal
		if fold(n) == fold(name) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%q is not a %s", name, kind)
}

// ParseResourceType parses a resource type's name (TOPIC, topic).
func ParseResourceType(name string) (ResourceType, error) {
	return parseName(resourceTypeNames, name, "resource type")
}

// ParsePatternType parses a pattern type's name (LITERAL, prefixed, any,
// match).
func ParsePatternType(name string) (PatternType, error) {
	return parseName(patternTypeNames, name, "resource pattern type")
}

// ParseOperation parses an operation's name as Kafka writes it
// (DESCRIBE_CONFIGS) or as kafka-acls.sh takes it (DescribeConfigs).
func ParseOperation(name string) (Operation, error) {
	return parseName(operationNames, name, "operation")
}

// ParsePermission parses ALLOW or DENY (any case).
func ParsePermission(name string) (Permission, error) {
	return parseName(permissionNames, name, "permission type")
}

// concrete reports whether t names one resource type (not ANY).
func (t ResourceType) concrete() bool { _, ok := resourceTypeNames[t]; return ok && t != AnyResource }

// concrete reports whether o names one operation or ALL (not ANY).
func (o Operation) concrete() bool { _, ok := operationNames[o]; return ok && o != AnyOperation }

// concrete reports whether p is ALLOW or DENY.
func (p Permission) concrete() bool { return p == Allow || p == Deny }

// concrete reports whether t is LITERAL or PREFIXED.
func (t PatternType) concrete() bool { return t == Literal || t == Prefixed }

// supportedOperations are the operations Kafka's tools accept on each
// resource type (AclEntry.supportedOperations), ALL aside. The authorizer
// itself accepts any operation on any resource, as Kafka's does.
var supportedOperations = map[ResourceType][]Operation{
	Topic:           {Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs},
	Group:           {Read, Describe, Delete},
	Cluster:         {Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe},
	TransactionalID: {Describe, Write},
	DelegationToken: {Describe},
	User:            {CreateTokens, DescribeTokens},
}

// SupportedOperations are the operations kafka-acls.sh accepts on
// resources of type t, ALL included, in Kafka's order.
func SupportedOperations(t ResourceType) []Operation {
	return append([]Operation{All}, supportedOperations[t]...)
}
