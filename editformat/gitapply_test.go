package editformat

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestNormalizeDiffAgreesWithGitApply runs each traditional diff through
// the real `git apply` (outside a repository, as a plain patch tool) and
// through NormalizeDiff and package unidiff: both must accept it and
// leave the same files, or both must refuse it. The diffs are the
// shapes GNU diff and hand-written patches take.
func TestNormalizeDiffAgreesWithGitApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, tc := range []struct {
		name  string
		diff  string
		files map[string]string
	}{
		{"diff -u with timestamps", "--- a/x.txt\t2024-05-01 10:00:00.000000000 +0200\n+++ b/x.txt\t2024-05-02 10:00:00.000000000 +0200\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n", map[string]string{"x.txt": "a\nb\nc\n"}},
		{"names with spaces", "--- a/my dir/x y.txt\t2024-05-01 10:00:00.000000000 +0200\n+++ b/my dir/x y.txt\t2024-05-02 10:00:00.000000000 +0200\n@@ -1 +1 @@\n-a\n+b\n", map[string]string{"my dir/x y.txt": "a\n"}},
		{"epoch add and delete", "--- a/n.txt\t1970-01-01 00:00:00.000000000 +0000\n+++ b/n.txt\t2024-05-02 10:00:00.000000000 +0200\n@@ -0,0 +1,2 @@\n+1\n+2\n--- a/o.txt\t2024-05-02 10:00:00.000000000 +0200\n+++ b/o.txt\t1970-01-01 00:00:00.000000000 +0000\n@@ -1 +0,0 @@\n-o\n", map[string]string{"o.txt": "o\n"}},
		{"epoch in another zone", "--- a/n.txt\t1970-01-01 01:00:00.000000000 +0100\n+++ b/n.txt\t2024-05-02 10:00:00.000000000 +0200\n@@ -0,0 +1 @@\n+1\n", map[string]string{}},
		{"no slash: strip 0", "--- x.txt.orig\n+++ x.txt\n@@ -1 +1 @@\n-a\n+b\n", map[string]string{"x.txt": "a\n"}},
		{"no newline at end", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n", map[string]string{"x": "a"}},
		{"empty context line", "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n", map[string]string{"x": "a\n\nb\n"}},
		{"junk between files", "Index: x\n=====\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\ndiff -ruN a/y b/y\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-c\n+d\n", map[string]string{"x": "a\n", "y": "c\n"}},
		{"offset hunk", "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n b\n-c\n+C\n d\n", map[string]string{"x": "a\nb\nc\nd\n"}},
		{"short hunk", "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", map[string]string{"x": "a\nb\n"}},
		{"context mismatch", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n zz\n-b\n+c\n", map[string]string{"x": "a\nb\n"}},
		{"missing file", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", map[string]string{}},
		{"add over a file", "--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+b\n", map[string]string{"x": "a\n"}},
		{"strip too far", "--- x\n+++ y/x\n@@ -1 +1 @@\n-a\n+b\n", map[string]string{"x": "a\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gitDir, ourFiles := t.TempDir(), map[string]string{}
			for p, c := range tc.files {
				f := filepath.Join(gitDir, filepath.FromSlash(p))
				os.MkdirAll(filepath.Dir(f), 0o755)
				os.WriteFile(f, []byte(c), 0o644)
				ourFiles[p] = c
			}
			cmd := exec.Command("git", "apply", "-")
			cmd.Dir = gitDir
			cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(gitDir))
			cmd.Stdin = stringsReader(tc.diff)
			gitOut, gitErr := cmd.CombinedOutput()

			ours, ourErr := applyOurs(tc.diff, ourFiles)
			if (gitErr == nil) != (ourErr == nil) {
				t.Fatalf("git apply: %v %s; ours: %v", gitErr, gitOut, ourErr)
			}
			if gitErr != nil {
				return
			}
			want := map[string]string{}
			filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					b, _ := os.ReadFile(p)
					rel, _ := filepath.Rel(gitDir, p)
					want[filepath.ToSlash(rel)] = string(b)
				}
				return nil
			})
			if len(want) != len(ours) {
				t.Errorf("git leaves %v, ours %v", want, ours)
			}
			for k, v := range want {
				if ours[k] != v {
					t.Errorf("%s: git %q, ours %q", k, v, ours[k])
				}
			}
		})
	}
}
