package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseJAAS(t *testing.T) {
	cfg, err := ParseJAAS("k", `org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="a\"b\\c" user_alice='s p a c e' user_bob=plain;`)
	if err != nil {
		t.Fatal(err)
	}
	want := JAASConfig{LoginModule: plainLoginModule, Flag: "required", Options: map[string]string{
		"username": "admin", "password": `a"b\c`, "user_alice": "s p a c e", "user_bob": "plain",
	}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		``,
		`Module required a="b"`,                  // no ;
		`Module maybe a="b";`,                    // flag
		`Module required a;`,                     // option without value
		`Module required a="b"; Other required;`, // two modules
		`Module required a="b;`,                  // unclosed quote
		`Module required a="1" a="2";`,           // duplicate option
		`Module required a=(b);`,                 // stray character
	} {
		if _, err := ParseJAAS("k", bad); err == nil {
			t.Errorf("ParseJAAS(%q) accepted", bad)
		}
	}
	// quoteJAAS round-trips through the parser.
	for _, s := range []string{`/tmp/a b/keytab`, `q"uote`, `back\slash`} {
		cfg, err := ParseJAAS("k", "M required x="+quoteJAAS(s)+";")
		if err != nil || cfg.Options["x"] != s {
			t.Errorf("quoteJAAS(%q) read back %q, %v", s, cfg.Options["x"], err)
		}
	}
}

// TestSSLPrincipalRules checks Kafka's SslPrincipalMapper behaviour on its
// documented examples: the first rule matching the whole DN wins, $n and
// L/U, DEFAULT, no rule.
func TestSSLPrincipalRules(t *testing.T) {
	rules, err := ParseSSLPrincipalRules("k", `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
		RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
		RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=kafka-server1,OU=ServiceUsers,O=Org,C=US":                   "kafka-server1",
		"CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US": "duke@javasoft",
		"OU=JavaSoft,O=Sun Microsystems,C=US,cn=duke.b":                 "DUKE.B",
		"OU=JavaSoft,O=Sun Microsystems,C=US":                           "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		got, err := rules.Map(dn)
		if err != nil || got != want {
			t.Errorf("Map(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
	only, err := ParseSSLPrincipalRules("k", `RULE:^CN=([a-z]+),O=Strand$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := only.Map("CN=Alice,O=Strand"); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("no rule applies: got %v, want ErrNoMatchingRule", err)
	}
	// A comma and an escaped slash inside a rule; $2 with one group is
	// literal text, as Kafka makes it.
	esc, err := ParseSSLPrincipalRules("k", `RULE:^CN=(a\/b),O=x$/u-$1-$2/`)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := esc.Map("CN=a/b,O=x"); got != "u-a/b-$2" {
		t.Errorf("escaped slash and literal $2: got %q", got)
	}
	for _, bad := range []string{"FOO", "RULE:abc", "RULE:a/b", "RULE:(/x/", "RULE:a/$/", "DEFAULT x", "RULE:a/b/Lx"} {
		if _, err := ParseSSLPrincipalRules("k", bad); err == nil {
			t.Errorf("ParseSSLPrincipalRules(%q) accepted", bad)
		}
	}
}

