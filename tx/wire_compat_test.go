package tx_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// compatFixture is the data dir written by the last release before the
// house restructure (testdata/compat/README.md).
var compatFixture = filepath.Join(harness.RepoRoot, "testdata", "compat", "release-946c92d")

// compatIDs is the fixture's ids.json: which transaction is which.
type compatIDs struct {
	Release   string `json:"release"`
	Pending   string `json:"pending"`
	Completed string `json:"completed"`
	Denied    string `json:"denied"`
}

// TestCompatReleaseDataDir resumes a workspace and data dir written by
// release 946c92d with today's binary (RELIABILITY.md: every byte on disk
// a release wrote stays readable). tx/list shows the fixture's
// transactions in their states; the completed one reads back through
// tx/status and tx/events with its fileChange items intact; the pending
// one is approved and applied and its file changes on disk; the denied
// fingerprint still fails fast, with no new approval asked for; and
// doc/get returns the recipe at revision 1.
func TestCompatReleaseDataDir(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(compatFixture, "ids.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ids compatIDs
	if err := json.Unmarshal(raw, &ids); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	ws, dd := filepath.Join(work, "ws"), filepath.Join(work, "data")
	harness.CopyTree(t, filepath.Join(compatFixture, "ws"), ws)
	harness.CopyTree(t, filepath.Join(compatFixture, "data"), dd)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", dd, "--framing", "ndjson", "--log-level", "warn")
	defer p.Stop()
	p.Initialize()

	// tx/list: the three workspace transactions, in their states (the
	// fourth is the document patch, completed).
	list := p.MustResult("tx/list", map[string]any{})
	states := map[string]string{}
	for _, row := range list["transactions"].([]any) {
		r := row.(map[string]any)
		states[harness.Str(r["transactionId"])] = harness.Str(r["state"])
		if r["error"] != nil {
			t.Errorf("tx/list: %s is unavailable: %v", r["transactionId"], r["error"])
		}
	}
	for id, want := range map[string]string{ids.Pending: "proposed", ids.Completed: "completed", ids.Denied: "denied"} {
		if states[id] != want {
			t.Errorf("tx/list: %s is %q, want %q (all: %v)", id, states[id], want, states)
		}
	}
	if len(states) != 4 {
		t.Errorf("tx/list: %d transactions, want 4: %v", len(states), states)
	}

	// The completed one reads back: status, and its fileChange items, the
	// proposal's and the applied upsert, with their changes.
	st := p.MustResult("tx/status", map[string]any{"transactionId": ids.Completed})
	if st["state"] != "completed" || st["target"] != "workspace" || st["kind"] != "files" {
		t.Errorf("tx/status of the completed transaction: %v", st)
	}
	if files, _ := harness.JSONPath(st, "pointers.proposal.target_files"); harness.JSONText(files) != `["docs/new.txt"]` {
		t.Errorf("tx/status: target_files %s", harness.JSONText(files))
	}
	evs := p.MustResult("tx/events", map[string]any{"transactionId": ids.Completed, "afterSeq": 0})
	var items []string
	for _, ev := range evs["events"].([]any) {
		e := ev.(map[string]any)
		if e["type"] == "turn/item" {
			if it := e["item"].(map[string]any); it["type"] == "fileChange" {
				items = append(items, harness.JSONText(it["changes"])+" applied="+harness.JSONText(it["metadata"].(map[string]any)["applied"]))
			}
		}
		if e["type"] == "apply/complete" && harness.JSONText(e["appliedFiles"]) != `["docs/new.txt"]` {
			t.Errorf("apply/complete: %v", e)
		}
	}
	want := []string{`[{"kind":"add","path":"docs/new.txt"}] applied=false`, `[{"kind":"add","path":"docs/new.txt"}] applied=true`}
	if harness.JSONText(items) != harness.JSONText(want) || harness.Num(evs["lastSeq"]) != 13 {
		t.Errorf("tx/events of the completed transaction: fileChange items %v (want %v), lastSeq %v", items, want, evs["lastSeq"])
	}

	// The pending one: its approval request survived; approve and apply.
	st = p.MustResult("tx/status", map[string]any{"transactionId": ids.Pending})
	pending, _ := st["pendingApprovals"].([]any)
	if len(pending) != 1 {
		t.Fatalf("tx/status of the pending transaction: %v", st)
	}
	apr := harness.Str(pending[0].(map[string]any)["approvalRequestId"])
	p.MustResult("approval/respond", map[string]any{"transactionId": ids.Pending, "approvalRequestId": apr, "decision": "approve"})
	ar := p.MustResult("apply/execute", map[string]any{"transactionId": ids.Pending})
	if ar["ok"] != true || ar["state"] != "completed" || harness.JSONText(ar["appliedFiles"]) != `["README.md"]` {
		t.Fatalf("apply/execute of the pending transaction: %v", ar)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "README.md")); err != nil || string(got) != "hello\ndone\nbye\n" {
		t.Fatalf("README.md after the apply: %q, %v", got, err)
	}

	// The denied fingerprint fails fast: the same change again is refused
	// at its first apply, asking nobody.
	res := p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "files",
		"files": []any{map[string]any{"path": "main.go", "content": "package main\n"}}}})
	again := harness.Str(res["transactionId"])
	resp, _ := p.Call("apply/execute", map[string]any{"transactionId": again})
	code, data := harness.RPCError(resp)
	if code != -32003 || data["transactionId"] != ids.Denied {
		t.Fatalf("apply/execute of the denied patch again: %v", resp)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "main.go")); string(got) != "package main\n\nfunc main() {}\n" {
		t.Fatalf("main.go changed: %q", got)
	}

	// The recipe document, at revision 1 with its patch applied.
	doc := p.MustResult("doc/get", map[string]any{"docId": "pancakes"})
	if harness.Num(doc["revision"]) != 1 {
		t.Fatalf("doc/get: %v", doc)
	}
	if portions, _ := harness.JSONPath(doc, "content.userDefaults.portions"); harness.Num(portions) != 4 {
		t.Fatalf("doc/get: portions %v, want 4: %v", portions, doc)
	}
}
