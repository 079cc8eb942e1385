package acl

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// refModel is the reference authorizer: SPEC.md §10.7's rules written as
// directly as they read, by scanning every ACL. It is what Authorizer, with
// its index, must agree with.
type refModel struct {
	acls          []ACL
	superUsers    []string
	allowEveryone bool
}

// covers reports whether pattern p applies to the resource named name.
func refCovers(p Pattern, name string) bool {
	if p.PatternType == Literal {
		return p.Name == name || p.Name == "*"
	}
	return strings.HasPrefix(name, p.Name)
}

// refOperationMatches reports whether an ACL's operation covers op.
func refOperationMatches(e Entry, op Operation) bool {
	if e.Operation == All || e.Operation == op {
		return true
	}
	if e.Permission != Allow {
		return false
	}
	impliesDescribe := []Operation{Read, Write, Delete, Alter}
	return (op == Describe && slices.Contains(impliesDescribe, e.Operation)) ||
		(op == DescribeConfigs && e.Operation == AlterConfigs)
}

func (m refModel) authorize(who Requester, x Action) bool {
	if slices.Contains(m.superUsers, who.Principal) {
		return true
	}
	var onResource []ACL
	for _, a := range m.acls {
		if a.Type == x.Type && refCovers(a.Pattern, x.Name) {
			onResource = append(onResource, a)
		}
	}
	if len(onResource) == 0 {
		return m.allowEveryone
	}
	matches := func(a ACL) bool {
		return (a.Principal == who.Principal || a.Principal == "User:*") &&
			(a.Host == who.Host || a.Host == "*") &&
			refOperationMatches(a.Entry, x.Operation)
	}
	for _, a := range onResource {
		if matches(a) && a.Permission == Deny {
			return false
		}
	}
	for _, a := range onResource {
		if matches(a) && a.Permission == Allow {
			return true
		}
	}
	return false
}

// freshRune never appears in a generated name, so name+freshRune is a
// resource name no generated ACL names.
const freshRune = "~"

// allowedOnSome asks authorize for every name that could be a witness:
// each ACL's name, each followed by a fresh character, and a fresh name.
func (m refModel) allowedOnSome(who Requester, op Operation, t ResourceType) bool {
	candidates := []string{freshRune}
	for _, a := range m.acls {
		candidates = append(candidates, a.Name, a.Name+freshRune)
	}
	for _, name := range candidates {
		if name != "*" && m.authorize(who, Action{Operation: op, Type: t, Name: name}) {
			return true
		}
	}
	return false
}

var (
	genPrincipals    = []string{"User:alice", "User:*", "User:bob"}
	queryPrincipals  = []string{"User:alice", "User:bob", "User:carol"}
	genHosts         = []string{"10.0.0.1", "*"}
	queryHosts       = []string{"10.0.0.1", "10.0.0.2"}
	genResourceTypes = []ResourceType{Topic, Group}
	// aclOperations favour the operations that imply others, and ALL, so
	// that DENYs and ALLOWs meet on one request often.
	aclOperations     = []Operation{All, Read, Write, Delete, Alter, Describe, Create, AlterConfigs, DescribeConfigs}
	requestOperations = []Operation{Read, Write, Describe, Create, DescribeConfigs, AlterConfigs, IdempotentWrite}
)

// genName draws a short name over a two-letter alphabet, so that
// PREFIXED patterns overlap often.
func genName(t *rapid.T, label string) string {
	return rapid.StringOfN(rapid.SampledFrom([]rune("ab")), 1, 3, -1).Draw(t, label)
}

func genACL(t *rapid.T, i int) ACL {
	p := Pattern{
		Type:        rapid.SampledFrom(genResourceTypes).Draw(t, fmt.Sprintf("type%d", i)),
		PatternType: rapid.SampledFrom([]PatternType{Literal, Prefixed}).Draw(t, fmt.Sprintf("pattern%d", i)),
		Name:        genName(t, fmt.Sprintf("name%d", i)),
	}
	if p.PatternType == Literal && rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("wildcard%d", i)) == 0 {
		p.Name = Wildcard
	}
	e := Entry{
		Principal:  rapid.SampledFrom(genPrincipals).Draw(t, fmt.Sprintf("principal%d", i)),
		Host:       rapid.SampledFrom(genHosts).Draw(t, fmt.Sprintf("host%d", i)),
		Operation:  rapid.SampledFrom(aclOperations).Draw(t, fmt.Sprintf("op%d", i)),
		Permission: rapid.SampledFrom([]Permission{Allow, Deny}).Draw(t, fmt.Sprintf("perm%d", i)),
	}
	var id ID
	id[0], id[1] = byte(i), byte(i>>8)
	return ACL{ID: id, Binding: Binding{Pattern: p, Entry: e}}
}

func genModel(t *rapid.T) refModel {
	n := rapid.IntRange(0, 12).Draw(t, "acls")
	m := refModel{allowEveryone: rapid.Bool().Draw(t, "allowEveryone")}
	for i := range n {
		m.acls = append(m.acls, genACL(t, i))
	}
	if rapid.IntRange(0, 4).Draw(t, "withSuperUser") == 0 {
		m.superUsers = []string{"User:bob"}
	}
	return m
}

