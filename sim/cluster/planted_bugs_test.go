package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"strand/core/acl"
	"strand/core/broker"
	"strand/core/group"
	"strand/core/quorum"
	"strand/core/replica"
)

// TestSpecSaysWhereEachPlantedBugTravels keeps SPEC.md's list of planted
// bugs (§4.7, §6.3) from drifting: every bug -bug takes (BugNames) is
// listed with the configuration it travels in ("`early-ack` ... travel in
// `replica.Config.Bugs`"), every bug SPEC lists is one -bug takes, and
// the switch each one sets lies where SPEC says: in the Bugs of the most
// specific Config that carries it (replica.Config.Bugs for a switch of
// replica.Bugs, broker.Config.Bugs for one of broker.Bugs' own fields,
// cluster.Bugs for a switch of the simulator's alone).
func TestSpecSaysWhereEachPlantedBugTravels(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "SPEC.md"))
	if err != nil {
		t.Fatal(err)
	}
	claims, err := plantedBugClaims(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range BugNames {
		if _, ok := claims[name]; !ok {
			t.Errorf("bug %s (-bug) is not in SPEC.md with where it travels (\"`%s` travels in `pkg.Config.Bugs`\")", name, name)
		}
	}
	for _, name := range sortedKeys(claims) {
		b, err := ParseBug(name)
		if err != nil {
			t.Errorf("SPEC.md lists planted bug %s, which -bug does not take: %v", name, err)
			continue
		}
		got, err := travelsIn(b)
		if err != nil {
			t.Errorf("bug %s: %v", name, err)
			continue
		}
		if got != claims[name] {
			t.Errorf("SPEC.md says bug %s travels in %s; its switch is in %s", name, claims[name], got)
		}
	}
}

// TestPlantedBugClaimsParse: the parser reads both forms SPEC uses, a
// list after the configuration and the bugs before "travel", and takes no
// backticked name from a parenthesis or after the bugs' own list.
func TestPlantedBugClaimsParse(t *testing.T) {
	text := "### 4.7 Planted bugs\nThey travel in `replica.Config.Bugs` (per partition,\nnever `global-x`): `a-b` (the\nfirst), `c-d`. `e-f` and `g-h` travel in `broker.Config.Bugs`: caught by\n`not-a-bug`. Nothing else (`i-j`).\n"
	got, err := plantedBugClaims(text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a-b": "replica.Config.Bugs", "c-d": "replica.Config.Bugs", "e-f": "broker.Config.Bugs", "g-h": "broker.Config.Bugs"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	if _, err := plantedBugClaims(text + "`a-b` travels in `quorum.Config.Bugs`.\n"); err == nil {
		t.Fatal("a bug SPEC places in two configurations was accepted")
	}
}

var (
	backticked   = regexp.MustCompile("`([^`]+)`")
	bugName      = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)+$`)
	bugsLocation = regexp.MustCompile(`^[a-z]+(\.Config)?\.Bugs$`)
	sentenceEnd  = regexp.MustCompile("([.;])\\s+([A-Z`])")
)

// plantedBugClaims reads, from SPEC's sentences that say where planted bugs
// travel, each bug's configuration: a sentence names the configuration in
// backticks after "travel(s) in", and its bugs either before "travel" or,
// when none is there, after the colon that follows the configuration.
// Parentheses are explanations, not lists, and are skipped.
func plantedBugClaims(spec string) (map[string]string, error) {
	claims := map[string]string{}
	text := strings.Join(strings.Fields(spec), " ")
	text = sentenceEnd.ReplaceAllString(text, "$1\n$2")
	for _, sentence := range strings.Split(text, "\n") {
		sentence = withoutParentheses(sentence)
		at := strings.Index(sentence, " travel")
		if at < 0 && !strings.HasPrefix(sentence, "travel") {
			continue
		}
		before, after := sentence[:max(at, 0)], sentence[max(at, 0):]
		loc := backticked.FindStringSubmatchIndex(after)
		if loc == nil || !bugsLocation.MatchString(after[loc[2]:loc[3]]) {
			continue
		}
		where := after[loc[2]:loc[3]]
		names := bugNames(before)
		if len(names) == 0 {
			rest := after[loc[1]:]
			if colon := strings.Index(rest, ":"); colon >= 0 {
				names = bugNames(rest[colon+1:])
			}
		}
		for _, name := range names {
			if other, ok := claims[name]; ok && other != where {
				return nil, fmt.Errorf("SPEC.md says bug %s travels in both %s and %s", name, other, where)
			}
			claims[name] = where
		}
	}
	return claims, nil
}

// bugNames are the backticked bug names in s.
func bugNames(s string) []string {
	var names []string
	for _, m := range backticked.FindAllStringSubmatch(s, -1) {
		if bugName.MatchString(m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// withoutParentheses drops every parenthesised part of s, nested ones too.
func withoutParentheses(s string) string {
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// bugsCarriers are the configurations whose Bugs field carries planted
// bugs into a package, by the name SPEC gives them.
var bugsCarriers = map[string]reflect.Type{
	"acl.Config.Bugs":     reflect.TypeFor[acl.Config](),
	"broker.Config.Bugs":  reflect.TypeFor[broker.Config](),
	"replica.Config.Bugs": reflect.TypeFor[replica.Config](),
	"quorum.Config.Bugs":  reflect.TypeFor[quorum.Config](),
	"group.Config.Bugs":   reflect.TypeFor[group.Config](),
}

// travelsIn is where the one switch b sets lies: the most specific of
// bugsCarriers whose Bugs holds it, or cluster.Bugs for a switch the
// simulator keeps to itself (its disk's lies).
func travelsIn(b Bugs) (string, error) {
	paths := setSwitches(reflect.ValueOf(b.broker()), nil)
	if len(paths) == 0 {
		if len(setSwitches(reflect.ValueOf(b), nil)) == 1 {
			return "cluster.Bugs", nil
		}
		return "", fmt.Errorf("sets %d switches, want one", len(setSwitches(reflect.ValueOf(b), nil)))
	}
	if len(paths) != 1 {
		return "", fmt.Errorf("sets %d switches in broker.Bugs, want one", len(paths))
	}
	where, holder := "broker.Config.Bugs", reflect.TypeFor[broker.Bugs]()
	for _, f := range paths[0][:len(paths[0])-1] {
		holder = f.Type
		carried := false
		for _, name := range sortedKeys(bugsCarriers) {
			if field, ok := bugsCarriers[name].FieldByName("Bugs"); ok && field.Type == holder {
				where, carried = name, true
			}
		}
		if !carried {
			return "", fmt.Errorf("its switch is in %v, which no Config in bugsCarriers carries", holder)
		}
	}
	if field, ok := bugsCarriers[where].FieldByName("Bugs"); !ok || field.Type != holder {
		return "", fmt.Errorf("%s is not a field of type %v", where, holder)
	}
	return where, nil
}

// setSwitches lists the paths to the true bools in the struct v.
func setSwitches(v reflect.Value, prefix []reflect.StructField) [][]reflect.StructField {
	var paths [][]reflect.StructField
	for i := range v.NumField() {
		f := v.Type().Field(i)
		path := append(slices.Clone(prefix), f)
		switch fv := v.Field(i); fv.Kind() {
		case reflect.Bool:
			if fv.Bool() {
				paths = append(paths, path)
			}
		case reflect.Struct:
			paths = append(paths, setSwitches(fv, path)...)
		}
	}
	return paths
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m { // order-independent: sorted below
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
