package config

import (
	"strings"
)

// JAASConfig is one sasl.jaas.config value: a single JAAS login module
// entry, `LoginModuleClass flag key=value key="quoted value" ...;`, as
// Kafka's JaasConfig reads it (one module, a control flag, options).
type JAASConfig struct {
	// LoginModule is the login module's class name.
	LoginModule string
	// Flag is the control flag: required, requisite, sufficient or
	// optional.
	Flag string
	// Options are the module's options, unquoted.
	Options map[string]string
}

// The login modules Strand reads, by the mechanism that uses them.
const (
	plainLoginModule    = "org.apache.kafka.common.security.plain.PlainLoginModule"
	kerberosLoginModule = "com.sun.security.auth.module.Krb5LoginModule"
	scramLoginModule    = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// jaasFlags are JAAS's control flags.
var jaasFlags = []string{"required", "requisite", "sufficient", "optional"}

// ParseJAAS parses a sasl.jaas.config value. key names the configuration
// key in errors. Kafka's grammar (java.io.StreamTokenizer): words of
// letters, digits and `_-.$/:`, double- or single-quoted strings with
// backslash escapes, '=' between an option and its value, and a ';' that
// ends the module. Exactly one module is allowed, as in Kafka.
func ParseJAAS(key, value string) (JAASConfig, error) {
	toks, err := jaasTokens(key, value)
	if err != nil {
		return JAASConfig{}, err
	}
	bad := func(format string, args ...any) (JAASConfig, error) {
		return JAASConfig{}, keyError(key, "is not a JAAS login module entry (`LoginModule required option=\"value\";`): "+format, args...)
	}
	if len(toks) < 3 || toks[0].kind != jaasWord || toks[1].kind != jaasWord {
		return bad("want a login module class and a control flag")
	}
	cfg := JAASConfig{LoginModule: toks[0].text, Flag: strings.ToLower(toks[1].text), Options: map[string]string{}}
	validFlag := false
	for _, f := range jaasFlags {
		validFlag = validFlag || f == cfg.Flag
	}
	if !validFlag {
		return bad("control flag %q: want one of %s", toks[1].text, strings.Join(jaasFlags, ", "))
	}
	i := 2
	for i < len(toks) && toks[i].kind != jaasSemicolon {
		if i+2 >= len(toks) || toks[i].kind != jaasWord || toks[i+1].kind != jaasEquals ||
			(toks[i+2].kind != jaasWord && toks[i+2].kind != jaasQuoted) {
			return bad("option %d: want name=value", (i-2)/3+1)
		}
		if _, dup := cfg.Options[toks[i].text]; dup {
			return bad("option %s given twice", toks[i].text)
		}
		cfg.Options[toks[i].text] = toks[i+2].text
		i += 3
	}
	if i == len(toks) {
		return bad("the entry does not end with ';'")
	}
	if i+1 != len(toks) {
		return JAASConfig{}, keyError(key, "holds more than one login module; Kafka and Strand take exactly one")
	}
	return cfg, nil
}

type jaasTokenKind uint8

const (
	jaasWord jaasTokenKind = iota + 1
	jaasQuoted
	jaasEquals
	jaasSemicolon
)

type jaasToken struct {
	kind jaasTokenKind
	text string
}

// isJAASWordByte reports the characters of an unquoted JAAS word: Kafka's
// tokenizer takes letters, digits and these as word characters.
func isJAASWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("_-.$/:@*", c) >= 0 || c >= 0x80
}

// jaasTokens splits value into words, quoted strings, '=' and ';'.
// Comments (// and /* */) are skipped, as StreamTokenizer does.
func jaasTokens(key, value string) ([]jaasToken, error) {
	var toks []jaasToken
	for i := 0; i < len(value); {
		c := value[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(value[i:], "//"):
			for i < len(value) && value[i] != '\n' {
				i++
			}
		case strings.HasPrefix(value[i:], "/*"):
			end := strings.Index(value[i+2:], "*/")
			if end < 0 {
				return nil, keyError(key, "has an unclosed /* comment")
			}
			i += end + 4
		case c == '=':
			toks = append(toks, jaasToken{jaasEquals, "="})
			i++
		case c == ';':
			toks = append(toks, jaasToken{jaasSemicolon, ";"})
			i++
		case c == '"' || c == '\'':
			text, n, err := jaasQuotedString(key, value[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, jaasToken{jaasQuoted, text})
			i += n
		case isJAASWordByte(c):
			start := i
			for i < len(value) && isJAASWordByte(value[i]) {
				i++
			}
			toks = append(toks, jaasToken{jaasWord, value[start:i]})
		default:
			return nil, keyError(key, "has an unexpected character %q at offset %d", c, i)
		}
	}
	return toks, nil
}

// jaasQuotedString reads the quoted string at the start of s and returns
// its text and the bytes it spans. Backslash escapes \n \t \r \b \f and
// \<any> (that character) are resolved, as StreamTokenizer does.
func jaasQuotedString(key, s string) (string, int, error) {
	quote := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == quote:
			return b.String(), i + 1, nil
		case c == '\n':
			return "", 0, keyError(key, "has a quoted string that runs past the end of its line")
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, keyError(key, "has an unclosed quoted string")
}

// quoteJAAS quotes s as a JAAS option value that ParseJAAS reads back as s.
func quoteJAAS(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
