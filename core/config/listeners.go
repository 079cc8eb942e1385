package config

import (
	"slices"
	"strconv"
	"strings"

	"strand/core/env"
)

// SecurityProtocolPlaintext is the protocol whose connections do not
// authenticate: every one is User:ANONYMOUS. Kafka's others (SSL,
// SASL_PLAINTEXT, SASL_SSL) are parsed too; an environment that does not
// serve one refuses to start a listener on it (Broker.CheckProtocolsServed).
const SecurityProtocolPlaintext = "PLAINTEXT"

// SecurityProtocols are the protocol names Kafka knows, in its order.
func SecurityProtocols() []string { return slices.Clone(kafkaSecurityProtocols) }

// kafkaSecurityProtocols are the protocol names Kafka knows.
var kafkaSecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// Listener is one entry of listeners or advertised.listeners:
// NAME://host:port.
type Listener struct {
	// Name is the listener name, upper-cased as Kafka normalises it.
	Name string
	// Host is the host or IP address (without brackets for IPv6). Empty means
	// every interface when binding; Kafka advertises the canonical host name
	// in that case, which the binary must resolve.
	Host string
	// Port is the TCP port; 0 asks the kernel for a free one (tests).
	Port uint16
	// SecurityProtocol is the listener's protocol from
	// listener.security.protocol.map.
	SecurityProtocol string
}

// Address returns host:port, bracketing an IPv6 host.
func (l Listener) Address() string { return joinHostPort(l.Host, l.Port) }

// String returns the listener as written in the configuration.
func (l Listener) String() string { return l.Name + "://" + l.Address() }

// Voter is one entry of controller.quorum.voters: id@host:port.
type Voter struct {
	// ID is the voter's node.id.
	ID env.NodeID
	// Host and Port are the voter's controller listener.
	Host string
	// Port is the TCP port of the voter's controller listener.
	Port uint16
}

// Address returns host:port, bracketing an IPv6 host.
func (v Voter) Address() string { return joinHostPort(v.Host, v.Port) }

// String returns the voter as written in controller.quorum.voters.
func (v Voter) String() string {
	return strconv.FormatInt(int64(v.ID), 10) + "@" + v.Address()
}

func joinHostPort(host string, port uint16) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.FormatUint(uint64(port), 10)
}

// rawListener is a listener before its security protocol is known.
type rawListener struct {
	name string
	host string
	port uint16
}

// parseListeners parses a listeners-style list. Names must be unique.
func parseListeners(key, value string) ([]rawListener, error) {
	items, err := parseList(key, value)
	if err != nil {
		return nil, err
	}
	listeners := make([]rawListener, 0, len(items))
	seen := map[string]bool{}
	for _, item := range items {
		l, err := parseListener(key, item)
		if err != nil {
			return nil, err
		}
		if seen[l.name] {
			return nil, valueError(key, value, "names listener %s more than once", l.name)
		}
		seen[l.name] = true
		listeners = append(listeners, l)
	}
	return listeners, nil
}

// parseListener parses NAME://host:port, [v6]:port included.
func parseListener(key, item string) (rawListener, error) {
	name, address, ok := strings.Cut(item, "://")
	if !ok || name == "" {
		return rawListener{}, valueError(key, item, "is not a listener: want NAME://host:port")
	}
	host, port, err := splitHostPort(key, item, address)
	if err != nil {
		return rawListener{}, err
	}
	return rawListener{name: strings.ToUpper(name), host: host, port: port}, nil
}

// splitHostPort splits host:port or [v6]:port. The host may be empty.
func splitHostPort(key, item, address string) (string, uint16, error) {
	colon := strings.LastIndexByte(address, ':')
	if colon < 0 {
		return "", 0, valueError(key, item, "has no port: want host:port")
	}
	host, portText := address[:colon], address[colon+1:]
	if strings.HasPrefix(host, "[") {
		if !strings.HasSuffix(host, "]") {
			return "", 0, valueError(key, item, "has an unclosed [ in its host")
		}
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") {
		return "", 0, valueError(key, item, "has an IPv6 host without brackets: want [host]:port")
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return "", 0, valueError(key, item, "has an invalid port %q: want 0 to 65535", portText)
	}
	return host, uint16(port), nil
}

// parseVoters parses controller.quorum.voters: id@host:port,... with unique
// ids.
func parseVoters(key, value string) ([]Voter, error) {
	items, err := parseList(key, value)
	if err != nil {
		return nil, err
	}
	voters := make([]Voter, 0, len(items))
	seen := map[env.NodeID]bool{}
	for _, item := range items {
		idText, address, ok := strings.Cut(item, "@")
		if !ok {
			return nil, valueError(key, item, "is not a voter: want id@host:port")
		}
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil || id < 0 {
			return nil, valueError(key, item, "has an invalid node id %q: want an integer >= 0", idText)
		}
		host, port, err := splitHostPort(key, item, address)
		if err != nil {
			return nil, err
		}
		if host == "" {
			return nil, valueError(key, item, "has no host")
		}
		if seen[env.NodeID(id)] {
			return nil, valueError(key, value, "lists voter %d more than once", id)
		}
		seen[env.NodeID(id)] = true
		voters = append(voters, Voter{ID: env.NodeID(id), Host: host, Port: uint16(port)})
	}
	return voters, nil
}

// parseProtocolMap parses listener.security.protocol.map: NAME:PROTOCOL,...
func parseProtocolMap(key, value string) (map[string]string, error) {
	items, err := parseList(key, value)
	if err != nil {
		return nil, err
	}
	protocols := map[string]string{}
	for _, item := range items {
		name, protocol, ok := strings.Cut(item, ":")
		name, protocol = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(protocol))
		if !ok || name == "" {
			return nil, valueError(key, item, "is not a mapping: want LISTENER_NAME:SECURITY_PROTOCOL")
		}
		if !isKafkaSecurityProtocol(protocol) {
			return nil, valueError(key, item, "names an unknown security protocol %q: want one of %s",
				protocol, strings.Join(kafkaSecurityProtocols, ", "))
		}
		if _, dup := protocols[name]; dup {
			return nil, valueError(key, value, "maps listener %s more than once", name)
		}
		protocols[name] = protocol
	}
	return protocols, nil
}

func isKafkaSecurityProtocol(name string) bool {
	for _, p := range kafkaSecurityProtocols {
		if p == name {
			return true
		}
	}
	return false
}
