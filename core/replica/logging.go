package replica

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"strand/core/env"
)

// This file holds the partition's operator log lines (Config.Log), worded
// after the lines Kafka's Partition and fetcher threads log at INFO and
// WARN. They are written after a decision is made and read only state the
// decision already settled, so removing them changes nothing.

// logTransition logs a change of role or leader epoch: Kafka's "starts at
// leader epoch" lines of makeLeader and makeFollower.
func (p *Partition) logTransition(before PartitionState, t Transition) {
	l := p.cfg.Log
	if !l.Enabled(slog.LevelInfo) {
		return
	}
	common := []slog.Attr{
		slog.Int("leader_epoch", int(p.state.LeaderEpoch)),
		slog.Int("partition_epoch", int(p.state.PartitionEpoch)),
		slog.Int64("log_end_offset", p.log.LogEndOffset()),
		slog.Int64("high_watermark", p.hw),
		env.IDs("isr", p.state.ISR),
		slog.Int("previous_leader", int(before.LeaderID)),
		slog.Int("previous_leader_epoch", int(before.LeaderEpoch)),
	}
	if t.TruncateToOffset != NoOffset {
		// A new leader drops batches of an epoch no leader has held
		// (corruptEpochStart); the broker truncates before anything else.
		common = append(common, slog.Int64("truncate_to_offset", t.TruncateToOffset))
	}
	if t.Role == RoleLeader {
		l.Info("became leader", append(common, env.IDs("replicas", p.state.Replicas))...)
		return
	}
	l.Info("became follower", append(common, slog.Int("leader", int(p.state.LeaderID)))...)
}

// logTruncation logs a follower's decision to truncate its log to offset,
// and why (Kafka's fetcher: "Truncating partition ... due to ...").
func (p *Partition) logTruncation(offset int64, reason string, attrs ...slog.Attr) {
	l := p.cfg.Log
	if !l.Enabled(slog.LevelInfo) {
		return
	}
	line := []slog.Attr{
		slog.Int64("truncate_to_offset", offset),
		slog.Int64("log_end_offset", p.log.LogEndOffset()),
		slog.Int64("log_start_offset", p.log.LogStartOffset()),
		slog.Int("leader", int(p.state.LeaderID)),
		slog.Int("leader_epoch", int(p.state.LeaderEpoch)),
		slog.String("reason", reason),
	}
	l.Info("truncating log", append(line, attrs...)...)
}

// logISRChange logs an AlterPartition proposal: Kafka's "Shrinking ISR
// from ... to ..." and "Expanding ISR from ... to ...".
func (p *Partition) logISRChange(msg string, newISR []int32, attrs ...slog.Attr) {
	l := p.cfg.Log
	if !l.Enabled(slog.LevelInfo) {
		return
	}
	line := []slog.Attr{
		env.IDs("isr", p.state.ISR),
		env.IDs("new_isr", newISR),
		slog.Int("leader_epoch", int(p.state.LeaderEpoch)),
		slog.Int("partition_epoch", int(p.state.PartitionEpoch)),
		slog.Int64("high_watermark", p.hw),
		slog.Int64("log_end_offset", p.log.LogEndOffset()),
	}
	l.Info(msg, append(line, attrs...)...)
}

// logISRUpdated logs a committed ISR change on the leader, whether the
// AlterPartition answer or the controller's pushed state brought it
// (Kafka's "ISR updated to ... and version updated to ...").
func (p *Partition) logISRUpdated() {
	if !p.cfg.Log.Enabled(slog.LevelInfo) {
		return
	}
	p.cfg.Log.Info("ISR updated", env.IDs("isr", p.state.ISR),
		slog.Int("partition_epoch", int(p.state.PartitionEpoch)), slog.Int("leader_epoch", int(p.state.LeaderEpoch)))
}

// logAlterPartitionError logs the controller's refusal of an ISR change:
// INFO when it ends or parks the proposal, DEBUG when the same proposal is
// simply sent again (NOT_CONTROLLER and other retriable errors come back
// at every retry while the controller moves, as Kafka logs them at DEBUG).
func (p *Partition) logAlterPartitionError(newISR []int32, code int16) {
	level := slog.LevelInfo
	switch code {
	case codeOperationNotAttempted, codeIneligibleReplica, codeFencedLeaderEpoch, codeInvalidUpdateVersion,
		codeUnknownTopicOrPartition, codeUnknownTopicID, codeInvalidRequest, codeNewLeaderElected:
	default:
		level = slog.LevelDebug
	}
	if !p.cfg.Log.Enabled(level) {
		return
	}
	attrs := []slog.Attr{env.IDs("isr", p.state.ISR), env.IDs("new_isr", newISR),
		slog.String("error", errorName(code)), slog.Int("leader_epoch", int(p.state.LeaderEpoch)),
		slog.Int("partition_epoch", int(p.state.PartitionEpoch))}
	if level == slog.LevelDebug {
		p.cfg.Log.Debug("AlterPartition failed; retrying", attrs...)
		return
	}
	p.cfg.Log.Info("AlterPartition refused", attrs...)
}

// outOfSyncDetail describes the ISR members a shrink removes, as Kafka's
// "Out of sync replicas: (brokerId: 3, endOffset: 10, lastCaughtUpTimeMs: 5)",
// with the lag instead of the time (a monotonic reading means nothing to a
// reader).
func (p *Partition) outOfSyncDetail(ids []int32, nowMs int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString("replica ")
		b.WriteString(strconv.Itoa(int(id)))
		f := p.leader.progress(id)
		if f == nil {
			b.WriteString(" (never fetched)")
			continue
		}
		b.WriteString(" (end offset ")
		b.WriteString(strconv.FormatInt(f.logEndOffset, 10))
		if f.lastCaughtUpTimeMs == neverCaughtUpMs {
			b.WriteString(", never caught up in this leader epoch")
		} else {
			b.WriteString(", last caught up ")
			b.WriteString(strconv.FormatInt(nowMs-f.lastCaughtUpTimeMs, 10))
			b.WriteString(" ms ago")
		}
		b.WriteString(")")
	}
	return b.String()
}

// errorName is a Kafka error code's name, as "NOT_LEADER_OR_FOLLOWER".
func errorName(code int16) string {
	var kerror *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &kerror) {
		return kerror.Message
	}
	return "error code " + strconv.Itoa(int(code))
}
