package memory

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// Why here: a bad --memory-store is a start-up refusal, seen as the
// binary's exit status and its output (harness.Command).

// TestMemoryStoreFlag: --memory-store names where memory lives.
// Anything but sqlite or a postgres:// URL, a malformed URL, or a URL
// that carries a password, fails the start-up with a message naming the
// flag (never the first memory call); a server that cannot be reached
// does not (store/postgres TestTeamMemoryStartWhileDown). A kernel on a
// team's database says so in capabilities.memory.store: store/postgres
// TestMemoryStoreCapability.
func TestMemoryStoreFlag(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for _, bad := range []string{"mysql://db/x", "postgres://nobody@/none?host=/nonexistent-socket-dir&statement_timeout=nonsense"} {
		cmd := harness.Command(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(t.TempDir(), "d"), "--memory-store", bad)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--memory-store") {
			t.Errorf("--memory-store %s: %v, %s; want a failed start naming the flag", bad, err, out)
		}
	}
	// A password on the command line is refused, and not repeated.
	for _, withPassword := range []string{"postgres://u:s3cret@/db?host=/tmp", "postgres://u@/db?host=/tmp&password=s3cret"} {
		out, err := harness.Command(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(t.TempDir(), "d"), "--memory-store", withPassword).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "PGPASSWORD") || strings.Contains(string(out), "s3cret") {
			t.Errorf("--memory-store %s: %v, %s; want a failed start that names PGPASSWORD and hides the password", withPassword, err, out)
		}
	}
}
