package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strand/core/acl"
)

// memACLs is a cluster's ACLs in memory, answering as a controller does:
// one create or remove is one batch (batches counts them).
type memACLs struct {
	held    []acl.Binding
	batches int
}

func (m *memACLs) describe(_ context.Context, f acl.Filter) ([]acl.Binding, error) {
	var out []acl.Binding
	for _, b := range m.held {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, acl.Compare)
	return out, nil
}

func (m *memACLs) create(_ context.Context, bindings []acl.Binding) error {
	m.batches++
	for _, b := range bindings {
		if err := b.Validate(); err != nil {
			return err
		}
		if !slices.Contains(m.held, b) {
			m.held = append(m.held, b)
		}
	}
	return nil
}

func (m *memACLs) remove(_ context.Context, filters []acl.Filter) ([]acl.Binding, error) {
	m.batches++
	var removed []acl.Binding
	m.held = slices.DeleteFunc(m.held, func(b acl.Binding) bool {
		for _, f := range filters {
			if f.Matches(b) {
				removed = append(removed, b)
				return true
			}
		}
		return false
	})
	slices.SortFunc(removed, acl.Compare)
	return removed, nil
}

// withMemACLs runs the test's tool invocations against m.
func withMemACLs(t *testing.T, m *memACLs) {
	saved := connectACLs
	connectACLs = func(*clientFlags) (aclClient, context.Context, func(), error) {
		return m, context.Background(), func() {}, nil
	}
	t.Cleanup(func() { connectACLs = saved })
}

