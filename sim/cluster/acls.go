package cluster

import (
	"fmt"
	"math/rand/v2"

	"strand/core/acl"
	"strand/models"
	"strand/sim/workload"
)

// The ACL side of a run (SPEC.md §6.1, §10.7): in the seeds with the
// authorizer on, the workload's ACL admin churns ACLs while its probes
// make requests that need them, and two checks run at the end.

// aclAdminPrincipal is the ACL admin client's principal, a super user.
const aclAdminPrincipal = "User:acl-admin"

// aclProbes is how many ACL probe clients a run with the authorizer has.
const aclProbes = 2

// aclWorkload is the workload's ACL configuration: none without the
// authorizer.
func (c *Cluster) aclWorkload(r *rand.Rand) workload.ACLConfig {
	if !c.Security.Authorizer {
		return workload.ACLConfig{}
	}
	b := c.Nodes[0].cfg.Broker
	return workload.ACLConfig{Probes: aclProbes, Rand: r, AdminPrincipal: aclAdminPrincipal,
		Config: acl.Config{SuperUsers: b.SuperUsers, AllowEveryoneIfNoACLFound: b.AllowEveryoneIfNoACLFound}}
}

// aclStalenessNs is how far behind the committed ACLs SPEC lets a broker
// decide: broker.session.timeout.ms, past which a broker that cannot
// confirm its metadata current refuses, plus the longest a deposed active
// controller may still answer metadata fetches (check-quorum: 1.5 times
// controller.quorum.fetch.timeout.ms).
func (c *Cluster) aclStalenessNs() int64 {
	b := c.Nodes[0].cfg.Broker
	return (int64(b.BrokerSessionTimeoutMs) + 3*int64(b.ControllerQuorumFetchTimeoutMs)/2) * 1e6
}

// checkACLs runs the authorized check over the ACL clients' history and,
// the cluster being quiet, the acl-agreement check of every running
// broker against the active controller.
func (r *run) checkACLs() []models.Violation {
	if !r.c.Security.Authorizer {
		return nil
	}
	vs := models.CheckAuthorized(r.w.ACLHistory(), r.c.aclStalenessNs())
	active := r.c.ActiveController()
	if active == nil {
		return vs // converged runs have one; the liveness check says so otherwise
	}
	want, _, _ := active.Core.ControllerACLs()
	var brokers []models.BrokerACLs
	for _, n := range r.c.Brokers() {
		if n.Proc.Up() && n.Core != nil {
			brokers = append(brokers, models.BrokerACLs{Node: n.ID, ACLs: n.Core.EffectiveACLs()})
		}
	}
	return append(vs, models.CheckACLAgreement(want, brokers)...)
}

// aclsQuiet says why the cluster is not yet quiet for the acl-agreement
// check ("" once it is): a running broker whose image has not reached the
// active controller's committed metadata. Checked with the convergence.
func (r *run) aclsQuiet() string {
	if !r.c.Security.Authorizer {
		return ""
	}
	active := r.c.ActiveController()
	if active == nil {
		return "no active controller"
	}
	_, offset, _ := active.Core.ControllerACLs()
	for _, n := range r.c.Brokers() {
		if n.Proc.Up() && n.Core != nil && n.Core.Image().Offset() < offset {
			return fmt.Sprintf("broker %d's metadata is at offset %d, the controller's at %d", n.ID, n.Core.Image().Offset(), offset)
		}
	}
	return ""
}
