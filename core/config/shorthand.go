package config

import (
	"maps"
	"slices"
	"strings"
)

// The design's authentication modes (`authentication=`).
const (
	AuthenticationSimple    = "simple"
	AuthenticationKerberos  = "kerberos"
	AuthenticationIPAddress = "ipaddress"
)

// expandShorthand rewrites the design's keys, authentication=
// simple|kerberos|ipaddress with principal and keytab, into the Kafka keys
// they stand for (SPEC.md §10.6), adding them to props:
//
//   - simple: nothing (PLAINTEXT listeners, ANONYMOUS principals);
//   - ipaddress: principal.builder.class=IPAddressPrincipalBuilder (every
//     PLAINTEXT connection's principal is User:<source IP>);
//   - kerberos: every listener (listeners and controller.listener.names)
//     SASL_PLAINTEXT with GSSAPI, for clients, brokers and controllers
//     alike: listener.security.protocol.map, sasl.enabled.mechanisms,
//     sasl.mechanism.inter.broker.protocol,
//     sasl.mechanism.controller.protocol, sasl.kerberos.service.name (the
//     principal's first component), and per listener
//     listener.name.<l>.gssapi.sasl.jaas.config with the keytab and the
//     principal; and, unless given, super.users=User:<that component>, the
//     design's privileged user, which the nodes authenticate as.
//
// A Kafka key the expansion would set that props already sets to another
// value is a contradiction, refused naming both keys: the shorthand is
// for configurations that do not spell out those keys.
func expandShorthand(props map[string]string) error {
	mode, given := props["authentication"]
	mode = strings.TrimSpace(mode)
	if !given {
		mode = AuthenticationSimple
	}
	principal, keytab := strings.TrimSpace(props["principal"]), strings.TrimSpace(props["keytab"])
	switch mode {
	case AuthenticationSimple, AuthenticationIPAddress:
		for _, k := range []string{"principal", "keytab"} {
			if _, set := props[k]; set {
				return keyError(k, "is set, but authentication=%s: principal and keytab go with authentication=kerberos", mode)
			}
		}
		if mode == AuthenticationIPAddress {
			return setExpanded(props, "ipaddress", map[string]string{"principal.builder.class": IPAddressPrincipalBuilder})
		}
		return nil
	case AuthenticationKerberos:
	default:
		return valueError("authentication", mode, "is not an authentication mode: want simple, kerberos or ipaddress")
	}
	if principal == "" || keytab == "" {
		return keyError("authentication", "is kerberos: principal and keytab are required (the node's Kerberos principal, e.g. kafka/host1@REALM, and its keytab file)")
	}
	primary, _, realm, err := SplitKerberosName(principal)
	if err != nil || realm == "" || primary == "" {
		return valueError("principal", principal, "is not a Kerberos principal: want service/host@REALM")
	}
	listenersValue, set := props["listeners"]
	if !set {
		listenersValue = brokerKeys["listeners"].defaultValue
	}
	listeners, err := parseListeners("listeners", listenersValue)
	if err != nil {
		return err
	}
	controllers, err := parseList("controller.listener.names", props["controller.listener.names"])
	if err != nil {
		return err
	}
	names := []string{}
	for _, l := range listeners {
		names = append(names, l.name)
	}
	for _, c := range controllers {
		if c = strings.ToUpper(c); !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	var protocolMap []string
	jaas := kerberosLoginModule + " required useKeyTab=true storeKey=true keyTab=" + quoteJAAS(keytab) + " principal=" + quoteJAAS(principal) + ";"
	expanded := map[string]string{
		"sasl.enabled.mechanisms":              MechanismGSSAPI,
		"sasl.mechanism.inter.broker.protocol": MechanismGSSAPI,
		"sasl.mechanism.controller.protocol":   MechanismGSSAPI,
		"sasl.kerberos.service.name":           primary,
	}
	for _, name := range names {
		protocolMap = append(protocolMap, name+":"+SecurityProtocolSASLPlaintext)
		expanded["listener.name."+strings.ToLower(name)+".gssapi.sasl.jaas.config"] = jaas
	}
	expanded["listener.security.protocol.map"] = strings.Join(protocolMap, ",")
	if _, set := props["super.users"]; !set {
		// The design's privileged user: the nodes' own principal (the
		// DEFAULT rule maps kafka/host@REALM to User:kafka), so that they
		// may register, heartbeat and replicate on the secured planes.
		// Given, super.users is the operator's and is kept.
		props["super.users"] = "User:" + primary
	}
	return setExpanded(props, "kerberos", expanded)
}

// setExpanded adds the expansion's keys to props, refusing a key already
// given with another value.
func setExpanded(props map[string]string, mode string, expanded map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(expanded)) {
		if v, set := props[k]; set && strings.TrimSpace(v) != expanded[k] {
			return keyError(k, "is set, and authentication=%s sets it too (to %q): use either the design's shorthand or Kafka's keys, not both", mode, expanded[k])
		}
		props[k] = expanded[k]
	}
	return nil
}