func runACLs(stdin string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	status := runWithStdin(append([]string{"acls"}, args...), strings.NewReader(stdin), &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

func topicBinding(topic, principal string, op acl.Operation, permission acl.Permission) acl.Binding {
	return acl.Binding{
		Pattern: acl.Pattern{Type: acl.Topic, Name: topic, PatternType: acl.Literal},
		Entry:   acl.Entry{Principal: principal, Host: "*", Operation: op, Permission: permission},
	}
}

// TestACLsAddAndListAsKafkaACLs: --add builds kafka-acls.sh's ACLs (every
// principal × host × operation, --producer and --consumer sets) and sends
// them in one request; --list prints kafka-acls.sh's table.
func TestACLsAddAndListAsKafkaACLs(t *testing.T) {
	m := &memACLs{}
	withMemACLs(t, m)
	status, out, errOut := runACLs("", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
		"--topic", "orders", "--group", "billing")
	if status != 0 {
		t.Fatalf("add: status %d: %s", status, errOut)
	}
	if !strings.Contains(out, "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)") {
		t.Errorf("add output:\n%s", out)
	}
	if len(m.held) != 4 || m.batches != 1 {
		t.Fatalf("%d ACLs in %d batches, want 4 in one: %v", len(m.held), m.batches, m.held)
	}
	status, _, errOut = runACLs("", "--add", "--producer", "--allow-principal", "User:bob", "--allow-host", "10.0.0.5", "--topic", "orders", "--idempotent")
	if status != 0 {
		t.Fatalf("producer add: status %d: %s", status, errOut)
	}
	for _, want := range []acl.Binding{
		{Pattern: acl.Pattern{Type: acl.Topic, Name: "orders", PatternType: acl.Literal}, Entry: acl.Entry{Principal: "User:bob", Host: "10.0.0.5", Operation: acl.Create, Permission: acl.Allow}},
		{Pattern: acl.Pattern{Type: acl.Cluster, Name: acl.ClusterName, PatternType: acl.Literal}, Entry: acl.Entry{Principal: "User:bob", Host: "10.0.0.5", Operation: acl.IdempotentWrite, Permission: acl.Allow}},
	} {
		if !slices.Contains(m.held, want) {
			t.Errorf("--producer --idempotent did not add %v", want)
		}
	}
	status, out, _ = runACLs("", "--list", "--topic", "orders")
	want := "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n" +
		"\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n" +
		"\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n" +
		"\t(principal=User:bob, host=10.0.0.5, operation=WRITE, permissionType=ALLOW)\n" +
		"\t(principal=User:bob, host=10.0.0.5, operation=CREATE, permissionType=ALLOW)\n" +
		"\t(principal=User:bob, host=10.0.0.5, operation=DESCRIBE, permissionType=ALLOW)\n\n"
	if status != 0 || out != want {
		t.Errorf("list: status %d, output\n%q\nwant\n%q", status, out, want)
	}
	status, out, _ = runACLs("", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
	if status != 0 || !strings.Contains(out, "already exists") || m.batches != 2 {
		t.Errorf("adding a held ACL: status %d, %d batches, output %q", status, m.batches, out)
	}
}

func TestACLsUsageMistakes(t *testing.T) {
	withMemACLs(t, &memACLs{})
	for _, args := range [][]string{
		{"--add", "--topic", "t"}, // no principal
		{"--add", "--list", "--topic", "t", "--allow-principal", "User:a"},
		{"--add", "--allow-principal", "User:a"},                                         // no resource
		{"--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"}, // not a group operation
		{"--add", "--allow-principal", "alice", "--topic", "t"},                          // not a principal
		{"--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"},
		{"grant", "alice", "RX", "t"},
		{"grant", "alice", "RR", "t"},
		{"grant", "alice", "R"},
		{"check", "alice", "", "t"},
	} {
		if status, _, errOut := runACLs("", args...); status != 2 {
			t.Errorf("%q: status %d, want 2 (usage); stderr %q", args, status, errOut)
		}
	}
}

// TestACLsRemoveAsksFirst: --remove asks unless --force, and removes what
// its filters match in one request.
func TestACLsRemoveAsksFirst(t *testing.T) {
	m := &memACLs{held: []acl.Binding{
		topicBinding("orders", "User:alice", acl.Read, acl.Allow),
		topicBinding("orders", "User:bob", acl.Read, acl.Allow),
		topicBinding("other", "User:bob", acl.Read, acl.Allow),
	}}
	withMemACLs(t, m)
	if status, out, _ := runACLs("n\n", "--remove", "--topic", "orders"); status != 0 || len(m.held) != 3 || !strings.Contains(out, "Are you sure") {
		t.Fatalf("answered n: status %d, %d ACLs left, output %q", status, len(m.held), out)
	}
	if status, _, _ := runACLs("y\n", "--remove", "--topic", "orders", "--allow-principal", "User:alice", "--operation", "Read"); status != 0 || len(m.held) != 2 {
		t.Fatalf("alice's READ: status %d, %d ACLs left", status, len(m.held))
	}
	if status, _, _ := runACLs("", "--remove", "--force", "--topic", "orders"); status != 0 || len(m.held) != 1 || m.held[0].Name != "other" {
		t.Fatalf("all of orders: status %d, left %v", status, m.held)
	}
}

// TestDesignVerbs: grant, revoke and reset change the user's RWCD on the
// topic, in at most one removal and one addition, removal first; check
// answers from the ACLs with the authorizer's rules.
func TestDesignVerbs(t *testing.T) {
	m := &memACLs{}
	withMemACLs(t, m)
	if status, out, errOut := runACLs("", "grant", "jack", "RW", "transaction"); status != 0 || !strings.Contains(out, "granted READ to User:jack on topic transaction") {
		t.Fatalf("grant: status %d, %q %q", status, out, errOut)
	}
	want := []acl.Binding{topicBinding("transaction", "User:jack", acl.Read, acl.Allow), topicBinding("transaction", "User:jack", acl.Write, acl.Allow)}
	if !slices.Equal(m.held, want) || m.batches != 1 {
		t.Fatalf("after grant: %v in %d batches, want %v in one", m.held, m.batches, want)
	}
	if status, out, _ := runACLs("", "check", "jack", "rw", "transaction"); status != 0 || !strings.HasPrefix(out, "yes\n") {
		t.Errorf("check RW: status %d, %q", status, out)
	}
	if status, out, _ := runACLs("", "check", "jack", "RWC", "transaction"); status != 1 || !strings.HasPrefix(out, "no\n") {
		t.Errorf("check RWC: status %d, %q", status, out)
	}
	m.batches = 0
	if status, _, errOut := runACLs("", "reset", "User:jack", "WC", "transaction"); status != 0 {
		t.Fatalf("reset: %d %s", status, errOut)
	}
	want = []acl.Binding{topicBinding("transaction", "User:jack", acl.Write, acl.Allow), topicBinding("transaction", "User:jack", acl.Create, acl.Allow)}
	if !slices.Equal(m.held, want) || m.batches != 2 {
		t.Fatalf("after reset WC: %v in %d batches, want %v in two (removal, addition)", m.held, m.batches, want)
	}
	if status, _, _ := runACLs("", "revoke", "jack", "W", "transaction"); status != 0 || len(m.held) != 1 {
		t.Fatalf("revoke W: status %d, left %v", status, m.held)
	}
	// A DENY elsewhere wins, as on the broker: check says no.
	m.held = append(m.held, acl.Binding{Pattern: acl.Pattern{Type: acl.Topic, Name: "trans", PatternType: acl.Prefixed},
		Entry: acl.Entry{Principal: "User:*", Host: "*", Operation: acl.Create, Permission: acl.Deny}})
	if status, out, _ := runACLs("", "check", "jack", "C", "transaction"); status != 1 {
		t.Errorf("check C under a PREFIXED DENY for User:*: status %d, %q", status, out)
	}
	m.batches = 0
	if status, out, _ := runACLs("", "reset", "jack", "C", "transaction"); status != 0 || m.batches != 0 || !strings.Contains(out, "Nothing to change") {
		t.Errorf("reset to what it holds: status %d, %d batches, %q", status, m.batches, out)
	}
}

// TestApplyCommitsTogether: apply's lines become one removal and one
// addition, whatever their number.
func TestApplyCommitsTogether(t *testing.T) {
	m := &memACLs{held: []acl.Binding{topicBinding("a", "User:old", acl.Read, acl.Allow)}}
	withMemACLs(t, m)
	file := filepath.Join(t.TempDir(), "changes")
	text := "# the design's AuthzTest, as a file\nreset 172.16.1.87 RW test\ngrant 172.16.1.87 C test\nrevoke 172.16.1.87 R test\n\nrevoke old R a\ngrant new RWCD a\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, _, errOut := runACLs("", "apply", "--file", file); status != 0 {
		t.Fatalf("apply: %d %s", status, errOut)
	}
	var got []string
	for _, b := range m.held {
		got = append(got, b.Principal+" "+b.Operation.String()+" "+b.Name)
	}
	slices.Sort(got)
	want := []string{"User:172.16.1.87 CREATE test", "User:172.16.1.87 WRITE test",
		"User:new CREATE a", "User:new DELETE a", "User:new READ a", "User:new WRITE a"}
	if !slices.Equal(got, want) || m.batches != 2 {
		t.Fatalf("after apply: %v in %d batches, want %v in two", got, m.batches, want)
	}
	if err := os.WriteFile(file, []byte("grant jack RW\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, _, errOut := runACLs("", "apply", "--file", file); status != 2 || !strings.Contains(errOut, ":1:") {
		t.Errorf("a bad line: status %d, %q; want a usage error naming line 1", status, errOut)
	}
}

// TestDesignVerbAfterClientFlags: the design's verbs may follow the client
// flags every form takes, as kafka-acls.sh users write them first; a flag
// value that looks like a verb is not taken for one.
func TestDesignVerbAfterClientFlags(t *testing.T) {
	m := &memACLs{}
	withMemACLs(t, m)
	if status, out, errOut := runACLs("", "--bootstrap-server", "127.0.0.1:9092", "--timeout", "5s", "grant", "jack", "R", "transaction"); status != 0 || !strings.Contains(out, "granted READ to User:jack on topic transaction") {
		t.Fatalf("grant after flags: status %d, %q %q", status, out, errOut)
	}
	if status, out, _ := runACLs("", "--command-config=", "check", "jack", "R", "transaction"); status != 0 || !strings.HasPrefix(out, "yes\n") {
		t.Errorf("check after flags: status %d, %q", status, out)
	}
	if status, out, errOut := runACLs("", "--bootstrap-server", "grant", "--list"); status != 0 || strings.Contains(out, "granted") || len(m.held) != 1 {
		t.Errorf("a flag value grant was taken for the verb: status %d, %q %q, held %v", status, out, errOut, m.held)
	}
}
