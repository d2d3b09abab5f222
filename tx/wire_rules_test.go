package tx_test

// Issue 31, "every seed rule holds at every door", on the real binary:
// no secret in any record or any byte on stdout for any target, a
// read-only kernel refuses every apply door, and a commit its target
// refuses after the commit record closes the transaction instead of
// leaving it applying (and unavailable after a restart).

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/secrets/secretstest"
)

// rulesPolicy lets the curator cora do everything in tenant t1 and the
// agent propose in t1/o1/r1.
const rulesPolicy = `{"roles": {"curator": ["cora"]},
 "grants": [
  {"principal_id": "agent-7", "actions": ["read", "propose"],
   "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
  {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
   "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}}
]}
`

var (
	rScope   = map[string]any{"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}
	rAgent   = map[string]any{"principal_id": "agent-7", "roles": []string{}, "purpose": "coding"}
	rCurator = map[string]any{"principal_id": "cora", "roles": []string{"curator"}, "purpose": "curation"}
)

// rMem builds memory params: scope, principal and the rest.
func rMem(principal map[string]any, kv ...any) map[string]any {
	m := map[string]any{"scope": rScope, "principal": principal}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// planted are the secrets of these tests, one of each kind the scanner
// knows by shape, from secretstest.
type planted struct {
	aws, github, key string
	keyLine          string // a body line of key: what must not appear
}

func plant() planted {
	sec := secretstest.Secrets(3)
	return planted{aws: sec[0].Secret, github: sec[1].Secret, key: sec[2].Secret, keyLine: sec[2].Needle}
}

func (s planted) needles() []string { return []string{s.aws, s.github, s.keyLine} }

// wire records every byte a kernel wrote to stdout through it.
type wire struct {
	p   *harness.Proc
	out bytes.Buffer
}

func (w *wire) call(method string, params any) map[string]any {
	w.p.T.Helper()
	resp, notes := w.p.Call(method, params)
	for _, n := range notes {
		w.out.Write(n.Raw)
		w.out.WriteByte('\n')
	}
	b, _ := json.Marshal(resp)
	w.out.Write(b)
	w.out.WriteByte('\n')
	return resp
}

func (w *wire) result(method string, params any) map[string]any {
	w.p.T.Helper()
	resp := w.call(method, params)
	res, ok := resp["result"].(map[string]any)
	if !ok {
		w.p.T.Fatalf("%s: %v", method, resp["error"])
	}
	return res
}

// approveAll answers every pending approval of a result with approve.
func (w *wire) approveAll(txID string, res map[string]any) {
	w.p.T.Helper()
	pend, _ := res["pendingApprovals"].([]any)
	for _, a := range pend {
		w.result("approval/respond", map[string]any{"transactionId": txID,
			"approvalRequestId": a.(map[string]any)["approvalRequestId"], "decision": "approve"})
	}
}

// applyTx runs apply/execute on txID until it is applied, approving what
// it asks for.
func (w *wire) applyTx(txID string) {
	w.p.T.Helper()
	for range 3 {
		res := w.result("apply/execute", map[string]any{"transactionId": txID})
		if res["ok"] == true {
			return
		}
		w.approveAll(txID, res)
	}
	w.p.T.Fatalf("apply/execute %s never applied", txID)
}

// assertNoNeedle fails if any needle is in data (what) or in any file
// under dir.
func assertNoNeedle(t *testing.T, needles []string, what string, data []byte, dir string) {
	t.Helper()
	for _, n := range needles {
		if bytes.Contains(data, []byte(n)) {
			i := bytes.Index(data, []byte(n))
			t.Errorf("%s holds a raw secret: …%s…", what, data[max(0, i-200):min(len(data), i+60)])
		}
	}
	files := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, _ := os.ReadFile(p)
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				t.Errorf("%s holds a raw secret", p)
			}
		}
		return nil
	})
	if files == 0 {
		t.Errorf("no file under %s: nothing was checked", dir)
	}
}

