package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// serveArgs are the arguments of a kernel on ws and data.
func serveArgs(ws, data string, more ...string) []string {
	return append([]string{"serve", "--workspace", ws, "--data-dir", data, "--log-level", "error"}, more...)
}

// startUp runs a kernel on ws and data with stdin closed at once and
// returns its exit status and stderr: what a refused start-up prints.
func startUp(t *testing.T, ws, data string) (int, string) {
	t.Helper()
	cmd := harness.Command(t, serveArgs(ws, data)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return 0, stderr.String()
	}
	if ee, ok := err.(interface{ ExitCode() int }); ok {
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("running the kernel: %v", err)
	return 0, ""
}

// TestLockSurvivesDeletedLockFile deletes kernel.lock while a kernel runs
// (a clean-up script's rm): a second kernel on the same data dir is still
// refused, because the data dir itself is locked, and the first kernel
// keeps serving.
func TestLockSurvivesDeletedLockFile(t *testing.T) {
	t.Parallel()
	ws, data := t.TempDir(), t.TempDir()
	first := harness.Start(t, nil, serveArgs(ws, data)...)
	first.Initialize()
	if err := os.Remove(filepath.Join(data, "kernel.lock")); err != nil {
		t.Fatal(err)
	}
	code, out := startUp(t, ws, data)
	if code != 1 || !strings.Contains(out, "in use by another txkernel") {
		t.Fatalf("second kernel with kernel.lock deleted: exit %d, stderr:\n%s", code, out)
	}
	first.MustResult("tx/list", map[string]any{})
	first.Stop()
	// With the first kernel gone, the data dir is free again.
	second := harness.Start(t, nil, serveArgs(ws, data)...)
	second.Initialize()
	second.Stop()
}

// TestKernelDBIdentity creates kernel.db through a document, then removes
// or empties it between runs: the next start-up is refused with a message
// naming the file and the recovery, and moving kernel.db.id aside (the
// documented recovery for starting afresh) lets the kernel start again.
func TestKernelDBIdentity(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		damage func(db string) error
		want   string
	}{
		{"deleted", os.Remove, "has disappeared"},
		{"emptied", func(db string) error { return os.Truncate(db, 0) }, "is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws, data := t.TempDir(), t.TempDir()
			k := harness.Start(t, nil, serveArgs(ws, data)...)
			k.Initialize()
			k.MustResult("doc/create", map[string]any{"docId": "d", "docType": "json", "content": map[string]any{"a": 1}})
			k.Stop()
			db := filepath.Join(data, "kernel.db")
			if _, err := os.Stat(db + ".id"); err != nil {
				t.Fatalf("no identity file beside kernel.db: %v", err)
			}
			if err := c.damage(db); err != nil {
				t.Fatal(err)
			}
			os.Remove(db + "-wal")
			os.Remove(db + "-shm")
			code, out := startUp(t, ws, data)
			for _, want := range []string{c.want, db, "kernel.db.id", "Recovery:", "restore"} {
				if code != 1 || !strings.Contains(out, want) {
					t.Fatalf("start-up on a %s kernel.db: exit %d, want 1 and %q in stderr:\n%s", c.name, code, want, out)
				}
			}
			if _, err := os.Stat(db); c.name == "deleted" && err == nil {
				t.Errorf("the refused start-up created %s", db)
			}
			// The recovery for starting afresh: move the identity aside.
			if err := os.Rename(db+".id", db+".id.old"); err != nil {
				t.Fatal(err)
			}
			k = harness.Start(t, nil, serveArgs(ws, data)...)
			k.Initialize()
			resp, _ := k.Call("doc/get", map[string]any{"docId": "d"})
			if resp["error"] == nil {
				t.Errorf("doc/get on the fresh kernel.db found the old document: %v", resp)
			}
			k.Stop()
		})
	}
}
