package broker

import "testing"

// TestReadyForClientsAfterRestart crashes and restarts a broker and checks
// Config.OnInitialUnfence, which realnet waits for before it serves the
// broker listeners: it runs once, only when the restarted incarnation's
// registration is in its image and the image shows it unfenced (so the
// Metadata it answers names a live broker and a controller), and by then
// the image knows the topics created before the crash; before it, the
// restarted node does not (the window in which a serving node answered
// UNKNOWN_TOPIC_OR_PARTITION, or no broker at all).
func TestReadyForClientsAfterRestart(t *testing.T) {
	c := threeNodes(t)
	for _, tn := range c.nodes {
		if !tn.node.InitialUnfenceDone() {
			t.Fatalf("node %d registered but not ready for clients", tn.id)
		}
	}
	tn := c.nodes[3]
	tn.proc.Crash()
	c.run(100)
	tn.proc.Restart()
	calls := 0
	var readyAtNs int64
	tn.cfg.OnInitialUnfence = func() {
		calls++
		readyAtNs = c.s.NowNs()
		if !tn.node.meta.caughtUpWithRegistration() {
			t.Error("OnInitialUnfence before the registration is in the image")
		}
		if b, _ := tn.node.meta.image.Broker(tn.id); b.Fenced {
			t.Error("OnInitialUnfence while the image shows the broker fenced")
		}
		if brokers, controller := tn.node.meta.liveBrokers("PLAINTEXT"); len(brokers) != 3 || controller < 0 {
			t.Errorf("OnInitialUnfence with Metadata naming %d live brokers and controller %d", len(brokers), controller)
		}
		if _, ok := tn.node.meta.image.TopicByName("r"); !ok {
			t.Error("OnInitialUnfence with an image that lacks topic r")
		}
	}
	startedNs := c.s.NowNs()
	c.start(tn)
	if tn.node.InitialUnfenceDone() || tn.node.InitialCatchUpDone() {
		t.Fatal("a node just started reports itself caught up or ready")
	}
	if _, ok := tn.node.meta.image.TopicByName("r"); ok {
		t.Fatal("test premise: the restarted node's image starts empty")
	}
	c.waitFor("ready for clients after the restart", 30000, tn.node.InitialUnfenceDone)
	c.run(5000) // more metadata and heartbeats: the callback must not run again
	if calls != 1 {
		t.Fatalf("OnInitialUnfence ran %d times, want once", calls)
	}
	t.Logf("ready %d ms after the restart", (readyAtNs-startedNs)/1e6)
}
