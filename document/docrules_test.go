package document_test

// Seed 000's and seed 003's rules through the kernel's methods (issue 31,
// moved here from e2e/docrules by issue 35 part 5): a PROPOSED envelope
// never applies, a recipe PatchSet applies only by patchset/decide, a
// tx/close of a pending PatchSet is its decision "expired", lifting a hard
// avoid waits for a person whatever the approval policy, an applied
// patch_id is refused at propose, and a patch that changes nothing is
// refused. Each test runs the kernel's command line in this process
// (harness.Serve): they need its answers, not a process.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// JSON-RPC codes (PROTOCOL.md §9).
const (
	codeValidation  = -32005
	codeClosed      = -32006
	codeIdempotency = -32014
	codePermission  = -32018
)

// serve runs the kernel in this process (harness.Serve) on a fresh
// workspace and data dir, with extra flags, and initializes it.
func serve(t *testing.T, flags ...string) (*harness.Proc, string) {
	t.Helper()
	work := t.TempDir()
	ws, data := filepath.Join(work, "ws"), filepath.Join(work, "data")
	os.Mkdir(ws, 0o755)
	p := harness.Serve(t, append([]string{"serve", "--workspace", ws, "--data-dir", data, "--log-level", "error"}, flags...)...)
	t.Cleanup(p.Stop)
	p.Initialize()
	return p, work
}

// salad is a recipe whose user hard-avoids walnuts and goose.
var salad = map[string]any{
	"title": "Salad",
	"steps": []any{
		map[string]any{"id": "s1", "text": "Wash the leaves", "status": "done"},
		map[string]any{"id": "s2", "text": "Scatter the walnuts", "status": "todo"},
	},
	"ingredients":  []any{map[string]any{"id": "i1", "text": "1 lettuce"}},
	"userDefaults": map[string]any{"hardAvoids": []any{"walnut", "goose"}, "portions": 2},
}

// rpcEnvelope is a seed 000 envelope as the wire carries it.
func rpcEnvelope(patchID string, rev int, mode string, ops ...any) map[string]any {
	env := map[string]any{"patch_id": patchID, "expected_revision": rev, "operations": append([]any{}, ops...)}
	if mode != "" {
		env["mode"] = mode
	}
	return env
}

func op(o, path string, value any) map[string]any {
	m := map[string]any{"op": o, "path": path}
	if value != nil {
		m["value"] = value
	}
	return m
}

// wantError fails unless resp is an error with code; it returns the data.
func wantError(t *testing.T, what string, resp map[string]any, code int) map[string]any {
	t.Helper()
	got, data := harness.RPCError(resp)
	if got != code {
		t.Fatalf("%s: %v, want error %d", what, harness.JSONText(resp), code)
	}
	return data
}

func revision(p *harness.Proc, docID string) int {
	return harness.Num(p.MustResult("doc/get", map[string]any{"docId": docID})["revision"])
}

// TestProposedEnvelopeNeverApplies: seed 000's PROPOSED mode stores the
// intent without mutating the document; apply/execute on its validation
// id is refused (issue 31: it applied with no person asked).
func TestProposedEnvelopeNeverApplies(t *testing.T) {
	t.Parallel()
	p, _ := serve(t)
	p.MustResult("doc/create", map[string]any{"docId": "deal", "docType": "json", "content": map[string]any{"status": "OPEN"}})
	env := rpcEnvelope("p1", 0, "PROPOSED", op("replace", "/status", "CLOSED"))
	v := p.MustResult("patch/validate", map[string]any{"docId": "deal", "patch": env})
	id := harness.Str(v["validationId"])
	resp, _ := p.Call("apply/execute", map[string]any{"transactionId": id})
	if data := wantError(t, "apply/execute of a PROPOSED envelope", resp, codeValidation); data["reason"] != "proposed-mode" {
		t.Errorf("data = %v, want reason proposed-mode", data)
	}
	if res := p.MustResult("patch/apply", map[string]any{"validationId": id, "patch": env}); res["proposed"] != true || res["ok"] == true {
		t.Errorf("patch/apply of a PROPOSED envelope = %v", res)
	}
	if rev := revision(p, "deal"); rev != 0 {
		t.Errorf("revision %d after a PROPOSED envelope, want 0", rev)
	}
}

