package auth

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"strings"
	"testing"

	"strand/realnet/authtest"
)

// TestDistinguishedNameIsJavasRFC2253 checks the DN text against what
// Java's X500Principal.getName() writes for the same subjects: RDNs last
// to first, Java's escapes (",=+<>#;\"\\" anywhere, leading and trailing
// spaces), '+' within a multi-valued RDN, and types without an RFC 2253
// keyword (emailAddress) as OID=#hex of the DER value.
func TestDistinguishedNameIsJavasRFC2253(t *testing.T) {
	oidEmail := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	cases := []struct {
		name pkix.Name
		want string
	}{
		{pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Strand"}, Country: []string{"US"}},
			"CN=alice,OU=eng,O=Strand,C=US"},
		{pkix.Name{CommonName: "Smith, J=r.", Organization: []string{" lead#"}},
			`CN=Smith\, J\=r.,O=\ lead\#`},
		{pkix.Name{CommonName: "x", ExtraNames: []pkix.AttributeTypeAndValue{{Type: oidEmail, Value: "a@b"}}},
			"1.2.840.113549.1.9.1=#0c03614062,CN=x"},
		{pkix.Name{CommonName: "trailing ", Locality: []string{"Paris"}, Province: []string{"IDF"}, StreetAddress: []string{"1 rue"}},
			`CN=trailing\ ,STREET=1 rue,L=Paris,ST=IDF`},
	}
	for _, c := range cases {
		raw, err := asn1.Marshal(c.name.ToRDNSequence())
		if err != nil {
			t.Fatal(err)
		}
		got, err := DistinguishedName(raw)
		if err != nil || got != c.want {
			t.Errorf("DN of %+v = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	// A multi-valued RDN keeps its order, joined by '+'.
	multi := pkix.RDNSequence{
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "Strand"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "bob"}, {Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}, Value: "b42"}},
	}
	raw, _ := asn1.Marshal(multi)
	if got, _ := DistinguishedName(raw); got != "CN=bob+UID=b42,O=Strand" {
		t.Errorf("multi-valued RDN: %q", got)
	}
	if _, err := DistinguishedName([]byte{0x30, 0x05, 0x01}); err == nil {
		t.Error("a truncated subject parsed")
	}
}

// TestPEMOnOneLine: a PEM chain and key given on one properties line (line
// continuations drop the breaks) load as from a file, as Kafka's PEM key
// store reads them.
func TestPEMOnOneLine(t *testing.T) {
	ca, err := authtest.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(pkix.Name{CommonName: "n"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	pair, err := keyPair(oneLine(cert.ChainPEM), oneLine(cert.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	if len(pair.Certificate) != 2 || pair.Leaf.Subject.CommonName != "n" {
		t.Errorf("chain of %d, leaf %q", len(pair.Certificate), pair.Leaf.Subject.CommonName)
	}
	other, _ := ca.Issue(pkix.Name{CommonName: "m"})
	if _, err := keyPair(cert.ChainPEM, other.KeyPEM); err == nil {
		t.Error("a key of another certificate was accepted")
	}
	for _, bad := range []string{"-----BEGIN CERTIFICATE-----abc", "-----BEGIN CERTIFICATE----- !!! -----END CERTIFICATE-----", "no pem"} {
		if _, err := parseCertificates(bad); err == nil {
			t.Errorf("parseCertificates(%q) accepted", bad)
		}
	}
	if _, err := parsePrivateKey("-----BEGIN ENCRYPTED PRIVATE KEY----- AAAA -----END ENCRYPTED PRIVATE KEY-----"); err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Errorf("an encrypted key: %v", err)
	}
}

func FuzzParsePEM(f *testing.F) {
	f.Add("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	f.Add("-----BEGIN PRIVATE KEY----- AA AA -----END PRIVATE KEY----- -----BEGIN X")
	f.Fuzz(func(t *testing.T, text string) {
		blocks, err := parsePEM(text)
		if err != nil {
			return
		}
		for _, b := range blocks {
			if !strings.Contains(text, "-----END "+b.kind+"-----") {
				t.Fatalf("block %q without its END marker", b.kind)
			}
		}
	})
}
