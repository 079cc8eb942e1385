package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"strand/core/config"
)

// runCmd runs a subcommand and returns its status and output.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	status := run(args, &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

// writeConfig writes a single-node config whose log dirs are under a fresh
// temporary directory, plus extra lines.
func writeConfig(t *testing.T, nodeID string, logDirs []string, extra ...string) string {
	t.Helper()
	text := strings.Join(append([]string{
		"process.roles=broker,controller",
		"node.id=" + nodeID,
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.listener.names=CONTROLLER",
		"controller.quorum.voters=" + nodeID + "@127.0.0.1:9093",
		"log.dirs=" + strings.Join(logDirs, ","),
	}, extra...), "\n")
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readMeta(t *testing.T, dir string) config.Meta {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, config.MetaFileName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := config.ParseMeta(text)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFormatWritesEveryLogDirAndRefusesAFormattedOne: format writes every
// log dir, and says so in one line; run again it refuses, as
// kafka-storage.sh format does, in one line on stderr and status 1, unless
// --ignore-formatted, which rewrites nothing and says so in one line. A
// refused format never also says it formatted, nor exits 0.
func TestFormatWritesEveryLogDirAndRefusesAFormattedOne(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b", "c")}
	cfgPath := writeConfig(t, "4", dirs)
	status, stdout, stderr := runCmd(t, "format", "--config", cfgPath, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk")
	if status != 0 {
		t.Fatalf("format: status %d, stderr %s", status, stderr)
	}
	if !strings.Contains(stdout, "MkU3OEVBNTcwNTJENDM2Qk") || strings.Count(stdout, "\n") != 1 || stderr != "" {
		t.Errorf("stdout %q, stderr %q: want one line naming the cluster id", stdout, stderr)
	}
	first := map[string]config.Meta{}
	for _, dir := range dirs {
		m := readMeta(t, dir)
		if m.NodeID != 4 || m.ClusterID != "MkU3OEVBNTcwNTJENDM2Qk" || m.Version != 1 || m.DirectoryID == "" {
			t.Errorf("%s: meta %+v", dir, m)
		}
		first[dir] = m
		if _, err := os.Stat(filepath.Join(dir, metaTempName)); !os.IsNotExist(err) {
			t.Errorf("%s: temp file left behind: %v", dir, err)
		}
	}
	if first[dirs[0]].DirectoryID == first[dirs[1]].DirectoryID {
		t.Error("two log dirs got the same directory.id")
	}

	// Again: refused, naming the first formatted directory and the flag.
	status, stdout, stderr = runCmd(t, "format", "--config", cfgPath)
	want := "strand format: log dir " + dirs[0] + " is already formatted: use --ignore-formatted"
	if status != 1 || stdout != "" || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("second format: status %d, stdout %q, stderr %q; want status 1 and one line starting %q", status, stdout, stderr, want)
	}
	// With --ignore-formatted, and without --cluster-id: the id on disk
	// is kept, nothing rewritten.
	status, stdout, stderr = runCmd(t, "format", "--config", cfgPath, "--ignore-formatted")
	want = "all 2 log dir(s) are already formatted for node.id 4, cluster.id MkU3OEVBNTcwNTJENDM2Qk\n"
	if status != 0 || stdout != want || stderr != "" {
		t.Errorf("format --ignore-formatted: status %d, stdout %q, stderr %q; want 0, %q", status, stdout, stderr, want)
	}
	for _, dir := range dirs {
		if m := readMeta(t, dir); m != first[dir] {
			t.Errorf("%s: a second format changed meta.properties: %+v -> %+v", dir, first[dir], m)
		}
	}

	// A new directory beside the formatted ones: refused without the
	// flag, formatted alone with it.
	more := append(dirs, filepath.Join(root, "d"))
	cfgPath = writeConfig(t, "4", more)
	if status, _, stderr := runCmd(t, "format", "--config", cfgPath); status != 1 || !strings.Contains(stderr, "already formatted") {
		t.Errorf("format with a new dir beside formatted ones: status %d, stderr %q", status, stderr)
	}
	if _, err := os.Stat(more[2]); !os.IsNotExist(err) {
		t.Errorf("the refused format created %s: %v", more[2], err)
	}
	status, stdout, stderr = runCmd(t, "format", "--config", cfgPath, "--ignore-formatted")
	want = "formatted 1 log dir(s) for node.id 4, cluster.id MkU3OEVBNTcwNTJENDM2Qk: " + more[2] + "\n"
	if status != 0 || stdout != want || stderr != "" {
		t.Errorf("format --ignore-formatted with a new dir: status %d, stdout %q, stderr %q; want 0, %q", status, stdout, stderr, want)
	}
	if m := readMeta(t, more[2]); m.ClusterID != "MkU3OEVBNTcwNTJENDM2Qk" || m.NodeID != 4 {
		t.Errorf("new dir formatted %+v", m)
	}
}

func TestFormatRefusesAnotherNodesDirectory(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	if status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "2", []string{shared})); status != 0 {
		t.Fatalf("format node 2: %s", stderr)
	}
	before, err := os.ReadFile(filepath.Join(shared, config.MetaFileName))
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(root, "fresh")
	status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "1", []string{fresh, shared}))
	if status == 0 {
		t.Fatal("format of another node's directory succeeded")
	}
	want := "log dir " + shared + " belongs to node.id 2, this is node.id 1"
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not contain %q", stderr, want)
	}
	after, _ := os.ReadFile(filepath.Join(shared, config.MetaFileName))
	if !bytes.Equal(before, after) {
		t.Error("the refused format rewrote meta.properties")
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Error("the refused format still formatted the other directory")
	}
}

func TestFormatRefusesAnotherCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	cfgPath := writeConfig(t, "1", []string{dir})
	if status, _, stderr := runCmd(t, "format", "--config", cfgPath, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk"); status != 0 {
		t.Fatal(stderr)
	}
	status, _, stderr := runCmd(t, "format", "--config", cfgPath, "--cluster-id", "J8aAPcfLQt2bqs1JT_rMgQ")
	if status == 0 || !strings.Contains(stderr, "belongs to cluster MkU3OEVBNTcwNTJENDM2Qk") {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
}

func TestFormatRefusesNonEmptyUnformattedDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "someone-elses-file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "1", []string{dir}))
	if status == 0 || !strings.Contains(stderr, "someone-elses-file") {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
}

func TestFormatRejectsBadClusterID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "1", []string{dir}), "--cluster-id", "not-a-uuid")
	if status == 0 || !strings.Contains(stderr, "not-a-uuid") {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
}

// TestServeFormatsReportsUnknownKeysAndServes: serve validates, logs each
// unknown key by name, formats the empty log dir, starts the broker, and on
// the stop signal shuts down cleanly with status 0.
func TestServeFormatsReportsUnknownKeysAndServes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfgPath := writeConfig(t, "1", []string{dir}, "num.network.threads=3", "zookeeper.connect=localhost:2181")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	status := make(chan int, 1)
	go func() {
		status <- serveUntil(ctx, []string{"--config", cfgPath, "--override", "num.io.threads=8",
			// Port 0: the test must not collide with a broker on 9092.
			"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, &stdout, &stderr)
	}()
	time.Sleep(500 * time.Millisecond) // let it start and register
	cancel()
	select {
	case s := <-status:
		if s != 0 {
			t.Errorf("status %d, want 0; stderr:\n%s", s, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60 s of the stop signal")
	}
	for _, key := range []string{"num.network.threads", "zookeeper.connect", "num.io.threads"} {
		if !strings.Contains(stderr.String(), "key="+key) {
			t.Errorf("stderr does not name unknown key %s:\n%s", key, stderr.String())
		}
	}
	for _, want := range []string{"msg=listening", "msg=serving", "msg=stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	m := readMeta(t, dir)
	voters := []config.Voter{{ID: 1, Host: "127.0.0.1", Port: 9093}}
	if m.NodeID != 1 || m.ClusterID != config.DeriveClusterID(voters) {
		t.Errorf("serve formatted %+v, want node 1 and the id derived from the voters", m)
	}
}

// TestServeRefusesUnimplementedSecurityKeys: a security key Strand does not
// implement stops serve with status 1 and a message naming it (SPEC.md
// §10, security settings fail closed): a warning would leave it serving
// wide open.
func TestServeRefusesUnimplementedSecurityKeys(t *testing.T) {
	for _, line := range []string{"delegation.token.secret.key=x",
		"ssl.cipher.suites=TLS_AES_128_GCM_SHA256", "password.encoder.secret=x"} {
		dir := filepath.Join(t.TempDir(), "data")
		key, _, _ := strings.Cut(line, "=")
		status, _, stderr := runCmd(t, "serve", "--config", writeConfig(t, "1", []string{dir}, line))
		if status != 1 || !strings.Contains(stderr, "config key "+key+": is a security setting Strand does not implement") {
			t.Errorf("%s: status %d, stderr %q", line, status, stderr)
		}
	}
	// An authorizer other than KRaft's StandardAuthorizer refuses the start.
	dir := filepath.Join(t.TempDir(), "data")
	status, _, stderr := runCmd(t, "serve", "--config", writeConfig(t, "1", []string{dir}, "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"))
	if status != 1 || !strings.Contains(stderr, "config key authorizer.class.name") {
		t.Errorf("ZooKeeper's authorizer: status %d, stderr %q", status, stderr)
	}
	// super.users is implemented; a secured listener is served, but not
	// without the certificate its TLS needs (SPEC.md §10.6).
	dir = filepath.Join(t.TempDir(), "data")
	status, _, stderr = runCmd(t, "serve", "--config", writeConfig(t, "1", []string{dir}, "super.users=User:admin",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"))
	if status != 1 || !strings.Contains(stderr, "config key listener.name.controller.ssl.keystore.location: is required") {
		t.Errorf("SASL_SSL controller listener without a certificate: status %d, stderr %q", status, stderr)
	}
}

func TestServeRefusesMismatchedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "2", []string{dir})); status != 0 {
		t.Fatal(stderr)
	}
	status, _, stderr := runCmd(t, "serve", "--config", writeConfig(t, "1", []string{dir}))
	if status != 1 || !strings.Contains(stderr, "belongs to node.id 2, this is node.id 1") {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
	if strings.Contains(stderr, "msg=listening") {
		t.Error("serve went on past a mismatched log dir")
	}
}

func TestServeRejectsInvalidConfigNamingTheKey(t *testing.T) {
	cfgPath := writeConfig(t, "1", []string{filepath.Join(t.TempDir(), "d")}, "min.insync.replicas=abc")
	status, _, stderr := runCmd(t, "serve", "--config", cfgPath)
	if status != 1 || !strings.Contains(stderr, `config key min.insync.replicas: \"abc\" is not an integer`) {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
}

func TestServeOverrideSyntax(t *testing.T) {
	status, _, stderr := runCmd(t, "serve", "--override", "no-equals-sign")
	if status != 2 || !strings.Contains(stderr, "key=value") {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
}

func TestVersionAndUnknownCommand(t *testing.T) {
	if status, stdout, _ := runCmd(t, "version"); status != 0 || !strings.HasPrefix(stdout, "strand ") {
		t.Errorf("version: %d %q", status, stdout)
	}
	if status, _, stderr := runCmd(t, "frobnicate"); status != 2 || !strings.Contains(stderr, "frobnicate") {
		t.Errorf("unknown command: %d %q", status, stderr)
	}
	status, stdout, _ := runCmd(t, "random-cluster-id")
	if status != 0 || config.ValidateClusterID(strings.TrimSpace(stdout)) != nil {
		t.Errorf("random-cluster-id: %d %q", status, stdout)
	}
}

func TestServeLogsMisspeltKeyWithTheError(t *testing.T) {
	cfgPath := writeConfig(t, "1", []string{filepath.Join(t.TempDir(), "d")}, "min.insync.replica=2", "num.partitions=x")
	status, _, stderr := runCmd(t, "serve", "--config", cfgPath)
	if status != 1 || !strings.Contains(stderr, "key=min.insync.replica ") || !strings.Contains(stderr, "num.partitions") {
		t.Errorf("status %d, stderr %q", status, stderr)
	}
}

// TestFormatIgnoresStaleTempFile: a meta.properties.tmp left by a format that
// crashed does not make the directory "not empty".
func TestFormatIgnoresStaleTempFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, metaTempName), []byte("version=1\nnode.id="), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, _, stderr := runCmd(t, "format", "--config", writeConfig(t, "3", []string{dir})); status != 0 {
		t.Fatalf("status %d, stderr %s", status, stderr)
	}
	if m := readMeta(t, dir); m.NodeID != 3 {
		t.Errorf("meta %+v", m)
	}
}
