package tx_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretOnHeaderLikeLineNeedsOverride: on the real binary, a secret
// added on a line whose diff line looks like a file header ("+++ …", for
// a line that starts "++ ") is a secret introduction like any other: the
// proposal reports it at its own line, the reviewable diff does not hold
// it, and the apply waits for a person's secrets_override.
func TestSecretOnHeaderLikeLineNeedsOverride(t *testing.T) {
	t.Parallel()
	s := plant()
	ws, dataDir := t.TempDir(), filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startRules(t, ws, dataDir)
	w := &wire{p: p}
	res := w.result("turn/start", map[string]any{"proposal": map[string]any{"kind": "files",
		"files": []any{map[string]any{"path": "notes.md", "content": "keep\n++ " + s.aws + "\n"}}}})
	prop, _ := res["proposal"].(map[string]any)
	findings, _ := prop["secretFindings"].([]any)
	if prop["containsSecretIntroductions"] != true || len(findings) != 1 {
		t.Fatalf("proposal %v: want one secret introduction", prop)
	}
	if f := findings[0].(map[string]any); f["path"] != "notes.md" || f["line"] != float64(2) {
		t.Errorf("finding %v, want notes.md line 2", f)
	}
	if diff, _ := prop["diff"].(string); strings.Contains(diff, s.aws) || !strings.Contains(diff, "+++ [REDACTED:") {
		t.Errorf("the reviewable diff:\n%s\nwant the added line redacted", diff)
	}
	ap := w.result("apply/execute", map[string]any{"transactionId": res["transactionId"]})
	kinds := map[any]bool{}
	pend, _ := ap["pendingApprovals"].([]any)
	for _, a := range pend {
		kinds[a.(map[string]any)["kind"]] = true
	}
	if ap["ok"] == true || !kinds["secrets_override"] {
		t.Fatalf("apply/execute %v: want it to wait for secrets_override", ap)
	}
}
