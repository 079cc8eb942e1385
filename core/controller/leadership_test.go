package controller

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
	"strand/core/quorum"
)

// scriptedQuorum is a Quorum whose leadership and commits the test moves by
// hand: one record per offset, one batch per record.
type scriptedQuorum struct {
	records    []metadata.Record
	committed  int64
	leading    bool
	epochStart int64
	onCommit   func()
	onChange   func()
}

func (q *scriptedQuorum) Listen(onCommit, onChange func(), _ func(error), _ func(*quorum.Snapshot)) {
	q.onCommit, q.onChange = onCommit, onChange
}

func (q *scriptedQuorum) Append(records []metadata.Record) (int64, error) {
	if !q.leading {
		return 0, errors.New("not the leader")
	}
	base := q.EndOffset()
	q.records = append(q.records, records...)
	return base, nil
}

func (q *scriptedQuorum) EndOffset() int64       { return int64(len(q.records)) }
func (q *scriptedQuorum) CommittedOffset() int64 { return q.committed }
func (q *scriptedQuorum) LogStartOffset() int64  { return 0 }
func (q *scriptedQuorum) ReadCommitted(int64, int32) ([]byte, error) {
	return nil, errors.New("not served in this test")
}
func (q *scriptedQuorum) TakeSnapshot(int64, []byte) error { return nil }
func (q *scriptedQuorum) LatestSnapshot() *quorum.Snapshot { return nil }
func (q *scriptedQuorum) Epoch() int32                     { return 1 }
func (q *scriptedQuorum) LeaderID() int32 {
	if q.leading {
		return 100
	}
	return -1
}
func (q *scriptedQuorum) LeaderEpochStart() (int64, bool) { return q.epochStart, q.leading }
func (q *scriptedQuorum) Describe() (quorum.Description, bool) {
	return quorum.Description{LeaderID: 100, LeaderEpoch: 1, HighWatermark: q.committed}, q.leading
}

func (q *scriptedQuorum) CommittedBatches(from int64, fn func(metadata.Batch) error) error {
	for o := from; o < q.committed; o++ {
		if err := fn(metadata.Batch{BaseOffset: o, NextOffset: o + 1, Records: []metadata.Record{q.records[o]}}); err != nil {
			return err
		}
	}
	return nil
}

// lead starts a new epoch with its leader-change entry, uncommitted.
func (q *scriptedQuorum) lead() {
	q.leading, q.epochStart = true, q.EndOffset()
	q.records = append(q.records, &metadata.NoOpRecord{})
	q.onChange()
}

// commitAll commits the whole log.
func (q *scriptedQuorum) commitAll() {
	q.committed = q.EndOffset()
	q.onCommit()
}

// lose ends the epoch; the next leader's log drops the uncommitted tail.
func (q *scriptedQuorum) lose() {
	q.leading = false
	q.records = q.records[:q.committed]
	q.onChange()
}

// TestControllerFollowsLeadership: the controller becomes active only once
// its epoch's leader-change entry commits; when leadership is lost with a
// registration waiting for its commit, the broker is answered
// NOT_CONTROLLER, the uncommitted record is forgotten, and a later epoch
// decides from the committed state.
func TestControllerFollowsLeadership(t *testing.T) {
	q := &scriptedQuorum{}
	clock := &manualClock{}
	c, err := New(DefaultConfig(100), clock, q, func() [16]byte { return [16]byte{1} })
	if err != nil {
		t.Fatal(err)
	}
	q.lead()
	if c.Active() {
		t.Fatal("active before the epoch's leader-change entry committed")
	}
	q.commitAll()
	if !c.Active() {
		t.Fatal("not active once the leader-change entry committed")
	}
	register := func() *[]kmsg.Response {
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.Version, req.BrokerID, req.IncarnationID = 4, 1, [16]byte{1}
		req.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "BROKER", Host: "h", Port: 9092}}
		var got []kmsg.Response
		c.HandleRequest(req, func(r kmsg.Response) { got = append(got, r) })
		return &got
	}
	waiting := register()
	if len(*waiting) != 0 || q.EndOffset() != 2 {
		t.Fatalf("registration answered %d times before its commit, log end %d", len(*waiting), q.EndOffset())
	}
	q.lose()
	if len(*waiting) != 1 || (*waiting)[0].(*kmsg.BrokerRegistrationResponse).ErrorCode != kerr.NotController.Code {
		t.Fatalf("waiting registration after losing leadership: %d answers, want one NOT_CONTROLLER", len(*waiting))
	}
	if c.Active() {
		t.Fatal("still active after losing leadership")
	}
	if got := register(); len(*got) != 1 || (*got)[0].(*kmsg.BrokerRegistrationResponse).ErrorCode != kerr.NotController.Code {
		t.Fatal("an inactive controller did not refuse a registration")
	}
	q.lead()
	q.commitAll()
	if !c.Active() {
		t.Fatal("not active in the new epoch")
	}
	if _, ok := c.Image().Broker(1); ok {
		t.Fatal("the uncommitted registration of the lost epoch reached the committed image")
	}
	got := register()
	q.commitAll()
	if len(*got) != 1 || (*got)[0].(*kmsg.BrokerRegistrationResponse).ErrorCode != 0 {
		t.Fatal("registration in the new epoch failed")
	}
	if b, ok := c.Image().Broker(1); !ok || b.Epoch != 2 {
		t.Fatalf("broker 1 registered with epoch %d (ok %v), want 2: after the new epoch's offsets", b.Epoch, ok)
	}
}
