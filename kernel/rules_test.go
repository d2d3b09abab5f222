package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets/secretstest"
)

// lockedBuffer is an io.Writer safe for the stream's concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// TestNoSecretInAnswersOrNotifications is the table of issue 31 over
// every target kind: a secret of each kind planted in what the target
// changes (a workspace file's content, a remove_todo_multi needle, a
// document patch's value, a memory proposal's body) is, once proposed and
// applied, in no answer the kernel emits (Invoker.Invoke, the path of
// every result), in no notification it writes on its stream, and in no
// file of the data dir's transactions/.
func TestNoSecretInAnswersOrNotifications(t *testing.T) {
	targets := []struct {
		name string
		run  func(t *testing.T, call func(string, any) map[string]any, ws, secret string)
	}{
		{"workspace file", func(t *testing.T, call func(string, any) map[string]any, ws, secret string) {
			res := call("turn/start", map[string]any{"proposal": map[string]any{"kind": "files",
				"files": []any{map[string]any{"path": "deploy.env", "content": "key: " + secret + "\n"}}}, "plan": "add " + secret})
			applyAll(t, call, res["transactionId"])
			if got, _ := os.ReadFile(filepath.Join(ws, "deploy.env")); !bytes.Contains(got, []byte(secret)) {
				t.Fatal("the workspace did not get the exact bytes")
			}
		}},
		{"workspace needle", func(t *testing.T, call func(string, any) map[string]any, ws, secret string) {
			needle := strings.SplitN(secret, "\n", 2)[0]
			os.WriteFile(filepath.Join(ws, "n.txt"), []byte("keep\nTODO "+needle+"\n"), 0o644)
			res := call("turn/start", map[string]any{"proposal": map[string]any{"kind": "remove_todo_multi", "needle": "TODO " + needle, "targetFiles": []string{"n.txt"}}})
			applyAll(t, call, res["transactionId"])
		}},
		{"document value", func(t *testing.T, call func(string, any) map[string]any, ws, secret string) {
			call("doc/create", map[string]any{"docId": "d", "docType": "json", "content": map[string]any{"a": 1}})
			env := map[string]any{"patch_id": "p", "expected_revision": 0, "operations": []any{
				map[string]any{"op": "add", "path": "/cred", "value": secret},
				map[string]any{"op": "add", "path": "/cfg", "value": map[string]any{"api_key": secret}}}}
			val := call("patch/validate", map[string]any{"docId": "d", "patch": env})
			for range 3 {
				ap := call("patch/apply", map[string]any{"validationId": val["validationId"], "patch": env})
				pend, _ := ap["pendingApprovals"].([]any)
				if len(pend) == 0 {
					break
				}
				for _, a := range pend {
					call("approval/respond", map[string]any{"transactionId": val["validationId"], "approvalRequestId": a.(map[string]any)["approvalRequestId"], "decision": "approve"})
				}
			}
			if doc := call("doc/get", map[string]any{"docId": "d"}); doc["revision"] != float64(1) {
				t.Fatalf("the patch did not apply: %v", doc)
			}
		}},
		{"memory body", func(t *testing.T, call func(string, any) map[string]any, ws, secret string) {
			os.MkdirAll(filepath.Join(ws, "backlog"), 0o755)
			os.WriteFile(filepath.Join(ws, "backlog", "cache.md"), []byte("# Cache\n\nThe cache is write-through.\n"), 0o644)
			who := "cora"
			req := func(kv ...any) map[string]any {
				m := map[string]any{"scope": map[string]any{"tenant_id": "t", "organization_id": "o", "repository_id": "r"},
					"principal": map[string]any{"principal_id": who, "roles": []string{"curator"}, "purpose": "curation"}}
				for i := 0; i+1 < len(kv); i += 2 {
					m[kv[i].(string)] = kv[i+1]
				}
				return m
			}
			call("memory/ingest", req("path", "."))
			item := call("memory/read_context", req("element_id", "backlog/cache.md"))["items"].([]any)[0].(map[string]any)
			who = "alex" // the proposer; cora decides
			prop := call("memory/propose", req("element_id", item["element_id"], "target_version_id", item["version_id"],
				"body", "# Cache\n\n"+secret+"\n", "summary", "cache",
				"provenance", map[string]any{"actor_type": "agent", "actor_id": "a", "tool_id": "t"}))
			who = "cora"
			acc := call("memory/accept", req("proposal_id", prop["proposal_id"]))
			call("tx/status", map[string]any{"transactionId": acc["transaction_id"]})
			call("memory/read_context", req("element_id", "backlog/cache.md"))
		}},
	}
	for _, tg := range targets {
		for _, s := range secretstest.Secrets(4) {
			if tg.name == "workspace needle" && s.Kind == "private-key" {
				continue // a needle is one line; a key's marker line alone is no secret
			}
			t.Run(tg.name+"/"+s.Kind, func(t *testing.T) {
				srv := newTestServer(t)
				var out lockedBuffer
				srv.stream = NewStream(strings.NewReader(""), &out, Config{})
				srv.cfg.Engine.SetNotify(func(ev protocol.Event) { srv.stream.Notify(ev.Type, ev) })
				iv := &Invoker{s: &srv.services}
				var answers bytes.Buffer
				call := func(method string, params any) map[string]any {
					t.Helper()
					raw, _ := json.Marshal(params)
					res, perr := iv.Invoke(context.Background(), method, raw, protocol.Session{})
					if perr != nil {
						t.Fatalf("%s: %v", method, perr)
					}
					answers.Write(res)
					var m map[string]any
					_ = json.Unmarshal(res, &m)
					return m
				}
				tg.run(t, call, srv.cfg.Workspace.Dir(), s.Secret)
				emitted := append(answers.Bytes(), out.bytes()...)
				if bytes.Contains(emitted, []byte(s.Needle)) {
					i := bytes.Index(emitted, []byte(s.Needle))
					t.Errorf("an answer or notification holds the raw secret: …%s…", emitted[max(0, i-150):i])
				}
				if !bytes.Contains(emitted, []byte("[REDACTED:")) {
					t.Error("nothing emitted carries a redaction marker: the secret was not where this test planted it")
				}
				if len(out.bytes()) == 0 {
					t.Error("no notification was written")
				}
				filepath.WalkDir(filepath.Join(srv.cfg.Engine.DataDir(), "transactions"), func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(s.Needle)) {
							t.Errorf("%s holds the raw secret", p)
						}
					}
					return err
				})
			})
		}
	}
}

// applyAll applies transaction id, approving what it asks for.
func applyAll(t *testing.T, call func(string, any) map[string]any, id any) {
	t.Helper()
	for range 3 {
		res := call("apply/execute", map[string]any{"transactionId": id})
		if res["ok"] == true {
			return
		}
		for _, a := range res["pendingApprovals"].([]any) {
			call("approval/respond", map[string]any{"transactionId": id, "approvalRequestId": a.(map[string]any)["approvalRequestId"], "decision": "approve"})
		}
	}
	t.Fatalf("%v never applied", id)
}
