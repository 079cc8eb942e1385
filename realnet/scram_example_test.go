package realnet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestScramTLSExampleRuns runs the README's SCRAM-over-TLS example as a
// newcomer would, in a fresh directory: config/examples/scram-tls/certs.sh
// makes the certificates with openssl, format.sh formats the three nodes
// with their bootstrap credentials, three `strand serve` processes start
// with the example's files (on free ports instead of 9092..9097), then the
// admin creates a topic and user alice with the strand tools and
// --command-config, and alice produces and consumes with strand and with
// kcat. Skipped without openssl.
func TestScramTLSExampleRuns(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	bin := buildStrand(t)
	example, err := filepath.Abs(filepath.Join("..", "config", "examples", "scram-tls"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	script := func(name string, env ...string) {
		t.Helper()
		cmd := exec.Command("bash", filepath.Join(example, name))
		cmd.Dir, cmd.Env = work, append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	script("certs.sh")
	script("format.sh", "STRAND="+bin)

	ports := freePorts(t, 6)
	voters := fmt.Sprintf("1@127.0.0.1:%d,2@127.0.0.1:%d,3@127.0.0.1:%d", ports[1], ports[3], ports[5])
	var bootstrap []string
	for n := 1; n <= 3; n++ {
		client, ctl := ports[2*n-2], ports[2*n-1]
		bootstrap = append(bootstrap, fmt.Sprintf("127.0.0.1:%d", client))
		logPath := filepath.Join(work, fmt.Sprintf("node%d.log", n))
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "serve", "--config", filepath.Join(example, fmt.Sprintf("node%d.properties", n)),
			"--override", fmt.Sprintf("listeners=CLIENT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", client, ctl),
			"--override", fmt.Sprintf("advertised.listeners=CLIENT://127.0.0.1:%d", client),
			"--override", "controller.quorum.voters="+voters)
		cmd.Dir, cmd.Stdout, cmd.Stderr = work, logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			logFile.Close()
			if t.Failed() {
				text, _ := os.ReadFile(logPath)
				t.Logf("node %d's log (last 3 KiB):\n%s", cmd.Process.Pid, lastBytes(text, 3072))
			}
		})
	}
	servers := strings.Join(bootstrap, ",")
	strand := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(bin, append(args, "--bootstrap-server", servers)...)
		cmd.Dir, cmd.Stdin = work, strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("strand %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), err
	}
	retry := func(what string, stdin string, args ...string) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, err := strand(stdin, args...)
			if err == nil {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	admin := filepath.Join(example, "admin.properties")
	alice := filepath.Join(example, "alice.properties")
	retry("create the topic as admin", "", "topics", "create", "--topic", "greetings", "--command-config", admin, "--timeout", "5s")
	retry("create user alice", "", "configs", "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "SCRAM-SHA-256=[password=alice-secret]")
	// Usable on each broker once it applied the record: retry until so.
	retry("alice produces", "hello\n", "produce", "--topic", "greetings", "--acks", "all", "--command-config", alice, "--timeout", "5s")
	if out := retry("alice consumes", "", "consume", "--topic", "greetings", "--from-beginning", "--max-messages", "1",
		"--command-config", alice, "--timeout", "10s"); out != "hello\n" {
		t.Fatalf("alice consumed %q", out)
	}
	if kcatOrSkip(t) == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), kcatTimeout)
	defer cancel()
	kcat := exec.CommandContext(ctx, "kcat", "-b", servers, "-X", "security.protocol=sasl_ssl",
		"-X", "ssl.ca.location=data/scram-tls/certs/ca.pem", "-X", "sasl.mechanisms=SCRAM-SHA-256",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-C", "-t", "greetings", "-e", "-f", "%s\n")
	kcat.Dir = work
	out, err := kcat.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello\n") {
		t.Fatalf("kcat as alice: %v\n%s", err, out)
	}
}
