package memory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// Why here: these are start-up refusals, seen as the binary's exit status
// and its output (harness.Command).

// TestMemoryBadPolicy: a malformed --memory-policy stops the binary's
// start-up (a non-zero exit status) with a message naming the file's line
// and the flag, never the first memory call.
func TestMemoryBadPolicy(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	// A malformed policy stops start-up with a message naming the line.
	for _, tc := range []struct{ name, policy, want string }{
		{"syntax", "{\"grants\": [\n  {\"role\": \"curator\",\n   \"actions\": [\"read\"],,\n}]}", ":3:"},
		{"both principal and role", "{\"grants\": [\n {\"role\": \"a\", \"actions\": [\"read\"], \"scope\": {\"tenant_id\": \"*\", \"organization_id\": \"*\", \"repository_id\": \"*\"}},\n {\"role\": \"c\", \"principal_id\": \"x\", \"actions\": [\"read\"],\n  \"scope\": {\"tenant_id\": \"*\", \"organization_id\": \"*\", \"repository_id\": \"*\"}}]}", ":3: grant 2"},
		{"unknown action", "{\"grants\": [{\"role\": \"c\", \"actions\": [\"delete\"], \"scope\": {\"tenant_id\": \"*\", \"organization_id\": \"*\", \"repository_id\": \"*\"}}]}", "unknown action \"delete\""},
		{"missing scope level", "{\"grants\": [{\"role\": \"c\", \"actions\": [\"read\"], \"scope\": {\"tenant_id\": \"*\", \"repository_id\": \"*\"}}]}", "scope.organization_id is missing"},
	} {
		pol := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(pol, []byte(tc.policy), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := harness.Command(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(t.TempDir(), "d"), "--memory-policy", pol).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "policy.json"+tc.want) && !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "--memory-policy") {
			t.Fatalf("%s: start-up gave %v\n%s\nwant it to stop naming %q", tc.name, err, out, tc.want)
		}
	}
}

// TestTeamMemorySuperuserRefused: serving memory as a PostgreSQL
// superuser (row-level security does not bind it) fails the binary's
// start-up, naming the reason. The rest of the serving-role story is
// store/postgres TestTeamMemoryRoles.
func TestTeamMemorySuperuserRefused(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	ws := t.TempDir()
	smallBacklog(t, ws)

	// A superuser URL fails the start-up, naming the reason.
	out, err := harness.Command(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(t.TempDir(), "d"), "--memory-store", srv.Admin()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "superuser") || !strings.Contains(string(out), "row-level security") {
		t.Fatalf("serve as a superuser: %v, %s; want a failed start naming the superuser and row-level security", err, out)
	}

}
