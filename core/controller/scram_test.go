package controller

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
)

const (
	sha256 = int8(metadata.ScramSHA256)
	sha512 = int8(metadata.ScramSHA512)
)

func upsertion(name string, mechanism int8, iterations int32, password string) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt = name, mechanism, iterations, []byte("salt-"+name)
	u.SaltedPassword = bytes.Repeat([]byte(password), 64)[:metadata.ScramMechanism(mechanism).KeyBytes()]
	if !metadata.ScramMechanism(mechanism).Known() {
		u.SaltedPassword = []byte(password)
	}
	return u
}

func deletion(name string, mechanism int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	return kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: name, Mechanism: mechanism}
}

func (h *harness) alterScram(deletions []kmsg.AlterUserSCRAMCredentialsRequestDeletion, upsertions ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) map[string]string {
	h.t.Helper()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions, req.Upsertions = deletions, upsertions
	resp := h.send(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	out := map[string]string{}
	for _, r := range resp.Results {
		if _, dup := out[r.User]; dup {
			h.t.Fatalf("user %q answered twice", r.User)
		}
		out[r.User] = "ok"
		if r.ErrorCode != 0 {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			out[r.User] = kerr.ErrorForCode(r.ErrorCode).(*kerr.Error).Message + msg
		}
	}
	return out
}

func TestAlterUserScramCredentials(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	got := h.alterScram(nil, upsertion("alice", sha256, 4096, "a"), upsertion("bob", sha512, 16384, "b"),
		upsertion("dave", sha256, 4096, "d"), upsertion("erin", sha256, 4096, "e"))
	if want := map[string]string{"alice": "ok", "bob": "ok", "dave": "ok", "erin": "ok"}; !cmp.Equal(got, want) {
		t.Fatalf("results %v", got)
	}
	creds := h.c.Image().ScramCredentials()
	alice, ok := creds.Credential(metadata.ScramUser{Name: "alice", Mechanism: metadata.ScramSHA256})
	if !ok || alice.Iterations != 4096 || string(alice.Salt) != "salt-alice" {
		t.Fatalf("alice's credential %+v %v", alice, ok)
	}
	// The controller keeps the derived keys, never the salted password.
	want := metadata.NewScramCredential(metadata.ScramSHA256, []byte("salt-alice"), upsertion("alice", sha256, 4096, "a").SaltedPassword, 4096)
	if !bytes.Equal(alice.StoredKey, want.StoredKey) || !bytes.Equal(alice.ServerKey, want.ServerKey) {
		t.Fatal("stored and server keys are not those of the salted password")
	}

	before := h.c.Image().Offset()
	got = h.alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{
		deletion("alice", sha512), // alice has no SCRAM-SHA-512 credential
		deletion("", sha256),
		deletion("carol", 3),
		deletion("dave", sha256), deletion("dave", sha256),
		deletion("erin", sha256),
	},
		upsertion("erin", sha256, 4096, "e"),
		upsertion("frank", sha256, 4095, "f"),
		upsertion("grace", sha512, 16385, "g"),
		upsertion("heidi", 0, 4096, "h"),
		upsertion("ivan", sha256, 8192, "i"),
	)
	want2 := map[string]string{
		"alice": kerr.ResourceNotFound.Message + ": Attempt to delete a user credential that does not exist",
		"":      kerr.UnacceptableCredential.Message + ": Username must not be empty",
		"carol": kerr.UnsupportedSaslMechanism.Message + ": Unknown SCRAM mechanism",
		"dave":  kerr.DuplicateResource.Message + ": A user credential cannot be altered twice in the same request",
		"erin":  kerr.DuplicateResource.Message + ": A user credential cannot be altered twice in the same request",
		"frank": kerr.UnacceptableCredential.Message + ": Too few iterations",
		"grace": kerr.UnacceptableCredential.Message + ": Too many iterations",
		"heidi": kerr.UnsupportedSaslMechanism.Message + ": Unknown SCRAM mechanism",
		"ivan":  "ok",
	}
	if diff := cmp.Diff(want2, got); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	if n := h.c.Image().Offset() - before; n != 1 {
		t.Fatalf("%d records for the one accepted alteration", n)
	}
	// An error is kept: a second mention of a user already refused does
	// not turn it into DUPLICATE_RESOURCE (Kafka's userToError).
	if got := h.alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("nobody", sha256), deletion("nobody", sha256)}); got["nobody"] != want2["alice"] {
		t.Fatalf("two deletions of a missing credential: %v", got)
	}
	if users := h.c.Image().ScramCredentials().Users(); len(users) != 5 {
		t.Fatalf("credentials %v", users)
	}

	bad := upsertion("judy", sha256, 4096, "j")
	bad.SaltedPassword = bad.SaltedPassword[:10]
	short := upsertion("ken", sha256, 4096, "k")
	short.Salt = nil
	got = h.alterScram(nil, bad, short)
	if got["judy"] != kerr.UnacceptableCredential.Message+": Salted password of 10 bytes: SCRAM-SHA-256's is 32" ||
		got["ken"] != kerr.UnacceptableCredential.Message+": Salt of 0 bytes: want 1 to 1024" {
		t.Fatalf("results %v", got)
	}

	// Deleting, then the answer comes once the record committed.
	if got := h.alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", sha256)}); got["alice"] != "ok" {
		t.Fatalf("delete alice: %v", got)
	}
	if _, ok := h.c.Image().ScramCredentials().Credential(metadata.ScramUser{Name: "alice", Mechanism: metadata.ScramSHA256}); ok {
		t.Fatal("alice's credential is still there")
	}

	// A snapshot and a restart keep the credentials.
	kept := h.c.Image().ScramCredentials()
	h.restart()
	if !h.c.Image().ScramCredentials().Equal(kept) {
		t.Fatalf("after a restart: %v, want %v", h.c.Image().ScramCredentials().Users(), kept.Users())
	}
}

