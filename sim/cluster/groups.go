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
// checkers. Within the
// fault budget every guarantee holds; over it the offsets partition itself
// may lose acknowledged records (a commit, a generation), so a violation
// is counted as loss over budget instead.
func (r *run) checkGroups() []models.Violation {
	gh := r.w.GroupHistory()
	var vs []models.Violation
	vs = append(vs, models.CheckAssignments(gh)...)
	vs = append(vs, models.CheckCommitGenerations(gh)...)
	vs = append(vs, models.CheckOffsets(gh, models.OffsetOptions{})...)
	vs = append(vs, models.CheckIdempotence(r.w.IdempotentSends(), r.final)...)
	vs = append(vs, models.CheckTopicChurn(r.w.AdminOps())...)
	if r.res.OverBudget {
		r.res.LostOverBudget += len(vs)
		return nil
	}
	return vs
}
