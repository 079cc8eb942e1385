package auth

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/types"

	"strand/core/config"
)

// kerberosLogins are a node's Kerberos logins, one per principal and
// keytab, sharing the krb5.conf and one replay cache.
type kerberosLogins struct {
	conf     *krbconfig.Config
	confPath string
	logger   *slog.Logger
	replays  *replayCache
	logins   map[[2]string]*kerberosLogin
}

// newKerberosLogins reads krb5.conf: path, else $KRB5_CONFIG, else
// /etc/krb5.conf, as MIT Kerberos and Java look for it.
func newKerberosLogins(path string, logger *slog.Logger) (*kerberosLogins, error) {
	if path == "" {
		path = os.Getenv("KRB5_CONFIG")
	}
	if path == "" {
		path = "/etc/krb5.conf"
	}
	conf, err := krbconfig.Load(path)
	var unsupported krbconfig.UnsupportedDirective
	if err != nil && !errors.As(err, &unsupported) {
		return nil, fmt.Errorf("krb5 configuration %s: %w", path, err)
	}
	return &kerberosLogins{conf: conf, confPath: path, logger: logger, replays: newReplayCache(), logins: map[[2]string]*kerberosLogin{}}, nil
}

// kerberosLogin is a node's login to the KDC with its principal and
// keytab: it accepts service tickets for the principal (with the
// keytab's keys) and gets service tickets to connect to other nodes.
type kerberosLogin struct {
	// principal is primary/instance@REALM.
	principal string
	name      types.PrincipalName
	realm     string
	keytab    *keytab.Keytab
	client    *client.Client
	conf      *krbconfig.Config
	replays   *replayCache
}

// login logs in with principal and keytabPath, once per pair. Its error
// names the principal, the keytab and the KDC's answer: the node's start
// fails with it.
func (k *kerberosLogins) login(principal, keytabPath string) (*kerberosLogin, error) {
	key := [2]string{principal, keytabPath}
	if l, ok := k.logins[key]; ok {
		return l, nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("login of %s with keytab %s failed (Kerberos): %s", principal, keytabPath, fmt.Sprintf(format, args...))
	}
	b, err := os.ReadFile(keytabPath)
	if err != nil {
		return nil, fail("%v", err)
	}
	kt := keytab.New()
	if err := kt.Unmarshal(b); err != nil {
		return nil, fail("not a keytab: %v", err)
	}
	primary, instance, realm, err := config.SplitKerberosName(principal)
	if err != nil {
		return nil, fail("%v", err)
	}
	user := primary
	if instance != "" {
		user += "/" + instance
	}
	name := types.NewPrincipalName(1, user) // KRB_NT_PRINCIPAL, as the KDC names it
	if !keytabHas(kt, name, realm) {
		return nil, fail("the keytab holds no key for the principal")
	}
	cl := client.NewWithKeytab(user, realm, kt, k.conf, client.DisablePAFXFAST(true))
	if err := cl.Login(); err != nil {
		return nil, fail("the KDC answered: %v", err)
	}
	k.logger.Info("Kerberos login", "principal", principal, "keytab", keytabPath, "krb5.conf", k.confPath)
	l := &kerberosLogin{principal: principal, name: name, realm: realm, keytab: kt, client: cl, conf: k.conf, replays: k.replays}
	k.logins[key] = l
	return l, nil
}

// keytabHas reports whether kt has a key for name@realm.
func keytabHas(kt *keytab.Keytab, name types.PrincipalName, realm string) bool {
	for _, e := range kt.Entries {
		if e.Principal.Realm == realm && slicesEqual(e.Principal.Components, name.NameString) {
			return true
		}
	}
	return false
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// close ends every login (gokrb5's clients renew their tickets in the
// background until destroyed).
func (k *kerberosLogins) close() {
	for _, l := range k.logins {
		l.client.Destroy()
	}
}

// clockSkew is krb5.conf's clockskew (MIT's and gokrb5's default 300 s):
// how far an authenticator's time may be from the broker's, and how long
// past its end a ticket is still taken.
func (l *kerberosLogin) clockSkew() time.Duration { return l.conf.LibDefaults.Clockskew }

// defaultRealm is krb5.conf's default_realm, which the DEFAULT
// principal-to-local rule strips.
func (l *kerberosLogin) defaultRealm() string { return l.conf.LibDefaults.DefaultRealm }

// replayCache remembers the authenticators accepted within the clock
// skew (RFC 4120 §3.2.3): one presented again is a replay. An older one
// is refused by the skew check already, so entries are dropped once out
// of it.
type replayCache struct {
	mu      sync.Mutex
	entries map[string]time.Time // key -> when it stops mattering
}

func newReplayCache() *replayCache { return &replayCache{entries: map[string]time.Time{}} }

// seen records key until expires and reports whether it was already
// there.
func (c *replayCache) seen(key string, now, expires time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) > 1024 {
		for k, until := range c.entries { // order-independent: drops every expired one
			if now.After(until) {
				delete(c.entries, k)
			}
		}
	}
	if until, ok := c.entries[key]; ok && !now.After(until) {
		return true
	}
	c.entries[key] = expires
	return false
}
