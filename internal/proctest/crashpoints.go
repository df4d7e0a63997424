package proctest

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Crash points (shm.CrashPoint) are declared, in each package that has
// them, as string constants in one file, crashpoints.go. The functions here
// keep the declarations honest: every call names a declared constant, and a
// full test run of the package kills a child at every declared point.

// CrashPointMark is shm.CrashPointMark (shm's tests check they agree): a
// child writes it and the point's name to stderr just before it kills
// itself there.
const CrashPointMark = "shm: killed at crash point "

// CrashPointsFile is the file of a package that declares its crash points.
const CrashPointsFile = "crashpoints.go"

var killed struct {
	sync.Mutex
	at map[string]bool
}

// recordKilled notes the crash points a dead child's stderr says it was
// killed at.
func recordKilled(stderr string) {
	killed.Lock()
	defer killed.Unlock()
	for _, line := range strings.Split(stderr, "\n") {
		if name, ok := strings.CutPrefix(line, CrashPointMark); ok {
			if killed.at == nil {
				killed.at = map[string]bool{}
			}
			killed.at[strings.TrimSpace(name)] = true
		}
	}
}

// KilledAt reports whether a child of this test binary was killed at the
// crash point name.
func KilledAt(name string) bool {
	killed.Lock()
	defer killed.Unlock()
	return killed.at[name]
}

// DeclaredCrashPoints parses dir's crashpoints.go and returns its string
// constants: identifier → crash point name.
func DeclaredCrashPoints(dir string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, CrashPointsFile), nil, 0)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if i >= len(vs.Values) {
					return nil, fmt.Errorf("%s: %s has no value", CrashPointsFile, id.Name)
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return nil, fmt.Errorf("%s: %s is not a string literal", CrashPointsFile, id.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, err
				}
				out[id.Name] = v
			}
		}
	}
	return out, nil
}

// CheckCrashPointCalls fails the test unless every shm.CrashPoint call in
// the non-test files of dir names one of the constants declared in its
// crashpoints.go, and every declared constant is used by some call.
func CheckCrashPointCalls(t *testing.T, dir string) {
	t.Helper()
	declared, err := DeclaredCrashPoints(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "CrashPoint" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "shm" || len(call.Args) != 1 {
				return true
			}
			id, ok := call.Args[0].(*ast.Ident)
			if !ok || declared[id.Name] == "" {
				t.Errorf("%s: shm.CrashPoint must name a constant declared in %s", fset.Position(call.Pos()), CrashPointsFile)
				return true
			}
			used[id.Name] = true
			return true
		})
	}
	for id, v := range declared {
		if !used[id] {
			t.Errorf("%s: %s (%q) is declared but no shm.CrashPoint call names it", CrashPointsFile, id, v)
		}
	}
}

// RunCoveringCrashPoints runs the package's tests (m.Run) and then, on a
// full run (no -run, -skip, -list or -fuzz; not -short; not a child) that
// passed, fails unless some test killed a child at every crash point
// declared in the crashpoints.go of each of dirs (the package's own, ".",
// and those of internal packages whose points only this package's tests
// reach). Call it from TestMain.
func RunCoveringCrashPoints(m *testing.M, dirs ...string) int {
	code := m.Run()
	if _, child := Role(); code != 0 || child || !fullRun() {
		return code
	}
	var missing []string
	for _, dir := range dirs {
		declared, err := DeclaredCrashPoints(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "proctest:", err)
			return 1
		}
		for _, v := range declared {
			if !KilledAt(v) {
				missing = append(missing, v)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		fmt.Fprintf(os.Stderr, "FAIL: no crash test killed a child at %d declared crash point(s): %s\n", len(missing), strings.Join(missing, ", "))
		return 1
	}
	return code
}

func fullRun() bool {
	for _, name := range []string{"test.run", "test.skip", "test.list", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return !testing.Short()
}
