package realnet

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strand/core/broker"
)

// TestStartsWithAnUnopenableSecondLogDir: a node whose second log dir
// cannot be opened (a regular file stands at its path; the tests run as
// root, whom permission bits would not stop) starts on its first, as
// Kafka's LogManager starts without the directories it cannot load: it
// registers again and catches up with the metadata log, fenced (its
// offline directory asks so, SPEC §3.5), while the other brokers serve
// produce and consume; restarted with the directory usable, it is
// unfenced and its replicas, kept in the first directory, rejoin the ISR.
// The first log dir unopenable refuses the start, naming it.
func TestStartsWithAnUnopenableSecondLogDir(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.createTopic("t", 3, 3)
	c.nodes[2].Kill()
	cfg := c.configs[2]
	healthy := cfg.LogDirs[0]
	broken := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(broken, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	firstBroken := cfg
	firstBroken.LogDirs = []string{broken, healthy}
	if n, err := Start(Options{Config: firstBroken, Logger: testLogger(t, 3)}); err == nil {
		n.Kill()
		t.Fatal("a node whose first log dir is a regular file started")
	} else if !strings.Contains(err.Error(), "log dir "+broken+", the first") {
		t.Fatalf("start with the first log dir unopenable: %v, want an error naming it", err)
	}

	var epochBefore int64
	c.nodes[0].Call(func(b *broker.Node) { br, _ := b.Image().Broker(3); epochBefore = br.Epoch })
	cfg.LogDirs = []string{healthy, broken}
	n, err := Start(Options{Config: cfg, Logger: testLogger(t, 3)})
	if err != nil {
		t.Fatalf("a node with one healthy and one unopenable log dir did not start: %v", err)
	}
	c.nodes[2] = n
	c.waitFor("node 3 to register again and catch up with the metadata log", 20*time.Second, func() bool {
		caughtUp := false
		n.Call(func(b *broker.Node) { caughtUp = b.InitialCatchUpDone() })
		registered := false
		c.nodes[0].Call(func(b *broker.Node) { br, ok := b.Image().Broker(3); registered = ok && br.Epoch > epochBefore })
		return caughtUp && registered
	})
	time.Sleep(time.Second) // heartbeats that could unfence it
	n.Call(func(b *broker.Node) {
		if br, _ := b.Image().Broker(3); !br.Fenced || b.InitialUnfenceDone() {
			t.Errorf("node 3, with an offline log dir, is unfenced (fenced %v, ready %v)", br.Fenced, b.InitialUnfenceDone())
		}
	})

	// Node 3's broker listener is not served while it is fenced: seed the
	// clients with the others.
	seeds := []string{c.nodes[0].Addr("PLAINTEXT").String(), c.nodes[1].Addr("PLAINTEXT").String()}
	acked := produceKeyed(t, c.client(kgo.SeedBrokers(seeds...)), "t", 300)
	consumeAll(t, c.client(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), "t", acked)

	n.Kill()
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if n, err = Start(Options{Config: cfg, Logger: testLogger(t, 3)}); err != nil {
		t.Fatalf("restart with both log dirs usable: %v", err)
	}
	c.nodes[2] = n
	c.waitRegistered(3)
	c.waitFor("node 3 back in every ISR of t", 30*time.Second, func() bool {
		in := true
		c.nodes[0].Call(func(b *broker.Node) {
			for p := range int32(3) {
				s, ok := b.Image().PartitionByName("t", p)
				in = in && ok && slices.Contains(s.ISR, 3)
			}
		})
		return in
	})
	entries, err := os.ReadDir(healthy)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	for p := range 3 {
		if !slices.Contains(names, fmt.Sprintf("t-%d", p)) {
			t.Errorf("node 3's first log dir holds %v, not t-%d", names, p)
		}
	}
}
