package quorum

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/batch"
)

// MetadataTopic and MetadataTopicID name the metadata log's partition
// (__cluster_metadata-0), Kafka's Uuid.METADATA_TOPIC_ID for the id.
const MetadataTopic = "__cluster_metadata"

// MetadataTopicID is Kafka's Uuid.METADATA_TOPIC_ID (0, 1).
var MetadataTopicID = [16]byte{15: 1}

// Request versions the codec speaks: Vote v2 carries PreVote (KIP-996);
// Fetch v15+ names the replica in ReplicaState and v12+ carries
// DivergingEpoch and CurrentLeader.
const (
	voteVersion       int16 = 2
	beginEpochVersion int16 = 0
	fetchVersion      int16 = 16
	fetchSnapVersion  int16 = 0
	endEpochVersion   int16 = 0
)

// VersionRange is one Raft RPC and the versions of it a voter accepts.
type VersionRange struct{ Key, Min, Max int16 }

// Versions are the RPCs voters send each other, in the versions the codec
// speaks: what a node with the controller role must accept (and a
// controller advertises). Fetch here is the voters' own, v15+.
func Versions() []VersionRange {
	return []VersionRange{
		{kmsg.Fetch.Int16(), fetchVersion, fetchVersion},
		{kmsg.Vote.Int16(), voteVersion, voteVersion},
		{kmsg.BeginQuorumEpoch.Int16(), beginEpochVersion, beginEpochVersion},
		{kmsg.EndQuorumEpoch.Int16(), endEpochVersion, endEpochVersion},
		{kmsg.FetchSnapshot.Int16(), fetchSnapVersion, fetchSnapVersion},
	}
}

// EncodeRequest turns a request message (Vote, BeginEpoch, Fetch) into the
// KRaft RPC that carries it.
func EncodeRequest(m Message) (kmsg.Request, error) {
	switch m.Type {
	case MsgVote:
		req := kmsg.NewPtrVoteRequest()
		req.Version = voteVersion
		req.VoterID = m.To
		p := kmsg.NewVoteRequestTopicPartition()
		p.CandidateEpoch, p.CandidateID, p.LastOffsetEpoch, p.LastOffset, p.PreVote = m.Epoch, m.From, m.LastEpoch, m.LastOffset, m.PreVote
		t := kmsg.NewVoteRequestTopic()
		t.Topic, t.Partitions = MetadataTopic, []kmsg.VoteRequestTopicPartition{p}
		req.Topics = []kmsg.VoteRequestTopic{t}
		return req, nil
	case MsgBeginEpoch:
		req := kmsg.NewPtrBeginQuorumEpochRequest()
		req.Version = beginEpochVersion
		p := kmsg.NewBeginQuorumEpochRequestTopicPartition()
		p.LeaderID, p.LeaderEpoch = m.From, m.Epoch
		t := kmsg.NewBeginQuorumEpochRequestTopic()
		t.Topic, t.Partitions = MetadataTopic, []kmsg.BeginQuorumEpochRequestTopicPartition{p}
		req.Topics = []kmsg.BeginQuorumEpochRequestTopic{t}
		return req, nil
	case MsgFetch:
		req := kmsg.NewPtrFetchRequest()
		req.Version = fetchVersion
		req.ReplicaID = -1
		req.ReplicaState.ID, req.ReplicaState.Epoch = m.From, -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(m.MaxWaitMs), 1, 1<<20
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.FetchOffset, p.LastFetchedEpoch = 0, m.Epoch, m.FetchOffset, m.LastFetchedEpoch
		p.LogStartOffset, p.PartitionMaxBytes = -1, 1<<20
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID, t.Partitions = MetadataTopic, MetadataTopicID, []kmsg.FetchRequestTopicPartition{p}
		req.Topics = []kmsg.FetchRequestTopic{t}
		return req, nil
	case MsgEndEpoch:
		req := kmsg.NewPtrEndQuorumEpochRequest()
		req.Version = endEpochVersion
		p := kmsg.NewEndQuorumEpochRequestTopicPartition()
		p.LeaderID, p.LeaderEpoch, p.PreferredSuccessors = m.From, m.Epoch, m.PreferredSuccessors
		t := kmsg.NewEndQuorumEpochRequestTopic()
		t.Topic, t.Partitions = MetadataTopic, []kmsg.EndQuorumEpochRequestTopicPartition{p}
		req.Topics = []kmsg.EndQuorumEpochRequestTopic{t}
		return req, nil
	case MsgFetchSnapshot:
		req := kmsg.NewPtrFetchSnapshotRequest()
		req.Version = fetchSnapVersion
		req.ReplicaID, req.MaxBytes = m.From, snapshotChunkBytesMax
		p := kmsg.NewFetchSnapshotRequestTopicPartition()
		p.CurrentLeaderEpoch, p.Position = m.Epoch, m.Position
		p.SnapshotID.EndOffset, p.SnapshotID.Epoch = m.SnapshotEndOffset, m.SnapshotEpoch
		t := kmsg.NewFetchSnapshotRequestTopic()
		t.Topic, t.Partitions = MetadataTopic, []kmsg.FetchSnapshotRequestTopicPartition{p}
		req.Topics = []kmsg.FetchSnapshotRequestTopic{t}
		return req, nil
	}
	return nil, fmt.Errorf("quorum: %v is not a request", m.Type)
}

