package broker

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
	"strand/sim/memdisk"
)

func scramUpsertion(name string, m metadata.ScramMechanism, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = name, int8(m), iterations
	u.Salt, u.SaltedPassword = []byte("salt"), bytes.Repeat([]byte{1}, m.KeyBytes())
	return u
}

func (c *cluster) describeScram(node int32, users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
	c.t.Helper()
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		req.Users = append(req.Users, kmsg.DescribeUserSCRAMCredentialsRequestUser{Name: u})
	}
	return c.request(node, req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
}

// TestScramCredentialsReachEveryBroker: an AlterUserScramCredentials sent
// to a broker without the controller role is forwarded and answered once
// committed; every broker then describes the credential from its own
// metadata and hands it to its environment, and a deletion takes it away
// everywhere.
func TestScramCredentialsReachEveryBroker(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitRegistered()
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Upsertions = append(alter.Upsertions, scramUpsertion("alice", metadata.ScramSHA256, 4096),
		scramUpsertion("alice", metadata.ScramSHA512, 8192), scramUpsertion("bob", metadata.ScramSHA512, 4096))
	resp := c.request(3, alter).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(resp.Results) != 2 || resp.Results[0].ErrorCode != kerr.DuplicateResource.Code || resp.Results[1].ErrorCode != 0 {
		t.Fatalf("alter via broker 3: %+v", resp.Results)
	}
	published := func(id int32, user string) bool {
		creds := c.nodes[id].nn.ScramCredentials()
		if creds == nil {
			return false
		}
		_, ok := creds.LookupScram("SCRAM-SHA-512", user)
		return ok
	}
	c.waitFor("bob's credential on every broker", 5000, func() bool {
		return published(1, "bob") && published(2, "bob") && published(3, "bob")
	})
	for id := int32(1); id <= 3; id++ {
		d := c.describeScram(id)
		if d.ErrorCode != 0 || len(d.Results) != 1 || d.Results[0].User != "bob" || len(d.Results[0].CredentialInfos) != 1 ||
			d.Results[0].CredentialInfos[0].Mechanism != 2 || d.Results[0].CredentialInfos[0].Iterations != 4096 {
			t.Fatalf("describe on node %d: %+v", id, d.Results)
		}
	}
	d := c.describeScram(2, "bob", "carol", "dave", "dave")
	var got []string
	for _, r := range d.Results {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		got = append(got, fmt.Sprintf("%s %v %s", r.User, kerr.ErrorForCode(r.ErrorCode), msg))
	}
	want := []string{
		"bob <nil> ",
		"carol " + kerr.ResourceNotFound.Error() + " Attempt to describe a user credential that does not exist: carol",
		"dave " + kerr.DuplicateResource.Error() + " Cannot describe SCRAM credentials for the same user twice in a single request: dave",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("describe named users (-want +got):\n%s", diff)
	}

	del := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del.Deletions = append(del.Deletions, kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: "bob", Mechanism: 2})
	if r := c.request(2, del).(*kmsg.AlterUserSCRAMCredentialsResponse); len(r.Results) != 1 || r.Results[0].ErrorCode != 0 {
		t.Fatalf("delete bob: %+v", r.Results)
	}
	c.waitFor("bob's credential gone from every broker", 5000, func() bool {
		return !published(1, "bob") && !published(2, "bob") && !published(3, "bob")
	})
}

// TestReadBootstrap: no file, no bootstrap records; a damaged one refuses
// the start naming the file.
func TestReadBootstrap(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	if recs, err := readBootstrap(disk); err != nil || recs != nil {
		t.Fatalf("no file: %v, %v", recs, err)
	}
	cred := metadata.NewScramCredential(metadata.ScramSHA256, []byte("s"), bytes.Repeat([]byte{2}, 32), 4096)
	want := []metadata.Record{metadata.NewUserScramCredentialRecord(metadata.ScramUser{Name: "broker", Mechanism: metadata.ScramSHA256}, cred)}
	write := func(data []byte) {
		if err := disk.MkdirAll(metadataLogDir); err != nil {
			t.Fatal(err)
		}
		f, err := disk.Open(bootstrapPath, env.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Truncate(0)
		if err := f.Append(data); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	data := metadata.EncodeBootstrap(want)
	write(data)
	if recs, err := readBootstrap(disk); err != nil || !cmp.Equal(recs, want) {
		t.Fatalf("bootstrap: %v, %v", recs, err)
	}
	write(data[:len(data)-2])
	if _, err := readBootstrap(disk); err == nil || !strings.Contains(err.Error(), bootstrapPath) {
		t.Fatalf("a damaged bootstrap file: %v", err)
	}
}
