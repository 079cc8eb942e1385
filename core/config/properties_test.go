package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TestParsePropertiesJavaRules checks each java.util.Properties rule on
// inputs whose results follow from the Properties.load documentation.
func TestParsePropertiesJavaRules(t *testing.T) {
	cases := []struct {
		name string
		text string
		want map[string]string
	}{
		{"equals", "a=b", map[string]string{"a": "b"}},
		{"colon", "a:b", map[string]string{"a": "b"}},
		{"whitespace separator", "a b", map[string]string{"a": "b"}},
		{"whitespace around separator", "  a \t = \f b", map[string]string{"a": "b"}},
		{"only the first separator", "a==b", map[string]string{"a": "=b"}},
		{"space then colon then value", "a : :b", map[string]string{"a": ":b"}},
		{"trailing whitespace kept", "a=b  ", map[string]string{"a": "b  "}},
		{"key only", "lonely", map[string]string{"lonely": ""}},
		{"empty value", "a=", map[string]string{"a": ""}},
		{"hash comment", "# a=b\nc=d", map[string]string{"c": "d"}},
		{"bang comment", "   ! a=b\nc=d", map[string]string{"c": "d"}},
		{"hash inside value", "a=b#c", map[string]string{"a": "b#c"}},
		{"comment line never continues", "# x \\\na=b", map[string]string{"a": "b"}},
		{"blank lines", "\n\n  \t\na=b\n\n", map[string]string{"a": "b"}},
		{"CRLF", "a=b\r\nc=d\r\n", map[string]string{"a": "b", "c": "d"}},
		{"CR only", "a=b\rc=d", map[string]string{"a": "b", "c": "d"}},
		{"continuation", "a=one,\\\n    two", map[string]string{"a": "one,two"}},
		{"continuation CRLF", "a=x\\\r\n  y", map[string]string{"a": "xy"}},
		{"continuation then comment-like text", "a=x\\\n#y", map[string]string{"a": "x#y"}},
		{"continuation onto blank line ends value", "a=x\\\n\nb=c", map[string]string{"a": "x", "b": "c"}},
		{"escaped backslash does not continue", "a=x\\\\\nb=c", map[string]string{"a": `x\`, "b": "c"}},
		{"trailing backslash at end of file", "a=x\\", map[string]string{"a": "x"}},
		{"escapes", `a=\t\n\r\f`, map[string]string{"a": "\t\n\r\f"}},
		{"unicode escape", `a=caf\u00e9`, map[string]string{"a": "café"}},
		{"surrogate pair", `a=\uD83D\uDE00`, map[string]string{"a": "😀"}},
		{"lone surrogate", `a=\uD83Dx`, map[string]string{"a": "\uFFFDx"}},
		{"other escapes drop the backslash", `a=\q\#\=`, map[string]string{"a": "q#="}},
		{"escaped separators in key", `my\=key\:x\ y=v`, map[string]string{"my=key:x y": "v"}},
		{"last duplicate wins", "a=1\na=2", map[string]string{"a": "2"}},
		{"utf8 passes through", "dir=/données", map[string]string{"dir": "/données"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseProperties([]byte(c.text))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePropertiesMalformedUnicodeEscape(t *testing.T) {
	for _, text := range []string{"ok=1\nb=\\u12", "ok=1\nb=\\u12G4"} {
		_, err := ParseProperties([]byte(text))
		if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), `\u`) {
			t.Errorf("%q: got %v, want a malformed \\u error on line 2", text, err)
		}
	}
}

// TestPropertiesRoundTrip: whatever keys and values EncodeProperties writes,
// ParseProperties reads back unchanged.
func TestPropertiesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		chars := rapid.SampledFrom([]rune("ab=: \t\\#!\n\r\fé😀x"))
		text := rapid.StringOfN(chars, 0, 12, -1)
		keys := rapid.SliceOfNDistinct(text, 1, 5, func(s string) string { return s }).Filter(func(ks []string) bool {
			for _, k := range ks {
				if k == "" {
					return false
				}
			}
			return true
		}).Draw(t, "keys")
		props := map[string]string{}
		for i, k := range keys {
			props[k] = text.Draw(t, "value"+string(rune('0'+i)))
		}
		got, err := ParseProperties(EncodeProperties(keys, props))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(props, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}

// FuzzParseProperties: any input either fails cleanly or parses to pairs that
// survive an encode/parse round trip.
func FuzzParseProperties(f *testing.F) {
	for _, seed := range []string{"a=b", "a\\\n b", "# c\n!d\ne:f", `k\u0041=\uD83D\uDE00`, "x\\", " = ", "\\u12"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		props, err := ParseProperties(text)
		if err != nil {
			return
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		again, err := ParseProperties(EncodeProperties(keys, props))
		if err != nil {
			t.Fatalf("re-parsing encoded properties: %v", err)
		}
		if diff := cmp.Diff(props, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
