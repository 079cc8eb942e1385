package realnet

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"strand/diskio"
)

// TestSecondStartOnTheSameLogDirsIsRefused: a second node started on a
// running node's log dirs, with other ports, is refused before it opens
// anything, naming the directory and the holder; the lock is released at
// Shutdown, and at Kill, as the kernel releases a killed process's. Two
// nodes must never open the same directories and serve.
func TestSecondStartOnTheSameLogDirsIsRefused(t *testing.T) {
	c := startCluster(t, 1, nil)
	cfg := c.configs[0]
	cfg.Listeners = slices.Clone(cfg.Listeners)
	for i := range cfg.Listeners {
		cfg.Listeners[i].Port = 0
	}
	_, err := Start(Options{Config: cfg, Logger: testLogger(t, 2)})
	want := "log dir " + cfg.LogDirs[0] + " is in use by this process (pid " + strconv.Itoa(os.Getpid()) + ")"
	if !errors.Is(err, diskio.ErrDirInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second Start on the same log dirs: %v, want an error containing %q", err, want)
	}
	c.waitRegistered(1) // the first node still serves

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.nodes[0].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.restart(1)
	c.waitRegistered(1)
	c.nodes[0].Kill()
	c.restart(1)
	c.waitRegistered(1)
}

// TestSecondServeProcessIsRefusedAndKill9FreesTheLogDir: while `strand
// serve` runs, a second one on the same configuration with other ports
// exits 1 naming the log dir and the first one's pid, and so does `strand
// format`; after kill -9 of the first, the kernel has dropped its lock:
// format finds the directory free (and formatted), and the node restarts
// and serves.
func TestSecondServeProcessIsRefusedAndKill9FreesTheLogDir(t *testing.T) {
	c := startProcCluster(t, 1, everyNodeVotes, map[string]string{
		"default.replication.factor":       "1",
		"min.insync.replicas":              "1",
		"offsets.topic.replication.factor": "1",
	})
	n := c.nodes[0]
	dir := strings.TrimSuffix(n.configPath, "server.properties") + "data"
	want := "log dir " + dir + " is in use by process " + strconv.Itoa(n.cmd.Process.Pid)
	serve := exec.Command(c.bin, "serve", "--config", n.configPath,
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
	out, err := runBounded(serve, 20*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, want) || strings.Contains(out, "msg=listening") {
		t.Errorf("second serve on the same log dir: %v, output:\n%s\nwant exit status 1 before listening, naming %q", err, out, want)
	}
	for _, flags := range [][]string{nil, {"--ignore-formatted"}} {
		format := exec.Command(c.bin, append([]string{"format", "--config", n.configPath}, flags...)...)
		out, err := runBounded(format, 20*time.Second)
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, want) {
			t.Errorf("format %v of a served log dir: %v, output %q; want exit status 1 naming %q", flags, err, out, want)
		}
	}
	if !c.running(1) {
		t.Fatal("the refused processes stopped the first node")
	}

	c.kill(1)
	format := exec.Command(c.bin, "format", "--config", n.configPath, "--ignore-formatted")
	if out, err := runBounded(format, 20*time.Second); err != nil || !strings.Contains(out, "already formatted") {
		t.Errorf("format after kill -9: %v, output %q; want the directory free and already formatted", err, out)
	}
	c.start(1)
	c.waitBrokers(1)
}

// runBounded runs cmd with its output combined, killing it after timeout.
func runBounded(cmd *exec.Cmd, timeout time.Duration) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return out.String(), errors.New("still running after " + timeout.String() + ": killed")
	}
}
