package realnet

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"strand/core/config"
)

// aclJAAS is the PLAIN users of the ACL tests: the nodes (broker), the
// ACL administrator (admin) and a client no ACL names at first (alice).
const aclJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" ` +
	`user_broker="broker-secret" user_admin="admin-secret" user_alice="alice-secret";`

// aclTestCluster is two nodes with SASL_PLAINTEXT/PLAIN listeners and the
// authorizer on; broker and admin are super users.
func aclTestCluster(t *testing.T) *testCluster {
	return startSecureCluster(t, secureClusterSpec{size: 2, clientListener: "CLIENT", props: func(int) map[string]string {
		return map[string]string{
			"listener.security.protocol.map":                  "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
			"sasl.enabled.mechanisms":                         "PLAIN",
			"sasl.mechanism.inter.broker.protocol":            "PLAIN",
			"sasl.mechanism.controller.protocol":              "PLAIN",
			"listener.name.client.plain.sasl.jaas.config":     aclJAAS,
			"listener.name.controller.plain.sasl.jaas.config": aclJAAS,
			"super.users":                      "User:broker;User:admin",
			"authorizer.class.name":            config.StandardAuthorizer,
			"offsets.topic.replication.factor": "2",
			"offsets.topic.num.partitions":     "2",
			"group.initial.rebalance.delay.ms": "0",
		}
	}})
}

func plainUser(user string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())
}

// kcatPlain runs kcat as user and returns its stdout, stderr and error.
func kcatPlain(t *testing.T, brokers []string, user string, stdin []byte, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args = append([]string{"-b", strings.Join(brokers, ","), "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + user + "-secret"}, args...)
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// strandACLs runs `strand acls` as admin (--command-config) and returns
// its exit status and output.
func strandACLs(t *testing.T, bootstrap []string, args ...string) (int, string) {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "admin.properties")
	text := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" +
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";` + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append(append([]string{"acls"}, args...), "--bootstrap-server", strings.Join(bootstrap, ","), "--command-config", conf, "--timeout", "20s")
	out, err := exec.Command(buildStrand(t), args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	case err != nil:
		t.Fatalf("strand %s: %v", strings.Join(args, " "), err)
	}
	return 0, string(out)
}

// TestACLsWithRealClients: kgo and kcat as a principal no ACL names are
// refused with Kafka's errors (produce, fetch, create) and do not see the
// topic in Metadata (kcat -L); after `strand acls grant` they produce and
// read; a group consumer needs READ on the group as well as the topic.
func TestACLsWithRealClients(t *testing.T) {
	c := aclTestCluster(t)
	addrs := c.clientAddrs()
	admin := c.secureClient(plainUser("admin"))
	createTopicWith(t, admin, "orders", 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("seed")}).FirstErr(); err != nil {
		t.Fatalf("admin produce: %v", err)
	}

	alice := c.secureClient(plainUser("alice"), kgo.RecordRetries(1))
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("kgo produce without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	created, err := kadm.NewClient(alice).CreateTopic(ctx, 1, 1, nil, "alice-topic")
	if err == nil {
		err = created.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("kgo CreateTopics without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	reader := c.secureClient(plainUser("alice"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
	pollCtx, pollCancel := context.WithTimeout(ctx, 10*time.Second)
	fetchErr := reader.PollFetches(pollCtx).Err()
	pollCancel()
	if !errors.Is(fetchErr, kerr.TopicAuthorizationFailed) {
		t.Errorf("kgo fetch without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", fetchErr)
	}
	if kcatOrSkip(t) != "" {
		out, stderr, err := kcatPlain(t, addrs, "alice", nil, "-L")
		if err != nil || strings.Contains(out, `topic "orders"`) {
			t.Errorf("kcat -L without ACLs lists orders (err %v):\n%s%s", err, out, stderr)
		}
		_, stderr, err = kcatPlain(t, addrs, "alice", []byte("k1\n"), "-P", "-t", "orders", "-p", "0")
		if err == nil || !strings.Contains(strings.ToLower(stderr), "authorization") {
			t.Errorf("kcat produce without ACLs: err %v, stderr:\n%s", err, stderr)
		}
	}

	if status, out := strandACLs(t, addrs, "grant", "alice", "RW", "orders"); status != 0 {
		t.Fatalf("strand acls grant: status %d\n%s", status, out)
	}
	if status, out := strandACLs(t, addrs, "check", "alice", "rw", "orders"); status != 0 || !strings.HasPrefix(out, "yes") {
		t.Errorf("strand acls check RW: status %d\n%s", status, out)
	}
	if status, out := strandACLs(t, addrs, "check", "alice", "D", "orders"); status != 1 || !strings.HasPrefix(out, "no") {
		t.Errorf("strand acls check D: status %d\n%s", status, out)
	}
	status, out := strandACLs(t, addrs, "--list", "--topic", "orders")
	if status != 0 || !strings.Contains(out, "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:") ||
		!strings.Contains(out, "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)") {
		t.Errorf("strand acls --list: status %d\n%s", status, out)
	}
	// The grant commits before it is answered; each broker applies it
	// from the metadata log within a fetch.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("alice")}).FirstErr()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kgo produce after the grant: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if kcatOrSkip(t) != "" {
		if _, stderr, err := kcatPlain(t, addrs, "alice", []byte("kcat\n"), "-P", "-t", "orders", "-p", "0"); err != nil {
			t.Errorf("kcat produce after the grant: %v\n%s", err, stderr)
		}
		out, stderr, err := kcatPlain(t, addrs, "alice", nil, "-C", "-t", "orders", "-p", "0", "-o", "beginning", "-e", "-f", "%s\n")
		if err != nil || !strings.Contains(out, "seed\n") || !strings.Contains(out, "kcat\n") {
			t.Errorf("kcat consume after the grant: %v\n%s%s", err, out, stderr)
		}
		if out, _, err := kcatPlain(t, addrs, "alice", nil, "-L"); err != nil || !strings.Contains(out, `topic "orders"`) {
			t.Errorf("kcat -L after the grant does not list orders (err %v):\n%s", err, out)
		}
	}

	// A group consumer needs READ on its group too.
	group := c.secureClient(plainUser("alice"), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pollCtx, pollCancel = context.WithTimeout(ctx, 10*time.Second)
	groupErr := group.PollFetches(pollCtx).Err()
	pollCancel()
	if !errors.Is(groupErr, kerr.GroupAuthorizationFailed) {
		t.Errorf("group consumer without READ on the group: %v, want GROUP_AUTHORIZATION_FAILED", groupErr)
	}
	group.Close()
	if status, out := strandACLs(t, addrs, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "billing"); status != 0 {
		t.Fatalf("strand acls --add --group: status %d\n%s", status, out)
	}
	member := c.secureClient(plainUser("alice"), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for read := 0; read < 2; {
		fetches := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group consumer with READ on group and topic read %d records: %v", read, fetches.Err())
		}
		read += fetches.NumRecords()
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("group commit with READ on group and topic: %v", err)
	}
}
