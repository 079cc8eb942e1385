package cluster

import (
	"encoding/hex"
	"fmt"
	"strings"

	"strand/core/metadata"
	"strand/models"
	"strand/sim/sched"
)

// SCRAM credentials in the simulation: in most seeds the credential admin
// alters credentials (workload/scram.go), every scramIntervalNsMin to
// scramIntervalNsMax on average, drawn from the "workload/scram" stream.
const (
	noScramPerMille    = 300
	scramIntervalNsMin = 500e6
	scramIntervalNsMax = 3e9
)

// drawScramInterval is the run's mean time between two credential
// alterations, 0 for none.
func drawScramInterval(s *sched.Streams) int64 {
	r := s.Get("workload/scram")
	if sched.Chance(r, noScramPerMille) {
		return 0
	}
	return sched.Int64Between(r, scramIntervalNsMin, scramIntervalNsMax)
}

// scramText is a credential set as canonical text, for comparisons and
// messages.
func scramText(c *metadata.ScramCredentials) string {
	var b strings.Builder
	for _, u := range c.Users() {
		cred, _ := c.Credential(u)
		fmt.Fprintf(&b, "%s/%v/%d/%s/%s/%s ", u.Name, u.Mechanism, cred.Iterations,
			hex.EncodeToString(cred.Salt), hex.EncodeToString(cred.StoredKey[:4]), hex.EncodeToString(cred.ServerKey[:4]))
	}
	return b.String()
}

// scramViews are the running brokers' credentials, and the active
// controller's committed ones ("" without an active controller).
func (r *run) scramViews() (controller string, views []models.ScramView) {
	if a := r.c.ActiveController(); a != nil {
		controller = scramText(a.Core.ControllerImage().ScramCredentials())
	}
	for _, n := range r.c.Brokers() {
		if !n.Proc.Up() || n.Core == nil {
			continue
		}
		applied := n.Core.Image().ScramCredentials()
		published, _ := n.Net.ScramCredentials().(*metadata.ScramCredentials)
		views = append(views, models.ScramView{Node: n.ID, Image: scramText(applied),
			Matches: published == applied || (published == nil && applied.Len() == 0)})
	}
	return controller, views
}

// scramConverged says why the brokers' credentials do not yet agree with
// the controller's, "" once they do: a broker applies a change a little
// after it commits. What a broker publishes is checked once converged
// (checkScram): it must match at once, not eventually.
func (r *run) scramConverged() string {
	controller, views := r.scramViews()
	for i := range views {
		views[i].Matches = true
	}
	if vs := models.CheckScramAgreement(controller, views); len(vs) > 0 {
		return vs[0].Detail
	}
	return ""
}

// checkScram checks the credential admin's answers and, the run having
// converged, that every broker holds the controller's credentials and
// authenticates with them.
func (r *run) checkScram() []models.Violation {
	vs := models.CheckScramRegisters(r.w.ScramOps(), 0)
	if r.final != nil {
		controller, views := r.scramViews()
		vs = append(vs, models.CheckScramAgreement(controller, views)...)
	}
	return vs
}
