package controller

// AlterUserScramCredentials (key 51, v0), as Kafka's ScramControlManager
// decides it, and the bootstrap credentials of a new cluster (KIP-900).
//
// Each user named in the request gets one result, in the order the
// request first names it (deletions, then upsertions):
//   - a user named twice (two deletions, two upsertions, or one of each)
//     is DUPLICATE_RESOURCE, and none of its alterations happens;
//   - an empty name is UNACCEPTABLE_CREDENTIAL, a mechanism other than
//     SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM;
//   - deleting a credential the user does not have is RESOURCE_NOT_FOUND;
//   - an upsertion's iterations must be within [4096, 16384], else
//     UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many iterations".
//     Strand also refuses (UNACCEPTABLE_CREDENTIAL) an empty salt, one over
//     metadata.ScramSaltBytesMax, and a salted password that is not the
//     hash's length: Kafka stores whatever arrives.
//
// The accepted alterations become one decision: a
// RemoveUserScramCredentialRecord per deletion, then a
// UserScramCredentialRecord per upsertion, whose stored and server keys the
// controller derives from the salted password the client sent (the
// password itself never reaches the broker). The answer comes once they
// commit; brokers authenticate with a changed credential once they have
// applied its record.

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/metadata"
)

// scramAlterationsPerRequestMax bounds the deletions and upsertions of
// one request, as Kafka bounds the records of one user operation
// (QuorumController's MAX_RECORDS_PER_USER_OP): the decision is one batch
// of the metadata log. Beyond it every user is answered INVALID_REQUEST.
const scramAlterationsPerRequestMax = 10000

// scramAlteration is one user's accepted alteration.
type scramAlteration struct {
	user     metadata.ScramUser
	upsert   *kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	deletion bool
}

