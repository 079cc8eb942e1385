package config

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseProperties reads text as java.util.Properties.load does, which is how
// Kafka reads server.properties and meta.properties:
//
//   - a natural line ends at \n, \r or \r\n; a line whose last character is an
//     unescaped backslash continues on the next one, whose leading whitespace
//     is dropped;
//   - blank lines, and lines whose first non-whitespace character is # or !,
//     are skipped (a comment line never continues);
//   - the key runs from the first non-whitespace character to the first
//     unescaped '=', ':' or whitespace; whitespace, then at most one '=' or
//     ':', then whitespace, separate it from the value, which is the rest of
//     the line (trailing whitespace included);
//   - in keys and values, \t \n \r \f and \uXXXX are escapes, and a backslash
//     before any other character stands for that character;
//   - a key given twice keeps its last value.
//
// One difference: Kafka decodes the file as ISO-8859-1, Strand passes its
// bytes through (so UTF-8 text stays UTF-8). The two agree on ASCII, and
// \uXXXX escapes mean the same in both.
func ParseProperties(text []byte) (map[string]string, error) {
	props := map[string]string{}
	for _, line := range logicalLines(text) {
		key, value, err := splitKeyValue(line.text)
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", line.number, err)
		}
		props[key] = value
	}
	return props, nil
}

// logicalLine is one key-value line after joining continuations. number is
// the 1-based natural line it starts on, for error messages.
type logicalLine struct {
	text   []byte
	number int
}

// isPropertiesSpace reports the whitespace Properties skips: space, tab and
// form feed (not newlines, which end lines).
func isPropertiesSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// logicalLines splits text into logical lines, dropping blank and comment
// lines and joining continuations as java.util.Properties.LineReader does.
func logicalLines(text []byte) []logicalLine {
	var lines []logicalLine
	lineNumber := 1
	pos := 0
	// endOfLine consumes the newline at pos (\n, \r or \r\n).
	endOfLine := func() {
		if text[pos] == '\r' && pos+1 < len(text) && text[pos+1] == '\n' {
			pos++
		}
		pos++
		lineNumber++
	}
	for pos < len(text) {
		for pos < len(text) && isPropertiesSpace(text[pos]) {
			pos++
		}
		if pos == len(text) {
			break
		}
		if c := text[pos]; c == '\n' || c == '\r' {
			endOfLine()
			continue
		}
		if c := text[pos]; c == '#' || c == '!' {
			for pos < len(text) && text[pos] != '\n' && text[pos] != '\r' {
				pos++
			}
			if pos < len(text) {
				endOfLine()
			}
			continue
		}
		start := lineNumber
		var buf []byte
		precedingBackslash := false
		for pos < len(text) {
			c := text[pos]
			if c != '\n' && c != '\r' {
				buf = append(buf, c)
				precedingBackslash = c == '\\' && !precedingBackslash
				pos++
				continue
			}
			if !precedingBackslash {
				endOfLine()
				break
			}
			// Continuation: drop the backslash, the newline and the next
			// line's leading whitespace.
			buf = buf[:len(buf)-1]
			precedingBackslash = false
			endOfLine()
			for pos < len(text) && isPropertiesSpace(text[pos]) {
				pos++
			}
		}
		if precedingBackslash {
			// A backslash ending the file continues onto nothing; Java
			// drops it.
			buf = buf[:len(buf)-1]
		}
		lines = append(lines, logicalLine{text: buf, number: start})
	}
	return lines
}

// splitKeyValue splits one logical line into its unescaped key and value.
func splitKeyValue(line []byte) (key, value string, err error) {
	keyEnd := len(line)
	valueStart := len(line)
	hasSeparator := false
	precedingBackslash := false
	for i, c := range line {
		if (c == '=' || c == ':') && !precedingBackslash {
			keyEnd, valueStart, hasSeparator = i, i+1, true
			break
		}
		if isPropertiesSpace(c) && !precedingBackslash {
			keyEnd, valueStart = i, i+1
			break
		}
		precedingBackslash = c == '\\' && !precedingBackslash
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isPropertiesSpace(c) {
			if hasSeparator || (c != '=' && c != ':') {
				break
			}
			hasSeparator = true
		}
		valueStart++
	}
	key, err = unescapeProperty(line[:keyEnd])
	if err != nil {
		return "", "", fmt.Errorf("key: %w", err)
	}
	value, err = unescapeProperty(line[valueStart:])
	if err != nil {
		return "", "", fmt.Errorf("value of %s: %w", key, err)
	}
	return key, value, nil
}

// unescapeProperty resolves Properties escapes. Consecutive \u escapes that
// form a UTF-16 surrogate pair become one character; a lone surrogate becomes
// U+FFFD, as it would when Java encodes the string.
func unescapeProperty(s []byte) (string, error) {
	if !strings.ContainsRune(string(s), '\\') {
		return string(s), nil
	}
	var b strings.Builder
	var pendingHigh rune = -1 // a high surrogate waiting for its low half
	flushHigh := func() {
		if pendingHigh >= 0 {
			b.WriteRune(utf8.RuneError)
			pendingHigh = -1
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			flushHigh()
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			flushHigh()
			b.WriteByte('\t')
		case 'n':
			flushHigh()
			b.WriteByte('\n')
		case 'r':
			flushHigh()
			b.WriteByte('\r')
		case 'f':
			flushHigh()
			b.WriteByte('\f')
		case 'u':
			unit, err := parseHex4(s[i+1:])
			if err != nil {
				return "", err
			}
			i += 4
			r := rune(unit)
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00:
				flushHigh()
				pendingHigh = r
			case utf16.IsSurrogate(r) && pendingHigh >= 0:
				b.WriteRune(utf16.DecodeRune(pendingHigh, r))
				pendingHigh = -1
			default:
				flushHigh()
				b.WriteRune(r) // a lone low surrogate is written as U+FFFD
			}
		default:
			flushHigh()
			b.WriteByte(s[i])
		}
	}
	flushHigh()
	return b.String(), nil
}

// parseHex4 reads the four hex digits of a \uXXXX escape.
func parseHex4(s []byte) (uint16, error) {
	if len(s) < 4 {
		return 0, fmt.Errorf("malformed \\uXXXX escape: %q", "\\u"+string(s))
	}
	var unit uint16
	for _, c := range s[:4] {
		var digit byte
		switch {
		case c >= '0' && c <= '9':
			digit = c - '0'
		case c >= 'a' && c <= 'f':
			digit = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			digit = c - 'A' + 10
		default:
			return 0, fmt.Errorf("malformed \\uXXXX escape: %q", "\\u"+string(s[:4]))
		}
		unit = unit<<4 | uint16(digit)
	}
	return unit, nil
}

// EncodeProperties writes props as Properties.store would read them back:
// one key=value line per key, in the given order, escaping what the reader
// would otherwise interpret. Non-ASCII text passes through unescaped.
func EncodeProperties(keys []string, props map[string]string) []byte {
	var b strings.Builder
	for _, k := range keys {
		v, ok := props[k]
		if !ok {
			panic(fmt.Sprintf("config: EncodeProperties: key %q listed but absent", k))
		}
		b.WriteString(escapeProperty(k, true))
		b.WriteByte('=')
		b.WriteString(escapeProperty(v, false))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// escapeProperty escapes s for a key (every space, and the separators) or a
// value (only a leading space), as Properties.saveConvert does.
func escapeProperty(s string, isKey bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			b.WriteString(`\\`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\f':
			b.WriteString(`\f`)
		case '=', ':', '#', '!':
			b.WriteByte('\\')
			b.WriteByte(c)
		case ' ':
			if isKey || i == 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
