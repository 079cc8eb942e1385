package main

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"strand/core/metadata"
)

// scramSpec is one SCRAM credential as Kafka's tools write it:
// SCRAM-SHA-256=[name=alice,iterations=8192,password=alice-secret]
// (kafka-storage.sh format --add-scram, KIP-900) or, for kafka-configs.sh
// --add-config, without name=. Values may be double-quoted, and must be
// to hold a ',' or ']'.
type scramSpec struct {
	mechanism metadata.ScramMechanism
	attrs     map[string]string
}

// parseScramSpecs parses a comma-separated list of specs (--add-config).
func parseScramSpecs(text string) ([]scramSpec, error) {
	var specs []scramSpec
	rest := strings.TrimSpace(text)
	for rest != "" {
		spec, after, err := parseScramSpec(rest)
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
		rest = strings.TrimSpace(after)
		if rest == "" {
			break
		}
		if rest[0] != ',' {
			return nil, fmt.Errorf("%q: want ',' between credentials", rest)
		}
		rest = strings.TrimSpace(rest[1:])
	}
	return specs, nil
}

// parseScramSpec parses one MECHANISM=[key=value,...] at the start of text
// and returns what follows it.
func parseScramSpec(text string) (scramSpec, string, error) {
	name, rest, ok := strings.Cut(text, "=")
	if !ok {
		return scramSpec{}, "", fmt.Errorf("%q: want SCRAM-SHA-256=[...] or SCRAM-SHA-512=[...]", text)
	}
	name = strings.TrimSpace(name)
	m, known := metadata.ScramMechanismNamed(name)
	if !known {
		return scramSpec{}, "", fmt.Errorf("%q is not SCRAM-SHA-256 or SCRAM-SHA-512", name)
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "[") {
		return scramSpec{}, "", fmt.Errorf("%s: want [key=value,...] after %s=", name, name)
	}
	spec := scramSpec{mechanism: m, attrs: map[string]string{}}
	rest = rest[1:]
	for {
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "]") {
			return spec, rest[1:], nil
		}
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			return scramSpec{}, "", fmt.Errorf("%s: %q: want key=value", name, rest)
		}
		key = strings.TrimSpace(key)
		value, after, err := scramValue(after)
		if err != nil {
			return scramSpec{}, "", fmt.Errorf("%s: %s: %w", name, key, err)
		}
		if _, dup := spec.attrs[key]; dup {
			return scramSpec{}, "", fmt.Errorf("%s: %s given twice", name, key)
		}
		spec.attrs[key] = value
		after = strings.TrimSpace(after)
		switch {
		case strings.HasPrefix(after, ","):
			rest = after[1:]
		case strings.HasPrefix(after, "]"):
			rest = after
		default:
			return scramSpec{}, "", fmt.Errorf("%s: no ']' closes the credential", name)
		}
	}
}

// scramValue reads a value, quoted or up to the next ',' or ']'.
func scramValue(text string) (value, rest string, err error) {
	text = strings.TrimLeft(text, " ")
	if strings.HasPrefix(text, `"`) {
		end := strings.IndexByte(text[1:], '"')
		if end < 0 {
			return "", "", fmt.Errorf("no closing '\"'")
		}
		return text[1 : 1+end], text[2+end:], nil
	}
	end := strings.IndexAny(text, ",]")
	if end < 0 {
		return "", "", fmt.Errorf("no ']' closes the credential")
	}
	return strings.TrimSpace(text[:end]), text[end:], nil
}

// iterations reads iterations= (Kafka's default 4096 when absent).
func (s scramSpec) iterations() (int32, error) {
	v, ok := s.attrs["iterations"]
	if !ok {
		return metadata.ScramIterationsMin, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < metadata.ScramIterationsMin || n > metadata.ScramIterationsMax {
		return 0, fmt.Errorf("%v: iterations %q: want %d to %d", s.mechanism, v, metadata.ScramIterationsMin, metadata.ScramIterationsMax)
	}
	return int32(n), nil
}

// only refuses attributes other than keys.
func (s scramSpec) only(keys ...string) error {
	for k := range s.attrs { // order-independent: any one is refused
		found := false
		for _, want := range keys {
			found = found || k == want
		}
		if !found {
			return fmt.Errorf("%v: %s is not one of %s", s.mechanism, k, strings.Join(keys, ", "))
		}
	}
	return nil
}

// decodeBase64Attr reads a base64 attribute (KIP-900's salt and
// saltedpassword).
func (s scramSpec) decodeBase64Attr(key string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s.attrs[key])
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("%v: %s is not base64", s.mechanism, key)
	}
	return b, nil
}
