package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// headings returns the section numbers a markdown file defines: "## 4.
// Methods" defines "4", "### 4.6 `apply/execute`" defines "4.6".
func headings(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,4} (\d+(?:\.\d+)*)\.? `).FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = true
	}
	return out
}

// TestCommentCitations checks every citation in a Go file of the
// repository: a `DESIGN.md §N` or `PROTOCOL.md §N` must name a section that
// docs/DESIGN.md or PROTOCOL.md has, a "seed 00N" must be one that
// docs/DESIGN.md §7 summarises, and nothing may cite the design or the seeds
// outside the repository: a reader of the code has only the repository.
func TestCommentCitations(t *testing.T) {
	root := repoRoot(t)
	design := headings(t, filepath.Join(root, "docs", "DESIGN.md"))
	proto := headings(t, filepath.Join(root, "PROTOCOL.md"))
	designText, _ := os.ReadFile(filepath.Join(root, "docs", "DESIGN.md"))
	cite := regexp.MustCompile(`\b(DESIGN|PROTOCOL)\.md §(\d+(?:\.\d+)*)`)
	seed := regexp.MustCompile(`\b[Ss]eeds? (00\d)\b`)
	outside := regexp.MustCompile(`shared/DESIGN\.md|shared/seeds|seeds/00\d_`)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range cite.FindAllStringSubmatch(line, -1) {
				checked++
				if have := map[string]map[string]bool{"DESIGN": design, "PROTOCOL": proto}[m[1]]; !have[m[2]] {
					t.Errorf("%s:%d cites %s.md §%s, which does not exist", rel, i+1, m[1], m[2])
				}
			}
			for _, m := range seed.FindAllStringSubmatch(line, -1) {
				checked++
				if !strings.Contains(string(designText), "### Seed "+m[1]) {
					t.Errorf("%s:%d cites seed %s, which docs/DESIGN.md §7 does not summarise", rel, i+1, m[1])
				}
			}
			if m := outside.FindString(line); m != "" && !strings.HasSuffix(rel, "citations_test.go") {
				t.Errorf("%s:%d cites %q, outside the repository; cite docs/DESIGN.md or PROTOCOL.md", rel, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d citations found: the walk missed the code", checked)
	}
}
