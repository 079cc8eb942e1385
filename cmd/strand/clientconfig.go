package main

// --command-config FILE: the client tools connect to secured listeners
// with Kafka's client properties, as kafka-topics.sh --command-config
// does. One builder, clientOpts, turns the file into kgo options for every
// tool.
//
//	security.protocol                PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
//	sasl.mechanism                   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI (Kafka's default)
//	sasl.jaas.config                 PlainLoginModule or ScramLoginModule (username, password);
//	                                 Krb5LoginModule (useKeyTab=true keyTab=… principal=…, or
//	                                 useTicketCache=true with $KRB5CCNAME)
//	sasl.kerberos.service.name       GSSAPI's service (or the JAAS serviceName)
//	ssl.truststore.location/.certificates, ssl.truststore.type=PEM
//	ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key, ssl.keystore.type=PEM
//	ssl.endpoint.identification.algorithm   https (default) or empty
//	client.id
//
// Any other key is refused, naming it: a misspelt security key (librdkafka's
// sasl.mechanisms) must not connect without the security it asked for.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"strand/core/config"
	"strand/realnet/auth"
)

// clientConfigKeys are the keys a --command-config file may hold.
var clientConfigKeys = []string{
	"client.id", "sasl.jaas.config", "sasl.kerberos.service.name", "sasl.mechanism", "security.protocol",
	"ssl.endpoint.identification.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.keystore.location", "ssl.keystore.type", "ssl.truststore.certificates", "ssl.truststore.location",
	"ssl.truststore.type",
}

// clientOpts reads a --command-config file ("" for none: PLAINTEXT) and
// returns the kgo options that connect as it says.
func clientOpts(cfgPath string) ([]kgo.Opt, error) {
	if cfgPath == "" {
		return nil, nil
	}
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	props, err := config.ParseProperties(text)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", cfgPath, err)
	}
	opts, err := clientOptsOf(props)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", cfgPath, err)
	}
	return opts, nil
}

