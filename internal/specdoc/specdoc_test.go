package specdoc

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is two directories up from this package.
const repoRoot = "../.."

// documents are the texts whose citations of tests must resolve.
var documents = []string{"SPEC.md", "docs/benchmarks.md", "README.md"}

// citedPattern is a test, benchmark or fuzz target's name as the documents
// cite it; a trailing * cites every test with that prefix.
var citedPattern = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*\*?`)

// definedPattern is such a function's declaration in a _test.go file.
var definedPattern = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)\(`)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(b)
}

// definedTests are the names of every test function in the repository.
func definedTests(t *testing.T) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range definedPattern.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the repository: %v", err)
	}
	slices.Sort(names)
	return names
}

// missingCitations are the citations in text that name no defined test.
func missingCitations(text string, defined []string) []string {
	var missing []string
	for _, cited := range citedPattern.FindAllString(text, -1) {
		prefix, isPrefix := strings.CutSuffix(cited, "*")
		found := slices.ContainsFunc(defined, func(name string) bool {
			return name == cited || isPrefix && strings.HasPrefix(name, prefix)
		})
		if !found && !slices.Contains(missing, cited) {
			missing = append(missing, cited)
		}
	}
	return missing
}

// TestEveryCitedTestExists: a test SPEC, the benchmark notes or the README
// cite as a check must exist, so that a renamed or deleted test cannot
// leave a rule unchecked while the text still says it is.
func TestEveryCitedTestExists(t *testing.T) {
	defined := definedTests(t)
	if len(defined) < 100 {
		t.Fatalf("found only %d tests in the repository: the walk is broken", len(defined))
	}
	for _, doc := range documents {
		if missing := missingCitations(read(t, doc), defined); len(missing) > 0 {
			t.Errorf("%s cites tests that do not exist: %v", doc, missing)
		}
	}
}

// TestMissingCitationsAreSeen: the check finds a citation of nothing, and
// takes a prefix citation as one.
func TestMissingCitationsAreSeen(t *testing.T) {
	defined := []string{"TestRetentionBySize", "TestLogStateMachine"}
	got := missingCitations("*Checked by* `TestRetention*`, `TestLogStateMachine`, `TestGone`, `TestGone`, `TestOther*`.", defined)
	if !slices.Equal(got, []string{"TestGone", "TestOther*"}) {
		t.Fatalf("missing citations %v, want [TestGone TestOther*]", got)
	}
}

// historyPatterns are what a lab notebook says and a contract does not:
// commit hashes (hex words of 7 to 40 characters holding a letter and a
// digit), work sessions and reviews.
var historyPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(?:[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*|[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*)\b`),
	regexp.MustCompile(`(?i)\bsessions? \d+`),
	regexp.MustCompile(`(?i)\breview(?:s|ed|er|ers)?\b`),
	regexp.MustCompile(`(?i)\bhelper-\d+`),
}

// historyIn lists the history tokens of text, with their line numbers.
func historyIn(text string) []string {
	var found []string
	for i, line := range strings.Split(text, "\n") {
		for _, p := range historyPatterns {
			for _, m := range p.FindAllString(line, -1) {
				if p == historyPatterns[0] && (len(m) < 7 || len(m) > 40) {
					continue
				}
				found = append(found, fmt.Sprintf("line %d: %s", i+1, m))
			}
		}
	}
	return found
}

// TestSpecTellsNoHistory: SPEC.md is the contract; how it came to be
// belongs in commit messages.
func TestSpecTellsNoHistory(t *testing.T) {
	if found := historyIn(read(t, "SPEC.md")); len(found) > 0 {
		t.Errorf("SPEC.md tells history (%d): %v", len(found), found)
	}
}

// TestHistoryIsSeen: the patterns catch a hash, a session and a review, and
// leave a segment file name and a hex constant alone.
func TestHistoryIsSeen(t *testing.T) {
	text := "fixed in 56dc28a\nuntil session 9\nthe review found\n`00000000000000000000.log`\n0x7fffffff\n"
	if got := historyIn(text); len(got) != 3 {
		t.Fatalf("found %v, want the hash, the session and the review", got)
	}
}
