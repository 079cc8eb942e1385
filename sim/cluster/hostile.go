package cluster

import (
	"fmt"

	"strand/models"
	"strand/sim/workload"
)

// The hostile shape (SPEC.md §6.1, §7.2):
// hostile clients (workload/hostile.go) attack every broker's connection
// limits for the whole run, liveness phase included, while the honest
// clients and the quorum must make progress as in any other shape: the
// liveness phase's acks=all probe and convergence are demanded under
// attack. The brokers run with small limits so that the attack reaches
// them: two stalled requests fill a broker's client plane.

// hostileLimits are the server.properties of a hostile shape's brokers.
func hostileLimits() map[string]string {
	return map[string]string{
		"socket.request.max.bytes":             fmt.Sprint(hostileFrameBytes),
		"queued.max.request.bytes":             fmt.Sprint(hostileFrameBytes),
		"strand.connection.buffered.bytes.max": fmt.Sprint(hostileFrameBytes),
		"queued.max.requests":                  "16",
		"max.connections":                      "64",
		"max.connections.per.ip":               "6",
		"strand.request.read.timeout.ms":       "1500",
		// Longer than the clients' request timeout (5 s): a request whose
		// bytes a partition holds back leaves its connection idle on the
		// broker's side, and an idle close then would look, to the forger's
		// check, like the broker closing on the request.
		"connections.max.idle.ms": "6000",
		// A client that does not read is closed within the run.
		"strand.response.write.timeout.ms": "3000",
	}
}

// hostileFrameBytes is socket.request.max.bytes in the hostile shape, and
// the size the hostile clients' requests claim: at the limit.
const hostileFrameBytes = 1 << 20

// hostileWorkload is the hostile clients' part of the workload: each keeps
// eight connections per broker, past max.connections.per.ip.
func hostileWorkload(cfg *workload.Config, shape Shape) {
	cfg.HostileClients = shape.HostileClients
	cfg.HostileConnsPerBroker = 8
	cfg.HostileFrameBytes = hostileFrameBytes
	cfg.HostileBackoffNs = 200e6
}

// checkHostile fails a hostile run whose attack met no limit: it would
// prove nothing about them.
func (r *run) checkHostile() []models.Violation {
	if r.shape.HostileClients == 0 {
		return nil
	}
	stats := r.c.Net.AdmissionStats()
	if r.w.HostileEnded() == 0 || stats.Refused == 0 || stats.ReadTimeouts == 0 || stats.WriteTimeouts == 0 {
		return []models.Violation{{Check: "hostile", Detail: fmt.Sprintf(
			"the hostile clients met no limit (%d connections ended; %s)", r.w.HostileEnded(), stats)}}
	}
	return nil
}
