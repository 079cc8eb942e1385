package broker

// The connection closes the core asks for (env.Network.Close) happen in
// request order, as Kafka's do: Kafka reads one request per connection at a
// time, so when it closes because of request N, every earlier request has
// been answered and no later one has been read.

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/sim/simnet"
)

// sendOn sends req on the given connection and runs the simulation until the
// answer (or the connection's end) arrives.
func (c *cluster) sendOn(cc *simnet.ClientConn, req kmsg.Request) (kmsg.Response, error) {
	c.t.Helper()
	var resp kmsg.Response
	var err error
	done := false
	cc.Send(req, func(r kmsg.Response, e error) { resp, err, done = r, e, true })
	c.waitFor("an answer", 60000, func() bool { return done })
	return resp, err
}

// TestAcksZeroProduceErrorClosesConnection: an acks=0 produce gets no
// response, so Kafka closes the connection when a partition fails (to a
// partition that does not exist, say) and the client refreshes its
// metadata; a successful one leaves the connection open.
func TestAcksZeroProduceErrorClosesConnection(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitRegistered()
	c.createTopic(1, "noacks", 1, 1)
	cc := c.conn(1)

	if _, err := c.sendOn(cc, produceReq("noacks", 0, 0, recordBatch("kept"))); err != nil {
		t.Fatalf("acks=0 produce to the leader: %v", err)
	}
	if _, err := c.sendOn(cc, kmsg.NewPtrMetadataRequest()); err != nil || !cc.Open() {
		t.Fatalf("after a successful acks=0 produce the connection ended: %v", err)
	}
	if got := values(t, c.fetch(1, "noacks", 0, 0).RecordBatches); joined(got) != "kept" {
		t.Fatalf("log holds %q, want the acks=0 record", got)
	}

	if _, err := c.sendOn(cc, produceReq("noacks", 7, 0, recordBatch("lost"))); err != nil {
		t.Fatalf("sending the failing acks=0 produce: %v", err)
	}
	if _, err := c.sendOn(cc, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("acks=0 produce to a partition that does not exist left the connection open; Kafka closes it")
	}
	if cc.Open() {
		t.Fatal("connection still open after the failing acks=0 produce")
	}
}

// TestOrderedCloseAnswersEarlierAndDropsLater pipelines, on one connection
// to the leader of a two-replica partition: an acks=all produce (its answer
// waits for the follower), a request the broker closes the connection on,
// and an acks=1 produce behind it. The first must be answered, then the
// connection must close; the last must be neither answered nor appended,
// as Kafka never reads it. The closing request is an acks=0 produce to a
// partition that does not exist, or a Produce in a version the broker does
// not advertise (v2; it must not append either).
func TestOrderedCloseAnswersEarlierAndDropsLater(t *testing.T) {
	for _, closer := range []struct {
		name string
		req  func() kmsg.Request
	}{
		{"acks=0 to a missing partition", func() kmsg.Request { return produceReq("ordered", 7, 0, recordBatch("refused")) }},
		{"unadvertised version", func() kmsg.Request {
			r := produceReq("ordered", 0, 1, recordBatch("old version"))
			r.SetVersion(2)
			return r
		}},
	} {
		t.Run(closer.name, func(t *testing.T) {
			c := newCluster(t, 2, nil)
			c.waitRegistered()
			c.createTopic(1, "ordered", 1, 2)
			leader := c.leaderOf("ordered", 0)
			c.waitFor("both replicas in the ISR", 10000, func() bool {
				st, ok := c.nodes[leader].node.meta.image.PartitionByName("ordered", 0)
				return ok && len(st.ISR) == 2
			})
			cc := c.conn(leader)
			type outcome struct {
				resp kmsg.Response
				err  error
				done bool
			}
			var first, behind outcome
			var order []string
			cc.Send(produceReq("ordered", 0, -1, recordBatch("acked")), func(r kmsg.Response, err error) {
				first = outcome{r, err, true}
				order = append(order, "first")
			})
			cc.Send(closer.req(), func(kmsg.Response, error) {})
			cc.Send(produceReq("ordered", 0, 1, recordBatch("behind")), func(r kmsg.Response, err error) {
				behind = outcome{r, err, true}
				order = append(order, "behind")
			})
			c.waitFor("both produces settled", 10000, func() bool { return first.done && behind.done })
			if first.err != nil {
				t.Fatalf("the acks=all produce sent before the close lost its answer (%v); Kafka answers it first", first.err)
			}
			if code := first.resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("acks=all produce: error %d", code)
			}
			if !errors.Is(behind.err, simnet.ErrConnClosed) {
				t.Fatalf("the produce behind the close got (%v, %v), want ErrConnClosed", behind.resp, behind.err)
			}
			if order[0] != "first" {
				t.Fatalf("outcomes in order %v", order)
			}
			if cc.Open() {
				t.Fatal("connection still open")
			}
			c.run(1000)
			if got := values(t, c.fetch(leader, "ordered", 0, 0).RecordBatches); joined(got) != "acked" {
				t.Fatalf("log holds %q, want only the acks=all record: nothing at or behind the close is executed", got)
			}
		})
	}
}

// TestAcksZeroCloseKeepsEarlierAnswers: Kafka reads one request of a
// connection at a time (SocketServer mutes the channel until the response,
// or the no-response of an acks=0 produce, is done), so when an acks=0
// produce fails and Kafka closes the connection, every earlier request on it
// has already been answered. Strand reads pipelined requests: closing at
// once would lose the answer of an acks=all produce still waiting for its
// followers though its batch was appended, so the client would see a
// connection error and, without idempotence, send the batch again (a
// duplicate). The close is in request order (env.Network.Close): the
// acks=all answer arrives, then the connection closes.
func TestAcksZeroCloseKeepsEarlierAnswers(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.waitRegistered()
	c.createTopic(1, "pipelined", 1, 2)
	leader := c.leaderOf("pipelined", 0)
	c.waitFor("both replicas in the ISR", 10000, func() bool {
		st, ok := c.nodes[leader].node.meta.image.PartitionByName("pipelined", 0)
		return ok && len(st.ISR) == 2
	})
	cc := c.conn(leader)

	var first kmsg.Response
	var firstErr error
	firstDone := false
	cc.Send(produceReq("pipelined", 0, -1, recordBatch("acked")), func(r kmsg.Response, err error) {
		first, firstErr, firstDone = r, err, true
	})
	cc.Send(produceReq("pipelined", 7, 0, recordBatch("refused")), func(kmsg.Response, error) {})
	c.waitFor("the acks=all answer or the connection's end", 10000, func() bool { return firstDone })
	if firstErr != nil {
		if got := values(t, c.fetch(leader, "pipelined", 0, 0).RecordBatches); joined(got) == "acked" {
			t.Logf("the batch was appended, yet its producer was told the connection failed")
		}
		t.Fatalf("the acks=all produce sent before the failing acks=0 one lost its answer (%v); Kafka answers it before closing", firstErr)
	}
	if code := first.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("acks=all produce: error %d", code)
	}
	c.waitFor("the close after the answer", 1000, func() bool { return !cc.Open() })
}
