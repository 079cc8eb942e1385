package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// pemBlock is one -----BEGIN TYPE----- ... -----END TYPE----- section.
type pemBlock struct {
	kind string
	der  []byte
}

// parsePEM reads every PEM block in text, as Kafka's PEM key store reads
// them: the base64 body may hold any whitespace, or none, so that a
// certificate written on one properties line (ssl.keystore.certificate.chain
// with \ continuations, which drop the line breaks) reads as well as a file.
// Text outside blocks is ignored; a block that does not end, or whose body
// is not base64, is an error.
func parsePEM(text string) ([]pemBlock, error) {
	var blocks []pemBlock
	for {
		start := strings.Index(text, "-----BEGIN ")
		if start < 0 {
			return blocks, nil
		}
		text = text[start+len("-----BEGIN "):]
		kindEnd := strings.Index(text, "-----")
		if kindEnd < 0 {
			return nil, errors.New("PEM: a BEGIN line without its closing dashes")
		}
		kind := text[:kindEnd]
		if strings.ContainsAny(kind, "\r\n") {
			return nil, errors.New("PEM: a BEGIN line without its closing dashes")
		}
		text = text[kindEnd+len("-----"):]
		endMarker := "-----END " + kind + "-----"
		end := strings.Index(text, endMarker)
		if end < 0 {
			return nil, fmt.Errorf("PEM: %s block without %q", kind, endMarker)
		}
		body := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\r' || r == '\n' || r == '\f' {
				return -1
			}
			return r
		}, text[:end])
		if strings.Contains(body, ":") {
			return nil, fmt.Errorf("PEM: %s block has headers (an encrypted legacy key?): Strand reads unencrypted PKCS#8 keys", kind)
		}
		der, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, fmt.Errorf("PEM: %s block: %w", kind, err)
		}
		blocks = append(blocks, pemBlock{kind: kind, der: der})
		text = text[end+len(endMarker):]
	}
}

// parseCertificates returns the certificates of text, in order.
func parseCertificates(text string) ([]*x509.Certificate, error) {
	blocks, err := parsePEM(text)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, b := range blocks {
		if b.kind != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}

// parsePrivateKey returns the one private key of text: PKCS#8 ("PRIVATE
// KEY", Kafka's form), or PKCS#1 RSA or SEC 1 EC keys.
func parsePrivateKey(text string) (crypto.Signer, error) {
	blocks, err := parsePEM(text)
	if err != nil {
		return nil, err
	}
	var key crypto.Signer
	for _, b := range blocks {
		var k any
		switch b.kind {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.der)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.der)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.der)
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("the private key is encrypted: Strand reads unencrypted keys only (ssl.key.password is not implemented)")
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.kind, err)
		}
		if key != nil {
			return nil, errors.New("more than one private key")
		}
		signer, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%s: unsupported key type %T", b.kind, k)
		}
		key = signer
	}
	if key == nil {
		return nil, errors.New("no PEM PRIVATE KEY block")
	}
	return key, nil
}

// keyPair builds a TLS certificate from a PEM chain and key, checking
// that the key belongs to the first certificate.
func keyPair(chainPEM, keyPEM string) (tls.Certificate, error) {
	certs, err := parseCertificates(chainPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	pub, ok := key.Public().(equaler)
	if !ok || !pub.Equal(certs[0].PublicKey) {
		return tls.Certificate{}, errors.New("the private key does not match the first certificate's public key")
	}
	switch key.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
	default:
		return tls.Certificate{}, fmt.Errorf("unsupported key type %T", key)
	}
	out := tls.Certificate{PrivateKey: key, Leaf: certs[0]}
	for _, c := range certs {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	return out, nil
}
