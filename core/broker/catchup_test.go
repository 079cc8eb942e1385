package broker

import "testing"

// TestInitialCatchUpAfterRestart crashes and restarts a broker and checks
// Config.OnInitialCatchUp, which realnet waits for before it serves the
// broker listeners: it runs once, only when the restarted incarnation's
// registration is in its image, and by then the image knows the topics
// created before the crash; before it, the restarted node does not (the
// window in which a serving node answered UNKNOWN_TOPIC_OR_PARTITION).
func TestInitialCatchUpAfterRestart(t *testing.T) {
	c := threeNodes(t)
	for _, tn := range c.nodes {
		if !tn.node.InitialCatchUpDone() {
			t.Fatalf("node %d registered but not caught up", tn.id)
		}
	}
	tn := c.nodes[3]
	tn.proc.Crash()
	c.run(100)
	tn.proc.Restart()
	calls := 0
	tn.cfg.OnInitialCatchUp = func() {
		calls++
		if !tn.node.caughtUpWithRegistration() {
			t.Error("OnInitialCatchUp before the registration is in the image")
		}
		if _, ok := tn.node.image.TopicByName("r"); !ok {
			t.Error("OnInitialCatchUp with an image that lacks topic r")
		}
	}
	c.start(tn)
	if tn.node.InitialCatchUpDone() {
		t.Fatal("a node just started reports its initial catch-up done")
	}
	if _, ok := tn.node.image.TopicByName("r"); ok {
		t.Fatal("test premise: the restarted node's image starts empty")
	}
	c.waitFor("initial catch-up after the restart", 30000, tn.node.InitialCatchUpDone)
	c.run(5000) // more metadata and heartbeats: the callback must not run again
	if calls != 1 {
		t.Fatalf("OnInitialCatchUp ran %d times, want once", calls)
	}
}
