package config

import (
	"slices"
	"strings"
)

// Security settings fail closed (SPEC.md §10): a key that asks for
// security Strand does not implement refuses the start, because a broker
// that warns and serves anyway leaves the operator believing the cluster is
// protected. Other unknown keys only warn. A security key becomes
// implemented by getting an entry in brokerKeys; from then on it is parsed
// like any other key and never reaches this classification.

// securityKeyPrefixes start the names of Kafka's security settings:
// TLS, SASL, the inter-broker and controller protocols, authorizers,
// delegation tokens and the password encoder.
var securityKeyPrefixes = []string{
	"ssl.", "sasl.", "security.", "authorizer.", "delegation.token.", "password.encoder.",
}

// securityKeys are the other security settings, by exact name: Kafka's
// (authorization, super users, principal building, re-authentication, the
// delay after a failed login, per-address connection limits) and the
// design's shorthand (authentication=simple|kerberos|ipaddress with
// principal and keytab, CLARIFICATIONS.md).
var securityKeys = []string{
	"allow.everyone.if.no.acl.found",
	"authentication",
	"connection.failed.authentication.delay.ms",
	"connections.max.reauth.ms",
	"keytab",
	"max.connections.per.ip",
	"max.connections.per.ip.overrides",
	"principal",
	"principal.builder.class",
	"super.users",
}

// listenerKeyPrefix scopes a setting to one listener:
// listener.name.<listener>.<key>, and for SASL
// listener.name.<listener>.<mechanism>.sasl.<key>.
const listenerKeyPrefix = "listener.name."

