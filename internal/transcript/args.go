// Package transcript reads the arguments of datadriven transcript commands
// (github.com/cockroachdb/datadriven) for the scenario tests of
// core/replica and core/quorum. It is test support: only _test files
// import it.
package transcript

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// Args reads one command's arguments and fails the test on any it did not
// read (Done), so that a misspelt argument cannot pass unnoticed.
type Args struct {
	T    *testing.T
	Data *datadriven.TestData
	used map[string]bool
}

// New returns the reader of td's arguments.
func New(t *testing.T, td *datadriven.TestData) *Args {
	return &Args{T: t, Data: td, used: map[string]bool{}}
}

// Lookup returns key's values and marks it read.
func (a *Args) Lookup(key string) ([]string, bool) {
	for _, arg := range a.Data.CmdArgs {
		if arg.Key == key {
			a.used[key] = true
			return arg.Vals, true
		}
	}
	return nil, false
}

// Has reports whether key was given.
func (a *Args) Has(key string) bool {
	_, ok := a.Lookup(key)
	return ok
}

// Done fails the test if the command was given an argument it never read.
func (a *Args) Done() {
	for _, arg := range a.Data.CmdArgs {
		if !a.used[arg.Key] {
			a.T.Fatalf("%s: %s does not take %q", a.Data.Pos, a.Data.Cmd, arg.Key)
		}
	}
}

// LookupStr returns key's values joined by commas.
func (a *Args) LookupStr(key string) (string, bool) {
	vals, ok := a.Lookup(key)
	return strings.Join(vals, ","), ok
}

// Str returns key's value, which the command requires.
func (a *Args) Str(key string) string {
	s, ok := a.LookupStr(key)
	if !ok {
		a.T.Fatalf("%s: %s needs %s=", a.Data.Pos, a.Data.Cmd, key)
	}
	return s
}

// Int64 returns key's value as a number, which the command requires.
func (a *Args) Int64(key string) int64 { return ParseInt(a.T, a.Str(key)) }

// Int64Or returns key's value as a number, or def when it is absent.
func (a *Args) Int64Or(key string, def int64) int64 {
	if s, ok := a.LookupStr(key); ok {
		return ParseInt(a.T, s)
	}
	return def
}

// Int32 is Int64 narrowed.
func (a *Args) Int32(key string) int32 { return int32(a.Int64(key)) }

// Int32Or is Int64Or narrowed.
func (a *Args) Int32Or(key string, def int32) int32 { return int32(a.Int64Or(key, int64(def))) }

// BoolOr returns key's value as a bool, or def when it is absent.
func (a *Args) BoolOr(key string, def bool) bool {
	s, ok := a.LookupStr(key)
	if !ok {
		return def
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		a.T.Fatalf("%s: %s=%q: %v", a.Data.Pos, key, s, err)
	}
	return v
}

// Strs reads a list given as a,b,c or (a, b, c); absent is nil.
func (a *Args) Strs(key string) []string {
	vals, _ := a.Lookup(key)
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// IDs reads a list of node or replica ids; an absent or empty list is nil.
func (a *Args) IDs(key string) []int32 {
	var out []int32
	for _, s := range a.Strs(key) {
		out = append(out, int32(ParseInt(a.T, s)))
	}
	return out
}

// ParseInt parses a decimal number or fails the test.
func ParseInt(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("%q is not a number: %v", s, err)
	}
	return v
}
