package models

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The files that declare the transport's crash points (shm.CrashPoint
// names): every string constant whose name starts with "crash"/"Crash".
var crashPointFiles = []string{
	"../transport/crashpoints.go",
	"../transport/internal/peers/crashpoints.go",
	"../internal/bridge/crashpoints.go",
}

// declaredCrashPoints parses the crash point constants of the code.
func declaredCrashPoints(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range crashPointFiles {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(strings.ToLower(name.Name), "crash") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatalf("%s: %s: %v", path, name.Name, err)
					}
					out[v] = true
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no crash points found in %v: has the declaration moved?", crashPointFiles)
	}
	return out
}

// modelSteps are the crash points the models name in "crash: a, b"
// comments, each with the model file that names it.
var modelStepRe = regexp.MustCompile(`crash: ([a-z0-9.,\- ]+)`)

func modelSteps(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.pml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no models (*.pml) here: %v", err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range modelStepRe.FindAllStringSubmatch(string(b), -1) {
			for _, name := range strings.Split(m[1], ",") {
				if name = strings.TrimSpace(name); name != "" {
					out[name] = f
				}
			}
		}
	}
	return out
}

// crashWindowRows are the crash points named first in a row of a table
// in docs/design.md ("| `name` | ...").
var rowRe = regexp.MustCompile("(?m)^\\| `([a-z0-9.\\-]+)`")

func crashWindowRows(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range rowRe.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

// unmapped splits the declared crash points into those with neither a
// model step nor a crash-window row (missing) and those with a row only.
func unmapped(declared map[string]bool, steps map[string]string, rows map[string]bool) (missing, onlyRow []string) {
	for name := range declared {
		switch {
		case steps[name] == "" && !rows[name]:
			missing = append(missing, name)
		case steps[name] == "":
			onlyRow = append(onlyRow, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(onlyRow)
	return missing, onlyRow
}

func TestEveryCrashPointHasAModelStepOrACrashWindowRow(t *testing.T) {
	missing, onlyRow := unmapped(declaredCrashPoints(t), modelSteps(t), crashWindowRows(t))
	for _, name := range missing {
		t.Errorf("crash point %q has no model step (a \"crash: %s\" comment in models/*.pml) and no crash-window row in docs/design.md", name, name)
	}
	if len(onlyRow) > 0 {
		t.Logf("crash points with a crash-window row but no model step: %s", strings.Join(onlyRow, ", "))
	}
}

// A model step must name a crash point the code declares: a renamed or
// removed point would otherwise leave the model claiming a step the code
// no longer has.
func TestEveryModelStepNamesADeclaredCrashPoint(t *testing.T) {
	declared := declaredCrashPoints(t)
	steps := modelSteps(t)
	if len(steps) == 0 {
		t.Fatal("the models name no crash points")
	}
	for name, file := range steps {
		if !declared[name] {
			t.Errorf("%s names crash point %q, which the code does not declare", file, name)
		}
	}
}

// The check above must be able to fail: a declared point absent from
// both the models and the design document is reported, one in either is
// not.
func TestAnUnmappedCrashPointIsReported(t *testing.T) {
	declared := map[string]bool{"a.in-model": true, "a.in-table": true, "a.nowhere": true}
	missing, onlyRow := unmapped(declared, map[string]string{"a.in-model": "x.pml"}, map[string]bool{"a.in-table": true})
	if strings.Join(missing, ",") != "a.nowhere" || strings.Join(onlyRow, ",") != "a.in-table" {
		t.Fatalf("missing %v, onlyRow %v; want [a.nowhere], [a.in-table]", missing, onlyRow)
	}
	if len(crashWindowRows(t)) == 0 {
		t.Fatal("docs/design.md has no crash-window rows: has the table format changed?")
	}
}
