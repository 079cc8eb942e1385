// Package quorum is Strand's Raft for the controller voters: leader
// election with pre-vote and check-quorum, replication of the metadata log,
// and the commit rule, as Kafka's KRaft runs them (KIP-595, KIP-996).
//
// # Shape: a pure state machine
//
// Raft is a state machine with no clock, no network and no disk, in the
// style of etcd-io/raft's RawNode. The caller feeds it messages (Step) and
// time (Tick), and takes a Ready: the hard state and log entries to persist,
// the messages to send, the entries newly committed. NextDeadlineMs says
// when Tick next has anything to do (an election or fetch timeout, a fetch
// to resend, a parked fetch to answer, check-quorum, a BeginQuorumEpoch to
// resend); a Tick before it changes nothing, so the caller ticks at the
// deadline, as KRaft's client polls until its next timeout, and not on a
// fixed period. The caller performs
// that I/O and then calls Advance. The one contract that makes Raft safe is
// written here, once:
//
//	Persist Ready.HardState and Ready.Entries (after Ready.TruncateTo), wait
//	for the Sync to complete, and only then send Ready.Messages and call
//	Advance.
//
// So a vote is answered only after the vote is durable, and a follower's
// next Fetch, which is its acknowledgement, leaves only after the entries it
// acknowledges are durable. The leader counts its own entries only once
// Advance reports them durable. env.File.Sync is asynchronous, which is
// exactly this shape: the driver sends the messages from the Sync's
// completion.
//
// Every random choice (the election timeout jitter) comes from
// Config.RandInt63n, which the environment seeds; core/ may not use
// math/rand.
//
// # Replication: pull, as KRaft does
//
// Followers replicate by Fetch (key 1) from the leader, with FetchOffset
// (their log end offset) and LastFetchedEpoch; the leader checks that the
// pair is consistent with its own log and otherwise answers with a
// DivergingEpoch {Epoch, EndOffset} at which the follower truncates and
// fetches again (KIP-595's reconciliation, the analogue of Raft's
// AppendEntries consistency check). A voter's FetchOffset is its match
// offset: the leader computes the high watermark (commit offset) as the
// largest offset a majority of voters has fetched past, and only an offset
// whose preceding entry carries the current epoch can commit by counting
// (Raft §5.4.2); a new leader therefore appends a leader-change entry of its
// epoch first, as KRaft appends its LeaderChangeMessage.
//
// Pull was chosen over etcd's push (AppendEntries) because it is Kafka's
// protocol: brokers already follow __cluster_metadata-0 with ordinary
// Fetch requests, so voters and observers (brokers) read the log with one
// mechanism, and the leader keeps no per-follower send window. The cost is
// latency of one fetch round trip per commit; the leader parks a fetch with
// nothing new (long poll) and answers it as soon as its log or high
// watermark moves.
//
// # Elections
//
// Epochs play Raft's terms. A follower that hears nothing from its leader
// for FetchTimeoutMs (an unattached voter: for a jittered election timeout)
// becomes prospective and asks for pre-votes (VoteRequest with PreVote,
// KIP-996) without bumping its epoch; voters grant a pre-vote only if the
// candidate's log is at least as up to date as theirs and they have not
// heard from a leader within FetchTimeoutMs. With a majority of pre-votes it
// becomes a candidate: epoch+1, a vote for itself, persisted, then real
// VoteRequests. A voter grants at most one vote per epoch (the vote is
// persisted before the answer) and only to an up-to-date log. The winner
// sends BeginQuorumEpoch to the voters. Check-quorum: a leader that has not
// been fetched from by a majority within 1.5 × FetchTimeoutMs resigns.
//
// # Snapshots
//
// The state machine hands Raft a snapshot of its state at an applied offset
// (TakeSnapshot); once a Ready has made it durable, the log behind it is
// dropped. A follower whose fetch falls below the leader's log start (or
// whose last fetched epoch predates it) gets the snapshot's id in the Fetch
// response, reads it with FetchSnapshot in chunks, and installs it: its log
// restarts at the snapshot's end and its state machine loads the snapshot.
//
// # Resignation
//
// Resign (a controlled shutdown; check-quorum failing) sends
// EndQuorumEpoch to the voters with the best-placed (longest match) first;
// they forget the leader and stand after a backoff that grows with their
// place, so a hand-over takes about a round trip, not a fetch timeout.
//
// # Messages
//
// Message is the protocol's own struct; codec.go maps it to and from Kafka's
// own RPCs in kmsg (Vote 52, BeginQuorumEpoch 53, EndQuorumEpoch 54, Fetch 1
// on __cluster_metadata-0, FetchSnapshot 59), so messages cross the network
// encoded as any other Kafka request. Entries travel in Fetch responses as
// RecordBatch v2, one batch per entry, its PartitionLeaderEpoch the entry's
// epoch.
//
// # Storage and the driver
//
// Storage persists a Ready on an env.Disk: quorum-state (Kafka's file
// name, JSON), quorum.log (CRC'd entries) and <offset>-<epoch>.checkpoint
// snapshots, and calls back once everything is durable. Node is the thin
// driver: it steps peers' requests in (HandleRequest), ticks Raft on
// env.Clock at its next deadline (one timer, moved only to an earlier
// deadline: a follower pushes its timeouts later at every Fetch answer,
// and a timer that fires early finds nothing to do and is armed again),
// persists each Ready through Storage and only then sends its messages over
// env.Network, applies committed entries through an Applier, and advances.
//
// IsVoterRequest names the traffic between voters; networks carry it on
// connections of its own, as KRaft's Raft client has: a connection answers
// in order, and a controller RPC's answer waits for a commit that may need
// the follower's Fetch answer queued behind it.
//
// # Observing safety
//
// Config.Observer, nil in production, is told of each durable vote, each
// new leader, each move of a leader's commit offset and each application
// of committed entries, as they happen; the simulator's checkers judge
// Raft's safety properties on these (sim/cluster/raftcheck.go).
//
// # For the controller
//
// MetadataQuorum implements core/controller's Quorum interface over a Node,
// one entry per metadata record so that entry offsets are record offsets;
// the leader-change entry reads as a NoOpRecord. A controller decision (one
// Append) is made atomic by the adapter: its entries carry their index and
// the decision's size, CommittedOffset stops before a decision not yet
// wholly committed, and a decision cut short by a change of leader is
// aborted and skipped by every reader (metadata_quorum.go). The adapter
// reports commits, changes of role, epoch or leader (Node calls it on every
// pump), failures and snapshots to the callbacks the controller registers
// with Listen. The controller does not take snapshots yet.
//
// # What it must not do
//
// It is part of core/: no goroutines, no clock, no I/O, no randomness but
// the injected source, no map order reaching messages. Planted bugs travel
// in Config.Bugs, never in globals.
package quorum
