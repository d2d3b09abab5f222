package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestVolumeTestsListed checks that the Makefile's VOLUME_TESTS and the
// tests that call testenv.Volume are the same: a volume test skips under
// -race, so one missing from the list would run in no make test run, and
// a listed test that is not one would run twice.
func TestVolumeTestsListed(t *testing.T) {
	root := repoRoot(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	// The value may go on over lines that end in a backslash.
	m := regexp.MustCompile(`(?m)^VOLUME_TESTS = ((?:.*\\\n)*.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no VOLUME_TESTS line")
	}
	listed := strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " "))
	slices.Sort(listed)
	calls, err := volumeCalls(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("no test calls testenv.Volume: the search is broken")
	}
	if !slices.Equal(listed, calls) {
		t.Errorf("the Makefile's VOLUME_TESTS is %q; the tests that call testenv.Volume are %q", listed, calls)
	}
}

// volumeCalls returns package:TestName of every test function under root
// that calls testenv.Volume, sorted.
func volumeCalls(root string) ([]string, error) {
	funcLine := regexp.MustCompile(`^func (Test\w*)\(`)
	call := regexp.MustCompile(`^\s*testenv\.Volume\(`)
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn := ""
		for line := range strings.Lines(string(b)) {
			if f := funcLine.FindStringSubmatch(line); f != nil {
				fn = f[1]
			}
			if call.MatchString(line) && fn != "" {
				pkg, _ := filepath.Rel(root, filepath.Dir(path))
				out = append(out, filepath.ToSlash(pkg)+":"+fn)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}