// TestPatchSetOnlyByDecide: apply/execute on a PatchSet's transaction is
// refused and points at patchset/decide; approval/respond has nothing to
// approve; patchset/decide applies it and records the decision.
func TestPatchSetOnlyByDecide(t *testing.T) {
	t.Parallel()
	p, _ := serve(t, "--approval-policy", "never", "--document-approval-policy", "never")
	p.MustResult("doc/create", map[string]any{"docId": "salad", "docType": "recipe", "content": salad})
	pr := p.MustResult("patchset/propose", map[string]any{"docId": "salad", "recipeVersion": 0,
		"patchSet": map[string]any{"patchSetId": "ps1", "patches": []any{map[string]any{"op": "add_ingredient", "text": "2 tomatoes"}}}})
	txID := harness.Str(pr["transactionId"])
	resp, _ := p.Call("apply/execute", map[string]any{"transactionId": txID})
	data := wantError(t, "apply/execute of a PatchSet", resp, codePermission)
	if data["method"] != "patchset/decide" || data["patchSetId"] != "ps1" || data["reason"] != "patchset-decide-only" {
		t.Errorf("data = %v, want method patchset/decide", data)
	}
	if st := p.MustResult("tx/status", map[string]any{"transactionId": txID}); st["state"] != "proposed" || len(asList(st["pendingApprovals"])) != 0 {
		t.Errorf("tx/status after the refusal = %v, want proposed with no approval request", st)
	}
	if rev := revision(p, "salad"); rev != 0 {
		t.Fatalf("revision %d before the decision", rev)
	}
	d := p.MustResult("patchset/decide", map[string]any{"patchSetId": "ps1", "decision": "accepted"})
	if d["decision"] != "accepted" || harness.Num(d["revision"]) != 1 {
		t.Fatalf("patchset/decide = %v", d)
	}
	c := p.MustResult("patchset/context", map[string]any{"docId": "salad"})
	if dec, _ := harness.JSONString(c, "context.llm.lastPatchDecision.decision"); dec != "accepted" {
		t.Errorf("patchset/context = %v, want the accepted decision", c)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestPatchSetCloseExpires: tx/close of a pending PatchSet is a decision
// "expired" of its own: patchset/review and patchset/decide say so (not
// "at revision 0, not the expected 0"), patchset/context reports it, and
// the recipe takes a new PatchSet.
func TestPatchSetCloseExpires(t *testing.T) {
	t.Parallel()
	p, _ := serve(t)
	p.MustResult("doc/create", map[string]any{"docId": "salad", "docType": "recipe", "content": salad})
	pr := p.MustResult("patchset/propose", map[string]any{"docId": "salad", "recipeVersion": 0,
		"patchSet": map[string]any{"patchSetId": "ps1", "patches": []any{map[string]any{"op": "add_ingredient", "text": "2 tomatoes"}}}})
	p.MustResult("tx/close", map[string]any{"transactionId": harness.Str(pr["transactionId"])})
	resp, _ := p.Call("patchset/review", map[string]any{"patchSetId": "ps1"})
	if data := wantError(t, "patchset/review after tx/close", resp, codeClosed); data["state"] != "expired" || data["reason"] != "closed" {
		t.Errorf("review data = %v, want state expired, reason closed", data)
	}
	if msg, _ := harness.JSONString(resp, "error.message"); strings.Contains(msg, "not the expected") {
		t.Errorf("review message %q speaks of a revision", msg)
	}
	resp, _ = p.Call("patchset/decide", map[string]any{"patchSetId": "ps1", "decision": "accepted"})
	wantError(t, "patchset/decide after tx/close", resp, codeClosed)
	c := p.MustResult("patchset/context", map[string]any{"docId": "salad"})
	if dec, _ := harness.JSONString(c, "context.llm.lastPatchDecision.decision"); dec != "expired" || c["patchSetId"] != "ps1" {
		t.Errorf("patchset/context = %v, want ps1's decision expired", c)
	}
	p.MustResult("patchset/propose", map[string]any{"docId": "salad", "recipeVersion": 0,
		"patchSet": map[string]any{"patchSetId": "ps2", "patches": []any{map[string]any{"op": "add_ingredient", "text": "3 tomatoes"}}}})
	if rev := revision(p, "salad"); rev != 0 {
		t.Errorf("revision %d, want 0", rev)
	}
}

// TestHardAvoidOverrideNeedsPersonOverRPC: lifting a hard avoid (an override, or
// a hard avoid removed) waits for a person's hard_avoid_override even
// under --approval-policy never and --document-approval-policy never,
// through patch/apply and through turn/start + apply/execute; a
// userDefaults change that lifts nothing applies at once.
func TestHardAvoidOverrideNeedsPersonOverRPC(t *testing.T) {
	t.Parallel()
	p, _ := serve(t, "--approval-policy", "never", "--document-approval-policy", "never")
	p.MustResult("doc/create", map[string]any{"docId": "salad", "docType": "recipe", "content": salad})

	// patch/* door: an override.
	env := rpcEnvelope("p1", 0, "", op("add", "/overrides", map[string]any{"hardAvoids": []any{"walnut"}}))
	v := p.MustResult("patch/validate", map[string]any{"docId": "salad", "patch": env})
	id := harness.Str(v["validationId"])
	res := p.MustResult("patch/apply", map[string]any{"validationId": id, "patch": env})
	pend := asList(res["pendingApprovals"])
	if res["ok"] == true || len(pend) != 1 || harness.Str(pend[0].(map[string]any)["kind"]) != "hard_avoid_override" {
		t.Fatalf("patch/apply of an override = %v, want one pending hard_avoid_override", res)
	}
	if rev := revision(p, "salad"); rev != 0 {
		t.Fatalf("revision %d before the person's approval", rev)
	}
	p.MustResult("approval/respond", map[string]any{"transactionId": id, "approvalRequestId": pend[0].(map[string]any)["approvalRequestId"], "decision": "approve"})
	if res := p.MustResult("patch/apply", map[string]any{"validationId": id, "patch": env}); res["ok"] != true || harness.Num(res["revision"]) != 1 {
		t.Fatalf("patch/apply after the approval = %v", res)
	}

	// turn/start door: a hard avoid removed.
	ts := p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "json_patch", "docId": "salad",
		"patch": rpcEnvelope("p2", 1, "", op("remove", "/userDefaults/hardAvoids/1", nil))}})
	txID := harness.Str(ts["transactionId"])
	ax := p.MustResult("apply/execute", map[string]any{"transactionId": txID})
	pend = asList(ax["pendingApprovals"])
	if ax["ok"] == true || len(pend) != 1 || harness.Str(pend[0].(map[string]any)["kind"]) != "hard_avoid_override" {
		t.Fatalf("apply/execute of a hard-avoid removal = %v, want one pending hard_avoid_override", ax)
	}
	if reason := harness.Str(pend[0].(map[string]any)["reason"]); !strings.Contains(reason, `"goose"`) {
		t.Errorf("reason %q does not name the lifted avoid", reason)
	}
	p.MustResult("approval/respond", map[string]any{"transactionId": txID, "approvalRequestId": pend[0].(map[string]any)["approvalRequestId"], "decision": "deny"})
	if rev := revision(p, "salad"); rev != 1 {
		t.Fatalf("revision %d after a denied removal, want 1", rev)
	}

	// Nothing lifted: the policy applies it.
	env = rpcEnvelope("p3", 1, "", op("replace", "/userDefaults/portions", 4))
	v = p.MustResult("patch/validate", map[string]any{"docId": "salad", "patch": env})
	if res := p.MustResult("patch/apply", map[string]any{"validationId": v["validationId"], "patch": env}); res["ok"] != true {
		t.Fatalf("patch/apply of portions = %v, want applied", res)
	}
}