// DecodeRequest turns a KRaft request received by node to into a message.
// It checks the shape (one topic, __cluster_metadata-0) and returns an error
// naming the field otherwise.
func DecodeRequest(to int32, req kmsg.Request) (Message, error) {
	m := Message{To: to, LeaderID: -1, DivergingEpoch: -1, DivergingEndOffset: -1, SnapshotEndOffset: -1, SnapshotEpoch: -1}
	switch req := req.(type) {
	case *kmsg.VoteRequest:
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Topic != MetadataTopic || req.Topics[0].Partitions[0].Partition != 0 {
			return m, fmt.Errorf("quorum: VoteRequest.Topics must name only %s-0", MetadataTopic)
		}
		p := req.Topics[0].Partitions[0]
		m.Type, m.From, m.Epoch, m.LastEpoch, m.LastOffset, m.PreVote = MsgVote, p.CandidateID, p.CandidateEpoch, p.LastOffsetEpoch, p.LastOffset, p.PreVote
	case *kmsg.BeginQuorumEpochRequest:
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Topic != MetadataTopic || req.Topics[0].Partitions[0].Partition != 0 {
			return m, fmt.Errorf("quorum: BeginQuorumEpochRequest.Topics must name only %s-0", MetadataTopic)
		}
		p := req.Topics[0].Partitions[0]
		m.Type, m.From, m.Epoch, m.LeaderID = MsgBeginEpoch, p.LeaderID, p.LeaderEpoch, p.LeaderID
	case *kmsg.FetchRequest:
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 ||
			(req.Topics[0].Topic != MetadataTopic && req.Topics[0].TopicID != MetadataTopicID) {
			return m, fmt.Errorf("quorum: FetchRequest.Topics must name only %s-0", MetadataTopic)
		}
		p := req.Topics[0].Partitions[0]
		m.Type, m.From = MsgFetch, req.ReplicaState.ID
		if req.Version < 15 {
			m.From = req.ReplicaID
		}
		m.LeaderID = to // a fetch goes to the leader its sender knows
		m.Epoch, m.FetchOffset, m.LastFetchedEpoch, m.MaxWaitMs = p.CurrentLeaderEpoch, p.FetchOffset, p.LastFetchedEpoch, int64(max(req.MaxWaitMillis, 0))
	case *kmsg.EndQuorumEpochRequest:
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Topic != MetadataTopic || req.Topics[0].Partitions[0].Partition != 0 {
			return m, fmt.Errorf("quorum: EndQuorumEpochRequest.Topics must name only %s-0", MetadataTopic)
		}
		p := req.Topics[0].Partitions[0]
		m.Type, m.From, m.LeaderID, m.Epoch, m.PreferredSuccessors = MsgEndEpoch, p.LeaderID, p.LeaderID, p.LeaderEpoch, p.PreferredSuccessors
	case *kmsg.FetchSnapshotRequest:
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Topic != MetadataTopic || req.Topics[0].Partitions[0].Partition != 0 {
			return m, fmt.Errorf("quorum: FetchSnapshotRequest.Topics must name only %s-0", MetadataTopic)
		}
		p := req.Topics[0].Partitions[0]
		m.Type, m.From, m.LeaderID, m.Epoch, m.Position = MsgFetchSnapshot, req.ReplicaID, to, p.CurrentLeaderEpoch, p.Position
		m.SnapshotEndOffset, m.SnapshotEpoch = p.SnapshotID.EndOffset, p.SnapshotID.Epoch
	default:
		return m, fmt.Errorf("quorum: request key %d is not a quorum request", req.Key())
	}
	if m.From < 0 {
		return m, fmt.Errorf("quorum: %v request from negative node id %d", m.Type, m.From)
	}
	return m, nil
}

