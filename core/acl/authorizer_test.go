package acl

import (
	"strings"
	"testing"
)

func allow(t ResourceType, name string, pt PatternType, principal, host string, op Operation) Binding {
	return Binding{Pattern{t, name, pt}, Entry{principal, host, op, Allow}}
}

func deny(t ResourceType, name string, pt PatternType, principal, host string, op Operation) Binding {
	return Binding{Pattern{t, name, pt}, Entry{principal, host, op, Deny}}
}

func authorizerOf(cfg Config, bindings ...Binding) *Authorizer {
	var acls []ACL
	for i, b := range bindings {
		acls = append(acls, ACL{ID: ID{byte(i + 1)}, Binding: b})
	}
	return New(cfg, NewSet(acls))
}

var (
	alice     = Requester{Principal: "User:alice", Host: "10.0.0.1"}
	bob       = Requester{Principal: "User:bob", Host: "10.0.0.2"}
	readT     = Action{Operation: Read, Type: Topic, Name: "orders"}
	describeT = Action{Operation: Describe, Type: Topic, Name: "orders"}
)

// TestKafkaAuthorizationRules checks each rule of SPEC.md §10.7 on one
// case as Kafka's StandardAuthorizer decides it.
func TestKafkaAuthorizationRules(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		acls   []Binding
		who    Requester
		action Action
		want   bool
		rule   Rule
	}{
		{"no ACLs: closed by default", Config{}, nil, alice, readT, false, RuleNoACLFound},
		{"no ACLs: allow.everyone.if.no.acl.found opens", Config{AllowEveryoneIfNoACLFound: true}, nil, alice, readT, true, RuleNoACLFound},
		{"ACLs for someone else close the resource even with allow.everyone", Config{AllowEveryoneIfNoACLFound: true},
			[]Binding{allow(Topic, "orders", Literal, "User:bob", "*", Read)}, alice, readT, false, RuleNoMatchingACL},
		{"super user", Config{SuperUsers: []string{"User:alice"}},
			[]Binding{deny(Topic, "orders", Literal, "User:alice", "*", Read)}, alice, readT, true, RuleSuperUser},
		{"literal allow", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", Read)}, alice, readT, true, RuleMatchingACL},
		{"literal allow of another topic", Config{}, []Binding{allow(Topic, "order", Literal, "User:alice", "*", Read)}, alice, readT, false, RuleNoACLFound},
		{"wildcard topic", Config{}, []Binding{allow(Topic, "*", Literal, "User:alice", "*", Read)}, alice, readT, true, RuleMatchingACL},
		{"wildcard principal", Config{}, []Binding{allow(Topic, "orders", Literal, "User:*", "*", Read)}, alice, readT, true, RuleMatchingACL},
		{"host named", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "10.0.0.1", Read)}, alice, readT, true, RuleMatchingACL},
		{"another host", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "10.0.0.9", Read)}, alice, readT, false, RuleNoMatchingACL},
		{"prefix", Config{}, []Binding{allow(Topic, "ord", Prefixed, "User:alice", "*", Read)}, alice, readT, true, RuleMatchingACL},
		{"prefix equal to the name", Config{}, []Binding{allow(Topic, "orders", Prefixed, "User:alice", "*", Read)}, alice, readT, true, RuleMatchingACL},
		{"prefix longer than the name", Config{}, []Binding{allow(Topic, "orders-eu", Prefixed, "User:alice", "*", Read)}, alice, readT, false, RuleNoACLFound},
		{"another resource type", Config{}, []Binding{allow(Group, "orders", Literal, "User:alice", "*", Read)}, alice, readT, false, RuleNoACLFound},
		{"ALL allows", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", All)}, alice, readT, true, RuleMatchingACL},
		{"other operation", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", Write)}, alice, readT, false, RuleNoMatchingACL},
		{"DENY wins over ALLOW", Config{}, []Binding{
			allow(Topic, "*", Literal, "User:*", "*", All), deny(Topic, "ord", Prefixed, "User:alice", "*", Read)}, alice, readT, false, RuleMatchingACL},
		{"DENY of another user", Config{}, []Binding{
			allow(Topic, "*", Literal, "User:*", "*", All), deny(Topic, "ord", Prefixed, "User:bob", "*", Read)}, alice, readT, true, RuleMatchingACL},
		{"DENY from one host", Config{}, []Binding{
			allow(Topic, "orders", Literal, "User:alice", "*", Read), deny(Topic, "orders", Literal, "User:alice", "10.0.0.1", Read)}, alice, readT, false, RuleMatchingACL},
		{"READ implies DESCRIBE", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", Read)}, alice, describeT, true, RuleMatchingACL},
		{"WRITE implies DESCRIBE", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", Write)}, alice, describeT, true, RuleMatchingACL},
		{"DELETE implies DESCRIBE", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", Delete)}, alice, describeT, true, RuleMatchingACL},
		{"ALTER implies DESCRIBE", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", Alter)}, alice, describeT, true, RuleMatchingACL},
		{"CREATE does not imply DESCRIBE", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", Create)}, alice, describeT, false, RuleNoMatchingACL},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", AlterConfigs)},
			alice, Action{DescribeConfigs, Topic, "orders"}, true, RuleMatchingACL},
		{"DENY of READ does not deny DESCRIBE", Config{}, []Binding{
			allow(Topic, "orders", Literal, "User:alice", "*", Describe), deny(Topic, "orders", Literal, "User:alice", "*", Read)}, alice, describeT, true, RuleMatchingACL},
		{"DENY of ALL denies DESCRIBE", Config{}, []Binding{
			allow(Topic, "orders", Literal, "User:alice", "*", Describe), deny(Topic, "orders", Literal, "User:alice", "*", All)}, alice, describeT, false, RuleMatchingACL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := authorizerOf(c.cfg, c.acls...).Authorize(c.who, c.action)
			if d.Allowed != c.want || d.Rule != c.rule {
				t.Errorf("%v by %+v: got allowed=%v by %v, want allowed=%v by rule %d", c.action, c.who, d.Allowed, d, c.want, c.rule)
			}
		})
	}
}

// TestPlantedAuthorizerBugsChangeDecisions: each planted bug flips the
// decision it is named for, and only under its switch.
func TestPlantedAuthorizerBugsChangeDecisions(t *testing.T) {
	denyWins := []Binding{allow(Topic, "*", Literal, "User:*", "*", All), deny(Topic, "orders", Literal, "User:alice", "*", Read)}
	if authorizerOf(Config{}, denyWins...).Allowed(alice, readT) {
		t.Fatal("a DENY did not win")
	}
	if !authorizerOf(Config{Bugs: Bugs{DenyIgnored: true}}, denyWins...).Allowed(alice, readT) {
		t.Fatal("acl-deny-ignored: a DENY still won")
	}
	longer := allow(Topic, "orders-eu", Prefixed, "User:alice", "*", Read)
	if authorizerOf(Config{}, longer).Allowed(alice, readT) {
		t.Fatal("PREFIXED orders-eu allowed orders")
	}
	if !authorizerOf(Config{Bugs: Bugs{PrefixOvermatch: true}}, longer).Allowed(alice, readT) {
		t.Fatal("acl-prefix-overmatch: PREFIXED orders-eu still did not apply to orders")
	}
}

func TestAllowedOnSome(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		acls []Binding
		want bool
	}{
		{"nothing", Config{}, nil, false},
		{"allow.everyone and no ACLs", Config{AllowEveryoneIfNoACLFound: true}, nil, true},
		{"allow.everyone but a wildcard ACL for someone else", Config{AllowEveryoneIfNoACLFound: true},
			[]Binding{allow(Topic, "*", Literal, "User:bob", "*", Write)}, false},
		{"one topic", Config{}, []Binding{allow(Topic, "orders", Literal, "User:alice", "*", Write)}, true},
		{"one topic denied by literal", Config{}, []Binding{
			allow(Topic, "orders", Literal, "User:alice", "*", Write), deny(Topic, "orders", Literal, "User:alice", "*", Write)}, false},
		{"one topic denied by prefix", Config{}, []Binding{
			allow(Topic, "orders", Literal, "User:alice", "*", Write), deny(Topic, "ord", Prefixed, "User:alice", "*", All)}, false},
		{"prefix narrowed by a longer deny", Config{}, []Binding{
			allow(Topic, "ord", Prefixed, "User:alice", "*", Write), deny(Topic, "orders", Prefixed, "User:alice", "*", Write)}, true},
		{"wildcard allow despite a literal deny", Config{}, []Binding{
			allow(Topic, "*", Literal, "User:alice", "*", Write), deny(Topic, "orders", Literal, "User:alice", "*", Write)}, true},
		{"wildcard deny", Config{}, []Binding{
			allow(Topic, "orders", Literal, "User:alice", "*", Write), deny(Topic, "*", Literal, "User:*", "*", Write)}, false},
		{"a group is not a topic", Config{}, []Binding{allow(Group, "orders", Literal, "User:alice", "*", Write)}, false},
	}
	for _, c := range cases {
		if got := authorizerOf(c.cfg, c.acls...).AllowedOnSome(alice, Write, Topic); got != c.want {
			t.Errorf("%s: WRITE on some topic = %v, want %v", c.name, got, c.want)
		}
	}
	if !authorizerOf(Config{SuperUsers: []string{"User:bob"}}).AllowedOnSome(bob, Write, Topic) {
		t.Error("a super user may not write some topic")
	}
}

