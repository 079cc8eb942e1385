package acl

import (
	"fmt"
	"slices"
	"strings"
)

// Config is what the authorizer decides with besides the ACLs.
type Config struct {
	// SuperUsers (super.users) are allowed everything.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound (allow.everyone.if.no.acl.found) allows a
	// request on a resource no ACL applies to; false closes it.
	AllowEveryoneIfNoACLFound bool
	// Bugs are planted for the simulator's seed sweeps; all false in
	// production.
	Bugs Bugs
}

// Bugs are the authorizer's planted bugs (SPEC.md §6).
type Bugs struct {
	// DenyIgnored checks ALLOW before DENY: a request some ALLOW matches
	// is allowed even when a DENY matches too.
	DenyIgnored bool
	// PrefixOvermatch lets a PREFIXED ACL also apply to a resource whose
	// name is a proper prefix of the ACL's ("orders" matching "ord").
	PrefixOvermatch bool
}

// Authorizer decides requests against one ACL set. It is immutable:
// build a new one when the ACLs change.
type Authorizer struct {
	cfg  Config
	acls *Set
}

// New returns the authorizer of cfg over acls (nil: no ACLs).
func New(cfg Config, acls *Set) *Authorizer {
	cfg.SuperUsers = slices.Clone(cfg.SuperUsers)
	return &Authorizer{cfg: cfg, acls: acls}
}

// ACLs is the set the authorizer decides with.
func (a *Authorizer) ACLs() *Set { return a.acls }

// Requester is who makes a request: the connection's principal and the
// client's IP address.
type Requester struct {
	Principal string
	Host      string
}

// Action is one operation on one named resource.
type Action struct {
	Operation Operation
	Type      ResourceType
	Name      string
}

// String renders the action as Kafka's audit log does: the operation, then
// the resource as TYPE:LITERAL:name.
func (x Action) String() string {
	return fmt.Sprintf("operation = %v on resource = %v:LITERAL:%s", x.Operation, x.Type, x.Name)
}

// Rule is why a decision was made, for the audit log.
type Rule uint8

// Rules, as Kafka's audit log names them.
const (
	// RuleSuperUser: the principal is a super user.
	RuleSuperUser Rule = iota + 1
	// RuleMatchingACL: an ACL matched (Decision.ACL); DENY wins.
	RuleMatchingACL
	// RuleNoACLFound: no ACL applies to the resource;
	// allow.everyone.if.no.acl.found decided.
	RuleNoACLFound
	// RuleNoMatchingACL: ACLs apply to the resource but none matches the
	// request: denied.
	RuleNoMatchingACL
)

// Decision is the authorizer's answer.
type Decision struct {
	Allowed bool
	Rule    Rule
	// ACL is the deciding ACL under RuleMatchingACL.
	ACL Binding
}

// String names the rule as Kafka's audit log does.
func (d Decision) String() string {
	switch d.Rule {
	case RuleSuperUser:
		return "SuperUser"
	case RuleMatchingACL:
		return "MatchingAcl(acl=" + d.ACL.String() + ")"
	case RuleNoACLFound:
		if d.Allowed {
			return "DefaultAllow"
		}
		return "DefaultDeny"
	case RuleNoMatchingACL:
		return "DefaultDeny"
	}
	return fmt.Sprintf("Rule(%d)", uint8(d.Rule))
}

// IsSuperUser reports whether principal is a super user.
func (a *Authorizer) IsSuperUser(principal string) bool {
	return slices.Contains(a.cfg.SuperUsers, principal)
}

