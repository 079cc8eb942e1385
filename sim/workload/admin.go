package workload

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopics creates every topic through a random broker (which forwards
// to the controller), retrying until each exists, then runs done.
func (w *Workload) createTopics(done func()) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 5000
	for _, name := range w.cfg.allTopics() {
		req.Topics = append(req.Topics, w.cfg.newTopic(name, w.cfg.Partitions))
	}
	w.admin.send(w.admin.randomBroker(), req, w.cfg.RequestTimeoutNs, func(resp kmsg.Response, err error) {
		if err == nil && allCreated(resp.(*kmsg.CreateTopicsResponse)) {
			w.waitForLeaders(done)
			return
		}
		w.admin.proc.After(w.cfg.BackoffNs, func() { w.createTopics(done) })
	})
}

func allCreated(resp *kmsg.CreateTopicsResponse) bool {
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 && t.ErrorCode != kerr.TopicAlreadyExists.Code {
			return false
		}
	}
	return true
}

// waitForLeaders polls Metadata until every partition has a leader.
func (w *Workload) waitForLeaders(done func()) {
	w.admin.refreshMetadata(func() {
		for _, tp := range w.Partitions() {
			if _, ok := w.admin.leaders[tp]; !ok {
				w.admin.proc.After(w.cfg.BackoffNs, func() { w.waitForLeaders(done) })
				return
			}
		}
		done()
	})
}
