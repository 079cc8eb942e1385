// Package realnet is the production environment around one core node
// (core/broker): a real event loop, a real clock, and Kafka's wire protocol
// on real TCP, for clients and for node-to-node traffic. Together with
// diskio it is what `strand serve` deploys.
//
// # Goroutines
//
//   - The event loop (Loop) owns the core. Every call into the node runs
//     on it, one at a time, in the order it was posted: decoded requests,
//     connection closes, timer fires, Sync completions from diskio,
//     responses to the node's own outgoing requests (core/env's event-loop
//     contract). It is a combining loop: the goroutine that posts into an
//     idle loop runs it (a connection reader runs its own request), and the
//     loop's own goroutine (Loop.Run) takes over long queues and the posts
//     of diskio's Sync worker, which must not run the core. Client
//     connections' events queue apart from the control plane's, which gets
//     at least every other turn.
//   - Per listener, an accept goroutine, which asks the node's connection
//     quotas (admission.Gate) about each connection. The broker listeners
//     start only once the core has caught up with the metadata log and been
//     unfenced (broker.Config.OnInitialUnfence), as Kafka's do; the
//     controller listeners at once.
//   - One reaper per node (Network.reap), which closes connections that
//     overstay connections.max.idle.ms, strand.request.read.timeout.ms or
//     strand.response.write.timeout.ms, and logs refused connections.
//   - Per client connection, a reader (size prefix, socket.request.max.bytes
//     checked before anything is reserved, the frame's budget reserved and
//     its buffer grown only as its bytes arrive, a fresh buffer per frame
//     because kmsg's []byte fields alias it, wire.ParseRequest against the versions the
//     node accepts (broker.Node.AcceptedVersions: what it advertises, plus
//     the voters' Raft Fetch) and the request limits, then the core's
//     pre-check (the env.Prechecker the loop last published), which takes
//     a Produce's decompression and record checks off the loop) and a
//     writer that sends responses in request order; a Fetch's record
//     batches go from the segment files with sendfile (framewriter.go). A
//     response made only of bytes that is next in line while the writer is
//     idle is written by the loop itself, with one non-blocking writev;
//     the writer finishes what the socket did not take. A close, asked for
//     by the core (env.Network.Close) or for a frame the reader refuses,
//     is in request order: the answers to earlier requests are written
//     first, then the FIN, and no request behind it reaches the core
//     (serverConn.closeAt).
//   - Per peer and plane (controller RPCs, Raft traffic between voters,
//     or inter-broker: peers.go), one outbound connection with a writer
//     that dials, reconnects with backoff and pipelines (a request that
//     finds nothing queued is written by the loop, as above), and a
//     reader that matches responses by correlation id.
//
// # Limits
//
// Every queue is bounded by a named configuration key
// (CLARIFICATIONS.md, "Validation and limits"; SPEC.md §7.2), decided by the pure core/admission types this package
// wraps with its mutexes (admission.go): the connection quotas
// (max.connections per pool, listener.name.<l>.max.connections,
// max.connections.per.ip, max.connection.creation.rate),
// queued.max.requests and queued.max.request.bytes (requests being read or
// waiting for the core, per plane, reserved as their bytes arrive),
// strand.connection.requests.in.flight.max and
// strand.connection.buffered.bytes.max (per connection, until the response is
// written). At a limit the reader stops reading that connection, as Kafka
// mutes a channel: backpressure, not an error. The produce pre-checks'
// decompression buffers, over all connections, wait for room under
// strand.produce.decompression.buffer.bytes.max. A request over the
// strand.request.* limits (topics, partitions, entries, tagged fields),
// found before it is decoded, closes its connection. Deadlines end what
// backpressure cannot: a request that stalls, a client that does not read,
// a connection left idle.
//
// # What it must not do
//
// It never calls into the core except on the event loop (the published
// env.Prechecker, immutable and safe on any goroutine, is the one
// exception), never decides
// protocol behaviour (that is core/'s), and never panics on bad input: a
// malformed or unknown request closes its connection (after the answers
// to the requests before it), an unsupported
// ApiVersions gets KIP-511's answer.
package realnet
