package cluster

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"strand/core/config"
)

// Listener names of every simulated node: the client (and inter-broker)
// listener, and the controller listener of the voters.
const (
	clientListener     = "PLAINTEXT"
	controllerListener = "CONTROLLER"
)

// securedProtocol is the protocol of a secured listener in the simulator.
// simnet does no handshake: a connection to a secured listener simply
// has its dialling host's principal (simnet.Listener), which is all the
// core sees of authentication (CLARIFICATIONS.md, "The principal is data,
// the crypto is environment").
const securedProtocol = "SASL_PLAINTEXT"

// Security is how a run's listeners authenticate, drawn from the seed
// (SPEC.md §6, §10): each plane open (PLAINTEXT, every connection
// User:ANONYMOUS) or secured, and the principals the nodes authenticate
// as, all of them super users.
type Security struct {
	// ControllerSecured: the controller listener is secured; only super
	// users act on the control plane.
	ControllerSecured bool
	// InterBrokerSecured: the client listener, which is also the
	// inter-broker listener, is secured; only super users fetch as
	// replicas. Drawn only with ControllerSecured.
	InterBrokerSecured bool
	// SharedPrincipal: every node authenticates as User:kafka (the
	// design's privileged user) instead of User:broker-<id>.
	SharedPrincipal bool
	// Authorizer: authorizer.class.name is StandardAuthorizer, the ACL
	// admin (aclAdminPrincipal) is a super user too, and the ACL clients
	// run (acls.go). Drawn only with both planes secured, where clients
	// have principals of their own.
	Authorizer bool
}

// drawSecurity draws a third of the seeds open, a third with the control
// plane secured, a third with both planes secured; the nodes' principals
// shared in half of the secured ones.
func drawSecurity(r *rand.Rand) Security {
	var s Security
	switch r.IntN(3) {
	case 1:
		s.ControllerSecured = true
	case 2:
		s.ControllerSecured, s.InterBrokerSecured = true, true
	}
	s.SharedPrincipal = s.ControllerSecured && r.IntN(2) == 0
	s.Authorizer = s.InterBrokerSecured && r.IntN(2) == 0
	return s
}

func (s Security) String() string {
	principals := "per-node"
	if s.SharedPrincipal {
		principals = "shared"
	}
	return fmt.Sprintf("security{controller_secured=%v inter_broker_secured=%v principals=%s authorizer=%v}",
		s.ControllerSecured, s.InterBrokerSecured, principals, s.Authorizer)
}

// principal is what node id authenticates as on a secured listener.
func (s Security) principal(id int32) string {
	if s.SharedPrincipal {
		return "User:kafka"
	}
	return fmt.Sprintf("User:broker-%d", id)
}

// properties are the security keys of a cluster of brokers nodes.
func (s Security) properties(brokers int) map[string]string {
	protocol := func(secured bool) string {
		if secured {
			return securedProtocol
		}
		return config.SecurityProtocolPlaintext
	}
	props := map[string]string{"listener.security.protocol.map": fmt.Sprintf("%s:%s,%s:%s",
		clientListener, protocol(s.InterBrokerSecured), controllerListener, protocol(s.ControllerSecured))}
	if s.ControllerSecured {
		var users []string
		for id := int32(1); id <= int32(brokers); id++ {
			users = append(users, s.principal(id))
		}
		if s.SharedPrincipal {
			users = users[:1]
		}
		if s.Authorizer {
			users = append(users, aclAdminPrincipal)
			props["authorizer.class.name"] = config.StandardAuthorizer
		}
		props["super.users"] = strings.Join(users, ";")
	}
	return props
}

// forgerPrincipals are what the forger authenticates as: never a member,
// some close to one.
var forgerPrincipals = []string{"User:ANONYMOUS", "User:mallory", "User:broker", "User:kafka-admin", "User:broker-99"}
