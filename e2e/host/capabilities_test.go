package host

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// start starts a kernel on a fresh workspace and data dir with extra
// flags, and returns it with initialize's capabilities.
func start(t *testing.T, extra ...string) (*harness.Proc, map[string]any) {
	t.Helper()
	args := append([]string{"serve", "--workspace", t.TempDir(), "--data-dir", filepath.Join(t.TempDir(), "data")}, extra...)
	p := harness.Start(t, nil, args...)
	res := p.MustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "test"}})
	caps, _ := res["capabilities"].(map[string]any)
	return p, caps
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestInitializeCapabilities: initialize says whether memory is served
// and where, which embedder semantic search uses, and the document types;
// the memory methods are listed only under a policy.
func TestInitializeCapabilities(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pol, []byte(`{"grants": [{"role": "curator", "actions": ["read"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	emb := harness.NewEmbedServer(t, 32)
	cases := []struct {
		name       string
		flags      []string
		enabled    bool
		policyMode string
		model      string
		version    string
		dims       float64
	}{
		{"no policy, built-in embedder", nil, false, "none", "txkernel-lsa", "txkernel-lsa-1", 256},
		{"asserted policy", []string{"--memory-policy", pol}, true, "asserted", "txkernel-lsa", "txkernel-lsa-1", 256},
		{"embedding server", []string{"--embed-url", "http://user:secret@" + strings.TrimPrefix(emb.URL, "http://"), "--embed-model", "mini", "--embed-model-version", "mini-2", "--embed-dims", "32"}, false, "none", "mini", "mini-2", 32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, caps := start(t, c.flags...)
			defer p.Stop()
			mem, _ := caps["memory"].(map[string]any)
			if mem["enabled"] != c.enabled || mem["store"] != "sqlite" || mem["policyMode"] != c.policyMode {
				t.Errorf("capabilities.memory = %v, want enabled %v, store sqlite, policyMode %s", mem, c.enabled, c.policyMode)
			}
			methods := strs(caps["methods"])
			if has := slices.Contains(methods, "memory/read_context"); has != c.enabled {
				t.Errorf("memory/read_context listed = %v with memory enabled = %v: %v", has, c.enabled, methods)
			}
			e, _ := caps["embedding"].(map[string]any)
			if e["model"] != c.model || e["embedding_model_version"] != c.version || e["dims"] != c.dims || harness.Str(e["method"]) == "" {
				t.Errorf("capabilities.embedding = %v, want model %s, version %s, dims %v and a method", e, c.model, c.version, c.dims)
			}
			if strings.Contains(harness.Str(e["method"]), "secret") {
				t.Errorf("capabilities.embedding.method shows the URL's password: %v", e["method"])
			}
			if got := strs(caps["documentTypes"]); !slices.Equal(got, []string{"json", "closing_checklist", "recipe"}) {
				t.Errorf("capabilities.documentTypes = %v", got)
			}
			// Without a policy a memory method is refused, naming the flag.
			if !c.enabled {
				resp, _ := p.Call("memory/read_context", map[string]any{})
				if code, _ := harness.RPCError(resp); code == 0 {
					t.Errorf("memory/read_context without a policy answered %v", resp)
				}
			}
		})
	}
}

// TestTurnStartKinds: turn/start's unknown-kind error lists exactly the
// kinds initialize's proposalKinds gives (never memory's internal ones),
// and json_patch, which it lists, proposes a document patch.
func TestTurnStartKinds(t *testing.T) {
	t.Parallel()
	p, caps := start(t)
	defer p.Stop()
	kinds := strs(caps["proposalKinds"])
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
			if got := strs(data["accepted"]); !slices.Equal(got, kinds) {
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
