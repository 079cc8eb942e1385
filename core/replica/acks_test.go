package replica

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func code(err error) int16 {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return codeNone
}

func TestAdmitProduce(t *testing.T) {
	cfg := testConfig(0)
	cfg.AckWaitersMax = 1
	l, _, f3 := cluster3(cfg, []int32{1, 2})
	if _, err := l.p.AdmitProduce(2); code(err) != codeInvalidRequiredAcks {
		t.Errorf("acks 2: %v, want INVALID_REQUIRED_ACKS", err)
	}
	if _, err := f3.p.AdmitProduce(AcksLeader); code(err) != codeNotLeaderOrFollower {
		t.Errorf("produce on a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	must(t, l.produce(AcksAll, 1, 0, 100, "a"))
	_, err := l.p.AdmitProduce(AcksAll)
	if code(err) != codeRequestTimedOut || !strings.Contains(err.Error(), "AckWaitersMax") {
		t.Errorf("beyond AckWaitersMax: %v, want REQUEST_TIMED_OUT naming AckWaitersMax", err)
	}
	if epoch, err := l.p.AdmitProduce(AcksLeader); err != nil || epoch != 0 {
		t.Errorf("acks=1 with a full purgatory: %d %v, want epoch 0 admitted", epoch, err)
	}
	under, _, _ := cluster3(testConfig(0), []int32{1})
	if _, err := under.p.AdmitProduce(AcksAll); code(err) != codeNotEnoughReplicas {
		t.Errorf("acks=all with ISR [1] < 2: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if _, err := under.p.AdmitProduce(AcksLeader); err != nil {
		t.Errorf("acks=1 with ISR [1] < 2: %v, want admitted", err)
	}
}

func TestAcksAllCompletesWhenHighWatermarkPasses(t *testing.T) {
	l, f2, f3 := cluster3(testConfig(0), []int32{1, 2, 3})
	must(t, l.produce(AcksAll, 1, 0, 100, "a"))
	must(t, l.produce(AcksAll, 2, 0, 100, "b", "c"))
	fetchOnce(f2, l, 1)
	fetchOnce(f3, l, 1)
	if got := l.p.TakeAckResults(); len(got) != 0 {
		t.Fatalf("acked %v before any follower confirmed", got)
	}
	l.p.OnFollowerFetch(FetchRequest{ReplicaID: 2, FetchOffset: 1, CurrentLeaderEpoch: 0, LastFetchedEpoch: 0}, 2)
	l.p.OnFollowerFetch(FetchRequest{ReplicaID: 3, FetchOffset: 3, CurrentLeaderEpoch: 0, LastFetchedEpoch: 0}, 2)
	if got := l.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{1, 0}}) {
		t.Fatalf("at HW 1: %v, want only request 1 acknowledged", got)
	}
	l.p.OnFollowerFetch(FetchRequest{ReplicaID: 2, FetchOffset: 3, CurrentLeaderEpoch: 0, LastFetchedEpoch: 0}, 3)
	if got := l.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{2, 0}}) {
		t.Fatalf("at HW 3: %v, want request 2 acknowledged", got)
	}
	if l.p.AckWaiters() != 0 {
		t.Errorf("%d waiters left", l.p.AckWaiters())
	}
}

func TestAcksAllFailures(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		l, _, _ := cluster3(testConfig(0), []int32{1, 2, 3})
		must(t, l.produce(AcksAll, 1, 0, 300, "a"))
		must(t, l.produce(AcksAll, 2, 0, 200, "b"))
		if d, ok := l.p.NextAckDeadlineMs(); !ok || d != 200 {
			t.Errorf("next deadline %d %v, want 200", d, ok)
		}
		l.p.ExpireAcks(250)
		if got := l.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{2, codeRequestTimedOut}}) {
			t.Errorf("at 250: %v, want request 2 timed out", got)
		}
		l.p.ExpireAcks(300)
		if got := l.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{1, codeRequestTimedOut}}) {
			t.Errorf("at 300: %v, want request 1 timed out", got)
		}
		if _, ok := l.p.NextAckDeadlineMs(); ok {
			t.Errorf("a deadline remains with no waiter")
		}
	})
	t.Run("leadership lost", func(t *testing.T) {
		l, _, _ := cluster3(testConfig(0), []int32{1, 2, 3})
		must(t, l.produce(AcksAll, 1, 0, 300, "a"))
		l.apply(state(2, 1, 1, []int32{1, 2, 3}, []int32{2, 3}), 1)
		if got := l.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{1, codeNotLeaderOrFollower}}) {
			t.Errorf("after demotion: %v, want NOT_LEADER_OR_FOLLOWER", got)
		}
	})
	t.Run("ISR shrinks below min", func(t *testing.T) {
		l, f2, _ := cluster3(testConfig(0), []int32{1, 2})
		must(t, l.produce(AcksAll, 1, 0, 100_000, "a"))
		fetchOnce(f2, l, 1)
		if !l.p.MaybeShrinkISR(20_000) {
			t.Fatalf("no shrink")
		}
		answer(t, l, 0, 20_001)
		if got := l.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{1, codeNotEnoughReplicasAfterAppend}}) {
			t.Errorf("after the ISR fell to [1]: %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", got)
		}
	})
}

func TestAckOutcome(t *testing.T) {
	cases := []struct {
		hw, required int64
		isrSize, min int
		ignore       bool
		done         bool
		want         int16
	}{
		{hw: 4, required: 5, isrSize: 3, min: 2, done: false},
		{hw: 5, required: 5, isrSize: 3, min: 2, done: true},
		{hw: 9, required: 5, isrSize: 1, min: 2, done: true, want: codeNotEnoughReplicasAfterAppend},
		{hw: 9, required: 5, isrSize: 1, min: 2, ignore: true, done: true},
	}
	for _, c := range cases {
		done, got := ackOutcome(c.hw, c.required, c.isrSize, c.min, c.ignore)
		if done != c.done || got != c.want {
			t.Errorf("%+v: done %v code %d", c, done, got)
		}
	}
}

func TestEarlyAckBugAcknowledgesOnAppend(t *testing.T) {
	cfg := testConfig(0)
	cfg.Bugs.EarlyAck = true
	l, _, _ := cluster3(cfg, []int32{1, 2, 3})
	must(t, l.produce(AcksAll, 7, 0, 100, "a"))
	if got := l.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{7, 0}}) || l.p.HighWatermark() != 0 {
		t.Errorf("early-ack: %v at HW %d, want request 7 acknowledged at HW 0", got, l.p.HighWatermark())
	}
}

func TestISRMinIgnoredBugAcknowledgesUnderMinISR(t *testing.T) {
	cfg := testConfig(0)
	cfg.Bugs.ISRMinIgnored = true
	l, _, _ := cluster3(cfg, []int32{1})
	must(t, l.produce(AcksAll, 7, 0, 100, "a"))
	if got := l.p.TakeAckResults(); !cmp.Equal(got, []AckResult{{7, 0}}) || l.p.HighWatermark() != 1 {
		t.Errorf("isr-min-ignored: %v at HW %d, want request 7 acknowledged at HW 1", got, l.p.HighWatermark())
	}
}
