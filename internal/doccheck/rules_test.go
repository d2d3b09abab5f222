package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rulesPath is the table of the seeds' hard rules (docs/RULES.md): each row
// names where a rule is enforced and the tests that prove it.
const rulesPath = "docs/RULES.md"

var (
	// ruleRowRe is a row of a rules table: "| 000-3 | …", "| X-1 | …".
	ruleRowRe = regexp.MustCompile(`^\|\s*(\d{3}|X)-\d+\s*\|`)
	// backquoted is a `reference` in a table cell.
	backquoted = regexp.MustCompile("`([^`]+)`")
	// testRefRe is "dir TestName" or "dir TestName/sub/…".
	testRefRe = regexp.MustCompile(`^([a-z0-9_]+(?:/[a-z0-9_]+)*) (Test[A-Za-z0-9_]*)((?:/[A-Za-z0-9_.-]+)*)$`)
	// codeRefRe is "dir.Name" or "dir.Type.Method".
	codeRefRe = regexp.MustCompile(`^([a-z0-9_]+(?:/[a-z0-9_]+)*)\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)$`)
	// dirRefRe is a package directory alone.
	dirRefRe = regexp.MustCompile(`^[a-z0-9_]+(?:/[a-z0-9_]+)*$`)
)

// goPackage is what one directory's Go files (tests included) declare.
type goPackage struct {
	names   map[string]bool // "Apply", "Engine", "Engine.Apply", "TestDoors"
	strings map[string]bool // the string literals of its _test.go files
}

// loadGoPackage parses every Go file of dir.
func loadGoPackage(t *testing.T, dir string) (*goPackage, error) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return nil, os.ErrNotExist
	}
	p := &goPackage{names: map[string]bool{}, strings: map[string]bool{}}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					name = recvName(d.Recv.List[0].Type) + "." + name
				}
				p.names[name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						p.names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.names[n.Name] = true
						}
					}
				}
			}
		}
		if strings.HasSuffix(f, "_test.go") {
			ast.Inspect(file, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						p.strings[s] = true
					}
				}
				return true
			})
		}
	}
	return p, nil
}

// recvName is a method receiver's type name, without pointer or type
// parameters.
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// TestRulesReferences checks every backquoted reference in the
// "Enforced in" and "Tests" columns of docs/RULES.md: a function, method,
// type or package that exists; a test function that exists in its
// directory, and a subtest that it runs (for TestSessions, a transcript
// under testdata/sessions; otherwise a string literal of the package's
// tests, as the rule names of kernel TestDoors are). A row naming something that
// was renamed or removed fails here; so does a rule kernel TestDoors probes that
// no row cites.
func TestRulesReferences(t *testing.T) {
	root := repoRoot(t)
	md, err := os.ReadFile(filepath.Join(root, rulesPath))
	if err != nil {
		t.Fatalf("%s: %v", rulesPath, err)
	}
	pkgs := map[string]*goPackage{}
	load := func(dir string) *goPackage {
		if p, ok := pkgs[dir]; ok {
			return p
		}
		p, err := loadGoPackage(t, filepath.Join(root, filepath.FromSlash(dir)))
		if err != nil {
			p = nil
		}
		pkgs[dir] = p
		return p
	}
	rows, refs := 0, 0
	for i, line := range strings.Split(string(md), "\n") {
		if !ruleRowRe.MatchString(line) {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 4 {
			t.Errorf("%s:%d: %d cells, want 4 (ID, rule, enforced in, tests)", rulesPath, i+1, len(cells))
			continue
		}
		for col, cell := range cells[2:] {
			for _, m := range backquoted.FindAllStringSubmatch(cell, -1) {
				refs++
				if msg := checkRuleRef(root, m[1], col == 1, load); msg != "" {
					t.Errorf("%s:%d: %s", rulesPath, i+1, msg)
				}
			}
		}
	}
	if rows < 40 || refs < 100 {
		t.Fatalf("read %d rows and %d references from %s: the table's format changed", rows, refs, rulesPath)
	}
	// The other way: every rule the door test probes is a row here.
	for _, rule := range doorRules(t, filepath.Join(root, "kernel")) {
		if !strings.Contains(string(md), "`kernel TestDoors/"+rule+"`") {
			t.Errorf("kernel TestDoors probes rule %q, which no row of %s cites (`kernel TestDoors/%s`)", rule, rulesPath, rule)
		}
	}
}

// doorRules returns the values of the rule constants (named rule…) of the
// door-by-rule test in dir.
func doorRules(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "doors*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no door test in %s", dir)
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "rule") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out = append(out, v)
					}
				}
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d rule constants in %s: the door test changed shape", len(out), dir)
	}
	return out
}