// EncodeResponse turns a response message into the KRaft response; its
// version must match the request's, which the caller sets.
func EncodeResponse(m Message) (kmsg.Response, error) {
	switch m.Type {
	case MsgVoteResp:
		resp := kmsg.NewPtrVoteResponse()
		resp.Version = voteVersion
		p := kmsg.NewVoteResponseTopicPartition()
		p.ErrorCode, p.LeaderID, p.LeaderEpoch, p.VoteGranted = m.ErrorCode, m.LeaderID, m.Epoch, m.Granted
		t := kmsg.NewVoteResponseTopic()
		t.Topic, t.Partitions = MetadataTopic, []kmsg.VoteResponseTopicPartition{p}
		resp.Topics = []kmsg.VoteResponseTopic{t}
		return resp, nil
	case MsgBeginEpochResp:
		resp := kmsg.NewPtrBeginQuorumEpochResponse()
		resp.Version = beginEpochVersion
		p := kmsg.NewBeginQuorumEpochResponseTopicPartition()
		p.ErrorCode, p.LeaderID, p.LeaderEpoch = m.ErrorCode, m.LeaderID, m.Epoch
		t := kmsg.NewBeginQuorumEpochResponseTopic()
		t.Topic, t.Partitions = MetadataTopic, []kmsg.BeginQuorumEpochResponseTopicPartition{p}
		resp.Topics = []kmsg.BeginQuorumEpochResponseTopic{t}
		return resp, nil
	case MsgFetchResp:
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = fetchVersion
		p := kmsg.NewFetchResponseTopicPartition()
		p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = m.ErrorCode, m.HighWatermark, m.HighWatermark, 0
		p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = m.DivergingEpoch, m.DivergingEndOffset
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = m.LeaderID, m.Epoch
		p.SnapshotID.EndOffset, p.SnapshotID.Epoch = m.SnapshotEndOffset, m.SnapshotEpoch
		p.RecordBatches = encodeEntries(m.Entries)
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID, t.Partitions = MetadataTopic, MetadataTopicID, []kmsg.FetchResponseTopicPartition{p}
		resp.Topics = []kmsg.FetchResponseTopic{t}
		return resp, nil
	case MsgEndEpochResp:
		resp := kmsg.NewPtrEndQuorumEpochResponse()
		resp.Version = endEpochVersion
		p := kmsg.NewEndQuorumEpochResponseTopicPartition()
		p.ErrorCode, p.LeaderID, p.LeaderEpoch = m.ErrorCode, m.LeaderID, m.Epoch
		t := kmsg.NewEndQuorumEpochResponseTopic()
		t.Topic, t.Partitions = MetadataTopic, []kmsg.EndQuorumEpochResponseTopicPartition{p}
		resp.Topics = []kmsg.EndQuorumEpochResponseTopic{t}
		return resp, nil
	case MsgFetchSnapshotResp:
		resp := kmsg.NewPtrFetchSnapshotResponse()
		resp.Version = fetchSnapVersion
		p := kmsg.NewFetchSnapshotResponseTopicPartition()
		p.ErrorCode, p.Size, p.Position, p.Bytes = m.ErrorCode, m.SnapshotSize, m.Position, m.SnapshotBytes
		p.SnapshotID.EndOffset, p.SnapshotID.Epoch = m.SnapshotEndOffset, m.SnapshotEpoch
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = m.LeaderID, m.Epoch
		t := kmsg.NewFetchSnapshotResponseTopic()
		t.Topic, t.Partitions = MetadataTopic, []kmsg.FetchSnapshotResponseTopicPartition{p}
		resp.Topics = []kmsg.FetchSnapshotResponseTopic{t}
		return resp, nil
	}
	return nil, fmt.Errorf("quorum: %v is not a response", m.Type)
}

