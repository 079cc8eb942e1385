// Package workload is the simulator's clients: producers (acks 0, 1 and
// all, retrying retriable errors; some idempotent, with producer ids and
// sequence numbers), consumers that fetch up to the high watermark from the
// leader Metadata names (one fetch in Config.FollowerFetchOneIn from a
// follower it names, KIP-392), consumer-group members speaking the classic group
// protocol, an admin client that creates the topics and churns some of
// them (delete, re-create, add partitions), and a deleter that moves log
// starts with DeleteRecords (deletes.go; consumers below the log start move
// to the earliest offset), a forger that sends control-plane requests
// no client may make (forger.go), and, in the hostile shape, hostile
// clients that hold stalled requests and idle connections against the
// brokers' connection limits (hostile.go). They speak kmsg requests over
// simnet client connections, exactly as real clients speak them over TCP,
// and record every operation, with its call and return times in virtual
// nanoseconds, into a models.History and models.GroupHistory for the
// checkers.
//
// Every produced record carries a unique value, "p<client>-<seq>", so that
// the checkers can tell every record apart; a retry resends the same
// values.
//
// Clients are sched nodes. Producers, consumers and the admin client never
// crash; a group member's process crashes and restarts (group.go), losing
// everything in flight. Everything runs on the scheduler's goroutine;
// randomness comes only from the stream handed to New. This package must
// not read real time, start goroutines, or let map iteration order reach
// the schedule.
package workload
