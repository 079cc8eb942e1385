package realnet

import (
	"sync/atomic"

	"strand/core/env"
)

// scramStore holds the SCRAM credentials the core last published
// (Network.SetScramCredentials), an immutable value the loop replaces and
// the connection readers' SCRAM exchanges read (auth.ScramLookup). Until
// the core publishes, no user has a credential.
type scramStore struct {
	current atomic.Pointer[scramCredentials]
}

// scramCredentials boxes an env.ScramCredentials for atomic.Pointer.
type scramCredentials struct{ env.ScramCredentials }

// lookup is the auth.ScramLookup over the newest credentials.
func (s *scramStore) lookup(mechanism, user string) (env.ScramCredential, bool) {
	c := s.current.Load()
	if c == nil || c.ScramCredentials == nil {
		return env.ScramCredential{}, false
	}
	return c.LookupScram(mechanism, user)
}

// SetScramCredentials keeps the core's newest SCRAM credentials for the
// connections' authentications from now on (env.Network). It runs on the
// loop.
func (n *Network) SetScramCredentials(c env.ScramCredentials) {
	n.scram.current.Store(&scramCredentials{c})
}