// checkRuleRef checks one reference; tests says it is in the Tests column
// (where a test reference is expected).
func checkRuleRef(root, ref string, tests bool, load func(string) *goPackage) string {
	if m := testRefRe.FindStringSubmatch(ref); m != nil {
		dir, name, subs := m[1], m[2], strings.Split(strings.TrimPrefix(m[3], "/"), "/")
		p := load(dir)
		if p == nil {
			return "`" + ref + "`: no Go package in " + dir
		}
		if !p.names[name] {
			return "`" + ref + "`: no func " + name + " in " + dir
		}
		if sub := subs[0]; sub != "" {
			if name == "TestSessions" {
				if _, err := os.Stat(filepath.Join(root, "testdata", "sessions", sub+".txtar")); err != nil {
					return "`" + ref + "`: no transcript testdata/sessions/" + sub + ".txtar"
				}
			} else if !p.strings[sub] {
				return "`" + ref + "`: " + dir + "'s tests run no subtest " + strconv.Quote(sub)
			}
		}
		return ""
	}
	if tests {
		return "`" + ref + "` in the Tests column is not \"dir TestName[/subtest]\""
	}
	if m := codeRefRe.FindStringSubmatch(ref); m != nil {
		p := load(m[1])
		if p == nil {
			return "`" + ref + "`: no Go package in " + m[1]
		}
		if !p.names[m[2]] {
			return "`" + ref + "`: " + m[1] + " declares no " + m[2]
		}
		return ""
	}
	if dirRefRe.MatchString(ref) {
		if load(ref) == nil {
			return "`" + ref + "`: no Go package in " + ref
		}
		return ""
	}
	return "`" + ref + "` is not \"dir.Name\", \"dir.Type.Method\" or a package directory"
}

// TestCheckRuleRef: references that exist pass, and each way one can be
// wrong is reported.
func TestCheckRuleRef(t *testing.T) {
	root := repoRoot(t)
	pkgs := map[string]*goPackage{}
	load := func(dir string) *goPackage {
		if p, ok := pkgs[dir]; ok {
			return p
		}
		p, err := loadGoPackage(t, filepath.Join(root, filepath.FromSlash(dir)))
		if err != nil {
			p = nil
		}
		pkgs[dir] = p
		return p
	}
	cases := []struct {
		ref   string
		tests bool
		ok    bool
	}{
		{"tx.Engine.Apply", false, true},
		{"jsondoc/recipe.Validate", false, true},
		{"document.planned.Admit", false, true},
		{"kernel", false, true},
		{"tx TestInternalKindRefusedFromPropose", true, true},
		{"e2e/session TestSessions/deny_sticks_restart", true, true},
		{"kernel TestDoors/deny-sticks", true, true},
		{"tx.Engine.NoSuchMethod", false, false},
		{"tx.NoSuchFunc", false, false},
		{"nosuchpkg.Func", false, false},
		{"tx TestNoSuchTest", true, false},
		{"e2e/session TestSessions/no_such_transcript", true, false},
		{"kernel TestDoors/no-such-rule", true, false},
		{"tx.Engine.Apply", true, false}, // a function in the Tests column
		{"Plan", false, false},
	}
	for _, c := range cases {
		if msg := checkRuleRef(root, c.ref, c.tests, load); (msg == "") != c.ok {
			t.Errorf("checkRuleRef(%q, tests %v) = %q, want ok %v", c.ref, c.tests, msg, c.ok)
		}
	}
}
