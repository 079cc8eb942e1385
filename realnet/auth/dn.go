package auth

import (
	"encoding/asn1"
	"errors"
	"strings"
	"unicode/utf16"
)

// rfc2253Keywords are the attribute types Java's X500Principal.getName
// (RFC 2253 form, what Kafka maps) writes by name; any other type is
// written as its dotted OID with the value as #hex of its DER encoding.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// rdnAttribute is one AttributeTypeAndValue, its value kept raw.
type rdnAttribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET is one RelativeDistinguishedName, an ASN.1 SET OF attributes
// (encoding/asn1 decodes a SET into a slice type whose name ends in SET).
type rdnSET []rdnAttribute

// The ASN.1 string tags Java writes as text (DerValue's isDerString for
// the non-canonical form).
const (
	tagUTF8String      = 12
	tagPrintableString = 19
	tagT61String       = 20
	tagIA5String       = 22
	tagGeneralString   = 27
	tagBMPString       = 30
)

// rfc2253Escapees are escaped with a backslash wherever they appear, as
// Java's AVA.toRFC2253String does (a superset of RFC 2253's).
const rfc2253Escapees = ",=+<>#;\"\\"

// DistinguishedName renders a certificate's raw subject (or issuer) as
// Java's X500Principal.getName() does, RFC 2253: the RDNs from last to
// first, joined by commas, the values of a multi-valued RDN by '+', each
// type=value with Java's escaping. This is the name Kafka's
// ssl.principal.mapping.rules see, so rules written for Kafka match the
// same certificates here.
func DistinguishedName(rawSubject []byte) (string, error) {
	var rdns []rdnSET
	rest, err := asn1.Unmarshal(rawSubject, &rdns)
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", errors.New("trailing bytes after the distinguished name")
	}
	parts := make([]string, 0, len(rdns))
	for i := len(rdns) - 1; i >= 0; i-- {
		avas := make([]string, 0, len(rdns[i]))
		for _, a := range rdns[i] {
			avas = append(avas, formatAttribute(a))
		}
		parts = append(parts, strings.Join(avas, "+"))
	}
	return strings.Join(parts, ","), nil
}

func formatAttribute(a rdnAttribute) string {
	oid := a.Type.String()
	keyword, named := rfc2253Keywords[oid]
	text, isString := attributeString(a.Value)
	if !named || !isString {
		name := keyword
		if !named {
			name = oid
		}
		const hexDigits = "0123456789abcdef"
		var b strings.Builder
		b.WriteString(name)
		b.WriteString("=#")
		for _, c := range a.Value.FullBytes {
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0x0f])
		}
		return b.String()
	}
	return keyword + "=" + escapeRFC2253(text)
}

// attributeString decodes a value of one of the string types.
func attributeString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case tagUTF8String, tagPrintableString, tagT61String, tagIA5String, tagGeneralString:
		return string(v.Bytes), true
	case tagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		units := make([]uint16, len(v.Bytes)/2)
		for i := range units {
			units[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(units)), true
	}
	return "", false
}

// escapeRFC2253 escapes a value as Java does: the escapees everywhere, NUL
// as \00, and leading and trailing spaces (and carriage returns).
func escapeRFC2253(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0:
			b.WriteString(`\00`)
		case strings.IndexByte(rfc2253Escapees, c) >= 0:
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	escaped := b.String()
	lead := 0
	for lead < len(escaped) && (escaped[lead] == ' ' || escaped[lead] == '\r') {
		lead++
	}
	trail := len(escaped) - 1
	for trail >= lead && (escaped[trail] == ' ' || escaped[trail] == '\r') {
		trail--
	}
	if lead == 0 && trail == len(escaped)-1 {
		return escaped
	}
	var out strings.Builder
	for i := 0; i < len(escaped); i++ {
		if i < lead || i > trail {
			out.WriteByte('\\')
		}
		out.WriteByte(escaped[i])
	}
	return out.String()
}