func TestAlterUserScramCredentialsOnAStandby(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("a", sha256, 4096, "a"), upsertion("a", sha512, 4096, "a")}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("b", sha256)}
	resp := notControllerResponse(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(resp.Results) != 2 || resp.Results[0].User != "b" || resp.Results[1].User != "a" ||
		resp.Results[0].ErrorCode != kerr.NotController.Code || resp.Results[1].ErrorCode != kerr.NotController.Code {
		t.Fatalf("NOT_CONTROLLER answer %+v", resp.Results)
	}
	h.stop()
	if got := h.alterScram(nil, upsertion("a", sha256, 4096, "a")); got["a"] != kerr.NotController.Message {
		t.Fatalf("a stopped controller answered %v", got)
	}
}

func TestAlterationsPerRequestAreBounded(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	var ups []kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	for i := range scramAlterationsPerRequestMax + 1 {
		ups = append(ups, upsertion(string(rune('a'+i%26))+string(rune(i)), sha256, 4096, "p"))
	}
	before := h.c.Image().Offset()
	got := h.alterScram(nil, ups...)
	for user, r := range got {
		if r[:len(kerr.InvalidRequest.Message)] != kerr.InvalidRequest.Message {
			t.Fatalf("%q: %s", user, r)
		}
	}
	if h.c.Image().Offset() != before {
		t.Fatal("an oversized request appended records")
	}
}

// TestBootstrapRecordsAreTheFirstDecision: the first active controller of
// a new cluster appends the bootstrap credentials; a controller restarted
// on a log that holds state appends nothing more.
func TestBootstrapRecordsAreTheFirstDecision(t *testing.T) {
	salted := bytes.Repeat([]byte{7}, 32)
	cred := metadata.NewScramCredential(metadata.ScramSHA256, []byte("s"), salted, 4096)
	boot := []metadata.Record{metadata.NewUserScramCredentialRecord(metadata.ScramUser{Name: "broker", Mechanism: metadata.ScramSHA256}, cred)}
	cfg := DefaultConfig(100)
	cfg.BootstrapRecords = boot
	h := newHarness(t, cfg)
	h.settle()
	if _, ok := h.c.Image().ScramCredentials().Credential(metadata.ScramUser{Name: "broker", Mechanism: metadata.ScramSHA256}); !ok {
		t.Fatal("the bootstrap credential is not in the committed image")
	}
	// Removed by an operator, it must not come back at the next start.
	if got := h.alterScram([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("broker", sha256)}); got["broker"] != "ok" {
		t.Fatalf("delete: %v", got)
	}
	h.register(1, 1)
	h.restart()
	h.settle()
	if n := h.c.Image().ScramCredentials().Len(); n != 0 {
		t.Fatalf("the bootstrap credential came back after a restart: %d credentials", n)
	}

	bad := DefaultConfig(100)
	short := *boot[0].(*metadata.UserScramCredentialRecord)
	short.Iterations = 10
	bad.BootstrapRecords = []metadata.Record{&short}
	if _, err := New(bad, &manualClock{}, nil, func() [16]byte { return [16]byte{1} }); err == nil {
		t.Fatal("a bootstrap credential of 10 iterations was accepted")
	}
}

// TestScramUserNameIsBounded: a name of metadata.ScramUserNameBytesMax
// bytes is taken, one byte more is UNACCEPTABLE_CREDENTIAL (a record's
// string could not hold it).
func TestScramUserNameIsBounded(t *testing.T) {
	h := newHarness(t, DefaultConfig(100))
	named := func(name string) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := upsertion(name, sha256, 4096, "p")
		u.Salt = []byte("s")
		return u
	}
	longest := string(bytes.Repeat([]byte{'a'}, metadata.ScramUserNameBytesMax))
	if got := h.alterScram(nil, named(longest)); got[longest] != "ok" {
		t.Fatalf("a %d-byte name: %.80s", len(longest), got[longest])
	}
	over := longest + "a"
	if got := h.alterScram(nil, named(over)); got[over] != kerr.UnacceptableCredential.Message+": Username of 32768 bytes: at most 32767" {
		t.Fatalf("a %d-byte name: %.80s", len(over), got[over])
	}
}