func (m refModel) authorizer() *Authorizer {
	return New(Config{SuperUsers: m.superUsers, AllowEveryoneIfNoACLFound: m.allowEveryone}, NewSet(m.acls))
}

func genRequester(t *rapid.T) Requester {
	return Requester{
		Principal: rapid.SampledFrom(queryPrincipals).Draw(t, "who"),
		Host:      rapid.SampledFrom(queryHosts).Draw(t, "from"),
	}
}

// TestAuthorizerAgreesWithReference: for random ACL sets (PREFIXED
// overlaps, LITERAL "*", User:*, host *, DENY, ALL and implied operations,
// super users, allow.everyone.if.no.acl.found) and random requests, the
// indexed authorizer decides as the reference does.
func TestAuthorizerAgreesWithReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		a := m.authorizer()
		for q := range 20 {
			who := genRequester(t)
			x := Action{
				Operation: rapid.SampledFrom(requestOperations).Draw(t, fmt.Sprintf("op%d", q)),
				Type:      rapid.SampledFrom(genResourceTypes).Draw(t, fmt.Sprintf("type%d", q)),
				Name:      rapid.StringOfN(rapid.SampledFrom([]rune("ab")), 1, 4, -1).Draw(t, fmt.Sprintf("name%d", q)),
			}
			got, want := a.Authorize(who, x), m.authorize(who, x)
			if got.Allowed != want {
				t.Fatalf("%v by %+v: authorizer says %v (%v), reference says %v; ACLs %v", x, who, got.Allowed, got, want, m.acls)
			}
			if got.Rule == RuleMatchingACL && got.ACL.Permission == Deny && got.Allowed {
				t.Fatalf("%v by %+v: allowed by a DENY rule %v", x, who, got)
			}
		}
	})
}

// TestAllowedOnSomeAgreesWithReference: authorizeByResourceType agrees with
// "some resource name of the type would be allowed".
func TestAllowedOnSomeAgreesWithReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		a := m.authorizer()
		for q := range 10 {
			who := genRequester(t)
			op := rapid.SampledFrom(requestOperations).Draw(t, fmt.Sprintf("op%d", q))
			typ := rapid.SampledFrom(genResourceTypes).Draw(t, fmt.Sprintf("type%d", q))
			if got, want := a.AllowedOnSome(who, op, typ), m.allowedOnSome(who, op, typ); got != want {
				t.Fatalf("%v on some %v by %+v: authorizer says %v, reference %v; ACLs %v", op, typ, who, got, want, m.acls)
			}
		}
	})
}

// TestSelectAgreesWithFilterScan: a Set's Select returns, sorted, exactly
// the ACLs the filter matches, and NewSet keeps every ACL.
func TestSelectAgreesWithFilterScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		s := NewSet(m.acls)
		if s.Len() != len(m.acls) {
			t.Fatalf("set holds %d of %d ACLs", s.Len(), len(m.acls))
		}
		name := genName(t, "filterName")
		f := Filter{
			Type:        rapid.SampledFrom([]ResourceType{AnyResource, Topic, Group, TransactionalID}).Draw(t, "ftype"),
			PatternType: rapid.SampledFrom([]PatternType{AnyPattern, Match, Literal, Prefixed}).Draw(t, "fpattern"),
			Operation:   rapid.SampledFrom(append([]Operation{AnyOperation}, aclOperations...)).Draw(t, "fop"),
			Permission:  rapid.SampledFrom([]Permission{AnyPermission, Allow, Deny}).Draw(t, "fperm"),
		}
		if rapid.Bool().Draw(t, "named") {
			f.Name = &name
		}
		got := s.Select(f)
		if !slices.IsSortedFunc(got, func(a, b ACL) int { return Compare(a.Binding, b.Binding) }) {
			t.Fatalf("Select is not sorted: %v", got)
		}
		want := 0
		for _, a := range m.acls {
			if refFilterMatches(f, a.Binding) {
				want++
				if !slices.ContainsFunc(got, func(g ACL) bool { return g.ID == a.ID }) {
					t.Fatalf("filter %+v misses %v", f, a)
				}
			}
		}
		if len(got) != want {
			t.Fatalf("filter %+v selects %d ACLs, the reference %d", f, len(got), want)
		}
	})
}

// refFilterMatches is Kafka's AclBindingFilter.matches, field by field.
func refFilterMatches(f Filter, b Binding) bool {
	if f.Type != AnyResource && f.Type != b.Type {
		return false
	}
	if f.Operation != AnyOperation && f.Operation != b.Operation {
		return false
	}
	if f.Permission != AnyPermission && f.Permission != b.Permission {
		return false
	}
	switch f.PatternType {
	case AnyPattern:
		return f.Name == nil || *f.Name == b.Name
	case Literal, Prefixed:
		return f.PatternType == b.PatternType && (f.Name == nil || *f.Name == b.Name)
	}
	// Match: what would apply to a resource named *f.Name.
	return f.Name == nil || refCovers(b.Pattern, *f.Name)
}
