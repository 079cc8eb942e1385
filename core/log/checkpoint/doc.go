// Package checkpoint reads and writes Kafka's small checkpoint files, and
// writes them atomically and durably without blocking the event loop.
//
// Two text formats, both Kafka's CheckpointFile layout (a version line 0, a
// count line, then one entry per line):
//
//	leader-epoch-checkpoint:            "<epoch> <startOffset>"
//	recovery-point-offset-checkpoint,
//	replication-offset-checkpoint,
//	log-start-offset-checkpoint:        "<topic> <partition> <offset>"
//
// A Writer replaces one file by writing <name>.tmp, syncing it, renaming it
// over <name> and syncing the directory. The syncs are asynchronous in env, so
// the steps chain through callbacks; writes to one file are serialized and
// coalesced (a newer write waits for the one in flight, and only the newest
// waiting content is written).
//
// It must not reach the disk except through env.Disk, and must not block.
package checkpoint