// TestKerberosRules checks Kafka's KerberosShortNamer behaviour: DEFAULT
// strips the default realm's principals to their first component, RULE
// rewrites by component count, a non-simple result or no rule is an error.
func TestKerberosRules(t *testing.T) {
	def, err := ParseKerberosRules("k", "DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"alice@STRAND.TEST":              "alice",
		"kafka/127.0.0.1@STRAND.TEST":    "kafka",
		"kafka/host.example@STRAND.TEST": "kafka",
	} {
		if got, err := def.ShortName(name, "STRAND.TEST"); err != nil || got != want {
			t.Errorf("DEFAULT %s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := def.ShortName("alice@OTHER.REALM", "STRAND.TEST"); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("DEFAULT on another realm: got %v, want ErrNoMatchingRule", err)
	}
	rules, err := ParseKerberosRules("k", `RULE:[1:$1@$0](.*@OTHER\.REALM)s/@.*//,RULE:[2:$1](kafka)s/^.*$/broker/,RULE:[2:$1/$2@$0](.*)s/X/Y/g/L,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"alice@OTHER.REALM":   "alice",
		"kafka/h@STRAND.TEST": "broker",
		"bob@STRAND.TEST":     "bob",
	} {
		if got, err := rules.ShortName(name, "STRAND.TEST"); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := rules.ShortName("svc/h@STRAND.TEST", "STRAND.TEST"); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("a rule giving svc/h@...: got %v, want a non-simple name error", err)
	}
	for _, bad := range []string{"RULE:[x:$1]", "RULE:[1:$2]", "NOPE", "RULE:[1:$1](a(b)"} {
		if _, err := ParseKerberosRules("k", bad); err == nil {
			t.Errorf("ParseKerberosRules(%q) accepted", bad)
		}
	}
}

// securedProps is a one-node configuration with a SASL_SSL client
// listener, a SASL_PLAINTEXT controller listener and TLS for both.
func securedProps(extra map[string]string) map[string]string {
	props := map[string]string{
		"process.roles":                                         "broker,controller",
		"node.id":                                               "1",
		"listeners":                                             "CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.listener.names":                             "CONTROLLER",
		"controller.quorum.voters":                              "1@127.0.0.1:9093",
		"log.dirs":                                              "/tmp/x",
		"listener.security.protocol.map":                        "CLIENT:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":                               "PLAIN,GSSAPI",
		"sasl.mechanism.inter.broker.protocol":                  "PLAIN",
		"sasl.mechanism.controller.protocol":                    "GSSAPI",
		"sasl.kerberos.service.name":                            "kafka",
		"listener.name.client.plain.sasl.jaas.config":           `org.apache.kafka.common.security.plain.PlainLoginModule required username="node" password="np" user_node="np" user_alice="ap";`,
		"listener.name.client.gssapi.sasl.jaas.config":          `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/k/node1.keytab" principal="kafka/h1@STRAND.TEST";`,
		"listener.name.controller.gssapi.sasl.jaas.config":      `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k/node1.keytab" principal="kafka/h1@STRAND.TEST";`,
		"listener.name.controller.sasl.enabled.mechanisms":      "GSSAPI",
		"ssl.keystore.type":                                     "PEM",
		"ssl.keystore.location":                                 "/k/node1.pem",
		"ssl.truststore.type":                                   "PEM",
		"ssl.truststore.location":                               "/k/ca.pem",
		"ssl.client.auth":                                       "required",
		"listener.name.client.gssapi.connections.max.reauth.ms": "60000",
		"super.users":                                           "User:node;User:kafka",
	}
	maps.Copy(props, extra)
	return props
}

func TestListenerSecurityResolves(t *testing.T) {
	b, warnings, err := FromProperties(securedProps(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %v", warnings)
	}
	client := b.Security.Listeners["CLIENT"]
	if client.Protocol != SecurityProtocolSASLSSL || client.TLS == nil || client.SASL == nil {
		t.Fatalf("CLIENT = %+v", client)
	}
	if client.TLS.KeystoreLocation != "/k/node1.pem" || client.TLS.TruststoreLocation != "/k/ca.pem" {
		t.Errorf("CLIENT TLS stores = %+v", client.TLS)
	}
	if client.TLS.ClientAuth != "none" {
		t.Errorf("SASL_SSL takes ssl.client.auth only listener-prefixed (KIP-684): got %s", client.TLS.ClientAuth)
	}
	if got := client.SASL.Mechanisms; !cmp.Equal(got, []string{"PLAIN", "GSSAPI"}) {
		t.Errorf("CLIENT mechanisms %v", got)
	}
	if p := client.SASL.Plain; p == nil || p.Users["alice"] != "ap" || p.Username != "node" {
		t.Errorf("CLIENT PLAIN %+v", p)
	}
	if k := client.SASL.Kerberos; k == nil || k.Principal != "kafka/h1@STRAND.TEST" || k.Keytab != "/k/node1.keytab" || k.ServiceName != "kafka" {
		t.Errorf("CLIENT GSSAPI %+v", k)
	}
	if client.SASL.ReauthMaxMs["GSSAPI"] != 60000 || client.SASL.ReauthMaxMs["PLAIN"] != 0 {
		t.Errorf("reauth %v", client.SASL.ReauthMaxMs)
	}
	if client.SASL.ServerMaxReceiveBytes != 524288 {
		t.Errorf("sasl.server.max.receive.size default %d", client.SASL.ServerMaxReceiveBytes)
	}
	controller := b.Security.Listeners["CONTROLLER"]
	if controller.Protocol != SecurityProtocolSASLPlaintext || controller.TLS != nil || !cmp.Equal(controller.SASL.Mechanisms, []string{"GSSAPI"}) {
		t.Errorf("CONTROLLER %+v", controller)
	}
	if b.Security.FailedAuthenticationDelayMs != 100 || b.Security.InterBrokerMechanism != "PLAIN" || b.Security.ControllerMechanism != "GSSAPI" {
		t.Errorf("globals %+v", b.Security)
	}
	// Security keys never reach Static, which DescribeConfigs shows.
	for k := range b.Static {
		if strings.Contains(k, "ssl") || strings.Contains(k, "sasl") {
			t.Errorf("security key %s in Static", k)
		}
	}
	// SSL with ssl.client.auth applies it.
	b, _, err = FromProperties(securedProps(map[string]string{"listener.security.protocol.map": "CLIENT:SSL,CONTROLLER:SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "GSSAPI"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Security.Listeners["CLIENT"].TLS.ClientAuth; got != "required" {
		t.Errorf("SSL client auth %s, want required", got)
	}
}

// TestSecurityRefusals: every security setting Strand cannot honour, or
// that contradicts another, refuses the start naming its key.
func TestSecurityRefusals(t *testing.T) {
	cases := []struct {
		name     string
		extra    map[string]string
		drop     []string
		key      string
		contains string
	}{
		{"JKS key store", map[string]string{"ssl.keystore.type": "JKS"}, nil, "ssl.keystore.type", "PEM"},
		{"JKS by default", nil, []string{"ssl.keystore.type"}, "ssl.keystore.type", "PEM"},
		{"encrypted key", map[string]string{"ssl.key.password": "x"}, nil, "ssl.key.password", "unencrypted"},
		{"key store password with PEM", map[string]string{"ssl.keystore.password": "x"}, nil, "ssl.keystore.password", "PEM"},
		{"two key stores", map[string]string{"ssl.keystore.certificate.chain": "x", "ssl.keystore.key": "y"}, nil, "listener.name.client.ssl.keystore.location", "one way"},
		{"bad client auth", map[string]string{"listener.name.client.ssl.client.auth": "maybe"}, nil, "listener.name.client.ssl.client.auth", "maybe"},
		{"TLS 1.1", map[string]string{"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, nil, "ssl.enabled.protocols", "TLSv1.1"},
		{"global JAAS", map[string]string{"sasl.jaas.config": "x"}, nil, "sasl.jaas.config", "listener.name"},
		{"OAUTHBEARER", map[string]string{"listener.name.client.sasl.enabled.mechanisms": "OAUTHBEARER"}, nil, "listener.name.client.sasl.enabled.mechanisms", "not implement yet"},
		{"SCRAM served on the controller listener", map[string]string{"listener.name.controller.sasl.enabled.mechanisms": "GSSAPI,SCRAM-SHA-512"}, nil, "listener.name.controller.sasl.enabled.mechanisms", "SCRAM cannot authenticate controller listener"},
		{"SCRAM enabled globally reaches the controller listener", map[string]string{"sasl.enabled.mechanisms": "PLAIN,GSSAPI,SCRAM-SHA-256"}, []string{"listener.name.controller.sasl.enabled.mechanisms"}, "sasl.enabled.mechanisms", "listener.name.controller.sasl.enabled.mechanisms"},
		{"SCRAM between controllers", map[string]string{"sasl.mechanism.controller.protocol": "SCRAM-SHA-256"}, nil, "sasl.mechanism.controller.protocol", "SCRAM cannot authenticate controller listener"},
		{"SCRAM with PLAIN's module", map[string]string{"listener.name.client.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
			"listener.name.client.scram-sha-256.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";`}, nil, "listener.name.client.scram-sha-256.sasl.jaas.config", "ScramLoginModule"},
		{"SCRAM delegation token login", map[string]string{"listener.name.client.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
			"listener.name.client.scram-sha-256.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b" tokenauth=true;`}, nil, "listener.name.client.scram-sha-256.sasl.jaas.config", "delegation tokens"},
		{"unknown mechanism", map[string]string{"sasl.enabled.mechanisms": "KERBEROS"}, nil, "sasl.enabled.mechanisms", "KERBEROS"},
		{"inter-broker mechanism not enabled", map[string]string{"listener.name.client.sasl.enabled.mechanisms": "GSSAPI"}, nil, "sasl.mechanism.inter.broker.protocol", "does not enable"},
		{"wrong login module", map[string]string{"listener.name.client.plain.sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required;`}, nil, "listener.name.client.plain.sasl.jaas.config", "PlainLoginModule"},
		{"ticket cache", map[string]string{"listener.name.controller.gssapi.sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;`}, nil, "listener.name.controller.gssapi.sasl.jaas.config", "useTicketCache"},
		{"unknown listener prefix", map[string]string{"listener.name.other.ssl.client.auth": "none"}, nil, "listener.name.other.ssl.client.auth", "OTHER"},
		{"unimplemented prefixed key", map[string]string{"listener.name.client.ssl.cipher.suites": "x"}, nil, "listener.name.client.ssl.cipher.suites", "does not implement"},
		{"unimplemented global key", map[string]string{"ssl.cipher.suites": "x"}, nil, "ssl.cipher.suites", "does not implement"},
		{"unimplemented mechanism key", map[string]string{"listener.name.client.plain.sasl.server.callback.handler.class": "x"}, nil, "listener.name.client.plain.sasl.server.callback.handler.class", "does not implement"},
		{"custom principal builder", map[string]string{"principal.builder.class": "com.example.Builder"}, nil, "principal.builder.class", "principal builder"},
		{"bad principal rules", map[string]string{"ssl.principal.mapping.rules": "RULE:x"}, nil, "ssl.principal.mapping.rules", "RULE"},
		{"bad kerberos rules", map[string]string{"sasl.kerberos.principal.to.local.rules": "RULE:[1:$3]"}, nil, "sasl.kerberos.principal.to.local.rules", "$3"},
		{"negative delay", map[string]string{"connection.failed.authentication.delay.ms": "-1"}, nil, "connection.failed.authentication.delay.ms", "at least 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			props := securedProps(c.extra)
			for _, k := range c.drop {
				delete(props, k)
			}
			_, _, err := FromProperties(props)
			var cfgErr *Error
			if !errors.As(err, &cfgErr) {
				t.Fatalf("got %v, want a *config.Error", err)
			}
			if cfgErr.Key != c.key || !strings.Contains(err.Error(), c.contains) {
				t.Errorf("got %q; want key %s and %q", err, c.key, c.contains)
			}
		})
	}
}

// TestIncompleteAuthenticationRefusedByTheEnvironment: what running the
// handshakes needs and the configuration lacks parses (the simulator,
// which assigns principals, needs none of it), and
// CheckAuthenticationComplete, which realnet calls, refuses it naming the
// missing key.
func TestIncompleteAuthenticationRefusedByTheEnvironment(t *testing.T) {
	cases := []struct {
		name     string
		extra    map[string]string
		drop     []string
		key      string
		contains string
	}{
		{"no key store", nil, []string{"ssl.keystore.location"}, "listener.name.client.ssl.keystore.location", "certificate"},
		{"client auth without trust store", map[string]string{"listener.name.client.ssl.client.auth": "requested"}, []string{"ssl.truststore.location"}, "listener.name.client.ssl.client.auth", "trust store"},
		{"no JAAS", nil, []string{"listener.name.client.plain.sasl.jaas.config"}, "listener.name.client.plain.sasl.jaas.config", "required"},
		{"PLAIN client without password", map[string]string{"listener.name.client.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";`}, nil, "listener.name.client.plain.sasl.jaas.config", "username and password"},
		{"no service name", nil, []string{"sasl.kerberos.service.name"}, "sasl.kerberos.service.name", "required"},
	}
	complete, _, err := FromProperties(securedProps(nil))
	if err != nil || complete.CheckAuthenticationComplete() != nil {
		t.Fatalf("complete configuration: %v / %v", err, complete.CheckAuthenticationComplete())
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			props := securedProps(c.extra)
			for _, k := range c.drop {
				delete(props, k)
			}
			b, _, err := FromProperties(props)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			err = b.CheckAuthenticationComplete()
			var cfgErr *Error
			if !errors.As(err, &cfgErr) || cfgErr.Key != c.key || !strings.Contains(err.Error(), c.contains) {
				t.Errorf("got %v; want key %s and %q", err, c.key, c.contains)
			}
		})
	}
}

// kerberosShorthand is the design's keys for one node.
func kerberosShorthand() map[string]string {
	return map[string]string{
		"process.roles":             "broker,controller",
		"node.id":                   "1",
		"listeners":                 "BROKER://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  "1@127.0.0.1:9093",
		"log.dirs":                  "/tmp/x",
		"authentication":            "kerberos",
		"principal":                 "kafka/host1@TDH",
		"keytab":                    "/etc/kafka/kafka.keytab",
	}
}

// TestKerberosShorthandExpandsToKafkaKeys: authentication=kerberos gives the
// same Security as the Kafka keys SPEC §10.6 lists for it.
func TestKerberosShorthandExpandsToKafkaKeys(t *testing.T) {
	short, _, err := FromProperties(kerberosShorthand())
	if err != nil {
		t.Fatal(err)
	}
	jaas := `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/etc/kafka/kafka.keytab" principal="kafka/host1@TDH";`
	kafkaKeys := kerberosShorthand()
	delete(kafkaKeys, "authentication")
	delete(kafkaKeys, "principal")
	delete(kafkaKeys, "keytab")
	maps.Copy(kafkaKeys, map[string]string{
		"listener.security.protocol.map":                   "BROKER:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":                          "GSSAPI",
		"sasl.mechanism.inter.broker.protocol":             "GSSAPI",
		"sasl.mechanism.controller.protocol":               "GSSAPI",
		"sasl.kerberos.service.name":                       "kafka",
		"listener.name.broker.gssapi.sasl.jaas.config":     jaas,
		"listener.name.controller.gssapi.sasl.jaas.config": jaas,
		"super.users": "User:kafka",
	})
	long, _, err := FromProperties(kafkaKeys)
	if err != nil {
		t.Fatal(err)
	}
	if !short.IsSuperUser("User:kafka") || len(short.SuperUsers) != 1 {
		t.Errorf("shorthand super.users %v, want User:kafka", short.SuperUsers)
	}
	if short.Security.Authentication != "kerberos" {
		t.Errorf("Authentication %q", short.Security.Authentication)
	}
	short.Security.Authentication = long.Security.Authentication
	if diff := cmp.Diff(long.Security, short.Security, cmpopts.IgnoreUnexported(KerberosRules{}, SSLPrincipalRules{}, Security{})); diff != "" {
		t.Errorf("shorthand differs from the Kafka keys (-kafka +shorthand):\n%s", diff)
	}
	for _, l := range short.Security.Listeners {
		if l.Protocol != SecurityProtocolSASLPlaintext || l.SASL.Kerberos.Keytab != "/etc/kafka/kafka.keytab" {
			t.Errorf("listener %s: %+v", l.Name, l)
		}
	}
}

func TestShorthandRefusals(t *testing.T) {
	cases := []struct {
		name     string
		edit     func(map[string]string)
		key      string
		contains string
	}{
		{"no keytab", func(p map[string]string) { delete(p, "keytab") }, "authentication", "keytab"},
		{"bad principal", func(p map[string]string) { p["principal"] = "kafka" }, "principal", "REALM"},
		{"bad mode", func(p map[string]string) { p["authentication"] = "ldap" }, "authentication", "ldap"},
		{"principal without kerberos", func(p map[string]string) { p["authentication"] = "ipaddress" }, "principal", "kerberos"},
		{"contradicting Kafka key", func(p map[string]string) { p["sasl.enabled.mechanisms"] = "PLAIN" }, "sasl.enabled.mechanisms", "not both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			props := kerberosShorthand()
			c.edit(props)
			_, _, err := FromProperties(props)
			var cfgErr *Error
			if !errors.As(err, &cfgErr) || cfgErr.Key != c.key || !strings.Contains(err.Error(), c.contains) {
				t.Errorf("got %v; want key %s and %q", err, c.key, c.contains)
			}
		})
	}
	// ipaddress expands to Strand's principal builder.
	props := kerberosShorthand()
	delete(props, "principal")
	delete(props, "keytab")
	props["authentication"] = "ipaddress"
	props["listener.security.protocol.map"] = "BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT"
	b, _, err := FromProperties(props)
	if err != nil || !b.Security.IPAddressPrincipals() {
		t.Errorf("ipaddress: %v, builder %q", err, b.Security.PrincipalBuilder)
	}
}

// TestKerberosExampleParses: the README's Kerberos example
// (config/examples/kerberos) parses, nodes 1 and 2 in Kafka's keys and node
// 3 in the design's shorthand, and node 3's security is node 1's with its
// own principal and keytab.
func TestKerberosExampleParses(t *testing.T) {
	parse := func(n int) Broker {
		t.Helper()
		text, err := os.ReadFile(filepath.Join("..", "..", "config", "examples", "kerberos", fmt.Sprintf("node%d.properties", n)))
		if err != nil {
			t.Fatal(err)
		}
		b, warnings, err := Parse(text, nil)
		if err != nil || len(warnings) != 0 {
			t.Fatalf("node%d.properties: %v %v", n, err, warnings)
		}
		return b
	}
	one, three := parse(1), parse(3)
	parse(2)
	for _, l := range three.Security.Listeners {
		k := l.SASL.Kerberos
		if k.Principal != "kafka/127.0.0.3@STRAND.EXAMPLE" || k.Keytab != "data/kerberos/node3.keytab" {
			t.Fatalf("node 3 listener %s: %+v", l.Name, k)
		}
		k.Principal, k.Keytab = "kafka/127.0.0.1@STRAND.EXAMPLE", "data/kerberos/node1.keytab"
	}
	if !slices.Equal(one.SuperUsers, three.SuperUsers) {
		t.Errorf("super.users: node 1 %v, node 3 %v", one.SuperUsers, three.SuperUsers)
	}
	three.Security.Authentication = one.Security.Authentication
	if diff := cmp.Diff(one.Security, three.Security, cmpopts.IgnoreUnexported(KerberosRules{}, SSLPrincipalRules{}, Security{})); diff != "" {
		t.Errorf("node 3 (shorthand) differs from node 1 (Kafka keys) (-1 +3):\n%s", diff)
	}
}
