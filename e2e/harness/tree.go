package harness

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// ReadTree returns every regular file under dir by its slash path (empty
// when dir is absent). Directories left empty do not count: Codex's
// expected/ trees cannot hold them either. It fails tb on a read error.
func ReadTree(tb testing.TB, dir string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	if _, err := os.Stat(dir); err != nil {
		return out
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TreeNames returns the paths of a ReadTree result, sorted.
func TreeNames(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// WantTree fails tb unless the workspace ws holds exactly the files of
// want (slash path → content).
func WantTree(tb testing.TB, ws string, want map[string]string) {
	tb.Helper()
	got := ReadTree(tb, ws)
	if len(got) != len(want) {
		tb.Errorf("workspace holds %v, want %d files", TreeNames(got), len(want))
	}
	for k, v := range want {
		if string(got[k]) != v {
			tb.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
