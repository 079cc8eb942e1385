package broker

// DescribeLogDirs (key 35), versions 1..4 (Kafka 4.0 dropped v0, KIP-896).
//
// Served as Kafka's ReplicaManager.describeLogDirs: one result per log
// directory in log.dirs order, named as configured; an offline directory
// answers KAFKA_STORAGE_ERROR alone; an online one lists the partitions it
// holds (all, or those the request names), each with its log's size in
// bytes and its offset lag, max(HW - LEO, 0), which is 0 for a replica
// that serves. Admin tools and UIs use it for topic and broker disk usage
// (kafka-log-dirs.sh, kadm.DescribeAllLogDirs).
//
// Skipped: TotalBytes and UsableBytes (v4) stay -1, unknown: the core
// reaches the disk only through env.Disk, which does not report space.
// Strand has no future (moving) replicas, so IsFutureKey is never set.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/log"
)

func (pm *partitionManager) handleDescribeLogDirs(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeLogDirsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var wanted map[log.TopicPartition]bool // nil: every partition
	if req.Topics != nil {
		wanted = map[log.TopicPartition]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				wanted[log.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	for i, m := range pm.managers {
		dir := kmsg.NewDescribeLogDirsResponseDir()
		dir.Dir = pm.cfg.Broker.LogDirs[i]
		if m.Err() != nil {
			dir.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, dir)
			continue
		}
		for _, tp := range m.Partitions() { // sorted by topic, then partition
			if wanted != nil && !wanted[tp] {
				continue
			}
			l, _ := m.Log(tp)
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag = tp.Partition, l.SizeBytes(), pm.logEndOffsetLag(tp, l)
			if k := len(dir.Topics); k == 0 || dir.Topics[k-1].Topic != tp.Topic {
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = tp.Topic
				dir.Topics = append(dir.Topics, rt)
			}
			last := &dir.Topics[len(dir.Topics)-1]
			last.Partitions = append(last.Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, dir)
	}
	pm.net.Reply(conn, hdr.CorrelationID, resp)
}

// logEndOffsetLag is Kafka's getLogEndOffsetLag for a current (not future)
// log: how far its end lies below the partition's high watermark, or -1 if
// the log is not the one a live partition replicates into.
func (pm *partitionManager) logEndOffsetLag(tp log.TopicPartition, l *log.Log) int64 {
	p, ok := pm.partitions[partitionKey{tp.Topic, tp.Partition}]
	if !ok || p.log != l {
		return -1
	}
	return max(p.replica.HighWatermark()-l.LogEndOffset(), 0)
}
