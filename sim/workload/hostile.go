package workload

import (
	"fmt"

	"strand/core/env"
)

// hostile is a client that attacks the brokers' connection limits (SPEC.md
// §7.2): on every broker it keeps HostileConnsPerBroker connections open, past
// max.connections.per.ip, half of them claiming a request of
// HostileFrameBytes and sending a quarter of it, then nothing (a partial
// frame, which holds its plane's budget until the read deadline), the
// other half sending nothing at all (until connections.max.idle.ms). Every
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

// start opens the connections to every broker.
func (h *hostile) start() {
	for _, b := range h.w.cfg.Brokers {
		for i := range h.w.cfg.HostileConnsPerBroker {
			h.open(b, i%2 == 0)
		}
	}
}

// open opens one connection to broker, with a partial frame or idle, and
// opens it again once the broker ends it.
func (h *hostile) open(broker env.NodeID, partial bool) {
	h.opened++
	cc, err := h.client.host.Dial(broker, func(error) {
		h.ended++
		h.client.proc.After(h.w.cfg.HostileBackoffNs, func() { h.open(broker, partial) })
	})
	if err != nil {
		panic(fmt.Sprintf("workload: hostile client dialing broker %d: %v", broker, err))
	}
	if partial {
		claimed := h.w.cfg.HostileFrameBytes
		cc.SendPartial(claimed, int(claimed/4))
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
