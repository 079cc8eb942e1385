package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrNoMatchingRule is the error a principal mapping returns when no rule
// applies to a name (Kafka's NoMatchingRule): the connection's
// authentication fails.
var ErrNoMatchingRule = errors.New("no principal mapping rule applies")

// SSLPrincipalRules are ssl.principal.mapping.rules: how a client
// certificate's distinguished name (RFC 2253, as X500Principal.getName
// writes it) becomes a principal name. Kafka's syntax: rules separated by
// commas, each DEFAULT (the DN as it is) or RULE:pattern/replacement/ with
// an optional L or U (lower- or upper-case the result). The first rule
// whose pattern matches the whole DN gives the name.
//
// Patterns are Go (RE2) regular expressions, not Java's: what RE2 lacks
// (back-references, look-around) is refused when the rules are parsed.
// Replacements are Java's: $n is group n, \x is x.
type SSLPrincipalRules struct {
	rules []sslRule
	text  string
}

type sslRule struct {
	isDefault bool
	// pattern is the rule's pattern anchored at both ends: Java's
	// matches() takes the whole DN.
	pattern     *regexp.Regexp
	replacement javaReplacement
	lower       bool
	upper       bool
}

// String returns the rules as configured.
func (r SSLPrincipalRules) String() string { return r.text }

// ParseSSLPrincipalRules parses ssl.principal.mapping.rules. key names the
// configuration key in errors.
func ParseSSLPrincipalRules(key, value string) (SSLPrincipalRules, error) {
	out := SSLPrincipalRules{text: value}
	s := strings.TrimSpace(value)
	for len(s) > 0 {
		var rule sslRule
		var err error
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			rule.isDefault = true
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			rule, s, err = parseSSLRule(key, s[len("RULE:"):])
			if err != nil {
				return SSLPrincipalRules{}, err
			}
		case s[0] == ',':
			// An empty rule: Kafka ignores it.
		default:
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			return SSLPrincipalRules{}, valueError(key, value, "has an invalid rule %q: want DEFAULT or RULE:pattern/replacement/[LU]", strings.TrimSpace(s[:end]))
		}
		if rule.isDefault || rule.pattern != nil {
			out.rules = append(out.rules, rule)
		}
		s = strings.TrimLeft(s, " \t\n\r")
		if len(s) > 0 {
			if s[0] != ',' {
				return SSLPrincipalRules{}, valueError(key, value, "has text %q after a rule: separate rules with commas", s)
			}
			s = strings.TrimLeft(s[1:], " \t\n\r")
		}
	}
	return out, nil
}

// parseSSLRule parses what follows "RULE:" up to the end of the rule and
// returns the rest of the text.
func parseSSLRule(key, s string) (sslRule, string, error) {
	pattern, s, ok := cutUnescapedSlash(s)
	if !ok {
		return sslRule{}, "", keyError(key, "has a RULE without the / after its pattern")
	}
	replacement, s, ok := cutUnescapedSlash(s)
	if !ok {
		return sslRule{}, "", keyError(key, "has a RULE without the / after its replacement")
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return sslRule{}, "", keyError(key, "has a RULE whose pattern %q does not compile (Strand uses Go's RE2 syntax): %v", pattern, err)
	}
	repl, err := parseJavaReplacement(replacement, re.NumSubexp())
	if err != nil {
		return sslRule{}, "", keyError(key, "has a RULE whose replacement %q is invalid: %v", replacement, err)
	}
	rule := sslRule{pattern: re, replacement: repl}
	if len(s) > 0 && (s[0] == 'L' || s[0] == 'U') {
		rule.lower, rule.upper = s[0] == 'L', s[0] == 'U'
		s = s[1:]
	}
	return rule, s, nil
}

