package quorum

// MsgType names a Raft message; each maps to a KRaft RPC (codec.go).
type MsgType int8

// The message types.
const (
	// MsgVote is VoteRequest (52), a pre-vote when PreVote is set.
	MsgVote MsgType = iota + 1
	// MsgVoteResp is VoteResponse.
	MsgVoteResp
	// MsgBeginEpoch is BeginQuorumEpochRequest (53): a new leader announces itself.
	MsgBeginEpoch
	// MsgBeginEpochResp is BeginQuorumEpochResponse.
	MsgBeginEpochResp
	// MsgFetch is FetchRequest (1) on __cluster_metadata-0.
	MsgFetch
	// MsgFetchResp is FetchResponse.
	MsgFetchResp
	// MsgFetchSnapshot is FetchSnapshotRequest (59): a follower below the
	// leader's log start reads the snapshot, one chunk per request.
	MsgFetchSnapshot
	// MsgFetchSnapshotResp is FetchSnapshotResponse.
	MsgFetchSnapshotResp
	// MsgEndEpoch is EndQuorumEpochRequest (54): a resigning leader tells
	// the voters to elect another at once, the best placed first.
	MsgEndEpoch
	// MsgEndEpochResp is EndQuorumEpochResponse.
	MsgEndEpochResp
)

// String names the type for test output.
func (t MsgType) String() string {
	switch t {
	case MsgVote:
		return "Vote"
	case MsgVoteResp:
		return "VoteResp"
	case MsgBeginEpoch:
		return "BeginEpoch"
	case MsgBeginEpochResp:
		return "BeginEpochResp"
	case MsgFetch:
		return "Fetch"
	case MsgFetchResp:
		return "FetchResp"
	case MsgFetchSnapshot:
		return "FetchSnapshot"
	case MsgFetchSnapshotResp:
		return "FetchSnapshotResp"
	case MsgEndEpoch:
		return "EndEpoch"
	case MsgEndEpochResp:
		return "EndEpochResp"
	}
	return "Unknown"
}

// IsResponse reports whether t answers a request.
func (t MsgType) IsResponse() bool {
	return t == MsgVoteResp || t == MsgBeginEpochResp || t == MsgFetchResp || t == MsgFetchSnapshotResp || t == MsgEndEpochResp
}

// Kafka error codes the quorum uses (kerr's numbers).
const (
	errNone                 int16 = 0
	errNotLeaderOrFollower  int16 = 6
	errFencedLeaderEpoch    int16 = 74
	errUnknownLeaderEpoch   int16 = 75
	errInconsistentVoterSet int16 = 53
	errSnapshotNotFound     int16 = 98
	errPositionOutOfRange   int16 = 99
)

// Message is one Raft message. Which fields mean something depends on Type.
//
// Ownership: Entries (and their Data) of a stepped message are retained by
// the receiving Raft; the sender must not modify them afterwards. Entries of
// a message from Ready alias the sender's log and must not be modified.
type Message struct {
	Type MsgType
	From int32
	To   int32
	// Ref correlates a response with its request. On a request the driver
	// steps in, the driver sets it and Raft copies it onto the response, so
	// the driver finds the connection to answer on. On a request Raft sends,
	// Raft sets it and the response must carry it back (DecodeResponse
	// copies it from the request): a follower ignores a Fetch response to
	// any but its latest Fetch, as Kafka's client drops a timed-out request's
	// late response.
	Ref uint64
	// Epoch: the candidate's epoch (Vote: for a pre-vote the epoch it would
	// take), the requester's current leader epoch (Fetch, BeginEpoch), the
	// responder's epoch (responses).
	Epoch int32
	// LeaderID is the leader the sender knows in Epoch, -1 if none.
	LeaderID int32
	// ErrorCode is a Kafka error code in responses.
	ErrorCode int16

	// Vote: the candidate's last entry epoch and log end offset.
	PreVote    bool
	LastEpoch  int32
	LastOffset int64
	// VoteResp.
	Granted bool

	// Fetch: the follower's log end offset and the epoch of its last entry.
	FetchOffset      int64
	LastFetchedEpoch int32
	MaxWaitMs        int64
	// FetchResp.
	HighWatermark int64
	Entries       []Entry
	// DivergingEpoch >= 0 means the fetch was inconsistent: truncate to at
	// most DivergingEndOffset, which ends DivergingEpoch in the leader's log.
	DivergingEpoch     int32
	DivergingEndOffset int64

	// SnapshotEndOffset >= 0 names a snapshot (with SnapshotEpoch, the
	// epoch of its last entry): in FetchResp, the fetch fell below the
	// leader's log start and the follower must read this snapshot; in
	// FetchSnapshot and its response, the snapshot being read.
	SnapshotEndOffset int64
	SnapshotEpoch     int32
	// FetchSnapshot: the byte position to read from. FetchSnapshotResp:
	// the position of SnapshotBytes and the snapshot's whole size.
	Position      int64
	SnapshotSize  int64
	SnapshotBytes []byte

	// EndEpoch: the voters in the order they should stand, best placed
	// (longest match) first.
	PreferredSuccessors []int32
}
