// Package authtest makes what authentication tests and benchmarks need
// from scratch: a certificate authority and certificates (crypto/x509),
// and a real MIT Kerberos KDC in a fresh realm in a temporary directory
// (kdc.go). It is for tests, the benchmark and the examples; a broker
// never imports it.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority for tests.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, for ssl.truststore.certificates or a
	// trust store file.
	PEM string
}

// NewCA makes a CA named cn, valid for a day.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Strand test"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: encodePEM("CERTIFICATE", der)}, nil
}

// Certificate is an issued certificate and its key, in PEM.
type Certificate struct {
	// ChainPEM is the certificate followed by the CA's.
	ChainPEM string
	// KeyPEM is the PKCS#8 private key.
	KeyPEM string
}

// KeystorePEM is the key and the chain in one text, the form of a PEM
// ssl.keystore.location file.
func (c Certificate) KeystorePEM() string { return c.KeyPEM + c.ChainPEM }

// Issue makes a certificate for subject, usable by servers and clients,
// naming hosts (IP addresses or DNS names) as its alternative names.
func (ca *CA) Issue(subject pkix.Name, hosts ...string) (Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Certificate{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Certificate{}, err
	}
	return Certificate{
		ChainPEM: encodePEM("CERTIFICATE", der) + ca.PEM,
		KeyPEM:   encodePEM("PRIVATE KEY", keyDER),
	}, nil
}

func encodePEM(kind string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}))
}

// WriteFile writes text to dir/name, readable by the owner only, and
// returns its path.
func WriteFile(dir, name, text string) (string, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
