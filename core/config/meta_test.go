package config

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"strand/core/env"
)

func TestMetaRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var random, dirRandom [16]byte
		copy(random[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "cluster"))
		copy(dirRandom[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "dir"))
		m := Meta{Version: MetaVersion, ClusterID: NewClusterID(random), NodeID: env.NodeID(rapid.Int32Min(0).Draw(t, "node"))}
		if rapid.Bool().Draw(t, "withDirectoryID") {
			m.DirectoryID = NewClusterID(dirRandom)
		}
		got, err := ParseMeta(EncodeMeta(m))
		if err != nil {
			t.Fatal(err)
		}
		if got != m {
			t.Fatalf("round trip: got %+v, want %+v", got, m)
		}
	})
}

// TestParseMetaWrittenByKafka reads a file in the layout kafka-storage.sh
// format writes (Properties.store: a date comment, keys in hash order).
func TestParseMetaWrittenByKafka(t *testing.T) {
	text := "#\n#Tue Nov 26 10:00:00 UTC 2024\nnode.id=3\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
	m, err := ParseMeta([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	// The cluster id is the example from Kafka's documentation; its last
	// character has non-zero padding bits, which Java's decoder accepts.
	want := Meta{Version: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qk", NodeID: 3, DirectoryID: "J8aAPcfLQt2bqs1JT_rMgQ"}
	if m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
}

func TestParseMetaRejects(t *testing.T) {
	cases := map[string]string{
		"version 0":        "version=0\nbroker.id=1\ncluster.id=J8aAPcfLQt2bqs1JT_rMgQ\n",
		"no version":       "node.id=1\ncluster.id=J8aAPcfLQt2bqs1JT_rMgQ\n",
		"no node.id":       "version=1\ncluster.id=J8aAPcfLQt2bqs1JT_rMgQ\n",
		"no cluster.id":    "version=1\nnode.id=1\n",
		"short cluster.id": "version=1\nnode.id=1\ncluster.id=abc\n",
		"zero cluster.id":  "version=1\nnode.id=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n",
		"bad node.id":      "version=1\nnode.id=x\ncluster.id=J8aAPcfLQt2bqs1JT_rMgQ\n",
		"bad directory.id": "version=1\nnode.id=1\ncluster.id=J8aAPcfLQt2bqs1JT_rMgQ\ndirectory.id=nope\n",
	}
	for name, text := range cases {
		if _, err := ParseMeta([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckMeta(t *testing.T) {
	found := Meta{Version: 1, ClusterID: "J8aAPcfLQt2bqs1JT_rMgQ", NodeID: 2}
	if err := CheckMeta("./data/node2", found, 2, ""); err != nil {
		t.Errorf("matching node, any cluster: %v", err)
	}
	if err := CheckMeta("./data/node2", found, 2, found.ClusterID); err != nil {
		t.Errorf("matching node and cluster: %v", err)
	}
	err := CheckMeta("./data/node1", found, 1, "")
	if !errors.Is(err, ErrMetaMismatch) || !strings.Contains(err.Error(), "log dir ./data/node1 belongs to node.id 2, this is node.id 1") {
		t.Errorf("node mismatch: %v", err)
	}
	err = CheckMeta("./data/node2", found, 2, "MkU3OEVBNTcwNTJENDM2Qg")
	if !errors.Is(err, ErrMetaMismatch) || !strings.Contains(err.Error(), "J8aAPcfLQt2bqs1JT_rMgQ") {
		t.Errorf("cluster mismatch: %v", err)
	}
}

func TestNewClusterID(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var random [16]byte
		copy(random[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "random"))
		id := NewClusterID(random)
		if len(id) != 22 || strings.HasPrefix(id, "-") {
			t.Fatalf("id %q", id)
		}
		if err := ValidateClusterID(id); err != nil {
			t.Fatal(err)
		}
	})
	// The byte patterns NewClusterID must adjust.
	if id := NewClusterID([16]byte{0xF8}); strings.HasPrefix(id, "-") {
		t.Errorf("leading '-' not avoided: %q", id)
	}
	if id := NewClusterID([16]byte{}); ValidateClusterID(id) != nil {
		t.Errorf("zero bytes gave the reserved zero Uuid: %q", id)
	}
	if ValidateClusterID("-AAAAAAAAAAAAAAAAAAAAA") == nil {
		t.Error("accepted an id starting with '-'")
	}
}

func TestDeriveClusterIDDependsOnlyOnVoters(t *testing.T) {
	var ids []string
	for _, name := range []string{"node1.properties", "node2.properties", "node3.properties"} {
		b, _, err := Parse(readExample(t, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, DeriveClusterID(b.QuorumVoters))
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Errorf("nodes of one cluster derived different ids: %v", ids)
	}
	other := DeriveClusterID([]Voter{{ID: 1, Host: "127.0.0.1", Port: 9093}})
	if other == ids[0] {
		t.Error("a different quorum derived the same id")
	}
	if err := ValidateClusterID(other); err != nil {
		t.Error(err)
	}
}
