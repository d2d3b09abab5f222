// These tests drive transactions over the wire, on the kernel's command line
// run in-process (e2e/harness.Serve): non-UTF-8 and CR bytes through
// diffBase64, concurrent applies over one connection, tx/list paging and
// `txkernel prune`, the secrets and read-only rules at every apply door,
// and a data dir written by a release.

package tx_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestNonUTF8AndCR proposes, through diffBase64, a change to a Latin-1 file
// with CRLF line endings and a CR inside a line, adds a file without a
// final newline, and checks the workspace gets the exact bytes. The
// proposal's diff comes back as diffBase64 because it is not UTF-8.
func TestNonUTF8AndCR(t *testing.T) {
	t.Parallel()
	ws, dd := t.TempDir(), t.TempDir()
	base := []byte("caf\xe9\r\nmid\rline\r\nend\r\n")
	if err := os.WriteFile(filepath.Join(ws, "latin1.txt"), base, 0o644); err != nil {
		t.Fatal(err)
	}
	diff := "diff --git a/latin1.txt b/latin1.txt\n--- a/latin1.txt\n+++ b/latin1.txt\n@@ -1,3 +1,3 @@\n caf\xe9\r\n-mid\rline\r\n+na\xefve\rline\r\n end\r\n" +
		"diff --git a/raw.bin b/raw.bin\nnew file mode 100644\n--- /dev/null\n+++ b/raw.bin\n@@ -0,0 +1 @@\n+\xff\xfe\x00tail\n\\ No newline at end of file\n"
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", dd, "--approval-policy", "never")
	p.Initialize()
	res := p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "unified_diff", "diffBase64": base64.StdEncoding.EncodeToString([]byte(diff))}})
	prop := res["proposal"].(map[string]any)
	if _, ok := prop["diffBase64"]; !ok {
		t.Fatalf("a non-UTF-8 diff must come back as diffBase64: %v", prop)
	}
	ap := p.MustResult("apply/execute", map[string]any{"transactionId": res["transactionId"]})
	if ap["ok"] != true {
		t.Fatalf("apply: %v", ap)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "latin1.txt"))
	if want := "caf\xe9\r\nna\xefve\rline\r\nend\r\n"; string(got) != want {
		t.Fatalf("latin1.txt = %q, want %q", got, want)
	}
	got, _ = os.ReadFile(filepath.Join(ws, "raw.bin"))
	if want := "\xff\xfe\x00tail"; string(got) != want {
		t.Fatalf("raw.bin = %q, want %q", got, want)
	}
}