func (c *Controller) handleAlterUserScramCredentials(req *kmsg.AlterUserSCRAMCredentialsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string // user names, first mention first
	errs := map[string]*apiError{}
	accepted := map[string]*scramAlteration{}
	mention := func(name string) bool {
		if _, seen := errs[name]; seen {
			return false
		}
		if _, seen := accepted[name]; seen {
			delete(accepted, name)
			errs[name] = errorf(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
			return false
		}
		order = append(order, name)
		return true
	}
	for _, d := range req.Deletions {
		if !mention(d.Name) {
			continue
		}
		u := metadata.ScramUser{Name: d.Name, Mechanism: metadata.ScramMechanism(d.Mechanism)}
		if err := c.validateScramDeletion(u); err != nil {
			errs[d.Name] = err
			continue
		}
		accepted[d.Name] = &scramAlteration{user: u, deletion: true}
	}
	for i := range req.Upsertions {
		up := &req.Upsertions[i]
		if !mention(up.Name) {
			continue
		}
		u := metadata.ScramUser{Name: up.Name, Mechanism: metadata.ScramMechanism(up.Mechanism)}
		if err := validateScramUpsertion(u, up); err != nil {
			errs[up.Name] = err
			continue
		}
		accepted[up.Name] = &scramAlteration{user: u, upsert: up}
	}

	var t *txn
	switch {
	case !c.Active():
		for _, name := range order {
			errs[name] = &apiError{code: codeNotController}
		}
	case len(req.Deletions)+len(req.Upsertions) > scramAlterationsPerRequestMax:
		for _, name := range order {
			errs[name] = errorf(kerr.InvalidRequest, "%d alterations: at most %d per request", len(req.Deletions)+len(req.Upsertions), scramAlterationsPerRequestMax)
		}
	default:
		t = c.begin()
		// Deletions first, then upsertions, as Kafka orders the records.
		for _, name := range order {
			if a := accepted[name]; a != nil && errs[name] == nil && a.deletion {
				t.add(&metadata.RemoveUserScramCredentialRecord{Name: a.user.Name, Mechanism: a.user.Mechanism})
			}
		}
		for _, name := range order {
			if a := accepted[name]; a != nil && errs[name] == nil && !a.deletion {
				cred := metadata.NewScramCredential(a.user.Mechanism, a.upsert.Salt, a.upsert.SaltedPassword, a.upsert.Iterations)
				t.add(metadata.NewUserScramCredentialRecord(a.user, cred))
			}
		}
	}
	for _, name := range order {
		out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		out.User = name
		if err := errs[name]; err != nil {
			out.ErrorCode = err.code
			if err.message != "" {
				out.ErrorMessage = &err.message
			}
		} else if a := accepted[name]; a != nil {
			c.cfg.Log.Info("altering SCRAM credential", slog.String("user", name), slog.String("mechanism", a.user.Mechanism.String()),
				slog.Bool("delete", a.deletion))
		}
		resp.Results = append(resp.Results, out)
	}
	if t == nil {
		reply(resp)
		return
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

// scramErrorResponse answers every user the request names with code, once
// each, in first-mention order.
func scramErrorResponse(req *kmsg.AlterUserSCRAMCredentialsRequest, code int16) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			out.User, out.ErrorCode = name, code
			resp.Results = append(resp.Results, out)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp
}

// validateScramUser checks what deletions and upsertions share (Kafka's
// validateScramUsernameAndMechanism).
func validateScramUser(u metadata.ScramUser) *apiError {
	switch {
	case u.Name == "":
		return errorf(kerr.UnacceptableCredential, "Username must not be empty")
	case len(u.Name) > metadata.ScramUserNameBytesMax:
		return errorf(kerr.UnacceptableCredential, "Username of %d bytes: at most %d", len(u.Name), metadata.ScramUserNameBytesMax)
	case !u.Mechanism.Known():
		return errorf(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
	}
	return nil
}

func (c *Controller) validateScramDeletion(u metadata.ScramUser) *apiError {
	if err := validateScramUser(u); err != nil {
		return err
	}
	if c.latest == nil {
		return nil // not active: answered NOT_CONTROLLER
	}
	if _, ok := c.latest.ScramCredentials().Credential(u); !ok {
		return errorf(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
	}
	return nil
}

func validateScramUpsertion(u metadata.ScramUser, up *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) *apiError {
	if err := validateScramUser(u); err != nil {
		return err
	}
	switch {
	case up.Iterations < metadata.ScramIterationsMin:
		return errorf(kerr.UnacceptableCredential, "Too few iterations")
	case up.Iterations > metadata.ScramIterationsMax:
		return errorf(kerr.UnacceptableCredential, "Too many iterations")
	case len(up.Salt) == 0 || len(up.Salt) > metadata.ScramSaltBytesMax:
		return errorf(kerr.UnacceptableCredential, "Salt of %d bytes: want 1 to %d", len(up.Salt), metadata.ScramSaltBytesMax)
	case len(up.SaltedPassword) != u.Mechanism.KeyBytes():
		return errorf(kerr.UnacceptableCredential, "Salted password of %d bytes: %v's is %d", len(up.SaltedPassword), u.Mechanism, u.Mechanism.KeyBytes())
	}
	return nil
}

// maybeWriteBootstrap appends the bootstrap records (KIP-900's
// bootstrap.checkpoint, Config.BootstrapRecords) as the first decision of
// a new cluster: when this controller becomes active on an image that
// holds nothing. Every controller of the cluster is formatted with them,
// so whichever is active first writes them, once.
func (c *Controller) maybeWriteBootstrap() {
	if len(c.cfg.BootstrapRecords) == 0 || !c.latest.Empty() {
		return
	}
	c.cfg.Log.Info("writing the bootstrap records of a new cluster", slog.Int("records", len(c.cfg.BootstrapRecords)))
	t := c.begin()
	for _, rec := range c.cfg.BootstrapRecords {
		t.add(rec)
	}
	t.commit(func() {}, nil)
}

// checkBootstrap refuses bootstrap records that an empty image would not
// take: they are appended without another check.
func checkBootstrap(records []metadata.Record) error {
	im := metadata.NewImage()
	for i, rec := range records {
		if err := im.Apply(int64(i), rec); err != nil {
			return fmt.Errorf("controller config: bootstrap record %d: %w", i, err)
		}
	}
	return nil
}
