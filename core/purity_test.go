package core_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// forbiddenImports reach the outside world or draw randomness the simulator
// cannot seed (DEVELOPERS.md, "The one hard rule").
var forbiddenImports = map[string]bool{
	"net":              true,
	"net/http":         true,
	"os":               true,
	"os/exec":          true,
	"os/signal":        true,
	"syscall":          true,
	"unsafe":           true,
	"crypto/rand":      true,
	"math/rand":        true,
	"math/rand/v2":     true,
	"golang.org/x/sys": true,
	// log writes to stderr, stamped with the real clock: the core logs
	// through env.Log.
	"log": true,
	// The core runs on one event loop (SPEC.md §1): it needs no lock and no
	// atomic, and one would let another goroutine into its state. What a
	// connection goroutine needs from it, it gets as an immutable value
	// through the environment (env.Prechecker).
	"sync":        true,
	"sync/atomic": true,
}

// forbiddenMapIterators are the maps package's iterators, which yield in
// map order: a range over one is a range over the map.
var forbiddenMapIterators = map[string]bool{"Keys": true, "Values": true, "All": true}

// forbiddenSlog are log/slog's names that log through a *slog.Logger (the
// process-global one, or one the core would build): its methods read the
// real clock for every line. The core may use slog's values (Attr, Level)
// with env.Log, whose environment stamps the time.
var forbiddenSlog = map[string]bool{
	"Logger": true, "Default": true, "SetDefault": true, "New": true, "NewLogLogger": true,
	"Debug": true, "Info": true, "Warn": true, "Error": true, "Log": true, "LogAttrs": true,
	"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true,
	"NewTextHandler": true, "NewJSONHandler": true,
}

// forbiddenTimeCalls read the real clock or block on it.
var forbiddenTimeCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// TestCoreIsDeterministic walks every non-test Go file under core/ and fails
// on anything that would let the real world or the Go scheduler into the
// state machine: forbidden imports (locks and atomics among them), the real
// clock, goroutines, select, sync.Pool, ranging over a map or over the maps
// package's iterators without saying why order cannot leak, and a package
// that does not type-check (which would hide the rest).
func TestCoreIsDeterministic(t *testing.T) {
	violations := checkTree(t, ".")
	for _, v := range violations {
		t.Error(v)
	}
}

// TestPurityCheckerCatchesViolations proves the checker can fail: it runs it
// on a fixture that commits every sin once.
func TestPurityCheckerCatchesViolations(t *testing.T) {
	violations := checkTree(t, "../testdata/impure")
	want := []string{
		`imports "os"`, `imports "math/rand"`, `imports "golang.org/x/sys/unix"`,
		"time.Now", "time.Sleep", "time.After", "go statement", "select statement",
		"sync.Pool", "range over map", `imports "log"`, "slog.Info", "slog.Logger",
		`imports "sync"`, `imports "sync/atomic"`,
		"range over maps.Keys", "range over maps.Values", "range over maps.All",
		"maps.Keys outside slices.Sorted",
	}
	joined := strings.Join(violations, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("checker missed %q; it reported:\n%s", w, joined)
		}
	}
	if strings.Contains(joined, "does not type-check") {
		t.Errorf("the fixture must type-check, or the checks that need types see nothing:\n%s", joined)
	}
	// A package that does not type-check would blind the checks that
	// need types (the real clock, ranges over maps): it is a violation.
	illTyped := strings.Join(checkTree(t, "../testdata/illtyped"), "\n")
	if !strings.Contains(illTyped, "does not type-check") {
		t.Errorf("checker accepted a package that does not type-check; it reported:\n%s", illTyped)
	}
}

func checkTree(t *testing.T, root string) []string {
	t.Helper()
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" && root == "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	dirNames := make([]string, 0, len(dirs))
	for dir := range dirs {
		dirNames = append(dirNames, dir)
	}
	sort.Strings(dirNames)
	var violations []string
	for _, dir := range dirNames {
		violations = append(violations, checkPackage(t, dirs[dir])...)
	}
	if len(dirNames) == 0 {
		t.Fatalf("no Go files found under %s", root)
	}
	return violations
}

