// Package auth is Strand's connection authentication: TLS key and trust
// stores, the principal a certificate or a source address gives, and the
// SASL mechanisms, both sides (SPEC.md §10.6). It is environment: it reads
// files, keytabs and the KDC, and core/ never imports it. realnet runs it
// on each connection before any request reaches the core.
package auth

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"time"

	"strand/core/config"
	"strand/core/env"
)

// Options says where the environment's security files are.
type Options struct {
	// Krb5Config is the krb5.conf path for Kerberos (KDCs, default realm,
	// clock skew); empty means $KRB5_CONFIG, else /etc/krb5.conf.
	Krb5Config string
	// Logger receives the login log lines; nil discards them.
	Logger *slog.Logger
	// Scram looks SCRAM credentials up in the metadata the node has
	// applied; nil finds no user.
	Scram ScramLookup
}

// Security is a node's loaded authentication: each listener's TLS
// material and SASL mechanisms, and its Kerberos login.
type Security struct {
	cfg       config.Security
	listeners map[string]*Listener
	kerberos  *kerberosLogins
}

// Load reads what cfg's security names — key and trust stores, keytabs —
// and logs in to the KDC with every principal and keytab a listener uses,
// so that a node that cannot authenticate does not start. Each error
// names the listener, the key or file, and the cause (for a login, the
// principal, the keytab and the KDC's answer).
func Load(cfg config.Broker, opts Options) (*Security, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Security{cfg: cfg.Security, listeners: map[string]*Listener{}}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	for _, name := range slices.Sorted(maps.Keys(cfg.Security.Listeners)) {
		ls := cfg.Security.Listeners[name]
		l := &Listener{
			name:         name,
			protocol:     ls.Protocol,
			ipPrincipals: cfg.Security.IPAddressPrincipals(),
			failureDelay: time.Duration(cfg.Security.FailedAuthenticationDelayMs) * time.Millisecond,
			mechanisms:   map[string]Mechanism{},
		}
		if ls.TLS != nil {
			lt, err := loadTLS("listener "+name, ls.TLS)
			if err != nil {
				return nil, err
			}
			l.tls = lt
		}
		if ls.SASL != nil {
			l.sasl = ls.SASL
			if ls.SASL.Kerberos != nil {
				if s.kerberos == nil {
					krb, err := newKerberosLogins(opts.Krb5Config, logger)
					if err != nil {
						return nil, fmt.Errorf("listener %s: %w", name, err)
					}
					s.kerberos = krb
				}
				login, err := s.kerberos.login(ls.SASL.Kerberos.Principal, ls.SASL.Kerberos.Keytab)
				if err != nil {
					return nil, err
				}
				l.kerberos = login
			}
			for _, mech := range ls.SASL.Mechanisms {
				switch mech {
				case config.MechanismPlain:
					l.mechanisms[mech] = NewPlain(StaticUsers(ls.SASL.Plain.Users))
				case config.MechanismGSSAPI:
					l.mechanisms[mech] = newGSSAPI(l.kerberos, ls.SASL.Kerberos.Rules)
				case config.MechanismScramSHA256, config.MechanismScramSHA512:
					lookup := opts.Scram
					if lookup == nil {
						lookup = func(string, string) (env.ScramCredential, bool) { return env.ScramCredential{}, false }
					}
					m, err := NewScram(mech, lookup)
					if err != nil {
						return nil, fmt.Errorf("listener %s: %w", name, err)
					}
					l.mechanisms[mech] = m
				default:
					return nil, fmt.Errorf("listener %s: SASL mechanism %s is not implemented", name, mech)
				}
			}
		}
		s.listeners[name] = l
	}
	ok = true
	return s, nil
}

// Listener returns a listener's authentication; nil for a listener the
// configuration has no security for (none: config covers every listener).
func (s *Security) Listener(name string) *Listener { return s.listeners[name] }

// Close ends the Kerberos logins.
func (s *Security) Close() {
	if s.kerberos != nil {
		s.kerberos.close()
	}
}

// Listener is one listener's authentication: its server side and what a
// node connecting to it presents.
type Listener struct {
	name         string
	protocol     string
	tls          *listenerTLS
	sasl         *config.SASLSettings
	kerberos     *kerberosLogin
	mechanisms   map[string]Mechanism
	ipPrincipals bool
	failureDelay time.Duration
}

// Name is the listener's name.
func (l *Listener) Name() string { return l.name }

// Protocol is the listener's security protocol.
func (l *Listener) Protocol() string { return l.protocol }

// ServerTLS is the TLS configuration the listener serves with; nil for a
// listener without TLS.
func (l *Listener) ServerTLS() *tls.Config {
	if l.tls == nil {
		return nil
	}
	return l.tls.server
}

// ClientTLS is the TLS configuration a node connects to the listener at
// host with; nil for a listener without TLS.
func (l *Listener) ClientTLS(host string) *tls.Config {
	if l.tls == nil {
		return nil
	}
	return l.tls.clientConfig(host)
}

// UsesSASL reports whether connections must authenticate with SASL.
func (l *Listener) UsesSASL() bool { return l.sasl != nil }

// Mechanisms are the SASL mechanisms the listener enables, as
// sasl.enabled.mechanisms lists them.
func (l *Listener) Mechanisms() []string {
	if l.sasl == nil {
		return nil
	}
	return l.sasl.Mechanisms
}

// Mechanism returns an enabled mechanism, or nil.
func (l *Listener) Mechanism(name string) Mechanism { return l.mechanisms[name] }

// ReauthMax is connections.max.reauth.ms for mechanism: the longest a
// session lasts before the client must authenticate again; 0 for no bound
// but the credential's.
func (l *Listener) ReauthMax(mechanism string) time.Duration {
	if l.sasl == nil {
		return 0
	}
	return time.Duration(l.sasl.ReauthMaxMs[mechanism]) * time.Millisecond
}

// ServerMaxReceiveBytes is sasl.server.max.receive.size: the largest frame
// read from a connection that has not authenticated.
func (l *Listener) ServerMaxReceiveBytes() int32 {
	if l.sasl == nil {
		return 0
	}
	return l.sasl.ServerMaxReceiveBytes
}

// FailureDelay is connection.failed.authentication.delay.ms.
func (l *Listener) FailureDelay() time.Duration { return l.failureDelay }

// TransportPrincipal is a connection's principal before SASL: on SSL the
// client certificate's (mapped by ssl.principal.mapping.rules); without one
// (PLAINTEXT, or SSL when the client sent no certificate) the source
// address with the ipaddress principal builder, else ANONYMOUS. cs is nil
// on a connection without TLS. A certificate no rule maps fails the
// connection, as in Kafka.
func (l *Listener) TransportPrincipal(cs *tls.ConnectionState, remote net.Addr) (string, error) {
	if cs != nil && l.protocol == config.SecurityProtocolSSL {
		principal, ok, err := certificatePrincipal(*cs, l.tls.settings.PrincipalRules)
		if err != nil {
			return "", err
		}
		if ok {
			return principal, nil
		}
	}
	if l.ipPrincipals {
		return AddressPrincipal(remote), nil
	}
	return env.AnonymousPrincipal, nil
}

// TLSVersionName names a negotiated TLS version for logs.
func TLSVersionName(v uint16) string { return tlsVersionName(v) }
