// Package cluster is the simulator's harness: it builds a Strand cluster
// for a scenario on one seeded scheduler (sim/sched), with a network
// (sim/simnet), per-node clocks (sim/simclock) and disks (sim/memdisk),
// runs the clients of sim/workload against it under swarm faults, heals
// everything, demands convergence within a bounded simulated time, and
// hands the history and the final state to the checkers of models/.
//
// # The cluster
//
// Every node is a broker, and the first three (VotersMax) are also the
// controller voters of controller.quorum.voters (process.roles
// broker,controller, as examples/three-nodes deploys them): the metadata
// log is replicated by core/quorum's Raft among them, and every fault
// class below reaches the voters as it reaches any broker (their crashes
// count against the same budget, so within budget at most one of three
// voters is unrecovered at once; disk faults reach the metadata log too).
// Each node is a sched.Node with its simclock, its memdisk (completions
// posted to the node, crashes hooked through OnCrash) and a simnet NodeNet
// that outlives incarnations; a restart rebuilds core/broker's Node from
// what the disk kept. The shape elections adds faults.electionStep: slow
// links between the voters and repeated crashes of the active controller,
// where split votes happen.
//
// # Raft checks
//
// raftChecker is every voter's quorum.Observer and checks, as each
// decision is made: one durable vote per voter and epoch, one leader per
// epoch, the commit rule (a majority holds the entry below a new commit
// offset), leader completeness, and state machine safety (every node
// applies the committed entry at each offset); log matching is polled
// every second. The AlterPartition exchanges the nodes' networks carry are
// recorded (metadata_history.go) for models.CheckMetadataRegisters, with
// the admin client's topic operations.
//
// # Faults (simulator issue §2), each class's rate drawn from the seed
//
//   - network: simnet.DrawFaults and StartChaos (latency, tails, resets,
//     black holes, partitions symmetric or not, isolation, clogs);
//   - process: sched.StartProcessChaos over the brokers (pauses, crashes,
//     restarts). Each crash is a process crash that keeps the page cache
//     or a power loss (memdisk CrashLoseAll or CrashTorn), after which the
//     disk may also show a corrupted or truncated log tail beyond the
//     recovery point;
//   - disk: ENOSPC periods, failed fsyncs, and background writeback now
//     and then;
//   - clock: simclock.DrawFaults and StartChaos (skew, drift, jumps).
//
// # The fault budget (CLARIFICATIONS.md), per partition
//
// Each seed draws "within budget" or "over budget". The budget is kept per
// partition (faults.admitLoss): every fault that may cost a replica its
// unsynced data counts, a crash whether or not it keeps the page cache
// (the restarted broker cannot tell what it lost, registers as unclean and
// leaves the ISR and ELR, KIP-966, just as after a power loss) and a disk
// fault (ENOSPC or a failed fsync takes the log directory offline; Kafka
// halts such a broker). Within budget, a fault is refused when one of the
// broker's partitions would have more than min.insync.replicas−1 replicas
// unrecovered; over budget every fault goes ahead and those partitions are
// marked over budget. A replica is recovered once every running broker's
// metadata has its broker's new incarnation registered, it is back in the
// partition's ISR with every record acknowledged before it lost data, and
// its disk has no armed fault and failed nothing since it started. Only
// losses (models.Violation.Loss) on a partition over its budget are
// excused, and reported; a group's lost commits are its offsets
// partition's. At heal time a broker whose disk failed something restarts
// at once, uncleanly, as Kafka's halt leaves it (its fault was counted when
// drawn); one whose disk failed nothing must shut down cleanly
// ("controlled-shutdown"). The
// sync-every-batch shape lets every fault through and still demands that
// nothing acknowledged is lost.
//
// # The liveness phase
//
// At a drawn time every fault heals: network, clocks, disks; crashed
// brokers restart; brokers whose disk failed something restart at once,
// and those whose disk faulted without failing anything are restarted
// through a controlled shutdown (clean, so they stay eligible).
// Producers stop shortly after, and a second later the deleter's last
// DeleteRecords round moves log starts. The quiet check (quiet.go) comes
// next, before anything else is produced: every settled partition's
// followers must hold the leader's HW and at least its log start, and a
// DeleteRecords to that log start must complete. Then a controller must be
// active, every partition must accept an acks=all write again, every
// request must be answered, and the replicas must converge (identical logs
// from the leader's log start to the high watermark, one leader everyone
// agrees on) within the convergence window. Failing to converge is a
// violation.
//
// # Invariants the harness checks itself
//
// Besides models' checkers: after every power loss each log must still
// reach its checkpointed recovery point, read from a checkpoint that must
// parse ("synced-kept": recovery never drops a synced batch); a node that
// cannot restart, a panic, a malformed frame or a damaged batch reaching a
// consumer is a violation. The history checkers run after a halt too, on
// what the clients were told so far. The harness samples where every
// leader epoch starts (for the HW model) and keeps the records of every
// partition segment a broker deletes (for CheckFinal's deleted records).
//
// # Timeouts scaled down (they keep the protocol's behaviour)
//
// broker.session.timeout.ms 3000 (Kafka 9000), broker.heartbeat.interval.ms
// 500 (2000), replica.lag.time.max.ms 3000 (30000): so that fencing and ISR
// shrinking happen within a 30-second run. Produce TimeoutMillis is 2000
// and the clients' own request timeout 5 s.
//
// This package must not start goroutines while a run is in progress (a run
// belongs to one goroutine; separate seeds may run in parallel), read real
// time inside a run, or let map iteration order reach the schedule.
package cluster
