package main

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"strand/core/metadata"
	"strand/realnet/authtest"
)

// scramCLI is a single node whose client listener is SASL_SSL with SCRAM,
// bootstrapped by `strand format --add-scram` with user admin.
type scramCLI struct {
	t          *testing.T
	bootstrap  string
	adminCfg   string
	caFile     string
	configsDir string
}

func startScramCLI(t *testing.T) *scramCLI {
	t.Helper()
	dir := t.TempDir()
	ca, err := authtest.NewCA("strand test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(pkix.Name{CommonName: "node1"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := authtest.WriteFile(dir, "ca.pem", ca.PEM)
	keystore, _ := authtest.WriteFile(dir, "node1.pem", cert.KeystorePEM())
	clientPort, controllerPort := freePort(t), freePort(t)
	jaas := `org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";`
	cfgPath := writeConfig(t, "1", []string{filepath.Join(dir, "data")},
		"offsets.topic.replication.factor=1", "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0",
		fmt.Sprintf("listeners=CLIENT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", clientPort, controllerPort),
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", controllerPort),
		"listener.security.protocol.map=CLIENT:SASL_SSL,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=CLIENT",
		"sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
		"listener.name.client.scram-sha-256.sasl.jaas.config="+jaas,
		"listener.name.client.scram-sha-512.sasl.jaas.config="+jaas,
		"ssl.keystore.type=PEM", "ssl.keystore.location="+keystore,
		"super.users=User:admin")
	status, stdout, stderr := runCmd(t, "format", "--config", cfgPath,
		"--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
		"--add-scram", `SCRAM-SHA-512=[name=admin,iterations=8192,password="admin-secret"]`)
	if status != 0 || !strings.Contains(stdout, "admin SCRAM-SHA-512 (8192 iterations)") {
		t.Fatalf("format --add-scram: status %d\nstdout %s\nstderr %s", status, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "metadata", metadata.BootstrapFileName)); err != nil {
		t.Fatalf("no bootstrap file: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var serveErr bytes.Buffer
	stopped := make(chan int, 1)
	go func() { stopped <- serveUntil(ctx, []string{"--config", cfgPath}, &bytes.Buffer{}, &serveErr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Errorf("broker did not stop; its log:\n%s", serveErr.String())
		}
	})
	c := &scramCLI{t: t, bootstrap: fmt.Sprintf("127.0.0.1:%d", clientPort), caFile: caFile, configsDir: dir}
	c.adminCfg = c.clientConfig("admin", "admin-secret", "SCRAM-SHA-512")
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _, stderr := c.run("", "topics", "create", "--topic", "ready", "--timeout", "2s", "--command-config", c.adminCfg)
		if status == 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not ready after 20 s: %s\nbroker log:\n%s", stderr, serveErr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clientConfig writes a --command-config file for user over SASL_SSL.
func (c *scramCLI) clientConfig(user, password, mechanism string) string {
	c.t.Helper()
	text := strings.Join([]string{
		"security.protocol=SASL_SSL",
		"sasl.mechanism=" + mechanism,
		fmt.Sprintf(`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, user, password),
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + c.caFile,
	}, "\n")
	path := filepath.Join(c.configsDir, fmt.Sprintf("%s-%s.properties", user, mechanism))
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return path
}

func (c *scramCLI) run(stdin string, args ...string) (int, string, string) {
	c.t.Helper()
	var stdout, stderr bytes.Buffer
	status := runWithStdin(append(args, "--bootstrap-server", c.bootstrap), strings.NewReader(stdin), &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

func (c *scramCLI) ok(stdin string, args ...string) string {
	c.t.Helper()
	status, stdout, stderr := c.run(stdin, args...)
	if status != 0 {
		c.t.Fatalf("strand %s: status %d, stderr %s", strings.Join(args, " "), status, stderr)
	}
	return stdout
}

// TestCLIScramBootstrapConfigsAndCommandConfig: a node formatted with
// --add-scram serves its bootstrap user over SASL_SSL; the tools connect
// with --command-config; strand configs creates, describes and deletes a
// user's credentials (both mechanisms in one --add-config), and that user
// produces and consumes with them.
func TestCLIScramBootstrapConfigsAndCommandConfig(t *testing.T) {
	c := startScramCLI(t)
	if status, _, stderr := c.run("", "topics", "list", "--timeout", "3s"); status != 1 {
		t.Fatalf("without --command-config: status %d %s, want 1", status, stderr)
	}
	out := c.ok("", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--command-config", c.adminCfg,
		"--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]")
	if out != "Completed updating config for user alice.\n" {
		t.Fatalf("alter: %q", out)
	}
	want := "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192\n" +
		"SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
	if out := c.ok("", "configs", "--describe", "--entity-type", "users", "--command-config", c.adminCfg); out != want {
		t.Fatalf("describe:\n%s\nwant:\n%s", out, want)
	}

	alice := c.clientConfig("alice", "alice-secret", "SCRAM-SHA-512")
	c.ok("", "topics", "create", "--topic", "orders", "--command-config", alice)
	c.ok("one\ntwo\n", "produce", "--topic", "orders", "--command-config", alice)
	if out := c.ok("", "consume", "--topic", "orders", "--from-beginning", "--max-messages", "2", "--command-config", alice); out != "one\ntwo\n" {
		t.Fatalf("consume: %q", out)
	}

	c.ok("", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-512", "--command-config", c.adminCfg)
	if out := c.ok("", "configs", "--describe", "--entity-type", "users", "--entity-name", "alice", "--command-config", c.adminCfg); out !=
		"SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n" {
		t.Fatalf("describe after deleting SCRAM-SHA-512: %q", out)
	}
	// Deleting a credential alice no longer has names the broker's error.
	status, _, stderr := c.run("", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-512", "--command-config", c.adminCfg)
	if status != 1 || !strings.Contains(stderr, "RESOURCE_NOT_FOUND") {
		t.Fatalf("deleting a missing credential: status %d %q", status, stderr)
	}
	// alice's SCRAM-SHA-512 login is gone; her SCRAM-SHA-256 one works.
	if status, _, _ := c.run("", "topics", "list", "--timeout", "3s", "--command-config", alice); status != 1 {
		t.Fatalf("alice with a deleted credential: status %d", status)
	}
	c.ok("", "topics", "list", "--command-config", c.clientConfig("alice", "alice-secret", "SCRAM-SHA-256"))
}

// TestCommandConfigRefusals: a --command-config file that asks for what
// the tools cannot do, or misspells a key, is refused naming the key.
func TestCommandConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{"security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-256", "sasl.mechanisms is not one"},
		{"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config=x required;", "OAUTHBEARER"},
		{"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256", "sasl.jaas.config is required"},
		{"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=a password=b;", "ScramLoginModule"},
		{"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=a;", "username and password"},
		{"security.protocol=PLAINTEXT\nssl.truststore.location=/x", "does not use TLS"},
		{"security.protocol=SSL\nssl.truststore.location=/x", "ssl.truststore.type must be PEM"},
		{"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/nonexistent", "/nonexistent"},
		{"security.protocol=TLS", "security.protocol"},
		{"ssl.cipher.suites=X", "ssl.cipher.suites is not one"},
		{"security.protocol=SSL\nssl.truststore.type=JKS", "ssl.truststore.type must be PEM"},
		{"security.protocol=SSL\nssl.keystore.type=PKCS12", "ssl.keystore.type must be PEM"},
		{"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;",
			"sasl.kerberos.service.name"},
	} {
		path := filepath.Join(dir, "client.properties")
		if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		// Every client tool builds its client with clientOpts, strand acls too.
		for _, tool := range [][]string{{"topics", "list"}, {"acls", "--list"}} {
			args := append(slices.Clone(tool), "--command-config", path, "--bootstrap-server", "127.0.0.1:1")
			status, _, stderr := runCmd(t, args...)
			if status != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("%v %q: status %d %q, want 1 mentioning %q", tool, c.text, status, stderr, c.want)
			}
		}
	}
	path := filepath.Join(dir, "plain.properties")
	text := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"s3cret\";\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if opts, err := clientOpts(path); err != nil || len(opts) != 1 {
		t.Errorf("SASL PLAIN: %d options, %v; want the SASL option alone", len(opts), err)
	}
}

// TestFormatAddScramRefusals: bad --add-scram specs are usage errors that
// write nothing.
func TestFormatAddScramRefusals(t *testing.T) {
	for _, spec := range []string{
		"SCRAM-SHA-1=[name=a,password=b]",
		"SCRAM-SHA-256=[password=b]",
		"SCRAM-SHA-256=[name=a,password=b,iterations=100]",
		"SCRAM-SHA-256=[name=a,password=b,colour=red]",
		"SCRAM-SHA-256=[name=a,password=b",
		"SCRAM-SHA-256=[name=a,salt=c2FsdA==,saltedpassword=c2FsdA==]",
	} {
		dir := filepath.Join(t.TempDir(), "data")
		status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "1", []string{dir}), "--add-scram", spec)
		if status != 2 || !strings.Contains(stderr, "--add-scram") {
			t.Errorf("%s: status %d %q, want 2", spec, status, stderr)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: the log dir was written", spec)
		}
	}
	// Two credentials of one user and mechanism.
	status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "1", []string{filepath.Join(t.TempDir(), "d")}),
		"--add-scram", "SCRAM-SHA-256=[name=a,password=b]", "--add-scram", "SCRAM-SHA-256=[name=a,password=c]")
	if status != 2 || !strings.Contains(stderr, "two SCRAM-SHA-256 credentials") {
		t.Errorf("a duplicate: status %d %q", status, stderr)
	}
}

func TestConfigsUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"configs", "--describe", "--entity-type", "topics"},
		{"configs", "--alter", "--describe", "--entity-type", "users"},
		{"configs", "--alter", "--entity-type", "users", "--add-config", "SCRAM-SHA-256=[password=x]"},
		{"configs", "--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "SCRAM-SHA-256=[iterations=8192]"},
		{"configs", "--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "producer_byte_rate=1024"},
		{"configs", "--alter", "--entity-type", "users", "--entity-name", "a", "--delete-config", "PLAIN"},
	} {
		if status, _, stderr := runCmd(t, args...); status != 2 {
			t.Errorf("%v: status %d %q, want 2", args, status, stderr)
		}
	}
}
