package config

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"strand/core/env"
)

// MetaFileName is the file in every log directory that says which cluster
// and node the directory belongs to (Kafka's meta.properties).
const MetaFileName = "meta.properties"

// MetaVersion is the KRaft meta.properties version: cluster.id and node.id
// are both required. Version 0 is ZooKeeper-era (broker.id), which Strand
// does not read.
const MetaVersion = 1

// Meta is the content of meta.properties.
type Meta struct {
	// Version is always MetaVersion for a directory Strand can use.
	Version int32
	// ClusterID is the cluster's id, a 22-character base64url Uuid.
	ClusterID string
	// NodeID is the node.id of the node that owns the directory.
	NodeID env.NodeID
	// DirectoryID is the directory's own Uuid (Kafka 3.7+, KIP-858); empty
	// when the file does not carry one.
	DirectoryID string
}

// ErrMetaMismatch marks a log directory that belongs to another node or
// cluster: the node must refuse to start (CLARIFICATIONS.md, "The log start
// offset and on-disk identity").
var ErrMetaMismatch = errors.New("refusing to use a log directory of another node or cluster")

// EncodeMeta writes m in the properties format Kafka writes and reads.
func EncodeMeta(m Meta) []byte {
	props := map[string]string{
		"cluster.id": m.ClusterID,
		"node.id":    strconv.FormatInt(int64(m.NodeID), 10),
		"version":    strconv.FormatInt(int64(m.Version), 10),
	}
	keys := []string{"cluster.id", "node.id", "version"}
	if m.DirectoryID != "" {
		props["directory.id"] = m.DirectoryID
		keys = []string{"cluster.id", "directory.id", "node.id", "version"}
	}
	header := "#\n# Written by strand format: this log directory's cluster and node.\n"
	return append([]byte(header), EncodeProperties(keys, props)...)
}

// ParseMeta reads a meta.properties file and checks that it is a KRaft
// (version 1) file with a valid cluster.id and node.id.
func ParseMeta(text []byte) (Meta, error) {
	props, err := ParseProperties(text)
	if err != nil {
		return Meta{}, fmt.Errorf("%s: %w", MetaFileName, err)
	}
	version, err := metaInt(props, "version")
	if err != nil {
		return Meta{}, err
	}
	if version != MetaVersion {
		return Meta{}, fmt.Errorf("%s: version %d is not supported: Strand reads KRaft meta.properties (version %d)", MetaFileName, version, MetaVersion)
	}
	nodeID, err := metaInt(props, "node.id")
	if err != nil {
		return Meta{}, err
	}
	if nodeID < 0 {
		return Meta{}, fmt.Errorf("%s: node.id %d is negative", MetaFileName, nodeID)
	}
	m := Meta{Version: version, ClusterID: props["cluster.id"], NodeID: env.NodeID(nodeID), DirectoryID: props["directory.id"]}
	if err := ValidateClusterID(m.ClusterID); err != nil {
		return Meta{}, fmt.Errorf("%s: cluster.id: %w", MetaFileName, err)
	}
	if _, ok := props["directory.id"]; ok {
		if err := validateUuid(m.DirectoryID); err != nil {
			return Meta{}, fmt.Errorf("%s: directory.id: %w", MetaFileName, err)
		}
	}
	return m, nil
}

// metaInt reads a required int32 from meta.properties.
func metaInt(props map[string]string, key string) (int32, error) {
	text, ok := props[key]
	if !ok {
		return 0, fmt.Errorf("%s: %s is missing", MetaFileName, key)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: %s %q is not an integer", MetaFileName, key, text)
	}
	return int32(n), nil
}

// CheckMeta checks that the log directory dir, whose meta.properties holds
// found, belongs to node wantNodeID of cluster wantClusterID. An empty
// wantClusterID accepts any cluster (the first directory a node reads sets
// it). A mismatch wraps ErrMetaMismatch.
func CheckMeta(dir string, found Meta, wantNodeID env.NodeID, wantClusterID string) error {
	if found.NodeID != wantNodeID {
		return fmt.Errorf("log dir %s belongs to node.id %d, this is node.id %d: %w", dir, found.NodeID, wantNodeID, ErrMetaMismatch)
	}
	if wantClusterID != "" && found.ClusterID != wantClusterID {
		return fmt.Errorf("log dir %s belongs to cluster %s, this node is in cluster %s: %w", dir, found.ClusterID, wantClusterID, ErrMetaMismatch)
	}
	return nil
}

// uuidBytes is the size of a Kafka Uuid.
const uuidBytes = 16

// uuidEncoding is how Kafka prints a Uuid: base64url without padding, 22
// characters. Decoding is not strict about the last character's padding
// bits, as Java's decoder is not: Kafka's own documented example id
// (MkU3OEVBNTcwNTJENDM2Qk) has them set.
var uuidEncoding = base64.RawURLEncoding

// NewClusterID turns 16 random bytes (the caller's: core has no randomness)
// into a cluster id in Kafka's Uuid format. Kafka's Uuid.randomUuid redraws
// ids that print with a leading '-', which a command line would take for a
// flag; NewClusterID clears the top bit of the first byte instead, which has
// the same effect, and sets the last bit when every byte is zero, because
// Kafka reserves the zero Uuid.
func NewClusterID(random [uuidBytes]byte) string {
	if random[0]>>2 == 62 { // base64url index 62 is '-'
		random[0] &^= 0x80
	}
	if random == [uuidBytes]byte{} {
		random[uuidBytes-1] = 1
	}
	id := uuidEncoding.EncodeToString(random[:])
	if err := ValidateClusterID(id); err != nil {
		panic("config: NewClusterID produced an invalid id: " + err.Error())
	}
	return id
}

// DeriveClusterID computes a cluster id from the controller quorum, so that
// every node of a cluster that formats its own directories (a first
// `strand serve`, `strand format` without --cluster-id) arrives at the same
// id without sharing one by hand. Two clusters with the same voters get the
// same id; give --cluster-id to tell them apart.
func DeriveClusterID(voters []Voter) string {
	h := sha256.New()
	h.Write([]byte("strand cluster id v1\n"))
	for _, v := range voters {
		h.Write([]byte(v.String() + "\n"))
	}
	var random [uuidBytes]byte
	copy(random[:], h.Sum(nil))
	return NewClusterID(random)
}

// ValidateClusterID checks that id is a Kafka Uuid as kafka-storage.sh
// format requires: base64url of 16 bytes, not the reserved zero Uuid, not
// starting with '-'.
func ValidateClusterID(id string) error {
	if err := validateUuid(id); err != nil {
		return err
	}
	if strings.HasPrefix(id, "-") {
		return fmt.Errorf("%q starts with '-', which command lines take for a flag", id)
	}
	return nil
}

// validateUuid checks the Uuid text format.
func validateUuid(id string) error {
	raw, err := uuidEncoding.DecodeString(id)
	if err != nil || len(raw) != uuidBytes {
		return fmt.Errorf("%q is not a Kafka Uuid: want 22 base64url characters encoding 16 bytes", id)
	}
	if [uuidBytes]byte(raw) == [uuidBytes]byte{} {
		return fmt.Errorf("%q is the zero Uuid, which Kafka reserves", id)
	}
	return nil
}