// DecodeResponse turns the response to req (the message that was sent) into
// a message.
func DecodeResponse(req Message, resp kmsg.Response) (Message, error) {
	m := Message{From: req.To, To: req.From, Ref: req.Ref, PreVote: req.PreVote, LeaderID: -1,
		DivergingEpoch: -1, DivergingEndOffset: -1, SnapshotEndOffset: -1, SnapshotEpoch: -1}
	switch resp := resp.(type) {
	case *kmsg.VoteResponse:
		if req.Type != MsgVote || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return m, fmt.Errorf("quorum: VoteResponse does not answer a %v with one partition", req.Type)
		}
		p := resp.Topics[0].Partitions[0]
		m.Type, m.ErrorCode, m.LeaderID, m.Epoch, m.Granted = MsgVoteResp, p.ErrorCode, p.LeaderID, p.LeaderEpoch, p.VoteGranted
	case *kmsg.BeginQuorumEpochResponse:
		if req.Type != MsgBeginEpoch || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return m, fmt.Errorf("quorum: BeginQuorumEpochResponse does not answer a %v with one partition", req.Type)
		}
		p := resp.Topics[0].Partitions[0]
		m.Type, m.ErrorCode, m.LeaderID, m.Epoch = MsgBeginEpochResp, p.ErrorCode, p.LeaderID, p.LeaderEpoch
	case *kmsg.FetchResponse:
		if req.Type != MsgFetch || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return m, fmt.Errorf("quorum: FetchResponse does not answer a %v with one partition", req.Type)
		}
		p := resp.Topics[0].Partitions[0]
		m.Type, m.ErrorCode, m.HighWatermark = MsgFetchResp, p.ErrorCode, p.HighWatermark
		m.LeaderID, m.Epoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
		m.DivergingEpoch, m.DivergingEndOffset = p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset
		m.SnapshotEndOffset, m.SnapshotEpoch = p.SnapshotID.EndOffset, p.SnapshotID.Epoch
		entries, err := decodeEntries(p.RecordBatches)
		if err != nil {
			return m, err
		}
		m.Entries = entries
	case *kmsg.EndQuorumEpochResponse:
		if req.Type != MsgEndEpoch || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return m, fmt.Errorf("quorum: EndQuorumEpochResponse does not answer a %v with one partition", req.Type)
		}
		p := resp.Topics[0].Partitions[0]
		m.Type, m.ErrorCode, m.LeaderID, m.Epoch = MsgEndEpochResp, p.ErrorCode, p.LeaderID, p.LeaderEpoch
	case *kmsg.FetchSnapshotResponse:
		if req.Type != MsgFetchSnapshot || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return m, fmt.Errorf("quorum: FetchSnapshotResponse does not answer a %v with one partition", req.Type)
		}
		p := resp.Topics[0].Partitions[0]
		m.Type, m.ErrorCode, m.SnapshotSize, m.Position = MsgFetchSnapshotResp, p.ErrorCode, p.Size, p.Position
		m.SnapshotEndOffset, m.SnapshotEpoch = p.SnapshotID.EndOffset, p.SnapshotID.Epoch
		m.LeaderID, m.Epoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
		m.SnapshotBytes = slices.Clone(p.Bytes) // p.Bytes aliases the network buffer
	default:
		return m, fmt.Errorf("quorum: response key %d is not a quorum response", resp.Key())
	}
	return m, nil
}

// encodeEntries writes each entry as a RecordBatch v2 of one record whose
// value is the entry's data, PartitionLeaderEpoch its epoch.
func encodeEntries(entries []Entry) []byte {
	var out []byte
	for _, e := range entries {
		out = append(out, batch.Build(batch.BuildSpec{
			BaseOffset: e.Offset, PartitionLeaderEpoch: e.Epoch,
			Records: []batch.Record{{Value: e.Data}},
		})...)
	}
	return out
}

// decodeEntries reads what encodeEntries wrote, verifying each batch's CRC.
// Data is copied: the input aliases a network buffer.
func decodeEntries(b []byte) ([]Entry, error) {
	var entries []Entry
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil {
			return nil, fmt.Errorf("quorum: fetched batch %d: %w", len(entries), err)
		}
		total := h.TotalBytes()
		if total > int64(len(b)) || total < batch.HeaderBytes {
			return nil, fmt.Errorf("quorum: fetched batch %d claims %d bytes, %d remain", len(entries), total, len(b))
		}
		if _, err := batch.Verify(b[:total]); err != nil {
			return nil, fmt.Errorf("quorum: fetched batch %d: %w", len(entries), err)
		}
		if h.RecordCount != 1 || h.Codec() != batch.CodecNone {
			return nil, fmt.Errorf("quorum: fetched batch %d has %d records with codec %v, want one uncompressed", len(entries), h.RecordCount, h.Codec())
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(b[batch.HeaderBytes:total]); err != nil {
			return nil, fmt.Errorf("quorum: fetched batch %d record: %w", len(entries), err)
		}
		entries = append(entries, Entry{Offset: h.BaseOffset, Epoch: h.PartitionLeaderEpoch, Data: slices.Clone(rec.Value)})
		b = b[total:]
	}
	return entries, nil
}