// startRules starts a kernel on ws and dataDir with the memory policy and
// extra flags, initialized.
func startRules(t *testing.T, ws, dataDir string, extra ...string) *harness.Proc {
	t.Helper()
	pol := filepath.Join(filepath.Dir(dataDir), "policy.json")
	if err := os.WriteFile(pol, []byte(rulesPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, append([]string{"serve", "--workspace", ws, "--data-dir", dataDir, "--memory-policy", pol, "--log-level", "info"}, extra...)...)
	p.Initialize()
	return p
}

// TestNoSecretStoredOrEmitted plants secrets in a workspace file's
// content, a remove_todo_multi needle, a document patch's values, a memory
// proposal's body and a file path, proposes and applies each, and checks
// every file under the data dir's transactions/ and every byte on stdout
// (answers and notifications, tx/status and tx/events included) for the
// raw secrets, before and after a restart. Only the targets get the real
// bytes: the workspace file and kernel.db. A path holding a secret is
// refused (-32005, secret-in-name) without the secret in the error.
func TestNoSecretStoredOrEmitted(t *testing.T) {
	t.Parallel()
	s := plant()
	ws, dataDir := t.TempDir(), filepath.Join(t.TempDir(), "data")
	os.WriteFile(filepath.Join(ws, "notes.md"), []byte("# Notes\n\nkeep\nTODO rotate "+s.github+"\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "backlog"), 0o755)
	os.WriteFile(filepath.Join(ws, "backlog", "cache.md"), []byte("# Cache\n\nThe cache is write-through.\n"), 0o644)
	p := startRules(t, ws, dataDir)
	w := &wire{p: p}
	var txs []string

	// Workspace: a file whose content holds the AWS key and the private key.
	content := "aws_access_key_id = " + s.aws + "\n" + s.key
	res := w.result("turn/start", map[string]any{"proposal": map[string]any{"kind": "files",
		"files": []any{map[string]any{"path": "deploy.env", "content": content}}},
		"plan": "write " + s.aws})
	txs = append(txs, harness.Str(res["transactionId"]))
	w.applyTx(txs[len(txs)-1])
	if got, _ := os.ReadFile(filepath.Join(ws, "deploy.env")); string(got) != content {
		t.Fatalf("the workspace did not get the exact bytes: %q", got)
	}
	// Workspace: a needle holding the GitHub token.
	res = w.result("turn/start", map[string]any{"proposal": map[string]any{"kind": "remove_todo_multi",
		"needle": "TODO rotate " + s.github, "targetFiles": []string{"notes.md"}}})
	txs = append(txs, harness.Str(res["transactionId"]))
	w.applyTx(txs[len(txs)-1])

	// A path holding a secret is refused, and the error does not quote it.
	resp := w.call("turn/start", map[string]any{"proposal": map[string]any{"kind": "files",
		"files": []any{map[string]any{"path": "conf/" + s.github + ".env", "content": "x\n"}}}})
	if code, data := harness.RPCError(resp); code != -32005 || data["reason"] != "secret-in-name" {
		t.Fatalf("a path holding a token: %v, want -32005 secret-in-name", resp)
	}

	// Document: a patch whose values hold the AWS key and the private key.
	w.result("doc/create", map[string]any{"docId": "deal", "docType": "json", "content": map[string]any{"creds": map[string]any{}}})
	env := map[string]any{"patch_id": "p1", "expected_revision": 0, "operations": []any{
		map[string]any{"op": "add", "path": "/creds/aws", "value": s.aws},
		map[string]any{"op": "add", "path": "/creds/key", "value": s.key},
		map[string]any{"op": "add", "path": "/creds/cfg", "value": map[string]any{"api_key": s.github}}}}
	val := w.result("patch/validate", map[string]any{"docId": "deal", "patch": env})
	vid := harness.Str(val["validationId"])
	txs = append(txs, vid)
	for range 3 {
		ap := w.result("patch/apply", map[string]any{"validationId": vid, "patch": env})
		if ap["ok"] == true || ap["revision"] == float64(1) && ap["pendingApprovals"] == nil {
			break
		}
		w.approveAll(vid, ap)
	}
	if doc := w.result("doc/get", map[string]any{"docId": "deal"}); harness.Num(doc["revision"]) != 1 {
		t.Fatalf("the patch did not apply: %v", doc)
	}

	// Memory: a proposal whose body holds the GitHub token, accepted.
	w.result("memory/ingest", rMem(rCurator, "path", "."))
	rc := w.result("memory/read_context", rMem(rAgent, "element_id", "backlog/cache.md"))
	item := rc["items"].([]any)[0].(map[string]any)
	prop := w.result("memory/propose", rMem(rAgent, "element_id", item["element_id"], "target_version_id", item["version_id"],
		"body", "# Cache\n\nUse token "+s.github+" and key "+s.aws+".\n", "summary", "token "+s.github,
		"provenance", map[string]any{"actor_type": "agent", "actor_id": "agent-7", "tool_id": "test"}))
	acc := w.result("memory/accept", rMem(rCurator, "proposal_id", prop["proposal_id"]))
	txs = append(txs, harness.Str(acc["transaction_id"]))

	for _, id := range txs {
		w.result("tx/status", map[string]any{"transactionId": id})
		w.result("tx/events", map[string]any{"transactionId": id, "afterSeq": 0})
	}
	w.result("tx/list", map[string]any{})
	if !bytes.Contains(w.out.Bytes(), []byte("[REDACTED:")) {
		t.Fatal("no byte on stdout carries a redaction marker: the secrets were not where this test planted them")
	}
	assertNoNeedle(t, s.needles(), "stdout", w.out.Bytes(), filepath.Join(dataDir, "transactions"))
	p.Stop()
	db, _ := filepath.Glob(filepath.Join(dataDir, "kernel.db*"))
	var dbBytes []byte
	for _, f := range db {
		b, _ := os.ReadFile(f)
		dbBytes = append(dbBytes, b...)
	}
	if !bytes.Contains(dbBytes, []byte(s.aws)) {
		t.Error("kernel.db does not hold the document's exact value: the target did not get the real bytes")
	}

	// After a restart, every answer is still clean.
	p = startRules(t, ws, dataDir)
	w = &wire{p: p}
	for _, id := range txs {
		w.result("tx/status", map[string]any{"transactionId": id})
		w.result("tx/events", map[string]any{"transactionId": id, "afterSeq": 0})
	}
	assertNoNeedle(t, s.needles(), "stdout after a restart", w.out.Bytes(), filepath.Join(dataDir, "transactions"))
	p.Stop()
}

// TestReadOnlyRefusesEveryApplyDoor: a kernel started with --sandbox
// read-only refuses, with -32004 and data.reason "read-only", every door
// that applies: apply/execute of a workspace proposal and of a json_patch,
// patch/apply, patchset/decide accepted, memory/accept, memory/promote and
// memory/ingest; and nothing changes. Everything was proposed by a
// writable kernel on the same data dir before.
func TestReadOnlyRefusesEveryApplyDoor(t *testing.T) {
	t.Parallel()
	ws, dataDir := t.TempDir(), filepath.Join(t.TempDir(), "data")
	os.MkdirAll(filepath.Join(ws, "backlog"), 0o755)
	os.WriteFile(filepath.Join(ws, "backlog", "cache.md"), []byte("# Cache\n\nThe cache is write-through.\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "backlog", "auth.md"), []byte("# Auth\n\nTokens expire.\n"), 0o644)
	p := startRules(t, ws, dataDir)
	w := &wire{p: p}
	wsTx := harness.Str(w.result("turn/start", map[string]any{"proposal": map[string]any{"kind": "files",
		"files": []any{map[string]any{"path": "new.txt", "content": "hello\n"}}}})["transactionId"])
	w.result("doc/create", map[string]any{"docId": "d", "docType": "json", "content": map[string]any{"a": 1}})
	env := map[string]any{"patch_id": "p1", "expected_revision": 0, "operations": []any{map[string]any{"op": "replace", "path": "/a", "value": 2}}}
	vid := harness.Str(w.result("patch/validate", map[string]any{"docId": "d", "patch": env})["validationId"])
	docTx := harness.Str(w.result("turn/start", map[string]any{"proposal": map[string]any{"kind": "json_patch", "docId": "d",
		"patch": map[string]any{"patch_id": "p2", "expected_revision": 0, "operations": []any{map[string]any{"op": "replace", "path": "/a", "value": 3}}}}})["transactionId"])
	w.result("doc/create", map[string]any{"docId": "pancakes", "docType": "recipe", "content": map[string]any{"title": "Pancakes",
		"steps": []any{map[string]any{"id": "s1", "text": "Whisk", "status": "todo"}}, "ingredients": []any{map[string]any{"id": "i1", "text": "2 eggs"}},
		"notes": []any{}, "userDefaults": map[string]any{"hardAvoids": []any{}, "portions": 2}}})
	w.result("patchset/propose", map[string]any{"docId": "pancakes", "recipeVersion": 0,
		"patchSet": map[string]any{"patchSetId": "ps1", "patches": []any{map[string]any{"op": "add_note", "text": "Serve warm"}}}})
	w.result("memory/ingest", rMem(rCurator, "path", "."))
	// One accepted version waits for a promote; one proposal for an accept.
	var props []string
	for _, el := range []string{"backlog/cache.md", "backlog/auth.md"} {
		item := w.result("memory/read_context", rMem(rAgent, "element_id", el))["items"].([]any)[0].(map[string]any)
		props = append(props, harness.Str(w.result("memory/propose", rMem(rAgent, "element_id", item["element_id"], "target_version_id", item["version_id"],
			"body", "# "+el+"\n\nchanged\n", "summary", "change", "provenance", map[string]any{"actor_type": "agent", "actor_id": "agent-7", "tool_id": "test"}))["proposal_id"]))
	}
	w.result("memory/accept", rMem(rCurator, "proposal_id", props[0]))
	p.Stop()

	p = startRules(t, ws, dataDir, "--sandbox", "read-only")
	w = &wire{p: p}
	doors := []struct {
		name   string
		method string
		params map[string]any
	}{
		{"apply/execute of a workspace proposal", "apply/execute", map[string]any{"transactionId": wsTx}},
		{"apply/execute of a json_patch", "apply/execute", map[string]any{"transactionId": docTx}},
		{"patch/apply", "patch/apply", map[string]any{"validationId": vid, "patch": env}},
		{"patchset/decide accepted", "patchset/decide", map[string]any{"patchSetId": "ps1", "decision": "accepted"}},
		{"memory/accept", "memory/accept", rMem(rCurator, "proposal_id", props[1])},
		{"memory/promote", "memory/promote", rMem(rCurator)},
		{"memory/ingest", "memory/ingest", rMem(rCurator, "path", ".")},
	}
	for _, d := range doors {
		resp := w.call(d.method, d.params)
		code, data := harness.RPCError(resp)
		if code != -32004 || data["reason"] != "read-only" {
			t.Errorf("%s in a read-only kernel: %v, want -32004 read-only", d.name, resp)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Error("the workspace was written")
	}
	for _, doc := range []string{"d", "pancakes"} {
		if got := w.result("doc/get", map[string]any{"docId": doc}); harness.Num(got["revision"]) != 0 {
			t.Errorf("document %s moved to revision %v", doc, got["revision"])
		}
	}
	if st := w.result("memory/proposal", rMem(rCurator, "proposal_id", props[1])); st["status"] != "open" {
		t.Errorf("the proposal was decided: %v", st["status"])
	}
	if bl := w.result("memory/baselines", rMem(rCurator)); len(bl["pointer_history"].([]any)) != 1 {
		t.Errorf("the published pointer moved: %v", bl["pointer_history"])
	}
	for _, id := range []string{wsTx, docTx, vid} {
		if st := w.result("tx/status", map[string]any{"transactionId": id}); st["state"] != "proposed" {
			t.Errorf("%s is %v, want proposed", id, st["state"])
		}
	}
	p.Stop()
}

// TestRefusedCommitClosed is seed 000's finding: a json_patch applied with
// patch_id "patchset:ps2" takes the patch-log key of the recipe PatchSet
// ps2, so accepting that PatchSet used to pass every check before the
// commit record and be refused (-32014) after it, leaving it applying and,
// after a restart, unavailable. The document target now finds the clash
// in CheckBase, before the commit point (the transaction stays proposed);
// where a target still refuses after it, the engine closes the
// transaction (tx/close reason failed; tx TestRefusedCommitRolledBack).
// Either way it is never applying, nothing changed, and a restart neither
// logs "recovery failed" nor leaves it unavailable.
func TestRefusedCommitClosed(t *testing.T) {
	t.Parallel()
	ws, dataDir := t.TempDir(), filepath.Join(t.TempDir(), "data")
	p := startRules(t, ws, dataDir, "--approval-policy", "never", "--document-approval-policy", "never")
	w := &wire{p: p}
	w.result("doc/create", map[string]any{"docId": "pancakes", "docType": "recipe", "content": map[string]any{"title": "Pancakes",
		"steps": []any{map[string]any{"id": "s1", "text": "Whisk", "status": "todo"}}, "ingredients": []any{map[string]any{"id": "i1", "text": "2 eggs"}},
		"notes": []any{}, "userDefaults": map[string]any{"hardAvoids": []any{}, "portions": 2}}})
	env := map[string]any{"patch_id": "patchset:ps2", "expected_revision": 0, "operations": []any{map[string]any{"op": "replace", "path": "/userDefaults/portions", "value": 4}}}
	vid := harness.Str(w.result("patch/validate", map[string]any{"docId": "pancakes", "patch": env})["validationId"])
	if ap := w.result("patch/apply", map[string]any{"validationId": vid, "patch": env}); ap["ok"] != true {
		t.Fatalf("patch/apply: %v", ap)
	}
	ps := w.result("patchset/propose", map[string]any{"docId": "pancakes", "recipeVersion": 1,
		"patchSet": map[string]any{"patchSetId": "ps2", "patches": []any{map[string]any{"op": "add_note", "text": "Serve cold"}}}})
	txID := harness.Str(ps["transactionId"])
	resp := w.call("patchset/decide", map[string]any{"patchSetId": "ps2", "decision": "accepted"})
	if code, _ := harness.RPCError(resp); code != -32014 {
		t.Fatalf("patchset/decide: %v, want -32014", resp)
	}
	closed := func(w *wire) {
		t.Helper()
		st := w.result("tx/status", map[string]any{"transactionId": txID})
		switch st["state"] {
		case "proposed": // refused before its commit record
		case "closed":
			evs := w.result("tx/events", map[string]any{"transactionId": txID, "afterSeq": 0})["events"].([]any)
			last := evs[len(evs)-1].(map[string]any)
			if last["type"] != "tx/close" || last["reason"] != "failed" {
				t.Fatalf("last event %v, want tx/close failed", last)
			}
		default:
			t.Fatalf("the refused transaction is %v, want proposed (refused before the commit point) or closed", st["state"])
		}
		if doc := w.result("doc/get", map[string]any{"docId": "pancakes"}); harness.Num(doc["revision"]) != 1 || len(doc["content"].(map[string]any)["notes"].([]any)) != 0 {
			t.Fatalf("the refused commit changed the recipe: %v", doc)
		}
	}
	closed(w)
	p.Stop()
	p = startRules(t, ws, dataDir)
	w = &wire{p: p}
	closed(w)
	list := w.result("tx/list", map[string]any{})
	for _, row := range list["transactions"].([]any) {
		if r := row.(map[string]any); r["transactionId"] == txID && r["state"] != "closed" && r["state"] != "proposed" {
			t.Fatalf("tx/list shows it %v", r["state"])
		}
	}
	p.Stop()
	if strings.Contains(p.StderrText(), "recovery failed") || !strings.Contains(p.StderrText(), "refused=0") {
		t.Fatalf("the restart did not recover cleanly:\n%s", p.StderrText())
	}
}
