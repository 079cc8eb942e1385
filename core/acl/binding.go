package acl

import (
	"cmp"
	"fmt"
	"strings"
)

// Pattern is the resources an ACL applies to (Kafka's ResourcePattern).
type Pattern struct {
	Type ResourceType
	// Name is the resource's name, "*" (LITERAL) for every resource of
	// the type, or the prefix (PREFIXED).
	Name        string
	PatternType PatternType
}

// String is Kafka's rendering (ResourcePattern.toString), which
// kafka-acls.sh prints.
func (p Pattern) String() string {
	return fmt.Sprintf("ResourcePattern(resourceType=%v, name=%s, patternType=%v)", p.Type, p.Name, p.PatternType)
}

// Entry is who is allowed or denied what, from where (Kafka's
// AccessControlEntry).
type Entry struct {
	// Principal is "<type>:<name>", or "User:*" for every user.
	Principal string
	// Host is the client's IP address, or "*" for every host.
	Host       string
	Operation  Operation
	Permission Permission
}

// String is Kafka's rendering (AccessControlEntry.toString).
func (e Entry) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%v, permissionType=%v)", e.Principal, e.Host, e.Operation, e.Permission)
}

// Binding is one ACL: an entry bound to a pattern (Kafka's AclBinding).
type Binding struct {
	Pattern
	Entry
}

// String renders the binding as Kafka's AclBinding does.
func (b Binding) String() string {
	return fmt.Sprintf("(pattern=%v, entry=%v)", b.Pattern, b.Entry)
}

// Compare orders bindings: by resource type, name, pattern type, then
// principal, host, operation and permission. Listings are in this order.
func Compare(a, b Binding) int {
	return cmp.Or(
		cmp.Compare(a.Type, b.Type), strings.Compare(a.Name, b.Name), cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.Principal, b.Principal), strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission),
	)
}

// ID is an ACL's id in the metadata log (AccessControlEntryRecord.Id).
type ID [16]byte

// IsZero reports whether id is the all-zero id, which is never an ACL's.
func (id ID) IsZero() bool { return id == ID{} }

// ACL is a binding with its id.
type ACL struct {
	ID ID
	Binding
}

// Validate checks a binding as Kafka's controller checks a new ACL
// (AclControlManager.validateNewAcl) and its broker a CreateAcls creation:
// a concrete resource type, pattern type, operation and permission; a
// non-empty name, "kafka-cluster" for the cluster; a principal of the form
// <type>:<name>; a non-empty host. The error names the field.
func (b Binding) Validate() error {
	switch {
	case !b.Type.concrete():
		return fmt.Errorf("field ResourceType %v: want TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN or USER", b.Type)
	case !b.PatternType.concrete():
		return fmt.Errorf("field ResourcePatternType %v: an ACL's pattern is LITERAL or PREFIXED", b.PatternType)
	case !b.Operation.concrete():
		return fmt.Errorf("field Operation %v: an ACL names one operation or ALL", b.Operation)
	case !b.Permission.concrete():
		return fmt.Errorf("field PermissionType %v: an ACL is ALLOW or DENY", b.Permission)
	case b.Name == "":
		return fmt.Errorf("field ResourceName: empty")
	case b.Type == Cluster && (b.Name != ClusterName || b.PatternType != Literal):
		return fmt.Errorf("field ResourceName %q (%v): the only CLUSTER resource is LITERAL %s", b.Name, b.PatternType, ClusterName)
	case b.Host == "":
		return fmt.Errorf("field Host: empty (use %q for every host)", Wildcard)
	}
	if err := ValidatePrincipal(b.Principal); err != nil {
		return fmt.Errorf("field Principal: %w", err)
	}
	return nil
}

// ValidatePrincipal checks the form <type>:<name> (Kafka's
// SecurityUtils.parseKafkaPrincipal), e.g. User:alice or User:*.
func ValidatePrincipal(principal string) error {
	kind, name, ok := strings.Cut(principal, ":")
	if !ok || kind == "" || name == "" {
		return fmt.Errorf("%q is not a principal: want <type>:<name>, such as User:alice", principal)
	}
	return nil
}

// Filter selects ACLs (Kafka's AclBindingFilter): DescribeAcls lists and
// DeleteAcls removes what one matches.
type Filter struct {
	// Type is a resource type or AnyResource.
	Type ResourceType
	// Name is nil for any name.
	Name *string
	// PatternType is LITERAL, PREFIXED, AnyPattern or Match.
	PatternType PatternType
	// Principal and Host are nil for any.
	Principal *string
	Host      *string
	// Operation is an operation, ALL, or AnyOperation.
	Operation Operation
	// Permission is ALLOW, DENY or AnyPermission.
	Permission Permission
}

// MatchAll is the filter that matches every ACL.
var MatchAll = Filter{Type: AnyResource, PatternType: AnyPattern, Operation: AnyOperation, Permission: AnyPermission}

// Validate checks that every field of the filter is known: Kafka refuses a
// filter with an UNKNOWN element (INVALID_REQUEST).
func (f Filter) Validate() error {
	switch {
	case !f.Type.concrete() && f.Type != AnyResource:
		return fmt.Errorf("field ResourceTypeFilter %v: unknown", f.Type)
	case !f.PatternType.concrete() && f.PatternType != AnyPattern && f.PatternType != Match:
		return fmt.Errorf("field PatternTypeFilter %v: unknown", f.PatternType)
	case !f.Operation.concrete() && f.Operation != AnyOperation:
		return fmt.Errorf("field Operation %v: unknown", f.Operation)
	case !f.Permission.concrete() && f.Permission != AnyPermission:
		return fmt.Errorf("field PermissionType %v: unknown", f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b, as Kafka's
// ResourcePatternFilter and AccessControlEntryFilter match.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b.Pattern) && f.matchesEntry(b.Entry)
}

func (f Filter) matchesPattern(p Pattern) bool {
	if f.Type != AnyResource && f.Type != p.Type {
		return false
	}
	if f.PatternType != AnyPattern && f.PatternType != Match && f.PatternType != p.PatternType {
		return false
	}
	if f.Name == nil {
		return true
	}
	if f.PatternType == AnyPattern || f.PatternType == p.PatternType {
		return *f.Name == p.Name
	}
	// Match: every pattern that applies to a resource named *f.Name.
	return appliesTo(p, *f.Name)
}

func (f Filter) matchesEntry(e Entry) bool {
	return (f.Principal == nil || *f.Principal == e.Principal) &&
		(f.Host == nil || *f.Host == e.Host) &&
		(f.Operation == AnyOperation || f.Operation == e.Operation) &&
		(f.Permission == AnyPermission || f.Permission == e.Permission)
}

// appliesTo reports whether a pattern covers the resource named name.
func appliesTo(p Pattern, name string) bool {
	switch p.PatternType {
	case Literal:
		return p.Name == name || p.Name == Wildcard
	case Prefixed:
		return strings.HasPrefix(name, p.Name)
	}
	return false
}
