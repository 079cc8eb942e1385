package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/group"
	"strand/core/quorum"
)

// TestAPITableIsWellFormed: every entry has a handler, a listener kind and
// a version range kmsg can decode; no key has two entries on one kind of
// listener (HandleRequest would serve only the first). Every advertised
// row is therefore served by a handler: the tables are built from the
// entries and nothing else.
func TestAPITableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range apiTable {
		name := kmsg.NameForKey(e.key.Int16())
		if e.handle == nil {
			t.Errorf("%s: no handler", name)
		}
		// Authorization (SPEC.md §10.7): every API served says what it
		// requires; one that needs no decision says so (noAccess).
		if e.requires == nil || e.requires.text == "" {
			t.Errorf("%s: no access rule (requires)", name)
		}
		// The control plane is for members, but for the APIs every
		// connection needs first and DescribeQuorum, which Kafka serves
		// to clients on a controller listener.
		switch {
		case e.listeners&controllerListener == 0 || e.key == kmsg.ApiVersions || e.key == kmsg.SASLHandshake ||
			e.key == kmsg.SASLAuthenticate:
		case e.key == kmsg.DescribeQuorum:
			if e.requires != describeQuorumOnControllerAccess {
				t.Errorf("%s on a controller listener requires %v, not DESCRIBE on the cluster", name, e.requires)
			}
		case e.requires != clusterAccess:
			t.Errorf("%s on a controller listener requires %v, not CLUSTER_ACTION", name, e.requires)
		}
		if e.listeners == 0 || e.listeners&^bothListeners != 0 {
			t.Errorf("%s: listener kinds %v", name, e.listeners)
		}
		if e.versionMin < 0 || e.versionMin > e.versionMax {
			t.Errorf("%s: versions %d..%d", name, e.versionMin, e.versionMax)
		}
		if req := kmsg.RequestForKey(e.key.Int16()); req == nil || req.MaxVersion() < e.versionMax {
			t.Errorf("%s: kmsg cannot decode up to v%d", name, e.versionMax)
		}
		for _, kind := range []listenerKind{brokerListener, controllerListener} {
			if e.listeners&kind == 0 {
				continue
			}
			k := fmt.Sprint(e.key, kind)
			if seen[k] {
				t.Errorf("%s has two entries on %s listeners", name, kind)
			}
			seen[k] = true
		}
	}
	for _, kind := range []listenerKind{brokerListener, controllerListener} {
		for _, row := range versionsTable(kind) {
			e := (&Node{}).apiFor(kind, row.ApiKey)
			if e == nil || e.handle == nil {
				t.Errorf("%s listener advertises key %d without a handler", kind, row.ApiKey)
			}
		}
	}
}

// TestAPITableServesWhatGroupAndQuorumSpeak: the group coordinators'
// versions are served on broker listeners and the voters' Raft versions
// on controller listeners, exactly the ranges their codecs speak.
func TestAPITableServesWhatGroupAndQuorumSpeak(t *testing.T) {
	n := &Node{}
	for _, v := range group.Versions() {
		e := n.apiFor(brokerListener, v.Key)
		if e == nil || e.versionMin != v.Min || e.versionMax != v.Max {
			t.Errorf("group key %d v%d..v%d: broker entry %+v", v.Key, v.Min, v.Max, e)
		}
	}
	for _, v := range quorum.Versions() {
		e := n.apiFor(controllerListener, v.Key)
		if e == nil || !e.serves(controllerListener, v.Min) || !e.serves(controllerListener, v.Max) {
			t.Errorf("quorum key %d v%d..v%d: controller entry %+v", v.Key, v.Min, v.Max, e)
		}
	}
}

// headerVersions finds "(key N)" and "versions A..B" in an api file's
// header comment.
var (
	headerKey      = regexp.MustCompile(`\(key (\d+)\)`)
	headerVersions = regexp.MustCompile(`versions\s+(\d+)\.\.(\d+)`)
	apiFileName    = regexp.MustCompile(`^api_(\d+)(?:_(\d+))?_`)
)

