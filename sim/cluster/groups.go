package cluster

import (
	"fmt"

	"strand/models"
)

// probeGroups reads every consumer group's committed offsets once the
// cluster has converged (workload.ProbeGroupOffsets), then runs done; a
// group whose coordinator does not answer by deadlineNs is a liveness
// violation.
func (r *run) probeGroups(deadlineNs int64, done func()) {
	r.w.ProbeGroupOffsets(deadlineNs, func(unanswered []string) {
		if len(unanswered) > 0 {
			r.violate("liveness", fmt.Sprintf("groups %v: no coordinator answered OffsetFetch %d s after healing",
				unanswered, r.shape.ConvergeNs/1e9))
			return
		}
		done()
	})
}

// checkGroups runs the consumer-group, idempotence and topic-churn
// checkers (idempotence only once the cluster converged: it reads the
// final logs). Their violations stand whatever the fault budget: none of
// them is a loss the budget explains.
func (r *run) checkGroups() []models.Violation {
	gh := r.w.GroupHistory()
	var vs []models.Violation
	vs = append(vs, models.CheckAssignments(gh)...)
	vs = append(vs, models.CheckCommitGenerations(gh)...)
	vs = append(vs, models.CheckOffsets(gh, models.OffsetOptions{})...)
	if r.final != nil {
		vs = append(vs, models.CheckIdempotence(r.w.IdempotentSends(), r.final)...)
	}
	vs = append(vs, models.CheckTopicChurn(r.w.AdminOps())...)
	return vs
}
