package workload

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/models"
)

// SCRAM credentials: the credential admin alters the credentials of a few
// users, one AlterUserScramCredentials at a time through a random broker
// (which forwards it to the controller), every ScramIntervalNs on average
// while producers run: an upsert of a random iteration count or a
// deletion, of a random user and mechanism. Every alteration is recorded
// (models.ScramOp) for models.CheckScramRegisters; the harness checks at
// convergence that every broker holds the controller's credentials and
// hands its environment what it applied (models.CheckScramAgreement).
// Everything it draws comes from ScramRand, so that a run with it keeps
// every other client's draws.

// scramUsers are the users whose credentials change.
var scramUsers = []string{"s0", "s1"}

// startScram begins the credential admin's loop, if the run has one.
func (w *Workload) startScram() {
	if w.scramAdmin != nil {
		w.scheduleScram()
	}
}

func (w *Workload) scheduleScram() {
	interval := w.cfg.ScramIntervalNs
	w.scramAdmin.proc.After(interval/2+w.cfg.ScramRand.Int64N(interval+1), w.scramStep)
}

// scramStep sends one alteration and schedules the next once it is
// answered.
func (w *Workload) scramStep() {
	if w.stopped {
		return
	}
	r := w.cfg.ScramRand
	op := models.ScramOp{Client: w.scramAdmin.index, User: scramUsers[r.IntN(len(scramUsers))], Mechanism: int8(1 + r.IntN(2)),
		CallNs: w.s.NowNs(), ReturnNs: models.NeverReturnedNs}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	if r.IntN(3) == 0 {
		op.Kind = models.ScramDelete
		req.Deletions = append(req.Deletions, kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: op.User, Mechanism: op.Mechanism})
	} else {
		op.Kind, op.Iterations = models.ScramUpsert, int32(4096+r.IntN(4096))
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations = op.User, op.Mechanism, op.Iterations
		u.Salt = []byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}
		u.SaltedPassword = make([]byte, 32*int(op.Mechanism)) // SCRAM-SHA-256's 32 bytes, SCRAM-SHA-512's 64
		for i := range u.SaltedPassword {
			u.SaltedPassword[i] = byte(r.IntN(256))
		}
		req.Upsertions = append(req.Upsertions, u)
	}
	i := len(w.scramOps)
	w.scramOps = append(w.scramOps, op)
	broker := int32(w.cfg.Brokers[r.IntN(len(w.cfg.Brokers))])
	w.scramAdmin.send(broker, req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		op := &w.scramOps[i]
		switch {
		case err == errTimedOut:
			// Unknown outcome: the return time stays infinite.
		case err != nil:
			op.ReturnNs, op.Error = w.s.NowNs(), err.Error()
		default:
			op.ReturnNs, op.ErrorCode = w.s.NowNs(), -1 // no result for the user: not definite
			for _, res := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
				if res.User == op.User {
					op.ErrorCode = res.ErrorCode
				}
			}
		}
		w.scheduleScram()
	})
}

// scramUnauthorized counts the alterations refused
// CLUSTER_AUTHORIZATION_FAILED: none where the authorizer is on, whose
// base ACLs let the credential admin ALTER the cluster (acls.go).
func (w *Workload) scramUnauthorized() int {
	n := 0
	for _, op := range w.scramOps {
		if op.ErrorCode == kerr.ClusterAuthorizationFailed.Code {
			n++
		}
	}
	return n
}

// ScramOps lists the credential admin's alterations.
func (w *Workload) ScramOps() []models.ScramOp { return w.scramOps }
