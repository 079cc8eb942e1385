package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"strand/core/config"
)

// listenerTLS is a listener's loaded TLS material.
type listenerTLS struct {
	settings *config.TLSSettings
	// cert is the key store's certificate and key; nil when none is
	// configured (a node connecting without a client certificate).
	cert *tls.Certificate
	// roots are the trust store's CAs; nil when none is configured.
	roots *x509.CertPool
	// server is the listener's server configuration, built once so that
	// its session ticket keys are shared by every connection; nil without
	// a certificate.
	server *tls.Config
}

// loadTLS reads a listener's key and trust stores; owner names whose
// they are in errors ("listener CLIENT").
func loadTLS(owner string, t *config.TLSSettings) (*listenerTLS, error) {
	lt := &listenerTLS{settings: t}
	if t.HasKeystore() {
		chain, key := t.KeystoreCertificateChain, t.KeystoreKey
		source := "ssl.keystore.certificate.chain/ssl.keystore.key"
		if t.KeystoreLocation != "" {
			text, err := os.ReadFile(t.KeystoreLocation)
			if err != nil {
				return nil, fmt.Errorf("%s: key store (ssl.keystore.location): %w", owner, err)
			}
			chain, key, source = string(text), string(text), "ssl.keystore.location "+t.KeystoreLocation
		}
		cert, err := keyPair(chain, key)
		if err != nil {
			return nil, fmt.Errorf("%s: key store (%s): %w", owner, source, err)
		}
		lt.cert = &cert
	}
	if t.HasTruststore() {
		text, source := t.TruststoreCertificates, "ssl.truststore.certificates"
		if t.TruststoreLocation != "" {
			b, err := os.ReadFile(t.TruststoreLocation)
			if err != nil {
				return nil, fmt.Errorf("%s: trust store (ssl.truststore.location): %w", owner, err)
			}
			text, source = string(b), "ssl.truststore.location "+t.TruststoreLocation
		}
		certs, err := parseCertificates(text)
		if err != nil {
			return nil, fmt.Errorf("%s: trust store (%s): %w", owner, source, err)
		}
		lt.roots = x509.NewCertPool()
		for _, c := range certs {
			lt.roots.AddCert(c)
		}
	}
	if lt.cert != nil {
		lt.server = lt.serverConfig()
	}
	return lt, nil
}

// ClientTLS is the tls.Config a client tool connects with, from Kafka's
// client ssl.* settings: the trust store (else the system's roots)
// verifies the servers, their host names too unless endpoint
// identification is off, and the key store's certificate, if any, is the
// client's. The dialer sets ServerName per broker. source names the
// settings' file in errors.
func ClientTLS(source string, t *config.TLSSettings) (*tls.Config, error) {
	lt, err := loadTLS(source, t)
	if err != nil {
		return nil, err
	}
	return lt.clientConfig(""), nil
}

// tlsVersions maps ssl.enabled.protocols to crypto/tls's bounds.
func tlsVersions(enabled []string) (minVersion, maxVersion uint16) {
	minVersion, maxVersion = tls.VersionTLS13, tls.VersionTLS12
	for _, p := range enabled {
		v := uint16(tls.VersionTLS12)
		if p == "TLSv1.3" {
			v = tls.VersionTLS13
		}
		minVersion, maxVersion = min(minVersion, v), max(maxVersion, v)
	}
	return minVersion, maxVersion
}

// serverConfig is the tls.Config a listener serves with.
func (lt *listenerTLS) serverConfig() *tls.Config {
	if lt.cert == nil {
		panic("auth: serving TLS without a certificate; config requires one on a served listener")
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{*lt.cert}, ClientCAs: lt.roots}
	cfg.MinVersion, cfg.MaxVersion = tlsVersions(lt.settings.EnabledProtocols)
	switch lt.settings.ClientAuth {
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		cfg.ClientAuth = tls.NoClientCert
	}
	return cfg
}

// clientConfig is the tls.Config a node connects to the listener at host
// with: the trust store (or the system's roots) verifies the server, its
// host name too unless ssl.endpoint.identification.algorithm is empty,
// and the key store's certificate, if any, is the client's.
func (lt *listenerTLS) clientConfig(host string) *tls.Config {
	cfg := &tls.Config{RootCAs: lt.roots, ServerName: host}
	if lt.cert != nil {
		cfg.Certificates = []tls.Certificate{*lt.cert}
	}
	cfg.MinVersion, cfg.MaxVersion = tlsVersions(lt.settings.EnabledProtocols)
	if lt.settings.Protocol == "TLSv1.2" {
		cfg.MaxVersion = tls.VersionTLS12
	}
	if !lt.settings.EndpointIdentification {
		// Verify the chain, not the name.
		roots := lt.roots
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg
}

// certificatePrincipal is the principal of a TLS connection's client
// certificate: User: and its subject's RFC 2253 name mapped through
// ssl.principal.mapping.rules. ok is false when the client sent none.
func certificatePrincipal(cs tls.ConnectionState, rules config.SSLPrincipalRules) (principal string, ok bool, err error) {
	if len(cs.PeerCertificates) == 0 {
		return "", false, nil
	}
	dn, err := DistinguishedName(cs.PeerCertificates[0].RawSubject)
	if err != nil {
		return "", false, fmt.Errorf("client certificate subject: %w", err)
	}
	name, err := rules.Map(dn)
	if err != nil {
		return "", false, err
	}
	return "User:" + name, true, nil
}

// AddressPrincipal is the ipaddress mode's principal of a connection from
// addr: User: and the source IP as Go writes it (dotted quad, RFC 5952 for
// IPv6; an IPv4-mapped IPv6 address as IPv4), the same text as the
// connection's ClientHost without its "/", which is what ACL hosts are
// matched against.
func AddressPrincipal(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		ip := tcp.IP
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		return "User:" + ip.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		host = addr.String()
	}
	return "User:" + host
}

// tlsVersionName names a negotiated version for logs.
func tlsVersionName(v uint16) string {
	names := map[uint16]string{tls.VersionTLS12: "TLSv1.2", tls.VersionTLS13: "TLSv1.3"}
	if n, ok := names[v]; ok {
		return n
	}
	return fmt.Sprintf("0x%04x", v)
}
