// Package simnet is the simulator's network: an env.Network for every
// simulated node, and connections for simulated clients, all driven by the
// scheduler in virtual time and all subject to seeded faults.
//
// # What crosses the network
//
// Every request and response is encoded by core/wire into a frame, exactly as
// realnet writes it to a socket, and decoded by core/wire on the other side
// (CLARIFICATIONS.md, "Environment interfaces"). Each frame has its own
// buffer, which is never reused, because decoded []byte fields alias it.
//
// This holds for every message in every run. Passing the kmsg structs
// directly for a seeded fraction of messages (which CLARIFICATIONS.md
// allows if the codec is too slow) was measured and rejected. A direct pass
// must hand the receiver a deep copy: the sender may keep or retry what it
// sent, and the receiver may change what it got (the broker stamps offsets
// into a Produce's batch bytes in place and keeps them in its log), so
// sharing any slice lets one end see the other's mutations. Decoding a fresh
// frame already is such a copy, and a generic (reflection) deep copy of a
// 1 KiB Produce costs about twice its encode and decode, while the codec is
// about a tenth of a standard run's CPU.
//
// # The connection model: TCP, not datagrams
//
// A connection delivers its frames in order, each direction FIFO, and never
// duplicates or silently reorders them. What TCP does instead, simnet does:
//   - delay: each frame takes a drawn latency, but never overtakes the frame
//     before it on its connection;
//   - break: a connection can be reset (a fault, or an end crashing). Frames
//     in flight are lost and each surviving end is told after a short delay:
//     a node through Handler.HandleClosed, a sender through its callbacks;
//   - close: either end may close. Frames it already sent still arrive, then
//     the other end is told (FIN). A request the client sent before closing
//     can thus reach the broker after the client retried it on a new
//     connection: that is how reordering and duplication appear on TCP, and
//     why simnet models them across connections, not within one;
//   - partitions: a frame due on a blocked link waits and is retransmitted
//     until the link heals or the connection times out and breaks. Rarely
//     the connection instead becomes a black hole: it and every later frame
//     in that direction vanish silently, and only the sender's own timeout
//     can tell (a half-open connection).
//
// Responses on a connection leave in request order: the Network holds back a
// reply until every earlier request on its connection is answered or skipped.
// A node's Close is in request order too (env.Network.Close): it takes the
// place of an answer, so the responses to earlier requests leave first, then
// the FIN; requests that arrive after the one closed on are never delivered,
// as Kafka, reading one request per connection at a time, never reads them.
//
// # Listeners and principals
//
// A node has named listeners (SetListeners; ListenersOf a configuration)
// and a connection is made to one of them: every request delivered carries
// the listener's name and the connection's principal in its
// env.RequestHeader, as realnet sets them from the socket. simnet does no
// handshake: a connection to a secured listener has the principal of the
// host that dialled it (SetPrincipal), one to an unsecured listener
// User:ANONYMOUS. A node's own requests go to the peer listener its route
// names (SetRoute: broker.PeerListener), each listener on a connection of
// its own.
//
// # Connection limits
//
// A node the harness gives limits (NodeNet.SetAdmission) admits client
// connections, holds their requests' bytes and closes them at their
// deadlines by the same core/admission rules realnet enforces, in virtual
// time; a client can send a request that never completes
// (ClientConn.SendPartial). See admission.go for what is modelled.
//
// # Processes
//
// Each host is a sched.Node. Frames are delivered as node events, so a
// paused host receives nothing until it resumes, and a crashed host's
// connections break. Callbacks run on the host's event loop, never
// concurrently with anything else.
//
// This package must not start goroutines, touch real sockets or time, or
// iterate a map where the order could reach the schedule.
package simnet