// cutUnescapedSlash splits s at its first '/' not escaped by a backslash.
// The escapes stay in the text (they mean something to the regexp or the
// replacement).
func cutUnescapedSlash(s string) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// Map returns the principal name for the distinguished name dn, or
// ErrNoMatchingRule.
func (r SSLPrincipalRules) Map(dn string) (string, error) {
	for _, rule := range r.rules {
		if rule.isDefault {
			return dn, nil
		}
		m := rule.pattern.FindStringSubmatchIndex(dn)
		if m == nil {
			continue
		}
		// The replacement stands for the whole DN, which the pattern
		// matched (Java's replaceAll would also replace an empty match
		// at the end of an unanchored pattern such as .*; Strand does
		// not).
		name := rule.replacement.expand(dn, m)
		switch {
		case rule.lower:
			name = strings.ToLower(name)
		case rule.upper:
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", fmt.Errorf("%w to %q (rules %q)", ErrNoMatchingRule, dn, r.text)
}

// javaReplacement is a replacement string in java.util.regex syntax: $n
// refers to group n, \x stands for x. Group references beyond the
// pattern's groups are literal text, as Kafka's SslPrincipalMapper makes
// them.
type javaReplacement []replacementPart

type replacementPart struct {
	literal string
	group   int // -1 for a literal part
}

// parseJavaReplacement parses repl for a pattern with groups groups. As
// Java's Matcher.appendReplacement, the digits after $ are read while they
// still name a group.
func parseJavaReplacement(repl string, groups int) (javaReplacement, error) {
	var out javaReplacement
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, replacementPart{literal: lit.String(), group: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '\\':
			if i+1 == len(repl) {
				return nil, errors.New("it ends with a lone backslash")
			}
			i++
			lit.WriteByte(repl[i])
		case c == '$':
			if i+1 == len(repl) || repl[i+1] < '0' || repl[i+1] > '9' {
				return nil, errors.New(`a $ is not followed by a group number (write \$ for a dollar sign)`)
			}
			j := i + 1
			n := int(repl[j] - '0')
			j++
			if n > groups {
				// Kafka turns a reference to a missing group into text.
				lit.WriteString(repl[i:j])
				i = j - 1
				continue
			}
			for j < len(repl) && repl[j] >= '0' && repl[j] <= '9' {
				next := n*10 + int(repl[j]-'0')
				if next > groups {
					break
				}
				n = next
				j++
			}
			flush()
			out = append(out, replacementPart{group: n})
			i = j - 1
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return out, nil
}

// expand builds the replacement for the match m (submatch indexes) in s.
func (r javaReplacement) expand(s string, m []int) string {
	var b strings.Builder
	for _, p := range r {
		if p.group < 0 {
			b.WriteString(p.literal)
			continue
		}
		if start, end := m[2*p.group], m[2*p.group+1]; start >= 0 {
			b.WriteString(s[start:end])
		}
	}
	return b.String()
}

// KerberosRules are sasl.kerberos.principal.to.local.rules: how a
// Kerberos principal (service/host@REALM, or user@REALM) becomes a short
// name, in Kafka's (and Hadoop's) auth_to_local syntax. DEFAULT gives the
// first component of a principal of the default realm; RULE:[n:format]
// (match)s/from/to/g/L rewrites principals of n components. The first rule
// that applies gives the name; a result holding '/' or '@' is an error.
// Patterns are Go (RE2) regular expressions.
type KerberosRules struct {
	rules []kerberosRule
	text  string
}

type kerberosRule struct {
	isDefault  bool
	components int
	format     string
	match      *regexp.Regexp // nil: any
	from       *regexp.Regexp // nil: no substitution
	to         javaReplacement
	global     bool
	lower      bool
}

// String returns the rules as configured.
func (r KerberosRules) String() string { return r.text }

// kerberosRuleSyntax parses one rule, as Kafka's KerberosShortNamer does.
var kerberosRuleSyntax = regexp.MustCompile(`^(?:(DEFAULT)|RULE:\[(\d*):([^\]]*)\](?:\(([^)]*)\))?(?:s/([^/]*)/([^/]*)/(g)?)?)/?(L)?$`)

// ParseKerberosRules parses the rules list; key names the key in errors.
func ParseKerberosRules(key, value string) (KerberosRules, error) {
	items, err := parseList(key, value)
	if err != nil {
		return KerberosRules{}, err
	}
	out := KerberosRules{text: value}
	for _, item := range items {
		idx := kerberosRuleSyntax.FindStringSubmatchIndex(item)
		if idx == nil {
			return KerberosRules{}, valueError(key, value, "has an invalid rule %q: want DEFAULT or RULE:[n:format](match)s/from/to/g/L", item)
		}
		group := func(i int) (string, bool) {
			if idx[2*i] < 0 {
				return "", false
			}
			return item[idx[2*i]:idx[2*i+1]], true
		}
		if _, ok := group(1); ok {
			out.rules = append(out.rules, kerberosRule{isDefault: true})
			continue
		}
		var m [9]string
		for i := range m {
			m[i], _ = group(i)
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return KerberosRules{}, valueError(key, value, "has a rule %q without a component count", item)
		}
		rule := kerberosRule{components: n, format: m[3], global: m[7] == "g", lower: m[8] == "L"}
		if _, ok := group(4); ok {
			if rule.match, err = regexp.Compile(`^(?:` + m[4] + `)$`); err != nil {
				return KerberosRules{}, valueError(key, value, "has a rule whose match %q does not compile (RE2 syntax): %v", m[4], err)
			}
		}
		if _, ok := group(5); ok {
			if rule.from, err = regexp.Compile(m[5]); err != nil {
				return KerberosRules{}, valueError(key, value, "has a rule whose pattern %q does not compile (RE2 syntax): %v", m[5], err)
			}
			if rule.to, err = parseJavaReplacement(m[6], rule.from.NumSubexp()); err != nil {
				return KerberosRules{}, valueError(key, value, "has a rule whose replacement %q is invalid: %v", m[6], err)
			}
		}
		if err := checkKerberosFormat(rule.format, n); err != nil {
			return KerberosRules{}, valueError(key, value, "has a rule %q: %v", item, err)
		}
		out.rules = append(out.rules, rule)
	}
	return out, nil
}

// checkKerberosFormat checks that every $n of format names the realm ($0)
// or one of n components.
func checkKerberosFormat(format string, components int) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '$' {
			continue
		}
		j := i + 1
		for j < len(format) && format[j] >= '0' && format[j] <= '9' {
			j++
		}
		num, err := strconv.Atoi(format[i+1 : j])
		if err != nil {
			return fmt.Errorf("format %q has a $ without a number", format)
		}
		if num > components {
			return fmt.Errorf("format %q names $%d, outside 0 to %d", format, num, components)
		}
		i = j - 1
	}
	return nil
}

// ShortName maps a Kerberos principal name (primary[/instance]@REALM) to
// its short name; defaultRealm is krb5.conf's default_realm, which DEFAULT
// compares with. It returns ErrNoMatchingRule (wrapped) when no rule
// applies or a rule gives a name with '/' or '@'.
func (r KerberosRules) ShortName(principal, defaultRealm string) (string, error) {
	primary, instance, realm, err := SplitKerberosName(principal)
	if err != nil {
		return "", err
	}
	if realm == "" && instance == "" {
		return primary, nil
	}
	params := []string{realm, primary}
	if instance != "" {
		params = append(params, instance)
	}
	for _, rule := range r.rules {
		name, ok := rule.apply(params, defaultRealm)
		if !ok {
			continue
		}
		if strings.ContainsAny(name, "/@") {
			return "", fmt.Errorf("%w: rule gives non-simple name %q for %s", ErrNoMatchingRule, name, principal)
		}
		return name, nil
	}
	return "", fmt.Errorf("%w to %s (rules %q)", ErrNoMatchingRule, principal, r.text)
}

func (rule kerberosRule) apply(params []string, defaultRealm string) (string, bool) {
	if rule.isDefault {
		return params[1], params[0] == defaultRealm
	}
	if len(params)-1 != rule.components {
		return "", false
	}
	var base strings.Builder
	f := rule.format
	for i := 0; i < len(f); i++ {
		if f[i] != '$' {
			base.WriteByte(f[i])
			continue
		}
		j := i + 1
		for j < len(f) && f[j] >= '0' && f[j] <= '9' {
			j++
		}
		num, _ := strconv.Atoi(f[i+1 : j]) // checked at parse time
		base.WriteString(params[num])
		i = j - 1
	}
	name := base.String()
	if rule.match != nil && !rule.match.MatchString(name) {
		return "", false
	}
	if rule.from != nil {
		name = replaceJava(rule.from, name, rule.to, rule.global)
	}
	if rule.lower {
		name = strings.ToLower(name)
	}
	return name, true
}

// replaceJava replaces the first (or, with all, every) match of re in s by
// repl, as Java's Matcher.replaceFirst and replaceAll do.
func replaceJava(re *regexp.Regexp, s string, repl javaReplacement, all bool) string {
	n := 1
	if all {
		n = -1
	}
	matches := re.FindAllStringSubmatchIndex(s, n)
	if len(matches) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		b.WriteString(s[last:m[0]])
		b.WriteString(repl.expand(s, m))
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// SplitKerberosName splits primary[/instance][@REALM] as Kafka's
// KerberosName.parse does: at most one instance; a name with '@' must be
// well formed.
func SplitKerberosName(name string) (primary, instance, realm string, err error) {
	at := strings.LastIndexByte(name, '@')
	if at < 0 {
		return name, "", "", nil
	}
	realm = name[at+1:]
	primary, instance, _ = strings.Cut(name[:at], "/")
	if strings.ContainsAny(realm, "/@") || strings.ContainsAny(instance, "/@") || strings.ContainsAny(primary, "@") {
		return "", "", "", fmt.Errorf("malformed Kerberos name %q: want primary[/instance]@REALM", name)
	}
	return primary, instance, realm, nil
}