func TestBindingValidate(t *testing.T) {
	good := allow(Topic, "orders", Literal, "User:alice", "*", Read)
	if err := good.Validate(); err != nil {
		t.Fatalf("valid binding refused: %v", err)
	}
	bad := map[string]func(b *Binding){
		"ResourceType":        func(b *Binding) { b.Type = AnyResource },
		"ResourcePatternType": func(b *Binding) { b.PatternType = Match },
		"Operation":           func(b *Binding) { b.Operation = AnyOperation },
		"PermissionType":      func(b *Binding) { b.Permission = AnyPermission },
		"ResourceName":        func(b *Binding) { b.Name = "" },
		"Host":                func(b *Binding) { b.Host = "" },
		"Principal":           func(b *Binding) { b.Principal = "alice" },
	}
	for field, mutate := range bad {
		b := good
		mutate(&b)
		err := b.Validate()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("binding with a bad %s: error %v does not name it", field, err)
		}
	}
	cluster := allow(Cluster, "kafka-cluster", Literal, "User:alice", "*", Alter)
	if err := cluster.Validate(); err != nil {
		t.Errorf("cluster ACL refused: %v", err)
	}
	cluster.Name = "other"
	if err := cluster.Validate(); err == nil {
		t.Error("a CLUSTER ACL not named kafka-cluster was accepted")
	}
}

func TestParseNames(t *testing.T) {
	for in, want := range map[string]Operation{"DESCRIBE_CONFIGS": DescribeConfigs, "DescribeConfigs": DescribeConfigs, "read": Read, "ClusterAction": ClusterAction} {
		if got, err := ParseOperation(in); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseOperation("Fly"); err == nil {
		t.Error("ParseOperation accepted Fly")
	}
	if p, err := ParsePatternType("prefixed"); err != nil || p != Prefixed {
		t.Errorf("ParsePatternType(prefixed) = %v, %v", p, err)
	}
	want := "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
	if got := (Pattern{Topic, "orders", Literal}).String(); got != want {
		t.Errorf("pattern renders %q, want Kafka's %q", got, want)
	}
	wantEntry := "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
	if got := allow(Topic, "orders", Literal, "User:alice", "*", Read).Entry.String(); got != wantEntry {
		t.Errorf("entry renders %q, want Kafka's %q", got, wantEntry)
	}
}
