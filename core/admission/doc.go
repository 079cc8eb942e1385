// Package admission is the accounting that decides what a node's network
// takes from its connections (SPEC.md §7.2):
//
//   - Gate admits, throttles or refuses a new connection by Kafka's
//     connection quotas: max.connections, listener.name.<l>.max.connections,
//     max.connections.per.ip (with its overrides) and
//     max.connection.creation.rate, with the controller listeners counted
//     apart and a dedicated inter-broker listener exempt from the
//     broker-wide limits, as in Kafka's ConnectionQuotas; it counts the
//     refusals and says when they are due to be logged.
//   - Budget is one plane's share of queued.max.requests and
//     queued.max.request.bytes: the requests being read or queued for the
//     core, reserved as their bytes arrive. The control plane (controller
//     listeners, replication) has a budget of its own, so that no client
//     load can starve it.
//   - FrameBytes says how much buffer a frame being read may have: a
//     bounded multiple of the bytes that have arrived.
//   - ConnAccount is one connection's share (strand.connection.buffered.bytes.max)
//     and the times its deadlines run from: connections.max.idle.ms,
//     strand.request.read.timeout.ms and strand.response.write.timeout.ms.
//
// It is pure and deterministic: time is an input, in milliseconds; nothing
// locks, waits or starts a goroutine. realnet wraps each type with its own
// mutex and the real clock; simnet drives the same types in virtual time,
// so that the simulator's hostile clients meet the rules production
// enforces. Every count is checked against going negative: a release
// without its reservation is a bug in the caller, and panics.
package admission