// IsSecurityKey reports whether key is one of Kafka's (or the design's)
// security settings, which refuse the start unless Strand implements them.
func IsSecurityKey(key string) bool {
	if rest, ok := strings.CutPrefix(key, listenerKeyPrefix); ok {
		_, scoped, ok := strings.Cut(rest, ".")
		if !ok {
			return false
		}
		if IsSecurityKey(scoped) {
			return true
		}
		// <mechanism>.sasl.jaas.config and the like.
		_, mechanismScoped, ok := strings.Cut(scoped, ".")
		return ok && strings.HasPrefix(mechanismScoped, "sasl.")
	}
	if slices.Contains(securityKeys, key) {
		return true
	}
	for _, prefix := range securityKeyPrefixes {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}

// refuseUnimplementedSecurity turns the unknown security keys among keys
// (sorted) into one error naming the first and listing the rest.
func refuseUnimplementedSecurity(keys []string) error {
	var refused []string
	for _, key := range keys {
		if IsSecurityKey(key) {
			refused = append(refused, key)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	detail := "is a security setting Strand does not implement: refusing to start rather than run without the protection it asks for (remove it to run without it)"
	if len(refused) > 1 {
		detail += "; also not implemented: " + strings.Join(refused[1:], ", ")
	}
	return keyError(refused[0], "%s", detail)
}

// parsePrincipals parses super.users: principals separated by semicolons
// (Kafka's separator, since a principal such as a TLS distinguished name
// may contain commas), each "<type>:<name>" as Kafka's
// KafkaPrincipal.fromString reads it.
func parsePrincipals(key, value string) ([]string, error) {
	trimmed := strings.TrimSpace(value)
	if trimmed == "" {
		return nil, nil
	}
	var principals []string
	for _, item := range strings.Split(trimmed, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, valueError(key, value, "has an empty item in its semicolon-separated list")
		}
		kind, name, ok := strings.Cut(item, ":")
		if !ok || kind == "" || name == "" {
			return nil, valueError(key, value, "has %q, which is not a principal: want <type>:<name>, such as User:alice", item)
		}
		if !slices.Contains(principals, item) {
			principals = append(principals, item)
		}
	}
	return principals, nil
}

// ListenerSecured reports whether the listener named name authenticates
// its connections: its security protocol is anything but PLAINTEXT. On a
// secured listener a connection has the principal its authentication
// gave it; on PLAINTEXT every connection is User:ANONYMOUS.
func (b Broker) ListenerSecured(name string) bool {
	protocol, ok := b.ListenerSecurityProtocols[name]
	return ok && protocol != SecurityProtocolPlaintext
}

// ControllerPlaneSecured reports whether any controller listener is
// secured: then only cluster members act on the control plane (SPEC.md
// §10), on every controller listener.
func (b Broker) ControllerPlaneSecured() bool {
	return slices.ContainsFunc(b.ControllerListenerNames, b.ListenerSecured)
}

// InterBrokerPlaneSecured reports whether the inter-broker listener is
// secured: then only cluster members fetch as replicas, on every broker
// listener.
func (b Broker) InterBrokerPlaneSecured() bool {
	return b.InterBrokerListenerName != "" && b.ListenerSecured(b.InterBrokerListenerName)
}

// IsSuperUser reports whether principal is listed in super.users.
func (b Broker) IsSuperUser(principal string) bool {
	return slices.Contains(b.SuperUsers, principal)
}

// resolveSecurity checks the security settings against each other. A
// secured control plane (controller listener) or replication plane
// (inter-broker listener) admits only cluster members; so does every plane
// once the authorizer is on. A member is a super user, or holds
// CLUSTER_ACTION by an ACL, but ACLs live in the metadata log, which the
// quorum must first elect and brokers register to hold: without
// super.users nobody could vote, register or replicate, so the node
// refuses to start. A lone combined node is the exception: its broker and
// controller talk in process.
func (b *builder) resolveSecurity() error {
	if len(b.SuperUsers) > 0 {
		return nil
	}
	membersNeeded := "list the brokers' and controllers' principals (ACLs, which could grant CLUSTER_ACTION, live in the metadata log those members must first write)"
	for _, name := range b.ControllerListenerNames {
		if b.ListenerSecured(name) {
			return keyError("super.users", "is empty, but controller listener %s is secured (%s): only cluster members "+
				"may register brokers, heartbeat or vote, so none could; %s", name, b.ListenerSecurityProtocols[name], membersNeeded)
		}
	}
	if b.Roles.Broker && b.InterBrokerPlaneSecured() {
		return keyError("super.users", "is empty, but inter-broker listener %s is secured (%s): only cluster members "+
			"may fetch as replicas, so no partition could replicate; %s", b.InterBrokerListenerName,
			b.ListenerSecurityProtocols[b.InterBrokerListenerName], membersNeeded)
	}
	loneCombinedNode := b.Roles.Broker && b.Roles.Controller && len(b.QuorumVoters) <= 1
	if b.AuthorizerEnabled && !loneCombinedNode {
		return keyError("super.users", "is empty, but authorizer.class.name is set: with the authorizer on, only cluster "+
			"members may vote, register brokers or replicate, on every listener, so none could; %s "+
			"(on a PLAINTEXT listener a node is User:ANONYMOUS)", membersNeeded)
	}
	return nil
}

// StandardAuthorizer is the one authorizer.class.name Strand serves:
// KRaft's, whose ACLs are metadata records.
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// parseAuthorizer parses authorizer.class.name: empty (no authorizer) or
// StandardAuthorizer. Anything else refuses the start: running without
// the authorizer the operator named would leave every resource open.
func parseAuthorizer(key, value string) (bool, error) {
	switch v := strings.TrimSpace(value); v {
	case "":
		return false, nil
	case StandardAuthorizer:
		return true, nil
	case "kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer":
		return false, valueError(key, value, "is ZooKeeper's authorizer; Strand keeps ACLs in the metadata log: use %s", StandardAuthorizer)
	default:
		return false, valueError(key, value, "is not an authorizer Strand implements: use %s, or leave the key out to allow every request", StandardAuthorizer)
	}
}

// CheckProtocolsServed refuses a configuration with a listener whose
// security protocol the environment does not serve. served lists the
// protocols the environment implements: realnet serves PLAINTEXT until
// TLS and SASL land there; the simulator authenticates every protocol by
// assigning principals. Serving a secured listener in plaintext would hand
// the operator's secured port to anyone, so the node does not start.
func (b Broker) CheckProtocolsServed(served []string) error {
	for _, l := range b.Listeners {
		if !slices.Contains(served, l.SecurityProtocol) {
			return keyError("listener.security.protocol.map",
				"maps listener %s to %s, which this build does not serve (it serves %s): refusing to start rather than serve it unsecured",
				l.Name, l.SecurityProtocol, strings.Join(served, ", "))
		}
	}
	return nil
}
