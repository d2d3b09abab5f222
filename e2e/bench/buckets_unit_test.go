package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestDurableGitApply checks the durable-git yardstick of
// BenchmarkHostSessionBuckets on a patch that modifies a file, deletes the
// only file of a directory (git removes the directory) and adds a file two
// new directories deep: durableSyncs names each written file and each
// directory whose entries change, and durableGitApply leaves the tree git
// made, fsyncing the parent of the removed directory instead.
func TestDurableGitApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: git is not installed")
	}
	dir := t.TempDir()
	base := map[string]string{"a.txt": "one\n", "gone/only.txt": "bye\n", "keep/k.txt": "k\n"}
	for p, body := range base {
		if err := os.MkdirAll(filepath.Join(dir, "base", filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "base", p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	diff := []byte(`diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-one
+two
diff --git a/gone/only.txt b/gone/only.txt
deleted file mode 100644
--- a/gone/only.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/new/sub/f.txt b/new/sub/f.txt
new file mode 100644
--- /dev/null
+++ b/new/sub/f.txt
@@ -0,0 +1 @@
+fresh
`)
	if err := os.WriteFile(filepath.Join(dir, "patch.diff"), diff, 0o644); err != nil {
		t.Fatal(err)
	}
	c := synthetic(t, "durable", dir, diff)
	tree := filepath.Join(t.TempDir(), "tree")
	if err := os.CopyFS(tree, os.DirFS(filepath.Join(dir, "base"))); err != nil {
		t.Fatal(err)
	}
	got := durableSyncs(tree, c)
	want := []string{"a.txt", "new/sub/f.txt", ".", "gone", "new", "new/sub"}
	if !slices.Equal(got, want) {
		t.Errorf("durableSyncs = %q, want %q", got, want)
	}
	if d := durableGitApply(t, c, tree); d <= 0 {
		t.Errorf("durableGitApply took %v", d)
	}
	after := map[string]string{"a.txt": "two\n", "new/sub/f.txt": "fresh\n", "keep/k.txt": "k\n"}
	for p, body := range after {
		if b, err := os.ReadFile(filepath.Join(tree, p)); err != nil || string(b) != body {
			t.Errorf("%s = %q, %v; want %q", p, b, err, body)
		}
	}
	if _, err := os.Stat(filepath.Join(tree, "gone")); !os.IsNotExist(err) {
		t.Errorf("gone/ is still there (%v): git should have removed the directory it emptied", err)
	}
}