// Authorize decides whether who may perform x (SPEC.md §10.7): a super
// user may; else a matching DENY denies; else a matching ALLOW allows;
// else, with no ACL on the resource at all,
// allow.everyone.if.no.acl.found decides; else denied.
func (a *Authorizer) Authorize(who Requester, x Action) Decision {
	if a.IsSuperUser(who.Principal) {
		return Decision{Allowed: true, Rule: RuleSuperUser}
	}
	var allow, deny *Binding
	applies := false
	a.acls.applicable(x.Type, x.Name, a.cfg.Bugs.PrefixOvermatch, func(c ACL) bool {
		applies = true
		switch entryVerdict(c.Entry, who, x.Operation) {
		case Deny:
			if deny == nil {
				deny = &c.Binding
			}
			// A DENY decides; under the planted bug an ALLOW found
			// later still wins.
			return a.cfg.Bugs.DenyIgnored
		case Allow:
			if allow == nil {
				allow = &c.Binding
			}
		}
		return true
	})
	switch {
	case allow != nil && a.cfg.Bugs.DenyIgnored:
		return Decision{Allowed: true, Rule: RuleMatchingACL, ACL: *allow}
	case deny != nil:
		return Decision{Allowed: false, Rule: RuleMatchingACL, ACL: *deny}
	case allow != nil:
		return Decision{Allowed: true, Rule: RuleMatchingACL, ACL: *allow}
	case !applies:
		return Decision{Allowed: a.cfg.AllowEveryoneIfNoACLFound, Rule: RuleNoACLFound}
	}
	return Decision{Allowed: false, Rule: RuleNoMatchingACL}
}

// Allowed is Authorize's verdict alone.
func (a *Authorizer) Allowed(who Requester, x Action) bool { return a.Authorize(who, x).Allowed }

// AllowedOnSome reports whether who may perform op on at least one
// resource of type t, whatever its name (Kafka's authorizeByResourceType,
// KIP-679: InitProducerId without a transactional id needs WRITE on some
// topic). A resource name is any string: a PREFIXED ALLOW covers names a
// finite set of DENYs cannot all cover unless one of them is a PREFIXED
// DENY of a prefix of it, or the LITERAL "*" DENY.
func (a *Authorizer) AllowedOnSome(who Requester, op Operation, t ResourceType) bool {
	if a.IsSuperUser(who.Principal) {
		return true
	}
	var allows []Pattern
	denyLiteral := map[string]bool{}
	var denyPrefixes []string
	wildcardACL := false
	for _, c := range a.acls.All() {
		if c.Type != t {
			continue
		}
		if c.PatternType == Literal && c.Name == Wildcard {
			wildcardACL = true
		}
		switch entryVerdict(c.Entry, who, op) {
		case Deny:
			switch {
			case c.PatternType == Literal && c.Name == Wildcard:
				return false
			case c.PatternType == Literal:
				denyLiteral[c.Name] = true
			default:
				denyPrefixes = append(denyPrefixes, c.Name)
			}
		case Allow:
			allows = append(allows, c.Pattern)
		}
	}
	deniedPrefix := func(name string) bool {
		return slices.ContainsFunc(denyPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	}
	for _, p := range allows {
		switch {
		case p.PatternType == Literal && p.Name == Wildcard:
			return true // a name no PREFIXED DENY starts
		case p.PatternType == Literal && !denyLiteral[p.Name] && !deniedPrefix(p.Name):
			return true
		case p.PatternType == Prefixed && !deniedPrefix(p.Name):
			return true // the prefix followed by a character no DENY continues with
		}
	}
	// A name no ACL applies to exists unless a LITERAL "*" ACL applies to
	// every name.
	return a.cfg.AllowEveryoneIfNoACLFound && !wildcardACL
}

// entryVerdict is the entry's verdict on who performing op, or 0 when the
// entry does not match: its principal is who's or User:*, its host who's
// or *, its operation op or ALL, or, for an ALLOW, one implying op (READ,
// WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
// DESCRIBE_CONFIGS).
func entryVerdict(e Entry, who Requester, op Operation) Permission {
	if e.Principal != who.Principal && e.Principal != WildcardPrincipal {
		return 0
	}
	if e.Host != Wildcard && e.Host != who.Host {
		return 0
	}
	if e.Operation != All && e.Operation != op && !(e.Permission == Allow && implies(e.Operation, op)) {
		return 0
	}
	return e.Permission
}

// implies reports whether an ALLOW of granted also allows op.
func implies(granted, op Operation) bool {
	switch op {
	case Describe:
		return granted == Read || granted == Write || granted == Delete || granted == Alter
	case DescribeConfigs:
		return granted == AlterConfigs
	}
	return false
}
