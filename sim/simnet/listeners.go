package simnet

import "strand/core/config"

// ListenersOf is the listeners a node configured as b has, in the order of
// its listeners key (a client listener first in every configuration the
// simulator writes), each secured when its security protocol is not
// PLAINTEXT.
func ListenersOf(b config.Broker) []Listener {
	out := make([]Listener, 0, len(b.Listeners))
	for _, l := range b.Listeners {
		out = append(out, Listener{Name: l.Name, Secured: b.ListenerSecured(l.Name)})
	}
	return out
}
