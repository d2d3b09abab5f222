package workspace_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/workspace"
)

// modeFixture is a fixture whose files have the permission bits modes.
func modeFixture(t *testing.T, policy approvals.Policy, modes map[string]os.FileMode) *fixture {
	t.Helper()
	files := map[string]string{}
	for name := range modes {
		files[name] = name + " content\n"
	}
	f := newFixture(t, files)
	for name, m := range modes {
		if err := os.Chmod(filepath.Join(f.ws, name), m); err != nil {
			t.Fatal(err)
		}
	}
	if policy != f.policy {
		f.policy = policy
		f.open("")
	}
	return f
}

// proposeDiff proposes a unified diff.
func (f *fixture) proposeDiff(diff string) (*tx.Proposed, error) {
	return f.e.Propose(context.Background(), workspace.Proposal(protocol.KindUnifiedDiff, workspace.Input{Diff: &diff}))
}

// modeDiff is a mode-only diff of path.
func modeDiff(path, oldMode, newMode string) string {
	return "diff --git a/" + path + " b/" + path + "\nold mode " + oldMode + "\nnew mode " + newMode + "\n"
}

// perm is a workspace file's permission bits.
func (f *fixture) perm(name string) os.FileMode {
	f.t.Helper()
	fi, err := os.Stat(filepath.Join(f.ws, name))
	if err != nil {
		f.t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestDiffModeRules: a diff may carry only 100644 and 100755 (errs.Invalid
// with the line otherwise); a mode change shows in the canonical diff with
// the file's real bits, has a non-empty patch id of its own, and the apply
// writes exactly the bits the reviewer read.
func TestDiffModeRules(t *testing.T) {
	emptyID := sha256.Sum256(nil)
	for _, tc := range []struct {
		name     string
		path     string
		diff     string
		line     int         // > 0: refused at this line
		shown    string      // the mode lines the reviewer reads
		want     os.FileMode // the bits written
		unchange bool        // the proposal changes nothing
	}{
		{name: "644 to 755", path: "notes.txt", diff: modeDiff("notes.txt", "100644", "100755"),
			shown: "old mode 100644\nnew mode 100755\n", want: 0o755},
		{name: "755 to 644", path: "run.sh", diff: modeDiff("run.sh", "100755", "100644"),
			shown: "old mode 100755\nnew mode 100644\n", want: 0o644},
		{name: "0600 made readable shows its real bits", path: "secret.key", diff: modeDiff("secret.key", "100644", "100644"),
			shown: "old mode 100600\nnew mode 100644\n", want: 0o644},
		{name: "0600 made executable", path: "secret.key", diff: modeDiff("secret.key", "100644", "100755"),
			shown: "old mode 100600\nnew mode 100755\n", want: 0o755},
		{name: "no mode line keeps 0600", path: "secret.key",
			diff: "diff --git a/secret.key b/secret.key\n--- a/secret.key\n+++ b/secret.key\n@@ -1 +1 @@\n-secret.key content\n+rotated\n",
			want: 0o600},
		{name: "no change is no patchset", path: "notes.txt", diff: modeDiff("notes.txt", "100644", "100644"), unchange: true, want: 0o644},
		{name: "100666 refused", path: "notes.txt", diff: modeDiff("notes.txt", "100644", "100666"), line: 3, want: 0o644},
		{name: "100600 refused", path: "secret.key", diff: modeDiff("secret.key", "100600", "100644"), line: 2, want: 0o600},
		{name: "symlink refused", path: "link", diff: "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n", line: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := modeFixture(t, approvals.Never, map[string]os.FileMode{"notes.txt": 0o644, "secret.key": 0o600, "run.sh": 0o755})
			res, err := f.proposeDiff(tc.diff)
			switch {
			case tc.line > 0:
				k, data := errs.KindOf(err)
				if k != errs.Invalid {
					t.Fatalf("propose = %v (kind %q), want %s", err, k, errs.Invalid)
				}
				b, _ := json.Marshal(data)
				var d struct {
					Field, Text, Mode, Reason string
					Line                      int
				}
				json.Unmarshal(b, &d)
				wantText := strings.Split(tc.diff, "\n")[tc.line-1]
				if d.Field != "proposal.diff" || d.Line != tc.line || d.Text != wantText || d.Reason != "mode" {
					t.Errorf("data %s, want field proposal.diff, line %d (%q)", b, tc.line, wantText)
				}
				return
			case tc.unchange:
				if k, _ := errs.KindOf(err); k != errs.Validation {
					t.Fatalf("propose = %v, want the proposal refused as changing nothing", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			p := res.Proposal
			if !strings.Contains(p.Diff, tc.shown) {
				t.Errorf("diff %q does not show %q", p.Diff, tc.shown)
			}
			if p.PatchID == hex.EncodeToString(emptyID[:]) {
				t.Errorf("patch id is the empty diff's")
			}
			if _, err := f.e.Apply(context.Background(), res.TransactionID); err != nil {
				t.Fatal(err)
			}
			if got := f.perm(tc.path); got != tc.want {
				t.Errorf("%s is %o after the apply, want %o", tc.path, got, tc.want)
			}
		})
	}
}

// TestModeChangeFingerprints: mode-only changes have distinct patch ids
// per path and per mode, an approve_for_session of one does not approve
// another, and a deny of one denies no other.
func TestModeChangeFingerprints(t *testing.T) {
	f := modeFixture(t, approvals.Untrusted, map[string]os.FileMode{"notes.txt": 0o644, "secret.key": 0o600, "run.sh": 0o644})
	ctx := context.Background()
	propose := func(diff string) *tx.Proposed {
		t.Helper()
		res, err := f.proposeDiff(diff)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// pending applies id and returns its one pending request.
	pending := func(id string) protocol.ApprovalRequest {
		t.Helper()
		r, err := f.e.Apply(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK || len(r.PendingApprovals) != 1 {
			t.Fatalf("apply %s = %+v, want one pending approval", id, r)
		}
		return r.PendingApprovals[0]
	}
	notes := propose(modeDiff("notes.txt", "100644", "100755"))
	run := propose(modeDiff("run.sh", "100644", "100755"))
	secretX := propose(modeDiff("secret.key", "100644", "100755"))
	secretR := propose(modeDiff("secret.key", "100644", "100644"))
	ids := map[string]string{}
	for name, p := range map[string]*tx.Proposed{"notes": notes, "run": run, "secretX": secretX, "secretR": secretR} {
		if other, dup := ids[p.Proposal.PatchID]; dup {
			t.Errorf("%s and %s share patch id %s", name, other, p.Proposal.PatchID)
		}
		ids[p.Proposal.PatchID] = name
	}

	req := pending(notes.TransactionID)
	if _, err := f.e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: notes.TransactionID, ApprovalRequestID: req.ApprovalRequestID, Decision: protocol.DecisionApproveForSession}); err != nil {
		t.Fatal(err)
	}
	if r, err := f.e.Apply(ctx, notes.TransactionID); err != nil || !r.OK {
		t.Fatalf("apply notes = %+v, %v", r, err)
	}
	// The grant on notes.txt's 644→755 does not cover run.sh's, nor any
	// change of secret.key.
	for _, p := range []*tx.Proposed{run, secretX, secretR} {
		if req := pending(p.TransactionID); req.Fingerprint != p.Proposal.Fingerprint {
			t.Errorf("pending %s, want %s", req.Fingerprint, p.Proposal.Fingerprint)
		}
	}
	if f.perm("secret.key") != 0o600 || f.perm("run.sh") != 0o644 {
		t.Errorf("modes changed without approval: secret.key %o, run.sh %o", f.perm("secret.key"), f.perm("run.sh"))
	}
	// A deny of secret.key's 600→644 denies that change only.
	req = pending(secretR.TransactionID)
	if _, err := f.e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: secretR.TransactionID, ApprovalRequestID: req.ApprovalRequestID, Decision: protocol.DecisionDeny}); err != nil {
		t.Fatal(err)
	}
	req = pending(run.TransactionID)
	if _, err := f.e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: run.TransactionID, ApprovalRequestID: req.ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if r, err := f.e.Apply(ctx, run.TransactionID); err != nil || !r.OK {
		t.Fatalf("apply run.sh after another mode change was denied = %+v, %v", r, err)
	}
	if f.perm("run.sh") != 0o755 {
		t.Errorf("run.sh is %o, want 755", f.perm("run.sh"))
	}
}
