package doccheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/txkernel/txkernel/"

// imports lists, for every package of the module (tests excluded), the
// packages of the module it imports, by path relative to the module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "sqlite_fts5 failpoints", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		m[pkg] = []string{}
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				m[pkg] = append(m[pkg], rel)
			}
		}
	}
	if len(m) < 20 {
		t.Fatalf("go list found %d packages of the module: the listing is broken", len(m))
	}
	return m
}

// TestLayers checks the import rules docs/DESIGN.md §6 states, so the
// text cannot drift from the code: data flows one way, only the adapters
// over the method table import kernel, and the floors below it import
// only what the text says.
func TestLayers(t *testing.T) {
	m := imports(t)
	// Who may import kernel: the adapters over its method table.
	kernelImporters := []string{"internal/cli", "mcpserver", "wireschema", "client/clientgen"}
	// What a floor may import of the module, and nothing else of it.
	only := map[string][]string{
		"approvals":          {"protocol"},
		"protocol":           {},
		"errs":               {},
		"internal/failpoint": {},
		"internal/jsonscan":  {},
		"client":             {"protocol"},
		"desk":               {"protocol", "sandbox"},
	}
	// What a floor must never import.
	never := map[string][]string{
		"tx":     {"workspace", "document", "corpus", "memory", "store", "store/postgres", "kernel"},
		"store":  {"workspace", "document", "corpus", "tx", "kernel"},
		"search": {"store", "tx", "kernel"},
		// memory owns its port (memory.Store) and the stores implement
		// it, so the stores import memory and memory imports neither.
		"memory":            {"store", "store/postgres", "kernel"},
		"memory/memorytest": {"store", "store/postgres"},
	}
	for pkg, imps := range m {
		for _, imp := range imps {
			switch {
			case imp == "kernel" && !slices.Contains(kernelImporters, pkg):
				t.Errorf("%s imports kernel: only %s may (docs/DESIGN.md §6)", pkg, strings.Join(kernelImporters, ", "))
			case strings.HasPrefix(imp, "cmd/"):
				t.Errorf("%s imports %s: nothing imports a command (docs/DESIGN.md §6)", pkg, imp)
			}
		}
		if allowed, ok := only[pkg]; ok {
			for _, imp := range imps {
				if !slices.Contains(allowed, imp) {
					t.Errorf("%s imports %s: of the module it may import only %v (docs/DESIGN.md §6)", pkg, imp, allowed)
				}
			}
		}
		for _, imp := range never[pkg] {
			if slices.Contains(imps, imp) {
				t.Errorf("%s imports %s, which sits above it (docs/DESIGN.md §6)", pkg, imp)
			}
		}
	}
	for pkg := range only {
		if _, ok := m[pkg]; !ok {
			t.Errorf("no package %s: the rule names a package that moved; update it and docs/DESIGN.md §6", pkg)
		}
	}
	for _, pkg := range kernelImporters {
		if !slices.Contains(m[pkg], "kernel") {
			t.Errorf("%s no longer imports kernel: update the list here and in docs/DESIGN.md §6", pkg)
		}
	}
}
