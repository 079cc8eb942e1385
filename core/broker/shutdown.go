package broker

import (
	"errors"
	"fmt"
)

// BeginShutdown starts a controlled shutdown (Kafka's KIP-631 flow): the
// broker keeps serving while its heartbeats ask to shut down; the controller
// moves every leadership it holds to other ISR members and answers
// ShouldShutdown once it leads nothing. Then done runs, and the caller stops
// the process with Close. A node without the broker role, or not registered
// yet, is done at once.
func (n *Node) BeginShutdown(done func()) {
	if !n.cfg.Broker.Roles.Broker || n.brokerEpoch < 0 {
		done()
		return
	}
	n.shutdownDone = done
	n.heartbeat()
}

// Close releases the node's files: every partition log and the metadata
// log. The node must not be used afterwards; pending timers and callbacks
// are the environment's to drop (the process is going away).
func (n *Node) Close() error {
	var err error
	for _, m := range n.managers {
		err = errors.Join(err, m.Close())
	}
	if n.ctrl != nil {
		n.ctrl.Close()
	}
	if n.metadataLog != nil {
		err = errors.Join(err, n.metadataLog.Close())
	}
	if err != nil {
		return fmt.Errorf("broker: close node %d: %w", n.id, err)
	}
	return nil
}
