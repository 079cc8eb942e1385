package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestIsSecurityKey classifies Kafka's security settings, the listener-
// scoped ones and the design's shorthand as security keys, and leaves the
// rest alone.
func TestIsSecurityKey(t *testing.T) {
	security := []string{
		"ssl.client.auth", "ssl.keystore.location", "ssl.principal.mapping.rules",
		"sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.mechanism.inter.broker.protocol",
		"security.inter.broker.protocol", "authorizer.class.name", "allow.everyone.if.no.acl.found",
		"super.users", "principal.builder.class", "connections.max.reauth.ms",
		"connection.failed.authentication.delay.ms", "delegation.token.secret.key", "password.encoder.secret",
		"max.connections.per.ip", "max.connections.per.ip.overrides",
		"listener.name.sasl_ssl.ssl.keystore.location", "listener.name.client.plain.sasl.jaas.config",
		"listener.name.internal.gssapi.sasl.kerberos.service.name", "listener.name.x.connections.max.reauth.ms",
		"listener.name.x.principal.builder.class",
		"authentication", "principal", "keytab",
	}
	for _, key := range security {
		if !IsSecurityKey(key) {
			t.Errorf("%s: not classified as a security key", key)
		}
	}
	other := []string{
		"num.network.threads", "zookeeper.connect", "zookeeper.ssl.client.enable", "listener.name.x.max.connections",
		"listener.name.x", "listeners", "log.dirs", "principals", "sslx", "max.connections",
	}
	for _, key := range other {
		if IsSecurityKey(key) {
			t.Errorf("%s: classified as a security key", key)
		}
	}
}

// TestUnimplementedSecurityKeysRefuseTheStart: each security key Strand does
// not implement, with a value an operator would set, is an *Error naming
// it: a warning would leave the broker serving wide open.
func TestUnimplementedSecurityKeysRefuseTheStart(t *testing.T) {
	cases := map[string]string{
		"authorizer.properties":   "x",
		"ssl.cipher.suites":       "TLS_AES_128_GCM_SHA256",
		"password.encoder.secret": "x",
		"sasl.login.class":        "x",
		"listener.name.controller.plain.sasl.server.callback.handler.class": "x",
		"delegation.token.secret.key":                                       "x",
	}
	for key, value := range cases {
		_, warnings, err := parseWith(t, map[string]string{key: value, "num.network.threads": "3"})
		var cfgErr *Error
		if !errors.As(err, &cfgErr) || cfgErr.Key != key {
			t.Errorf("%s=%s: got %v, want a *config.Error naming the key", key, value, err)
			continue
		}
		if !strings.Contains(err.Error(), "security setting Strand does not implement") {
			t.Errorf("%s: error %q does not say why", key, err)
		}
		if !slices.Equal(warnings.Keys(), []string{"num.network.threads"}) {
			t.Errorf("%s: warnings %v, want only the non-security key", key, warnings.Keys())
		}
	}
}

// TestSeveralUnimplementedSecurityKeysAreAllNamed: the error names the
// first and lists the others, so one start attempt shows every key to fix.
func TestSeveralUnimplementedSecurityKeysAreAllNamed(t *testing.T) {
	_, _, err := parseWith(t, map[string]string{"ssl.cipher.suites": "x", "authorizer.properties": "x", "sasl.login.class": "PLAIN"})
	var cfgErr *Error
	if !errors.As(err, &cfgErr) || cfgErr.Key != "authorizer.properties" {
		t.Fatalf("got %v, want the first key, authorizer.properties", err)
	}
	if !strings.Contains(err.Error(), "also not implemented: sasl.login.class, ssl.cipher.suites") {
		t.Errorf("error %q does not list the other keys", err)
	}
}