// clientOptsOf builds the options from parsed properties.
func clientOptsOf(props map[string]string) ([]kgo.Opt, error) {
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if !slices.Contains(clientConfigKeys, k) {
			return nil, fmt.Errorf("key %s is not one the strand tools read (%s)", k, strings.Join(clientConfigKeys, ", "))
		}
	}
	var opts []kgo.Opt
	if id := props["client.id"]; id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	protocol := strings.ToUpper(valueOr(props, "security.protocol", config.SecurityProtocolPlaintext))
	useTLS, useSASL := false, false
	switch protocol {
	case config.SecurityProtocolPlaintext:
	case config.SecurityProtocolSSL:
		useTLS = true
	case config.SecurityProtocolSASLPlaintext:
		useSASL = true
	case config.SecurityProtocolSASLSSL:
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", protocol)
	}
	if !useTLS {
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if strings.HasPrefix(k, "ssl.") {
				return nil, fmt.Errorf("key %s is set but security.protocol is %s, which does not use TLS", k, protocol)
			}
		}
	}
	if !useSASL {
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if strings.HasPrefix(k, "sasl.") {
				return nil, fmt.Errorf("key %s is set but security.protocol is %s, which does not use SASL", k, protocol)
			}
		}
	}
	if useTLS {
		cfg, err := clientTLS(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if useSASL {
		mech, err := clientSASL(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

func valueOr(props map[string]string, key, def string) string {
	if v, ok := props[key]; ok {
		return strings.TrimSpace(v)
	}
	return def
}

// clientTLS reads the ssl.* keys.
func clientTLS(props map[string]string) (*tls.Config, error) {
	t := &config.TLSSettings{
		KeystoreLocation: props["ssl.keystore.location"], KeystoreCertificateChain: props["ssl.keystore.certificate.chain"],
		KeystoreKey: props["ssl.keystore.key"], TruststoreLocation: props["ssl.truststore.location"],
		TruststoreCertificates: props["ssl.truststore.certificates"], EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"},
		Protocol: "TLSv1.3", EndpointIdentification: true,
	}
	// A store's type must say PEM where a store is given (Kafka's default
	// is JKS), and may say nothing else where none is.
	for _, store := range []struct {
		kind  string
		given bool
	}{{"keystore", t.HasKeystore()}, {"truststore", t.HasTruststore()}} {
		key := "ssl." + store.kind + ".type"
		_, set := props[key]
		if typ := valueOr(props, key, "JKS"); (store.given || set) && typ != "PEM" {
			return nil, fmt.Errorf("%s must be PEM, not %q (Kafka's default is JKS; the strand tools read PEM only)", key, typ)
		}
	}
	if (t.KeystoreCertificateChain == "") != (t.KeystoreKey == "") {
		return nil, errors.New("ssl.keystore.certificate.chain and ssl.keystore.key go together")
	}
	switch endpoint := strings.ToLower(valueOr(props, "ssl.endpoint.identification.algorithm", "https")); endpoint {
	case "https":
	case "":
		t.EndpointIdentification = false
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm %q: want https, or empty to not check host names", endpoint)
	}
	return auth.ClientTLS("the TLS settings", t)
}

// clientSASL reads sasl.mechanism and its login module.
func clientSASL(props map[string]string) (sasl.Mechanism, error) {
	mechanism := valueOr(props, "sasl.mechanism", config.MechanismGSSAPI)
	jaasText, ok := props["sasl.jaas.config"]
	if !ok {
		return nil, fmt.Errorf("sasl.jaas.config is required for SASL mechanism %s", mechanism)
	}
	jaas, err := config.ParseJAAS("sasl.jaas.config", jaasText)
	if err != nil {
		return nil, err
	}
	wantModule := map[string]string{
		config.MechanismPlain:       "org.apache.kafka.common.security.plain.PlainLoginModule",
		config.MechanismScramSHA256: "org.apache.kafka.common.security.scram.ScramLoginModule",
		config.MechanismScramSHA512: "org.apache.kafka.common.security.scram.ScramLoginModule",
		config.MechanismGSSAPI:      "com.sun.security.auth.module.Krb5LoginModule",
	}[mechanism]
	switch {
	case wantModule == "":
		return nil, fmt.Errorf("sasl.mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or GSSAPI", mechanism)
	case jaas.LoginModule != wantModule:
		return nil, fmt.Errorf("sasl.jaas.config names %s: %s takes %s", jaas.LoginModule, mechanism, wantModule)
	}
	if mechanism == config.MechanismGSSAPI {
		return kerberosMechanism(props, jaas)
	}
	for _, opt := range slices.Sorted(maps.Keys(jaas.Options)) {
		if opt != "username" && opt != "password" {
			return nil, fmt.Errorf("sasl.jaas.config has option %s: %s's login module takes username and password", opt, mechanism)
		}
	}
	user, password := jaas.Options["username"], jaas.Options["password"]
	if user == "" || password == "" {
		return nil, errors.New("sasl.jaas.config needs username and password options")
	}
	switch mechanism {
	case config.MechanismPlain:
		return plain.Auth{User: user, Pass: password}.AsMechanism(), nil
	case config.MechanismScramSHA256:
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism(), nil
	}
	return scram.Auth{User: user, Pass: password}.AsSha512Mechanism(), nil
}

// kerberosMechanism logs in from a keytab (useKeyTab=true keyTab=…
// principal=…) or a ticket cache (useTicketCache=true: $KRB5CCNAME, else
// /tmp/krb5cc_<uid>), with krb5.conf from $KRB5_CONFIG, else /etc/krb5.conf.
func kerberosMechanism(props map[string]string, jaas config.JAASConfig) (sasl.Mechanism, error) {
	service := valueOr(props, "sasl.kerberos.service.name", jaas.Options["serviceName"])
	if service == "" {
		return nil, errors.New("sasl.kerberos.service.name (or the JAAS serviceName) is required for GSSAPI")
	}
	krb5Path := os.Getenv("KRB5_CONFIG")
	if krb5Path == "" {
		krb5Path = "/etc/krb5.conf"
	}
	krb5, err := krbconfig.Load(krb5Path)
	if err != nil {
		return nil, fmt.Errorf("GSSAPI: krb5.conf %s: %w", krb5Path, err)
	}
	var cl *client.Client
	switch {
	case strings.EqualFold(jaas.Options["useKeyTab"], "true"):
		principal, ktPath := jaas.Options["principal"], jaas.Options["keyTab"]
		primary, instance, realm, err := config.SplitKerberosName(principal)
		if err != nil || principal == "" || ktPath == "" {
			return nil, errors.New("sasl.jaas.config needs keyTab=\"…\" and principal=\"name@REALM\" with useKeyTab=true")
		}
		if realm == "" {
			realm = krb5.LibDefaults.DefaultRealm
		}
		kt, err := keytab.Load(ktPath)
		if err != nil {
			return nil, fmt.Errorf("GSSAPI: keytab %s: %w", ktPath, err)
		}
		name := primary
		if instance != "" {
			name += "/" + instance
		}
		cl = client.NewWithKeytab(name, realm, kt, krb5, client.DisablePAFXFAST(true))
		if err := cl.Login(); err != nil {
			return nil, fmt.Errorf("GSSAPI: login as %s with keytab %s: %w", principal, ktPath, err)
		}
	case strings.EqualFold(jaas.Options["useTicketCache"], "true"):
		path := os.Getenv("KRB5CCNAME")
		path = strings.TrimPrefix(path, "FILE:")
		if path == "" {
			path = fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid())
		}
		cache, err := credentials.LoadCCache(path)
		if err != nil {
			return nil, fmt.Errorf("GSSAPI: ticket cache %s: %w", path, err)
		}
		if cl, err = client.NewFromCCache(cache, krb5, client.DisablePAFXFAST(true)); err != nil {
			return nil, fmt.Errorf("GSSAPI: ticket cache %s: %w", path, err)
		}
	default:
		return nil, errors.New("sasl.jaas.config: Krb5LoginModule needs useKeyTab=true (keyTab, principal) or useTicketCache=true")
	}
	return kerberos.Auth{Client: cl, Service: service}.AsMechanismWithClose(), nil
}
