package realnet

import (
	"context"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShutdownClosesSegmentsOfInFlightFetches shuts a node down, several
// times over, while Fetch responses are in flight (clients that stopped
// reading in the middle of a sendfile) and just after one was read whole,
// and checks the process then holds no file the node opened. Each response
// pins its segment file until its release runs; Shutdown closes the
// connections before the logs, so their writers normally post the releases
// to a loop still running, but one that is slow to get there finds the loop
// stopped (TestStopReleasesFetchesItOutlived makes that happen every time).
func TestShutdownClosesSegmentsOfInFlightFetches(t *testing.T) {
	before := openFilesAfterWarmUp(t)
	const rounds = 3
	for round := range rounds {
		c := startInFlightFetches(t, 4)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := c.nodes[0].Shutdown(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: shutdown: %v", round, err)
		}
		c.nodes[0] = nil
	}
	checkNoFilesLeft(t, before)
}

// TestStopReleasesFetchesItOutlived closes a node's logs while Fetch
// responses are in flight, then stops its loop before the connections: the
// writers, interrupted only then, post their releases to a stopped loop.
// This is Shutdown's order when a writer is slower than the close. The
// segment file stays open until the last release, which must run anyway.
func TestStopReleasesFetchesItOutlived(t *testing.T) {
	before := openFilesAfterWarmUp(t)
	c := startInFlightFetches(t, 4)
	n := c.nodes[0]
	closed := make(chan error, 1)
	n.loop.Call(func() { n.core.Close(func(err error) { closed <- err }) })
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("closing the logs took over 20 s")
	}
	pinned := false
	for _, f := range newOpenFiles(t, before) {
		pinned = pinned || strings.HasSuffix(f, ".log")
	}
	if !pinned {
		t.Fatal("no segment file open after the logs closed: no response was in flight, the test proves nothing")
	}
	n.stop(true)
	c.nodes[0] = nil
	checkNoFilesLeft(t, before)
}

// startInFlightFetches starts a one-node cluster whose topic "inflight"
// holds about 11 MiB, with inFlight clients that sent a Fetch of all of it
// and stopped reading after the first bytes of the response (its sendfile
// stalls on their small, full receive buffers), after one client that
// read its whole response (its release is posted just before).
func startInFlightFetches(t *testing.T, inFlight int) *testCluster {
	t.Helper()
	const topic = "inflight"
	c := startCluster(t, 1, nil)
	c.createTopic(topic, 1, 1)
	producer := c.client(kgo.ProducerBatchMaxBytes(1 << 20))
	for range 192 {
		value := make([]byte, 60<<10) // incompressible, whatever the codec
		rand.Read(value)
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	producer.Close()

	addr := c.nodes[0].Addr("PLAINTEXT")
	fetch := fetchAllRequest(topic)
	whole := dialRaw(t, addr)
	whole.send(1, fetch)
	if frame, err := whole.readFrame(10 * time.Second); err != nil || len(frame) < 1<<20 {
		t.Fatalf("whole response: %d bytes, %v", len(frame), err)
	}
	for range inFlight {
		r := dialRaw(t, addr)
		if err := r.c.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
			t.Fatal(err)
		}
		r.send(1, fetch)
		r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var started [64]byte
		if _, err := r.c.Read(started[:]); err != nil {
			t.Fatalf("response start: %v", err)
		}
	}
	return c
}

// openFilesAfterWarmUp lists the open descriptors once the runtime's
// network poller exists, which the first listener opens for good.
func openFilesAfterWarmUp(t *testing.T) []string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	return openFDs(t)
}

// newOpenFiles names the descriptors open now and not in before, sockets
// aside (the test's clients close at cleanup): "fd -> path".
func newOpenFiles(t *testing.T, before []string) []string {
	t.Helper()
	var extra []string
	for _, fd := range openFDs(t) {
		if slices.Contains(before, fd) {
			continue
		}
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd))
		if err != nil || strings.HasPrefix(target, "socket:") {
			continue // closed meanwhile, or a socket
		}
		extra = append(extra, fd+" -> "+target)
	}
	return extra
}

// checkNoFilesLeft fails if files opened since before are still open a few
// seconds on.
func checkNoFilesLeft(t *testing.T, before []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(newOpenFiles(t, before)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if extra := newOpenFiles(t, before); len(extra) > 0 {
		t.Fatalf("%d files the node opened are still open after it stopped:\n%s", len(extra), strings.Join(extra, "\n"))
	}
}

// fetchAllRequest is a Fetch v12 of topic's partition 0 from offset 0 that
// answers at once with up to 16 MiB.
func fetchAllRequest(topic string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxBytes = 16 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 16 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// openFDs lists the process's open file descriptors.
func openFDs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds := make([]string, 0, len(entries))
	for _, e := range entries {
		fds = append(fds, e.Name())
	}
	return fds
}
