package broker

// Behaviours a real Kafka client relies on beyond the happy path, each
// checked against what Apache Kafka's broker does.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// sendOn sends req on the given connection and runs the simulation until the
// answer (or the connection's end) arrives.
func (c *cluster) sendOn(cc interface {
	Send(kmsg.Request, func(kmsg.Response, error))
}, req kmsg.Request) (kmsg.Response, error) {
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
// partition this broker does not lead, say) and the client refreshes its
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