// TestAPIFileHeadersMatchTheTable: each api_NN_name.go file opens with a
// comment naming its key(s) and either the versions it serves, which must
// be the table's (every listener's union), or the package that lists them
// (core/group); its file name's numbers are keys the table serves.
func TestAPIFileHeadersMatchTheTable(t *testing.T) {
	files, err := filepath.Glob("api_[0-9]*.go")
	if err != nil || len(files) < 20 {
		t.Fatalf("api files: %v, %v", files, err)
	}
	union := map[int16][2]int16{}
	for _, row := range versionsTable(brokerListener, controllerListener) {
		union[row.ApiKey] = [2]int16{row.MinVersion, row.MaxVersion}
	}
	checked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := apiFileName.FindStringSubmatch(file)
		for _, number := range m[1:] {
			if number == "" {
				continue
			}
			key, _ := strconv.Atoi(number)
			if _, ok := union[int16(key)]; !ok {
				t.Errorf("%s: key %d is not in the API table", file, key)
			}
		}
		header := strings.Join(strings.Fields(headerComment(string(text))), " ")
		keys := headerKey.FindAllStringSubmatch(header, -1)
		if len(keys) == 0 {
			continue // a helper of an API's file (the produce pre-check), not an API's
		}
		versions := headerVersions.FindStringSubmatch(header)
		if versions == nil {
			if !strings.Contains(header, "core/group, which lists the versions") {
				t.Errorf("%s: the header names neither the versions served nor where they are listed", file)
			}
			continue
		}
		lo, _ := strconv.Atoi(versions[1])
		hi, _ := strconv.Atoi(versions[2])
		for _, k := range keys {
			key, _ := strconv.Atoi(k[1])
			if got := union[int16(key)]; got != [2]int16{int16(lo), int16(hi)} {
				t.Errorf("%s: the header says key %d versions %d..%d, the table serves %d..%d", file, key, lo, hi, got[0], got[1])
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d headers named their versions", checked)
	}
}

// headerComment is the comment block after the package clause, before
// the imports or the first declaration.
func headerComment(text string) string {
	var lines []string
	started := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "package "):
			started = true
		case started && strings.HasPrefix(line, "//"):
			lines = append(lines, strings.TrimPrefix(line, "//"))
		case started && strings.TrimSpace(line) == "" && len(lines) == 0:
		case started:
			return strings.Join(lines, "\n")
		}
	}
	return strings.Join(lines, "\n")
}

// specAPITableBegin and specAPITableEnd enclose SPEC.md §10's copy of the
// API table.
const (
	specAPITableBegin = "<!-- api-table: rendered from core/broker/api_table.go, checked by TestSpecAPITableMatchesTheCode -->"
	specAPITableEnd   = "<!-- /api-table -->"
)

// renderAPITable is the API table as SPEC.md §10 shows it: per key, the
// versions each kind of listener serves and what they require.
func renderAPITable() string {
	var b strings.Builder
	b.WriteString("| key | API | broker listener | requires | controller listener | requires |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	n := &Node{}
	for _, row := range versionsTable(brokerListener, controllerListener) {
		fmt.Fprintf(&b, "| %d | %s |", row.ApiKey, kmsg.NameForKey(row.ApiKey))
		for _, kind := range []listenerKind{brokerListener, controllerListener} {
			switch e := n.apiFor(kind, row.ApiKey); {
			case e != nil && e.versionMin == e.versionMax:
				fmt.Fprintf(&b, " v%d | %s |", e.versionMin, e.requires)
			case e != nil:
				fmt.Fprintf(&b, " v%d–v%d | %s |", e.versionMin, e.versionMax, e.requires)
			default:
				b.WriteString(" not served | |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestSpecAPITableMatchesTheCode: SPEC.md §10's listener/API table is the
// code's.
func TestSpecAPITableMatchesTheCode(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "SPEC.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(text), specAPITableBegin+"\n")
	table, _, ok2 := strings.Cut(after, specAPITableEnd)
	if !ok || !ok2 {
		t.Fatalf("SPEC.md has no table between %q and %q", specAPITableBegin, specAPITableEnd)
	}
	if want := renderAPITable(); table != want {
		t.Errorf("SPEC.md §10's API table differs from api_table.go; it should read:\n%s\n%s%s", specAPITableBegin, want, specAPITableEnd)
	}
}