func checkPackage(t *testing.T, paths []string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parsing %s: %v", p, err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	var violations []string
	report := func(pos token.Pos, format string, args ...any) {
		violations = append(violations, fmt.Sprintf("%s: %s", fset.Position(pos), fmt.Sprintf(format, args...)))
	}
	// Every error, not only the first: the checks below need types, and
	// what does not type-check they cannot see.
	conf := types.Config{Importer: exportDataImporter(t, fset), Error: func(err error) {
		var typeErr types.Error
		if errors.As(err, &typeErr) {
			report(typeErr.Pos, "does not type-check: %s", typeErr.Msg)
			return
		}
		violations = append(violations, fmt.Sprintf("does not type-check: %v", err))
	}}
	_, _ = conf.Check(files[0].Name.Name, fset, files, info)

	for _, f := range files {
		sortedIterators := iteratorsSortedOrRanged(info, f)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImports[path] || strings.HasPrefix(path, "golang.org/x/sys/") {
				report(imp.Pos(), "imports %q", path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				report(n.Pos(), "go statement starts a goroutine")
			case *ast.SelectStmt:
				report(n.Pos(), "select statement lets the Go scheduler choose")
			case *ast.SelectorExpr:
				obj := info.Uses[n.Sel]
				if obj == nil || obj.Pkg() == nil {
					return true
				}
				switch {
				case obj.Pkg().Path() == "maps" && forbiddenMapIterators[obj.Name()] && !sortedIterators[n]:
					report(n.Pos(), "maps.%s outside slices.Sorted yields in map order: sort it (slices.Sorted(maps.Keys(m))), or range over it in a loop marked // order-independent: <why>", obj.Name())
				case obj.Pkg().Path() == "time" && forbiddenTimeCalls[obj.Name()]:
					report(n.Pos(), "time.%s reads or waits on the real clock; use env.Clock", obj.Name())
				case obj.Pkg().Path() == "log/slog" && forbiddenSlog[obj.Name()]:
					report(n.Pos(), "slog.%s logs through a *slog.Logger, which reads the real clock; use env.Log", obj.Name())
				case obj.Pkg().Path() == "sync" && obj.Name() == "Pool":
					report(n.Pos(), "sync.Pool makes allocation reuse depend on the Go runtime")
				}
			case *ast.RangeStmt:
				if tv, ok := info.Types[n.X]; ok {
					if _, isMap := tv.Type.Underlying().(*types.Map); isMap && !orderIndependent(fset, f, n) {
						report(n.Pos(), "range over map: sort the keys, or mark the loop // order-independent: <why>")
					}
				}
				if name, ok := mapIterator(info, n.X); ok && !orderIndependent(fset, f, n) {
					report(n.Pos(), "range over maps.%s yields in map order: range over slices.Sorted(maps.Keys(m)), or mark the loop // order-independent: <why>", name)
				}
			}
			return true
		})
	}
	return violations
}

// orderFixingConsumers take an iterator and give a result that does not
// depend on the order it yields in: the sorts, and maps.Collect and
// maps.Insert, which build a map.
var orderFixingConsumers = map[string]map[string]bool{
	"slices": {"Sorted": true, "SortedFunc": true, "SortedStableFunc": true},
	"maps":   {"Collect": true, "Insert": true},
}

// iteratorsSortedOrRanged returns the selectors of the maps iterator calls
// in f that are harmless or judged elsewhere: the argument of an
// order-fixing consumer, or a range statement's expression (the range rule
// decides those). Any other use (slices.Collect(maps.Keys(m)), a call
// passing the iterator on) lets map order through.
func iteratorsSortedOrRanged(info *types.Info, f *ast.File) map[*ast.SelectorExpr]bool {
	out := map[*ast.SelectorExpr]bool{}
	mark := func(x ast.Expr) {
		if call, ok := ast.Unparen(x).(*ast.CallExpr); ok {
			if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
				out[sel] = true
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.RangeStmt:
			mark(n.X)
		case *ast.CallExpr:
			sel, ok := ast.Unparen(n.Fun).(*ast.SelectorExpr)
			if !ok || len(n.Args) == 0 {
				return true
			}
			if obj := info.Uses[sel.Sel]; obj != nil && obj.Pkg() != nil && orderFixingConsumers[obj.Pkg().Path()][obj.Name()] {
				mark(n.Args[len(n.Args)-1]) // the iterator is the last argument of each (Insert's second)
				if obj.Name() != "Insert" {
					mark(n.Args[0])
				}
			}
		}
		return true
	})
	return out
}

// mapIterator reports whether x calls one of the maps package's iterators
// (forbiddenMapIterators), and which.
func mapIterator(info *types.Info, x ast.Expr) (string, bool) {
	call, ok := ast.Unparen(x).(*ast.CallExpr)
	if !ok {
		return "", false
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	obj := info.Uses[sel.Sel]
	if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != "maps" || !forbiddenMapIterators[obj.Name()] {
		return "", false
	}
	return obj.Name(), true
}

// orderIndependent reports whether the range statement carries a
// "// order-independent:" comment on its line or the line above.
func orderIndependent(fset *token.FileSet, f *ast.File, n *ast.RangeStmt) bool {
	line := fset.Position(n.Pos()).Line
	for _, group := range f.Comments {
		for _, c := range group.List {
			cl := fset.Position(c.Pos()).Line
			if (cl == line || cl == line-1) && strings.Contains(c.Text, "order-independent:") {
				return true
			}
		}
	}
	return false
}

var (
	exportFilesOnce sync.Once
	exportFiles     map[string]string
	exportFilesErr  error
)

// exportDataImporter imports packages from the compiler's export data, which
// `go list -export` builds (or finds in the build cache). Type-checking every
// dependency from source instead takes minutes: kmsg alone is huge.
func exportDataImporter(t *testing.T, fset *token.FileSet) types.Importer {
	t.Helper()
	exportFilesOnce.Do(func() { exportFiles, exportFilesErr = listExportFiles() })
	if exportFilesErr != nil {
		t.Fatalf("listing export data: %v", exportFilesErr)
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exportFiles[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	})
}

// listExportFiles maps every package that core/ and the fixture depend on to
// its export data file.
func listExportFiles() (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", "./...", "golang.org/x/sys/unix")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	files := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var pkg struct{ ImportPath, Export string }
		if err := dec.Decode(&pkg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		if pkg.Export != "" {
			files[pkg.ImportPath] = pkg.Export
		}
	}
	return files, nil
}
