// TestTurnStartKinds was e2e/host's: it checks what initialize and
// turn/start answer (kernel.services.turnStart, tx.Engine.Propose), which
// needs no process, so it runs the command line in-process
// (harness.Serve).

package kernel_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// startKinds runs a kernel in-process on a fresh workspace and data dir,
// and returns it with initialize's capabilities.
func startKinds(t *testing.T) (*harness.Proc, map[string]any) {
	t.Helper()
	p := harness.Serve(t, "serve", "--workspace", t.TempDir(), "--data-dir", filepath.Join(t.TempDir(), "data"))
	res := p.MustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "test"}})
	caps, _ := res["capabilities"].(map[string]any)
	return p, caps
}

// kindStrs returns a decoded JSON array of strings.
func kindStrs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestTurnStartKinds: turn/start's unknown-kind error lists exactly the
// kinds initialize's proposalKinds gives (never memory's internal ones),
// and json_patch, which it lists, proposes a document patch.
func TestTurnStartKinds(t *testing.T) {
	t.Parallel()
	p, caps := startKinds(t)
	defer p.Stop()
	kinds := kindStrs(caps["proposalKinds"])
	for _, kind := range []string{"nope", "memory_promote", "recipe_patchset"} {
		resp, _ := p.Call("turn/start", map[string]any{"proposal": map[string]any{"kind": kind}})
		code, data := harness.RPCError(resp)
		if code != -32602 || data["field"] != "proposal.kind" || data["kind"] != kind {
			t.Fatalf("kind %s: %v", kind, resp)
		}
		msg := harness.Str(resp["error"].(map[string]any)["message"])
		if kind != "recipe_patchset" {
			// recipe_patchset is refused by the kernel before the engine,
			// naming patchset/propose (use-patchset-propose).
			if got := kindStrs(data["accepted"]); !slices.Equal(got, kinds) {
				t.Errorf("kind %s: data.accepted = %v, want proposalKinds %v", kind, got, kinds)
			}
			for _, k := range kinds {
				if !strings.Contains(msg, k) {
					t.Errorf("kind %s: the message does not name %s: %s", kind, k, msg)
				}
			}
		}
		for _, internal := range []string{"memory_accept", "memory_promote", "recipe_patchset"} {
			// The kind sent is named once, in quotes or first; a listed kind is not.
			if rest := strings.Replace(strings.Replace(msg, `"`+kind+`"`, "", 1), kind+" is", "", 1); strings.Contains(rest, internal) {
				t.Errorf("kind %s: the error lists %s, which turn/start refuses: %s", kind, internal, msg)
			}
		}
	}
	if !slices.Contains(kinds, "json_patch") {
		t.Fatalf("proposalKinds %v lacks json_patch", kinds)
	}
	p.MustResult("doc/create", map[string]any{"docId": "d", "docType": "json", "content": map[string]any{"a": 1}})
	res := p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "json_patch", "docId": "d",
		"patch": map[string]any{"patch_id": "p1", "expected_revision": 0, "operations": []any{map[string]any{"op": "replace", "path": "/a", "value": 2}}}}})
	if target, _ := harness.JSONPath(res, "proposal.target"); target != "document" {
		t.Errorf("json_patch by turn/start: proposal.target = %v, want document", target)
	}
	id := harness.Str(res["transactionId"])
	if apply := p.MustResult("apply/execute", map[string]any{"transactionId": id}); apply["ok"] != true {
		t.Fatalf("apply of a json_patch proposed by turn/start: %v", apply)
	}
	if doc := p.MustResult("doc/get", map[string]any{"docId": "d"}); harness.JSONText(doc["content"]) != `{"a":2}` {
		t.Fatalf("document after the apply: %v", doc)
	}
}