func TestSuperUsers(t *testing.T) {
	b, _, err := parseWith(t, map[string]string{"super.users": " User:admin ; User:CN=broker,O=strand;User:admin"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"User:admin", "User:CN=broker,O=strand"}; !slices.Equal(b.SuperUsers, want) {
		t.Errorf("SuperUsers = %q, want %q", b.SuperUsers, want)
	}
	if !b.IsSuperUser("User:admin") || b.IsSuperUser("User:ANONYMOUS") || b.IsSuperUser("User:admi") {
		t.Error("IsSuperUser does not match exactly")
	}
	b, _, err = parseWith(t, nil)
	if err != nil || len(b.SuperUsers) != 0 {
		t.Errorf("default super.users: %q, %v", b.SuperUsers, err)
	}
	for _, bad := range []string{"admin", "User:", ":admin", "User:a;;User:b"} {
		_, _, err := parseWith(t, map[string]string{"super.users": bad})
		var cfgErr *Error
		if !errors.As(err, &cfgErr) || cfgErr.Key != "super.users" {
			t.Errorf("super.users=%q: got %v, want an error naming super.users", bad, err)
		}
	}
}

// securedController is minimal with its controller listener on SASL_SSL.
var securedController = map[string]string{
	"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
}

// TestSecuredPlaneWithoutSuperUsersRefusesTheStart: a secured control or
// replication plane admits only members, who must be super users before
// the metadata log can hold ACLs; without any, no broker could register or
// replicate.
func TestSecuredPlaneWithoutSuperUsersRefusesTheStart(t *testing.T) {
	for name, overrides := range map[string]map[string]string{
		"controller":   securedController,
		"inter-broker": {"listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"},
	} {
		_, _, err := parseWith(t, overrides)
		var cfgErr *Error
		if !errors.As(err, &cfgErr) || cfgErr.Key != "super.users" || !strings.Contains(err.Error(), name+" listener") {
			t.Errorf("%s secured without super.users: got %v, want an error naming super.users and the %s listener", name, err, name)
		}
		withUsers := map[string]string{"super.users": "User:broker-1"}
		for k, v := range overrides {
			withUsers[k] = v
		}
		b, _, err := parseWith(t, withUsers)
		if err != nil {
			t.Fatalf("%s secured with super.users: %v", name, err)
		}
		if name == "controller" && (!b.ControllerPlaneSecured() || b.InterBrokerPlaneSecured()) {
			t.Errorf("controller secured: planes secured %v/%v", b.ControllerPlaneSecured(), b.InterBrokerPlaneSecured())
		}
		if name == "inter-broker" && (b.ControllerPlaneSecured() || !b.InterBrokerPlaneSecured()) {
			t.Errorf("inter-broker secured: planes secured %v/%v", b.ControllerPlaneSecured(), b.InterBrokerPlaneSecured())
		}
	}
}

// TestUnservedProtocolRefusesTheStart: the environment refuses a listener
// whose protocol it cannot serve, naming the listener and the protocol.
func TestUnservedProtocolRefusesTheStart(t *testing.T) {
	overrides := map[string]string{"super.users": "User:broker-1"}
	for k, v := range securedController {
		overrides[k] = v
	}
	b, _, err := parseWith(t, overrides)
	if err != nil {
		t.Fatal(err)
	}
	err = b.CheckProtocolsServed([]string{SecurityProtocolPlaintext})
	var cfgErr *Error
	if !errors.As(err, &cfgErr) || cfgErr.Key != "listener.security.protocol.map" ||
		!strings.Contains(err.Error(), "CONTROLLER to SASL_SSL") {
		t.Errorf("got %v, want an error naming listener.security.protocol.map, CONTROLLER and SASL_SSL", err)
	}
	if err := b.CheckProtocolsServed(SecurityProtocols()); err != nil {
		t.Errorf("every protocol served: %v", err)
	}
	plain, _, err := parseWith(t, nil)
	if err != nil || plain.CheckProtocolsServed([]string{SecurityProtocolPlaintext}) != nil {
		t.Errorf("PLAINTEXT listeners: %v", err)
	}
}

// TestAuthorizerKeys: authorizer.class.name takes KRaft's StandardAuthorizer
// or nothing; any other class refuses the start naming the key, since
// running without the authorizer named would leave every resource open.
// allow.everyone.if.no.acl.found defaults to false.
func TestAuthorizerKeys(t *testing.T) {
	b, _, err := parseWith(t, nil)
	if err != nil || b.AuthorizerEnabled || b.AllowEveryoneIfNoACLFound {
		t.Fatalf("defaults: authorizer %v, allow everyone %v, err %v; want both off", b.AuthorizerEnabled, b.AllowEveryoneIfNoACLFound, err)
	}
	b, _, err = parseWith(t, map[string]string{"authorizer.class.name": StandardAuthorizer, "allow.everyone.if.no.acl.found": "true"})
	if err != nil || !b.AuthorizerEnabled || !b.AllowEveryoneIfNoACLFound {
		t.Fatalf("StandardAuthorizer with allow everyone: authorizer %v, allow everyone %v, err %v", b.AuthorizerEnabled, b.AllowEveryoneIfNoACLFound, err)
	}
	for _, bad := range []string{"kafka.security.authorizer.AclAuthorizer", "com.example.Mine"} {
		_, _, err := parseWith(t, map[string]string{"authorizer.class.name": bad})
		var cfgErr *Error
		if !errors.As(err, &cfgErr) || cfgErr.Key != "authorizer.class.name" || !strings.Contains(err.Error(), StandardAuthorizer) {
			t.Errorf("authorizer.class.name=%s: got %v, want an error naming the key and the class to use", bad, err)
		}
	}
	if _, _, err := parseWith(t, map[string]string{"allow.everyone.if.no.acl.found": "yes"}); err == nil {
		t.Error("allow.everyone.if.no.acl.found=yes accepted")
	}
}

// TestAuthorizerWithoutSuperUsersRefusesTheStart: with the authorizer on,
// voting, registering and replicating need CLUSTER_ACTION on every
// listener, which only super users can hold before the quorum writes any
// ACL; a lone combined node needs none (its roles talk in process).
func TestAuthorizerWithoutSuperUsersRefusesTheStart(t *testing.T) {
	_, _, err := parseWith(t, map[string]string{"authorizer.class.name": StandardAuthorizer,
		"controller.quorum.voters": "1@localhost:9093,2@localhost:9095"})
	var cfgErr *Error
	if !errors.As(err, &cfgErr) || cfgErr.Key != "super.users" || !strings.Contains(err.Error(), "authorizer.class.name") {
		t.Fatalf("two voters, authorizer on, no super users: got %v, want an error naming super.users", err)
	}
	if _, _, err := parseWith(t, map[string]string{"authorizer.class.name": StandardAuthorizer}); err != nil {
		t.Fatalf("a lone combined node with the authorizer on: %v", err)
	}
}
