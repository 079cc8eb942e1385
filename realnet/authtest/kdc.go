package authtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// kdcBinaries are MIT Kerberos's programs the KDC needs: Debian's
// krb5-kdc (krb5kdc, kdb5_util) and krb5-admin-server (kadmin.local).
var kdcBinaries = []string{"krb5kdc", "kdb5_util", "kadmin.local"}

// KDCAvailable reports why a KDC cannot be started here (nil: it can):
// the MIT binaries are missing. Tests skip on it.
func KDCAvailable() error {
	for _, b := range kdcBinaries {
		if _, err := lookPath(b); err != nil {
			return fmt.Errorf("%s not found (apt-get install -y krb5-kdc krb5-admin-server krb5-user): %w", b, err)
		}
	}
	return nil
}

// lookPath finds an MIT binary in PATH or the sbin directories Debian
// puts them in, which a non-root PATH may lack.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// KDC is a real MIT krb5kdc serving a fresh realm from a directory of its
// own, as an unprivileged process on a loopback port. Stop ends it.
type KDC struct {
	// Realm is the realm's name.
	Realm string
	// Dir holds the database, the configuration and the logs.
	Dir string
	// Addr is the KDC's host:port (TCP and UDP).
	Addr string
	// Krb5Conf is a krb5.conf naming this KDC (default realm, TCP only,
	// no DNS): for clients (KRB5_CONFIG) and brokers.
	Krb5Conf string
	kdcConf  string
	cmd      *exec.Cmd
	exited   chan error
}

// StartKDC creates realm in a new directory under parent and serves it.
func StartKDC(parent, realm string) (*KDC, error) {
	if err := KDCAvailable(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "kdc-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // a port picked free may be taken before krb5kdc binds it
		k, err := startKDCIn(dir, realm)
		if err == nil {
			return k, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startKDCIn(dir, realm string) (*KDC, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	k := &KDC{Realm: realm, Dir: dir, Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	k.kdcConf = filepath.Join(dir, "kdc.conf")
	kdcConf := fmt.Sprintf(`[kdcdefaults]
 kdc_listen = %[1]s
 kdc_tcp_listen = %[1]s
[realms]
 %[2]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  max_life = 10h 0m 0s
  max_renewable_life = 1d
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  default_principal_flags = +preauth
 }
[logging]
 kdc = FILE:%[3]s/kdc.log
 admin_server = FILE:%[3]s/kadmin.log
 default = FILE:%[3]s/krb5.log
`, k.Addr, realm, dir)
	if err := os.WriteFile(k.kdcConf, []byte(kdcConf), 0o600); err != nil {
		return nil, err
	}
	k.Krb5Conf, err = k.WriteKrb5Conf("krb5.conf", 300)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "principal")); err != nil {
		if _, err := k.run("kdb5_util", "-r", realm, "create", "-s", "-P", "strand-master-key"); err != nil {
			return nil, err
		}
	}
	bin, _ := lookPath("krb5kdc")
	k.cmd = exec.Command(bin, "-n", "-r", realm)
	k.cmd.Env = k.env()
	var stderr bytes.Buffer
	k.cmd.Stdout, k.cmd.Stderr = &stderr, &stderr
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start krb5kdc: %w", err)
	}
	k.exited = make(chan error, 1)
	go func() { k.exited <- k.cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", k.Addr, time.Second); err == nil {
			c.Close()
			return k, nil
		}
		select {
		case err := <-k.exited:
			return nil, fmt.Errorf("krb5kdc exited: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			k.Stop()
			return nil, fmt.Errorf("krb5kdc did not listen on %s within 10 s\n%s", k.Addr, stderr.String())
		}
	}
}

// WriteKrb5Conf writes another krb5.conf for this KDC into its directory,
// with clockSkewS as the clock skew allowed (clockskew), and returns its
// path.
func (k *KDC) WriteKrb5Conf(name string, clockSkewS int) (string, error) {
	conf := fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
 ignore_acceptor_hostname = false
 clockskew = %[3]d
 default_ccache_name = FILE:%[4]s/ccache-default
[realms]
 %[1]s = {
  kdc = %[2]s
 }
`, k.Realm, k.Addr, clockSkewS, k.Dir)
	path := filepath.Join(k.Dir, name)
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// env is the environment MIT's programs read this realm's files from.
func (k *KDC) env() []string {
	return append(os.Environ(), "KRB5_CONFIG="+k.Krb5Conf, "KRB5_KDC_PROFILE="+k.kdcConf)
}

// run runs an MIT program against the realm.
func (k *KDC) run(name string, args ...string) (string, error) {
	bin, err := lookPath(name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = k.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// kadmin runs one kadmin.local query.
func (k *KDC) kadmin(query string) error {
	out, err := k.run("kadmin.local", "-r", k.Realm, "-q", query)
	if err != nil {
		return err
	}
	if strings.Contains(out, "error") || strings.Contains(out, "rror ") {
		return fmt.Errorf("kadmin.local %q: %s", query, out)
	}
	return nil
}

// AddPrincipal creates name (without its realm) with password, or a random
// key when password is empty (service principals, used from keytabs).
// maxLife, if not empty, bounds its tickets (kadmin's -maxlife, e.g. "3
// seconds").
func (k *KDC) AddPrincipal(name, password, maxLife string) error {
	q := "addprinc -randkey"
	if password != "" {
		q = "addprinc -pw " + password
	}
	if maxLife != "" {
		q += ` -maxlife "` + maxLife + `"`
	}
	return k.kadmin(q + " " + name)
}

// Keytab writes the current keys of principals (without realm) to path
// without changing them.
func (k *KDC) Keytab(path string, principals ...string) error {
	for _, p := range principals {
		if err := k.kadmin("ktadd -k " + path + " -norandkey " + p); err != nil {
			return err
		}
	}
	return nil
}

// RandomizeKey gives principal a new key: keytabs written before hold a
// stale one, which the KDC refuses.
func (k *KDC) RandomizeKey(principal string) error {
	return k.kadmin("cpw -randkey " + principal)
}

// Principal is name@realm.
func (k *KDC) Principal(name string) string { return name + "@" + k.Realm }

// Kinit gets principal's tickets from keytab into the credentials cache
// ccache (MIT's kinit), as a client process would have them.
func (k *KDC) Kinit(ccache, principal, keytab string) error {
	_, err := k.run("kinit", "-c", ccache, "-k", "-t", keytab, principal)
	return err
}

// Log returns the KDC's log, for failed tests.
func (k *KDC) Log() string {
	b, _ := os.ReadFile(filepath.Join(k.Dir, "kdc.log"))
	return string(b)
}

// Stop ends the KDC process and waits for it.
func (k *KDC) Stop() {
	if k.cmd == nil || k.cmd.Process == nil {
		return
	}
	_ = k.cmd.Process.Kill()
	select {
	case <-k.exited:
	case <-time.After(5 * time.Second):
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	// The KDC binds UDP too.
	u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0, errors.New("udp port taken")
	}
	u.Close()
	return port, nil
}
