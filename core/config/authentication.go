package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The secured protocols of listener.security.protocol.map (PLAINTEXT is in
// listeners.go).
const (
	SecurityProtocolSSL           = "SSL"
	SecurityProtocolSASLPlaintext = "SASL_PLAINTEXT"
	SecurityProtocolSASLSSL       = "SASL_SSL"
)

// The SASL mechanisms Strand implements.
const (
	MechanismGSSAPI      = "GSSAPI"
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// implementedMechanisms are the SASL mechanisms a listener may enable.
var implementedMechanisms = []string{MechanismGSSAPI, MechanismPlain, MechanismScramSHA256, MechanismScramSHA512}

// laterMechanisms are Kafka's other SASL mechanisms: refused with a
// message that says so, rather than as unknown.
var laterMechanisms = []string{"OAUTHBEARER"}

// IsScram reports whether mechanism is SCRAM-SHA-256 or SCRAM-SHA-512.
func IsScram(mechanism string) bool {
	return mechanism == MechanismScramSHA256 || mechanism == MechanismScramSHA512
}

// The principal builders of principal.builder.class.
const (
	// DefaultPrincipalBuilder is Kafka's: ANONYMOUS on PLAINTEXT, the
	// certificate's mapped DN on SSL, the SASL identity on SASL.
	DefaultPrincipalBuilder = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
	// IPAddressPrincipalBuilder is Strand's, the design's light mode: a
	// connection that would be ANONYMOUS (PLAINTEXT, or SSL without a
	// client certificate) gets User:<its source IP address>.
	IPAddressPrincipalBuilder = "strand.security.IpAddressPrincipalBuilder"
)

// Security is the node's authentication configuration: each listener's
// security and the settings that are not per listener. core/ never acts
// on it; realnet loads the files it names (key stores, keytabs) and runs
// the handshakes (SPEC.md §10.6).
type Security struct {
	// Listeners holds the security of each listener this node serves
	// (listeners) or connects to as a client (the controller listener on
	// a broker-only node), by name.
	Listeners map[string]ListenerSecurity
	// InterBrokerMechanism is sasl.mechanism.inter.broker.protocol: the
	// mechanism brokers use on a SASL inter-broker listener.
	InterBrokerMechanism string
	// ControllerMechanism is sasl.mechanism.controller.protocol: the
	// mechanism nodes use on a SASL controller listener.
	ControllerMechanism string
	// FailedAuthenticationDelayMs is
	// connection.failed.authentication.delay.ms: a failed authentication
	// is answered, and its connection closed, this long after it failed.
	FailedAuthenticationDelayMs int32
	// PrincipalBuilder is principal.builder.class.
	PrincipalBuilder string
	// Authentication is the design's shorthand as given (simple,
	// kerberos or ipaddress); the Kafka keys it expanded to are in the
	// fields above.
	Authentication string
	// incomplete are the settings missing for an environment that runs
	// the handshakes (CheckAuthenticationComplete), in key order.
	incomplete []error
}

// CheckAuthenticationComplete refuses a configuration that lacks what
// running its listeners' authentication needs: a certificate on a served
// SSL or SASL_SSL listener, a trust store where client certificates are
// asked for, the JAAS configuration of every mechanism a listener serves
// or a node connects with, PLAIN's username and password for connecting
// nodes, GSSAPI's service name. realnet calls it; the simulator, which
// assigns principals without handshakes, does not. The error names the
// first missing key.
func (b Broker) CheckAuthenticationComplete() error {
	if len(b.Security.incomplete) == 0 {
		return nil
	}
	return b.Security.incomplete[0]
}

// IPAddressPrincipals reports whether connections that would be
// ANONYMOUS get their source address as principal (the ipaddress mode).
func (s Security) IPAddressPrincipals() bool {
	return s.PrincipalBuilder == IPAddressPrincipalBuilder
}

// ListenerSecurity is one listener's security: what its server side
// requires of a connection, and what a node connecting to it presents.
type ListenerSecurity struct {
	// Name is the listener name.
	Name string
	// Protocol is its security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT
	// or SASL_SSL.
	Protocol string
	// TLS is set for SSL and SASL_SSL.
	TLS *TLSSettings
	// SASL is set for SASL_PLAINTEXT and SASL_SSL.
	SASL *SASLSettings
}

// TLSSettings are a listener's ssl.* keys. Key and trust stores are PEM
// (ssl.keystore.type=PEM, ssl.truststore.type=PEM), in a file or inline.
type TLSSettings struct {
	// KeystoreLocation is ssl.keystore.location: a PEM file holding the
	// private key and the certificate chain. Or, inline,
	// KeystoreCertificateChain and KeystoreKey
	// (ssl.keystore.certificate.chain, ssl.keystore.key).
	KeystoreLocation         string
	KeystoreCertificateChain string
	KeystoreKey              string
	// TruststoreLocation is ssl.truststore.location, a PEM file of CA
	// certificates; or, inline, TruststoreCertificates
	// (ssl.truststore.certificates). Neither: the system's roots verify
	// servers, and no client certificate can be verified.
	TruststoreLocation     string
	TruststoreCertificates string
	// ClientAuth is ssl.client.auth: required, requested or none. On a
	// SASL_SSL listener only its listener-prefixed value counts (KIP-684).
	ClientAuth string
	// EnabledProtocols is ssl.enabled.protocols: TLSv1.2, TLSv1.3.
	EnabledProtocols []string
	// Protocol is ssl.protocol: the highest version a node connecting to
	// the listener offers (TLS, TLSv1.3 or TLSv1.2).
	Protocol string
	// EndpointIdentification is ssl.endpoint.identification.algorithm=https
	// (Kafka's default): a node connecting to the listener checks that the
	// server's certificate names the host it dialled.
	EndpointIdentification bool
	// PrincipalRules is ssl.principal.mapping.rules.
	PrincipalRules SSLPrincipalRules
}

// HasKeystore reports whether a certificate and key are configured.
func (t *TLSSettings) HasKeystore() bool {
	return t.KeystoreLocation != "" || t.KeystoreCertificateChain != ""
}

// HasTruststore reports whether CA certificates are configured.
func (t *TLSSettings) HasTruststore() bool {
	return t.TruststoreLocation != "" || t.TruststoreCertificates != ""
}

// SASLSettings are a listener's SASL keys.
type SASLSettings struct {
	// Mechanisms is sasl.enabled.mechanisms: what the listener serves.
	Mechanisms []string
	// Plain is the PLAIN login module's settings, set when the listener
	// serves PLAIN or the node connects to it with PLAIN.
	Plain *PlainSettings
	// Kerberos is the GSSAPI settings, set when the listener serves
	// GSSAPI or the node connects to it with GSSAPI.
	Kerberos *KerberosSettings
	// Scram is ScramLoginModule's settings per SCRAM mechanism, set for
	// each the listener serves or the node connects to it with.
	Scram map[string]*ScramSettings
	// ServerMaxReceiveBytes is sasl.server.max.receive.size: the largest
	// frame read from a connection before it has authenticated.
	ServerMaxReceiveBytes int32
	// ReauthMaxMs is connections.max.reauth.ms per mechanism (KIP-368):
	// the longest an authenticated session lasts; 0 bounds it only by the
	// credential's own end (a Kerberos ticket's).
	ReauthMaxMs map[string]int64
}

// Serves reports whether the listener enables mechanism.
func (s *SASLSettings) Serves(mechanism string) bool {
	return slices.Contains(s.Mechanisms, mechanism)
}

// PlainSettings are PlainLoginModule's options.
type PlainSettings struct {
	// Users maps each user_<name> option's name to its password: the
	// users the listener accepts.
	Users map[string]string
	// Username and Password are the node's own credentials, used when it
	// connects to this listener.
	Username, Password string
}

// ScramSettings are ScramLoginModule's options: the node's own user and
// password, which it authenticates with when it connects to the listener.
// A listener serving SCRAM checks clients against the credentials of the
// metadata log, not against these.
type ScramSettings struct {
	Username, Password string
}

// KerberosSettings are Krb5LoginModule's options and the Kerberos keys.
type KerberosSettings struct {
	// Principal and Keytab are the node's own principal and keytab file
	// (the login module's principal and keyTab): the node logs in with
	// them at start and accepts service tickets for Principal.
	Principal, Keytab string
	// ServiceName is sasl.kerberos.service.name (or the module's
	// serviceName): the first component of the service principal a node
	// asks a ticket for when it connects to the listener.
	ServiceName string
	// Rules is sasl.kerberos.principal.to.local.rules.
	Rules KerberosRules
}

// scope says where a security key may be given.
type scope uint8

const (
	scopeGlobal    scope = 1 << iota // key
	scopeListener                    // listener.name.<l>.key
	scopeMechanism                   // listener.name.<l>.<mechanism>.key
)

// authenticationKey is a security key Strand implements.
type authenticationKey struct {
	defaultValue string
	hasDefault   bool
	scopes       scope
}

const listenerScopes = scopeGlobal | scopeListener

// authenticationKeys are the authentication keys Strand implements, with
// Kafka's defaults (SPEC.md §10.6). They are kept apart from brokerKeys so
// that DescribeConfigs, which lists brokerKeys, never shows a password or a
// private key; and, unlike brokerKeys, most may be listener- or
// mechanism-prefixed. Security keys in neither table refuse the start
// (security.go).
var authenticationKeys = map[string]authenticationKey{
	"sasl.mechanism.inter.broker.protocol":      {"GSSAPI", true, scopeGlobal},
	"sasl.mechanism.controller.protocol":        {"GSSAPI", true, scopeGlobal},
	"connection.failed.authentication.delay.ms": {"100", true, scopeGlobal},
	"principal.builder.class":                   {DefaultPrincipalBuilder, true, scopeGlobal},
	"sasl.enabled.mechanisms":                   {"GSSAPI", true, listenerScopes},
	"sasl.kerberos.principal.to.local.rules":    {"DEFAULT", true, listenerScopes},
	"sasl.server.max.receive.size":              {"524288", true, listenerScopes},
	"sasl.kerberos.service.name":                {"", false, listenerScopes | scopeMechanism},
	"connections.max.reauth.ms":                 {"0", true, listenerScopes | scopeMechanism},
	"sasl.jaas.config":                          {"", false, scopeMechanism},
	"ssl.keystore.type":                         {"JKS", true, listenerScopes},
	"ssl.keystore.location":                     {"", false, listenerScopes},
	"ssl.keystore.password":                     {"", false, listenerScopes},
	"ssl.keystore.certificate.chain":            {"", false, listenerScopes},
	"ssl.keystore.key":                          {"", false, listenerScopes},
	"ssl.key.password":                          {"", false, listenerScopes},
	"ssl.truststore.type":                       {"JKS", true, listenerScopes},
	"ssl.truststore.location":                   {"", false, listenerScopes},
	"ssl.truststore.password":                   {"", false, listenerScopes},
	"ssl.truststore.certificates":               {"", false, listenerScopes},
	"ssl.client.auth":                           {"none", true, listenerScopes},
	"ssl.enabled.protocols":                     {"TLSv1.2,TLSv1.3", true, listenerScopes},
	"ssl.protocol":                              {"TLSv1.3", true, listenerScopes},
	"ssl.endpoint.identification.algorithm":     {"https", true, listenerScopes},
	"ssl.principal.mapping.rules":               {"DEFAULT", true, listenerScopes},
	// The design's shorthand (shorthand.go).
	"authentication": {"simple", true, scopeGlobal},
	"principal":      {"", false, scopeGlobal},
	"keytab":         {"", false, scopeGlobal},
}

// AuthenticationKeys returns the authentication keys Strand implements, sorted. Those
// a listener may override can also be given as
// listener.name.<listener>.<key>; sasl.jaas.config,
// sasl.kerberos.service.name and connections.max.reauth.ms as
// listener.name.<listener>.<mechanism>.<key>.
func AuthenticationKeys() []string { return slices.Sorted(maps.Keys(authenticationKeys)) }

// mechanismPrefixes are the lower-case SASL mechanism names that may
// follow listener.name.<listener>.
var mechanismPrefixes = []string{"gssapi", "plain", "scram-sha-256", "scram-sha-512", "oauthbearer"}

// listenerKey is a listener-prefixed security key, split.
type listenerKey struct {
	listener  string // upper-cased, as listener names are
	mechanism string // upper-cased; empty for a listener-scope key
	key       string
}

// classifyAuthenticationKey reports whether key is an authentication key
// Strand implements (ok), as given or listener- or mechanism-prefixed. A
// security key it does not implement is not ok, and refuses the start
// (IsSecurityKey, refuseUnimplementedSecurity); an unprefixed
// sasl.jaas.config gets its own error, which says what Kafka brokers
// take instead.
func classifyAuthenticationKey(key string) (lk listenerKey, ok bool, err error) {
	if def, found := authenticationKeys[key]; found && def.scopes&scopeGlobal != 0 {
		return listenerKey{key: key}, true, nil
	}
	if key == "sasl.jaas.config" {
		return listenerKey{}, false, keyError(key, "must name its listener and mechanism on a broker, as in Kafka: listener.name.<listener>.<mechanism>.sasl.jaas.config")
	}
	rest, prefixed := strings.CutPrefix(key, listenerKeyPrefix)
	if !prefixed {
		return listenerKey{}, false, nil
	}
	listener, rest, found := strings.Cut(rest, ".")
	if !found || listener == "" {
		return listenerKey{}, false, nil
	}
	lk = listenerKey{listener: strings.ToUpper(listener), key: rest}
	if def, found := authenticationKeys[rest]; found && def.scopes&scopeListener != 0 {
		return lk, true, nil
	}
	for _, mech := range mechanismPrefixes {
		if k, found := strings.CutPrefix(rest, mech+"."); found {
			if def, known := authenticationKeys[k]; known && def.scopes&scopeMechanism != 0 {
				lk.mechanism, lk.key = strings.ToUpper(mech), k
				return lk, true, nil
			}
		}
	}
	return listenerKey{}, false, nil
}

// securityProps are the security keys given, split for lookups.
type securityProps struct {
	global map[string]string
	// scoped maps listener (upper-case) to key (with "<MECH>." in front
	// for mechanism-scoped ones) to value.
	scoped map[string]map[string]string
	// names maps the same to the key as written, for error messages.
	names map[string]map[string]string
}

func newSecurityProps() securityProps {
	return securityProps{global: map[string]string{}, scoped: map[string]map[string]string{}, names: map[string]map[string]string{}}
}

func (p securityProps) add(lk listenerKey, original, value string) {
	value = strings.TrimSpace(value)
	if lk.listener == "" {
		p.global[lk.key] = value
		return
	}
	k := lk.key
	if lk.mechanism != "" {
		k = lk.mechanism + "." + k
	}
	if p.scoped[lk.listener] == nil {
		p.scoped[lk.listener] = map[string]string{}
		p.names[lk.listener] = map[string]string{}
	}
	p.scoped[lk.listener][k] = value
	p.names[lk.listener][k] = original
}

// lookup returns key's value for listener and mechanism (either may be
// empty): the mechanism-prefixed value, else the listener-prefixed one,
// else the global one, else the default. name is the key the value came
// from; set is false for a default.
func (p securityProps) lookup(listener, mechanism, key string) (value, name string, set bool) {
	def := authenticationKeys[key]
	if listener != "" {
		if mechanism != "" && def.scopes&scopeMechanism != 0 {
			if v, ok := p.scoped[listener][mechanism+"."+key]; ok {
				return v, p.names[listener][mechanism+"."+key], true
			}
		}
		if def.scopes&scopeListener != 0 {
			if v, ok := p.scoped[listener][key]; ok {
				return v, p.names[listener][key], true
			}
		}
	}
	if def.scopes&scopeGlobal != 0 {
		if v, ok := p.global[key]; ok {
			return v, key, true
		}
	}
	if listener != "" && mechanism != "" && def.scopes == scopeMechanism {
		key = "listener.name." + strings.ToLower(listener) + "." + strings.ToLower(mechanism) + "." + key
	}
	return def.defaultValue, key, false
}

// listenerOnly returns key's listener-prefixed value, if any (KIP-684's
// ssl.client.auth on SASL_SSL).
func (p securityProps) listenerOnly(listener, key string) (value, name string, set bool) {
	v, ok := p.scoped[listener][key]
	return v, p.names[listener][key], ok
}

// resolveAuthentication builds b.Security from the security keys, for every
// listener this node serves and the controller listener it connects to.
func (b *builder) resolveAuthentication() error {
	p := b.security
	s := Security{Listeners: map[string]ListenerSecurity{}}
	b.Security.incomplete = nil
	var err error
	if s.FailedAuthenticationDelayMs, err = parseInt32("connection.failed.authentication.delay.ms", p.value("connection.failed.authentication.delay.ms"), 0, maxInt32); err != nil {
		return err
	}
	s.PrincipalBuilder = p.value("principal.builder.class")
	if s.PrincipalBuilder != DefaultPrincipalBuilder && s.PrincipalBuilder != IPAddressPrincipalBuilder {
		return valueError("principal.builder.class", s.PrincipalBuilder, "is not a principal builder Strand has: want %s (Kafka's) or %s (the source address as principal)", DefaultPrincipalBuilder, IPAddressPrincipalBuilder)
	}
	s.Authentication = p.value("authentication")
	if s.InterBrokerMechanism, err = parseMechanism("sasl.mechanism.inter.broker.protocol", p.value("sasl.mechanism.inter.broker.protocol")); err != nil {
		return err
	}
	if s.ControllerMechanism, err = parseMechanism("sasl.mechanism.controller.protocol", p.value("sasl.mechanism.controller.protocol")); err != nil {
		return err
	}

	// The listeners: served ones, then controller listeners a broker-only
	// node connects to.
	served := map[string]bool{}
	names := []string{}
	for _, l := range b.Listeners {
		served[l.Name] = true
		names = append(names, l.Name)
	}
	for _, name := range b.ControllerListenerNames {
		if !served[name] {
			names = append(names, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.scoped)) {
		if !slices.Contains(names, name) {
			key := slices.Sorted(maps.Values(p.names[name]))[0]
			return keyError(key, "names listener %s, which is neither in listeners nor in controller.listener.names", name)
		}
	}
	for _, name := range names {
		clientMechanism := ""
		switch {
		case name == b.InterBrokerListenerName && b.Roles.Broker:
			clientMechanism = s.InterBrokerMechanism
		case slices.Contains(b.ControllerListenerNames, name):
			clientMechanism = s.ControllerMechanism
		}
		ls, err := b.resolveListenerSecurity(name, served[name], clientMechanism)
		if err != nil {
			return err
		}
		s.Listeners[name] = ls
	}
	s.incomplete = b.Security.incomplete
	b.Security = s
	return nil
}

// requirement records a setting the environment will need
// (Broker.CheckAuthenticationComplete).
func (b *builder) requirement(err error) {
	b.Security.incomplete = append(b.Security.incomplete, err)
}

// value is a global key's value or default.
func (p securityProps) value(key string) string {
	v, _, _ := p.lookup("", "", key)
	return v
}

// parseMechanism checks a single mechanism name.
func parseMechanism(key, value string) (string, error) {
	switch {
	case slices.Contains(implementedMechanisms, value):
		return value, nil
	case slices.Contains(laterMechanisms, value):
		return "", valueError(key, value, "is a SASL mechanism Strand does not implement yet: want %s", strings.Join(implementedMechanisms, " or "))
	}
	return "", valueError(key, value, "is not a SASL mechanism Strand knows: want %s", strings.Join(implementedMechanisms, " or "))
}

// resolveListenerSecurity builds one listener's security. served says the
// node listens on it; clientMechanism is the SASL mechanism the node uses
// when it connects to it ("" if it never does).
func (b *builder) resolveListenerSecurity(name string, served bool, clientMechanism string) (ListenerSecurity, error) {
	protocol, ok := b.ListenerSecurityProtocols[name]
	if !ok {
		return ListenerSecurity{}, keyError("listener.security.protocol.map", "has no security protocol for listener %s", name)
	}
	ls := ListenerSecurity{Name: name, Protocol: protocol}
	if protocol == SecurityProtocolSSL || protocol == SecurityProtocolSASLSSL {
		tls, err := b.resolveTLS(name, protocol, served)
		if err != nil {
			return ListenerSecurity{}, err
		}
		ls.TLS = tls
	}
	if protocol == SecurityProtocolSASLPlaintext || protocol == SecurityProtocolSASLSSL {
		sasl, err := b.resolveSASL(name, served, clientMechanism)
		if err != nil {
			return ListenerSecurity{}, err
		}
		ls.SASL = sasl
	}
	return ls, nil
}

// resolveTLS reads a listener's ssl.* keys.
func (b *builder) resolveTLS(listener, protocol string, served bool) (*TLSSettings, error) {
	p := b.security
	get := func(key string) (string, string, bool) { return p.lookup(listener, "", key) }
	t := &TLSSettings{}
	keystoreType, typeKey, _ := get("ssl.keystore.type")
	t.KeystoreLocation, _, _ = get("ssl.keystore.location")
	t.KeystoreCertificateChain, _, _ = get("ssl.keystore.certificate.chain")
	t.KeystoreKey, _, _ = get("ssl.keystore.key")
	if t.KeystoreLocation != "" || t.KeystoreCertificateChain != "" || t.KeystoreKey != "" {
		if keystoreType != "PEM" {
			return nil, valueError(typeKey, keystoreType, "is not PEM (Kafka's default is JKS): Strand reads PEM key stores only; set %s=PEM", typeKey)
		}
	}
	if t.KeystoreLocation != "" && (t.KeystoreCertificateChain != "" || t.KeystoreKey != "") {
		return nil, keyError(listenerKeyName(listener, "ssl.keystore.location"), "and ssl.keystore.certificate.chain/ssl.keystore.key are both set for listener %s: give the key store one way", listener)
	}
	if (t.KeystoreCertificateChain == "") != (t.KeystoreKey == "") {
		return nil, keyError(listenerKeyName(listener, "ssl.keystore.key"), "and ssl.keystore.certificate.chain go together: listener %s has only one of them", listener)
	}
	if v, k, set := get("ssl.keystore.password"); set && v != "" && keystoreType == "PEM" {
		return nil, keyError(k, "cannot be set with a PEM key store (as in Kafka): only ssl.key.password may be, for an encrypted key")
	}
	if v, k, set := get("ssl.key.password"); set && v != "" {
		return nil, keyError(k, "is set: Strand reads unencrypted PEM private keys only; refusing to start rather than ignore it")
	}
	if served && !t.HasKeystore() {
		b.requirement(keyError(listenerKeyName(listener, "ssl.keystore.location"), "is required: listener %s uses %s, so it needs a certificate (ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key, with ssl.keystore.type=PEM)", listener, protocol))
	}

	truststoreType, ttypeKey, _ := get("ssl.truststore.type")
	t.TruststoreLocation, _, _ = get("ssl.truststore.location")
	t.TruststoreCertificates, _, _ = get("ssl.truststore.certificates")
	if t.HasTruststore() && truststoreType != "PEM" {
		return nil, valueError(ttypeKey, truststoreType, "is not PEM (Kafka's default is JKS): Strand reads PEM trust stores only; set %s=PEM", ttypeKey)
	}
	if t.TruststoreLocation != "" && t.TruststoreCertificates != "" {
		return nil, keyError(listenerKeyName(listener, "ssl.truststore.location"), "and ssl.truststore.certificates are both set for listener %s: give the trust store one way", listener)
	}
	if v, k, set := get("ssl.truststore.password"); set && v != "" && truststoreType == "PEM" {
		return nil, keyError(k, "cannot be set with a PEM trust store (as in Kafka)")
	}

	clientAuth, authKey, _ := get("ssl.client.auth")
	if protocol == SecurityProtocolSASLSSL {
		// KIP-684: a SASL_SSL listener asks for client certificates only
		// when its own prefixed key says so.
		clientAuth, authKey, _ = p.listenerOnly(listener, "ssl.client.auth")
		if clientAuth == "" {
			clientAuth = "none"
		}
	}
	var err error
	if t.ClientAuth, err = parseChoice(authKey, clientAuth, "required", "requested", "none"); err != nil {
		return nil, err
	}
	if served && t.ClientAuth != "none" && !t.HasTruststore() {
		b.requirement(keyError(authKey, "is %s on listener %s, which has no trust store to verify client certificates: set ssl.truststore.location or ssl.truststore.certificates", t.ClientAuth, listener))
	}

	protocols, protocolsKey, _ := get("ssl.enabled.protocols")
	items, err := parseList(protocolsKey, protocols)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, valueError(protocolsKey, protocols, "is empty: enable TLSv1.2, TLSv1.3 or both")
	}
	for _, item := range items {
		if item != "TLSv1.2" && item != "TLSv1.3" {
			return nil, valueError(protocolsKey, protocols, "enables %q: Strand speaks TLSv1.2 and TLSv1.3 only", item)
		}
	}
	t.EnabledProtocols = items
	protocolValue, protocolKey, _ := get("ssl.protocol")
	if t.Protocol, err = parseChoice(protocolKey, protocolValue, "TLSv1.3", "TLSv1.2", "TLS"); err != nil {
		return nil, err
	}
	endpoint, endpointKey, _ := get("ssl.endpoint.identification.algorithm")
	switch strings.ToLower(endpoint) {
	case "https":
		t.EndpointIdentification = true
	case "":
	default:
		return nil, valueError(endpointKey, endpoint, "is not an endpoint identification algorithm: want https, or empty to not check host names")
	}
	rules, rulesKey, _ := get("ssl.principal.mapping.rules")
	if t.PrincipalRules, err = ParseSSLPrincipalRules(rulesKey, rules); err != nil {
		return nil, err
	}
	return t, nil
}

// listenerKeyName is key as listener would prefix it, for messages about
// a key that is missing.
func listenerKeyName(listener, key string) string {
	return "listener.name." + strings.ToLower(listener) + "." + key
}

// resolveSASL reads a listener's SASL keys and the JAAS configurations of
// the mechanisms it serves or the node uses on it.
func (b *builder) resolveSASL(listener string, served bool, clientMechanism string) (*SASLSettings, error) {
	p := b.security
	s := &SASLSettings{ReauthMaxMs: map[string]int64{}, Scram: map[string]*ScramSettings{}}
	mechanisms, mechanismsKey, _ := p.lookup(listener, "", "sasl.enabled.mechanisms")
	items, err := parseList(mechanismsKey, mechanisms)
	if err != nil {
		return nil, err
	}
	for _, m := range items {
		if _, err := parseMechanism(mechanismsKey, m); err != nil {
			return nil, err
		}
		if !slices.Contains(s.Mechanisms, m) {
			s.Mechanisms = append(s.Mechanisms, m)
		}
	}
	if served && len(s.Mechanisms) == 0 {
		return nil, valueError(mechanismsKey, mechanisms, "is empty: listener %s uses SASL and must enable a mechanism", listener)
	}
	if slices.Contains(b.ControllerListenerNames, listener) {
		if err := refuseScramOnControllerListener(listener, served, s.Mechanisms, mechanismsKey, clientMechanism); err != nil {
			return nil, err
		}
	}
	if served && clientMechanism != "" && !s.Serves(clientMechanism) {
		key := "sasl.mechanism.inter.broker.protocol"
		if slices.Contains(b.ControllerListenerNames, listener) {
			key = "sasl.mechanism.controller.protocol"
		}
		return nil, keyError(key, "is %s, which listener %s does not enable (%s=%s): nodes could not authenticate to each other", clientMechanism, listener, mechanismsKey, mechanisms)
	}
	size, sizeKey, _ := p.lookup(listener, "", "sasl.server.max.receive.size")
	if s.ServerMaxReceiveBytes, err = parseInt32(sizeKey, size, 1, maxInt32); err != nil {
		return nil, err
	}
	var used []string
	if served {
		used = slices.Clone(s.Mechanisms)
	}
	if clientMechanism != "" && !slices.Contains(used, clientMechanism) {
		used = append(used, clientMechanism)
	}
	for _, mech := range used {
		reauth, reauthKey, _ := p.lookup(listener, mech, "connections.max.reauth.ms")
		if s.ReauthMaxMs[mech], err = parseInt64(reauthKey, reauth, 0, maxInt64); err != nil {
			return nil, err
		}
		jaasText, jaasKey, set := p.lookup(listener, mech, "sasl.jaas.config")
		if !set {
			b.requirement(keyError(jaasKey, "is required: listener %s %s SASL mechanism %s, whose login module this key configures", listener, usedHow(served && s.Serves(mech), mech == clientMechanism), mech))
			continue
		}
		jaas, err := ParseJAAS(jaasKey, jaasText)
		if err != nil {
			return nil, err
		}
		switch mech {
		case MechanismPlain:
			if s.Plain, err = b.plainSettings(jaasKey, jaas, mech == clientMechanism); err != nil {
				return nil, err
			}
		case MechanismGSSAPI:
			if s.Kerberos, err = b.kerberosSettings(listener, jaasKey, jaas); err != nil {
				return nil, err
			}
		case MechanismScramSHA256, MechanismScramSHA512:
			if s.Scram[mech], err = b.scramSettings(jaasKey, jaas, mech == clientMechanism); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// refuseScramOnControllerListener refuses SCRAM on a controller listener,
// served or connected with: its credentials are in the metadata log, which
// the controllers must reach over this very listener, so a controller quorum
// restarting after a credential change could never elect a leader again (as
// in Kafka, where SCRAM does not authenticate the controller listener,
// KAFKA-15513).
func refuseScramOnControllerListener(listener string, served bool, mechanisms []string, mechanismsKey, clientMechanism string) error {
	const why = "SCRAM cannot authenticate controller listener %s: its credentials live in the metadata log, which the controllers reach over this listener (as in Kafka); use PLAIN, GSSAPI or SSL client certificates there%s"
	if served {
		for _, m := range mechanisms {
			if IsScram(m) {
				return keyError(mechanismsKey, why, listener, ", and set listener.name."+strings.ToLower(listener)+".sasl.enabled.mechanisms")
			}
		}
	}
	if IsScram(clientMechanism) {
		return keyError("sasl.mechanism.controller.protocol", why, listener, "")
	}
	return nil
}

func usedHow(serves, connects bool) string {
	switch {
	case serves && connects:
		return "serves, and nodes connect with,"
	case connects:
		return "is connected to with"
	}
	return "serves"
}

// plainSettings reads PlainLoginModule's options. client says the node
// connects with PLAIN, so its own username and password are required.
func (b *builder) plainSettings(key string, jaas JAASConfig, client bool) (*PlainSettings, error) {
	if jaas.LoginModule != plainLoginModule {
		return nil, keyError(key, "names login module %s: PLAIN takes %s", jaas.LoginModule, plainLoginModule)
	}
	ps := &PlainSettings{Users: map[string]string{}}
	for _, opt := range slices.Sorted(maps.Keys(jaas.Options)) {
		v := jaas.Options[opt]
		switch {
		case opt == "username":
			ps.Username = v
		case opt == "password":
			ps.Password = v
		case strings.HasPrefix(opt, "user_") && len(opt) > len("user_"):
			ps.Users[opt[len("user_"):]] = v
		default:
			return nil, keyError(key, "has option %s, which PlainLoginModule does not take (username, password, user_<name>)", opt)
		}
	}
	if client && (ps.Username == "" || ps.Password == "") {
		b.requirement(keyError(key, "needs username and password options: nodes connect to this listener with PLAIN"))
	}
	return ps, nil
}

// scramSettings reads ScramLoginModule's options. client says the node
// connects with this mechanism, so its own username and password are
// required. tokenauth (a delegation token login) is refused: Strand has no
// delegation tokens.
func (b *builder) scramSettings(key string, jaas JAASConfig, client bool) (*ScramSettings, error) {
	if jaas.LoginModule != scramLoginModule {
		return nil, keyError(key, "names login module %s: SCRAM takes %s", jaas.LoginModule, scramLoginModule)
	}
	ss := &ScramSettings{}
	for _, opt := range slices.Sorted(maps.Keys(jaas.Options)) {
		switch opt {
		case "username":
			ss.Username = jaas.Options[opt]
		case "password":
			ss.Password = jaas.Options[opt]
		case "tokenauth":
			return nil, keyError(key, "has option tokenauth: Strand has no delegation tokens")
		default:
			return nil, keyError(key, "has option %s, which ScramLoginModule does not take (username, password)", opt)
		}
	}
	if client && (ss.Username == "" || ss.Password == "") {
		b.requirement(keyError(key, "needs username and password options: nodes connect to this listener with SCRAM"))
	}
	return ss, nil
}

// krb5Options are the Krb5LoginModule options Strand accepts. Those that
// change nothing for a keytab login are accepted and ignored.
var krb5Options = []string{"useKeyTab", "keyTab", "principal", "storeKey", "serviceName", "debug", "doNotPrompt", "isInitiator", "refreshKrb5Config"}

// kerberosSettings reads Krb5LoginModule's options and the listener's
// Kerberos keys.
func (b *builder) kerberosSettings(listener, key string, jaas JAASConfig) (*KerberosSettings, error) {
	if jaas.LoginModule != kerberosLoginModule {
		return nil, keyError(key, "names login module %s: GSSAPI takes %s", jaas.LoginModule, kerberosLoginModule)
	}
	for _, opt := range slices.Sorted(maps.Keys(jaas.Options)) {
		if !slices.Contains(krb5Options, opt) {
			return nil, keyError(key, "has option %s, which Strand does not implement (it logs in from a keytab: useKeyTab=true keyTab=\"...\" principal=\"...\")", opt)
		}
	}
	if !strings.EqualFold(jaas.Options["useKeyTab"], "true") {
		return nil, keyError(key, "needs useKeyTab=true: Strand logs in from a keytab only")
	}
	ks := &KerberosSettings{Principal: jaas.Options["principal"], Keytab: jaas.Options["keyTab"]}
	if ks.Principal == "" || ks.Keytab == "" {
		return nil, keyError(key, "needs keyTab=\"...\" and principal=\"...\"")
	}
	if _, _, realm, err := SplitKerberosName(ks.Principal); err != nil || realm == "" {
		return nil, keyError(key, "has principal %q: want primary/instance@REALM", ks.Principal)
	}
	service, serviceKey, set := b.security.lookup(listener, MechanismGSSAPI, "sasl.kerberos.service.name")
	if jaasService := jaas.Options["serviceName"]; jaasService != "" {
		if set && service != jaasService {
			return nil, keyError(serviceKey, "is %q but the JAAS serviceName is %q: conflicting service names", service, jaasService)
		}
		service = jaasService
	}
	if service == "" {
		b.requirement(keyError(serviceKey, "is required for GSSAPI on listener %s: no serviceName in the JAAS config either", listener))
	}
	ks.ServiceName = service
	rules, rulesKey, _ := b.security.lookup(listener, "", "sasl.kerberos.principal.to.local.rules")
	var err error
	if ks.Rules, err = ParseKerberosRules(rulesKey, rules); err != nil {
		return nil, err
	}
	return ks, nil
}

// String describes a listener's security for the start-up log.
func (ls ListenerSecurity) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%s", ls.Name, ls.Protocol)
	if ls.TLS != nil {
		fmt.Fprintf(&b, " tls(client.auth=%s protocols=%s)", ls.TLS.ClientAuth, strings.Join(ls.TLS.EnabledProtocols, ","))
	}
	if ls.SASL != nil {
		fmt.Fprintf(&b, " sasl(%s)", strings.Join(ls.SASL.Mechanisms, ","))
	}
	return b.String()
}