// TestAppliedPatchIDRefusedAtTurnStart: reusing an applied patch_id
// through turn/start is refused at propose (-32014), so no transaction is
// left to fail after its commit record; a restart recovers cleanly.
func TestAppliedPatchIDRefusedAtTurnStart(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws, data := filepath.Join(work, "ws"), filepath.Join(work, "data")
	os.Mkdir(ws, 0o755)
	args := []string{"serve", "--workspace", ws, "--data-dir", data, "--log-level", "info"}
	p := harness.Serve(t, args...)
	p.Initialize()
	p.MustResult("doc/create", map[string]any{"docId": "deal", "docType": "json", "content": map[string]any{"status": "OPEN"}})
	env := rpcEnvelope("p1", 0, "", op("replace", "/status", "CLOSED"))
	v := p.MustResult("patch/validate", map[string]any{"docId": "deal", "patch": env})
	p.MustResult("patch/apply", map[string]any{"validationId": v["validationId"], "patch": env})
	for _, again := range []map[string]any{
		rpcEnvelope("p1", 1, "", op("replace", "/status", "REOPENED")), // another payload
		rpcEnvelope("p1", 1, "", op("replace", "/status", "OPEN")),
	} {
		resp, _ := p.Call("turn/start", map[string]any{"proposal": map[string]any{"kind": "json_patch", "docId": "deal", "patch": again}})
		data := wantError(t, "turn/start reusing p1", resp, codeIdempotency)
		if data["patchId"] != "p1" || data["transactionId"] != v["validationId"] {
			t.Errorf("data = %v, want p1 and the transaction that applied it", data)
		}
	}
	if rev := revision(p, "deal"); rev != 1 {
		t.Errorf("revision %d, want 1", rev)
	}
	p.Stop()
	p = harness.Serve(t, args...)
	defer p.Stop()
	p.Initialize()
	if doc := p.MustResult("doc/get", map[string]any{"docId": "deal"}); harness.Num(doc["revision"]) != 1 {
		t.Errorf("after a restart: %v", doc)
	}
	if s := p.StderrText(); strings.Contains(s, "recovery failed") {
		t.Errorf("the restart logged a failed recovery:\n%s", s)
	}
}

