package workload

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

// hostile is a client that attacks the brokers' connection limits (SPEC.md
// §7.2): on every broker it keeps HostileConnsPerBroker connections open, past
// max.connections.per.ip, a third of them claiming a request of
// HostileFrameBytes and sending a quarter of it, then nothing (a partial
// frame, which holds its plane's budget until the read deadline), a third
// sending nothing at all (until connections.max.idle.ms), and a third
// asking unreadRequests Metadata of every topic and never reading the
// answers (until strand.response.write.timeout.ms). Every
// connection the broker refuses or closes is opened again after
// HostileBackoffNs. It records nothing in the history: the checkers judge
// the honest clients, and the liveness phase demands that they and the
// quorum make progress while it attacks, which it does until the run
// ends.
type hostile struct {
	w      *Workload
	client *client
	// opened counts connections opened, ended those the broker refused or
	// closed.
	opened, ended int
}

// newHostile adds a hostile client.
func (w *Workload) newHostile() *hostile {
	return &hostile{w: w, client: w.newClient("hostile")}
}

// hostileKind is what one hostile connection does.
type hostileKind int

const (
	hostilePartial hostileKind = iota
	hostileIdle
	hostileUnread
	hostileKinds
)

// unreadRequests is how many Metadata requests an unread connection sends:
// their answers pass the broker's socket send buffer, so its write stalls.
const unreadRequests = 400

// start opens the connections to every broker.
func (h *hostile) start() {
	for _, b := range h.w.cfg.Brokers {
		for i := range h.w.cfg.HostileConnsPerBroker {
			h.open(b, hostileKind(i)%hostileKinds)
		}
	}
}

// open opens one connection of kind to broker, and opens it again once the
// broker ends it.
func (h *hostile) open(broker env.NodeID, kind hostileKind) {
	h.opened++
	cc, err := h.client.host.Dial(broker, func(error) {
		h.ended++
		h.client.proc.After(h.w.cfg.HostileBackoffNs, func() { h.open(broker, kind) })
	})
	if err != nil {
		panic(fmt.Sprintf("workload: hostile client dialing broker %d: %v", broker, err))
	}
	switch kind {
	case hostilePartial:
		claimed := h.w.cfg.HostileFrameBytes
		cc.SendPartial(claimed, int(claimed/4))
	case hostileUnread:
		cc.StopReading()
		for range unreadRequests {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(12)
			cc.Send(req, func(kmsg.Response, error) {}) // never read
		}
	}
}

// hostileStats summarises the hostile clients for the run's stats line.
func (w *Workload) hostileStats() string {
	if len(w.hostiles) == 0 {
		return ""
	}
	opened, ended := 0, 0
	for _, h := range w.hostiles {
		opened += h.opened
		ended += h.ended
	}
	return fmt.Sprintf(" hostile_conns=%d hostile_ended=%d", opened, ended)
}

// HostileEnded counts the hostile clients' connections the brokers refused
// or closed so far: a run whose hostile clients met no limit proves
// nothing about them.
func (w *Workload) HostileEnded() int {
	ended := 0
	for _, h := range w.hostiles {
		ended += h.ended
	}
	return ended
}
