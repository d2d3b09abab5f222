package workspace_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// allOrNothing names the Codex scenarios whose end differs by design: an
// apply_patch proposal is refused whole, so nothing is written where Codex
// writes the sections before the failing one (PROTOCOL.md §4.1).
var allOrNothing = map[string]string{
	"015_failure_after_partial_success_leaves_changes": "Codex writes created.txt, then fails on missing.txt; the kernel refuses the whole patch and writes nothing",
}

// TestCodexScenarios runs every scenario of Codex's apply_patch suite
// (../shared/conformance/codex-apply-patch/scenarios) through the kernel
// (harness.Serve): input/ is copied into an empty workspace, patch.txt is proposed
// as an apply_patch and applied (approval policy never), and the whole
// workspace must end as expected/. A scenario whose expected/ equals its
// input/ must be refused by turn/start and leave the workspace as it was;
// the scenarios in allOrNothing must be refused and leave input/.
func TestCodexScenarios(t *testing.T) {
	root := harness.SharedDir(t, "conformance/codex-apply-patch/scenarios")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		dir := filepath.Join(root, e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			t.Parallel()
			patch, err := os.ReadFile(filepath.Join(dir, "patch.txt"))
			if err != nil {
				t.Fatal(err)
			}
			input, expected := harness.ReadTree(t, filepath.Join(dir, "input")), harness.ReadTree(t, filepath.Join(dir, "expected"))
			_, byDesign := allOrNothing[e.Name()]
			refuse := byDesign || equalTrees(input, expected)
			ws := t.TempDir()
			if len(input) > 0 {
				harness.CopyTree(t, filepath.Join(dir, "input"), ws)
			}
			p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", t.TempDir(), "--approval-policy", "never", "--log-level", "warn")
			p.Initialize()
			resp, _ := p.Call("turn/start", map[string]any{"proposal": map[string]any{"kind": "apply_patch", "patch": string(patch)}})
			if refuse {
				if resp["error"] == nil {
					t.Fatalf("turn/start accepted a patch that must be refused: %v", resp["result"])
				}
				e := resp["error"].(map[string]any)
				if e["data"] == nil {
					t.Errorf("refusal without data: %v", e)
				}
				t.Logf("refused as expected: %v %v", e["code"], e["message"])
				p.Stop()
				if got := harness.ReadTree(t, ws); !equalTrees(got, input) {
					t.Errorf("a refused patch changed the workspace: %v, want input/ %v", harness.TreeNames(got), harness.TreeNames(input))
				}
				return
			}
			res, ok := resp["result"].(map[string]any)
			if !ok {
				t.Fatalf("turn/start refused: %v", resp["error"])
			}
			ap := p.MustResult("apply/execute", map[string]any{"transactionId": res["transactionId"]})
			if ap["ok"] != true {
				t.Fatalf("apply/execute: %v", ap)
			}
			p.Stop()
			harness.CheckNoStaged(t, ws)
			if got := harness.ReadTree(t, ws); !equalTrees(got, expected) {
				t.Errorf("workspace differs from expected/:\n got %q\nwant %q", got, expected)
			}
		})
	}
	if n < 20 {
		t.Fatalf("found %d scenarios, want the 23 of the suite", n)
	}
}

func equalTrees(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