// TestNoChangePatchRefusedOverRPC: a patch with no operations, or whose
// operations change nothing, is refused through patch/validate and
// turn/start alike, and makes no revision.
func TestNoChangePatchRefusedOverRPC(t *testing.T) {
	t.Parallel()
	p, _ := serve(t)
	p.MustResult("doc/create", map[string]any{"docId": "deal", "docType": "json", "content": map[string]any{"status": "OPEN"}})
	for i, ops := range [][]any{
		{},
		{op("test", "/status", "OPEN")},
		{op("replace", "/status", "OPEN")},
	} {
		env := rpcEnvelope("p"+string(rune('0'+i)), 0, "", ops...)
		resp, _ := p.Call("patch/validate", map[string]any{"docId": "deal", "patch": env})
		if data := wantError(t, "patch/validate "+harness.JSONText(ops), resp, codeValidation); data["reason"] != "no-change" {
			t.Errorf("data = %v, want reason no-change", data)
		}
		resp, _ = p.Call("turn/start", map[string]any{"proposal": map[string]any{"kind": "json_patch", "docId": "deal", "patch": env}})
		wantError(t, "turn/start "+harness.JSONText(ops), resp, codeValidation)
	}
	if rev := revision(p, "deal"); rev != 0 {
		t.Errorf("revision %d, want 0", rev)
	}
	if log := p.MustResult("patch/log", map[string]any{"docId": "deal"}); len(asList(log["entries"])) != 0 {
		t.Errorf("patch/log = %v, want empty", log)
	}
}

// TestHardAvoidSpellingsRefused: patchset/propose refuses a hard avoid
// however it is spelt (issue 31's reproductions), and an update that adds
// mentions to a step that named the item once; nothing is held for review.
func TestHardAvoidSpellingsRefused(t *testing.T) {
	t.Parallel()
	p, _ := serve(t)
	p.MustResult("doc/create", map[string]any{"docId": "salad", "docType": "recipe", "content": salad})
	for i, patch := range []map[string]any{
		{"op": "add_ingredient", "text": "50 g wal\u00adnuts"},
		{"op": "add_ingredient", "text": "50 g wal\u200bnuts"},
		{"op": "add_ingredient", "text": "50 g ｗａｌｎｕｔｓ"},
		{"op": "add_ingredient", "text": "50 g w\u0430lnuts"},
		{"op": "add_ingredient", "text": "roast geese"},
		{"op": "add_step", "after_step_id": "s2", "text": "Drizzle with walnutoil"},
		{"op": "update_step", "step_id": "s2", "text": "Scatter walnut butter, walnut oil and candied walnuts"},
	} {
		resp, _ := p.Call("patchset/propose", map[string]any{"docId": "salad", "recipeVersion": 0,
			"patchSet": map[string]any{"patchSetId": "ps" + string(rune('a'+i)), "patches": []any{patch}}})
		data := wantError(t, "patchset/propose "+harness.JSONText(patch), resp, codeValidation)
		if rule, _ := harness.JSONString(data, "violations.0.rule"); rule != "hard-avoid" {
			t.Errorf("%v: data = %v, want a hard-avoid violation", patch, data)
		}
	}
	// Keeping the one existing mention is allowed.
	p.MustResult("patchset/propose", map[string]any{"docId": "salad", "recipeVersion": 0,
		"patchSet": map[string]any{"patchSetId": "keep", "patches": []any{map[string]any{"op": "update_step", "step_id": "s2", "text": "Scatter the toasted walnuts"}}}})
}
