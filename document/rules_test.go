package document_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
)

// kernel is a real engine with the document target over a real kernel.db,
// json_patch under --document-approval-policy never (the default).
type kernel struct {
	svc *document.Service
	eng *tx.Engine
}

func newKernel(t *testing.T) *kernel { return newKernelOptions(t, "", false) }

// newKernelPolicy is newKernel with the engine's Options.Policy, which
// overrides every kind's (recipe_patchset's too) when not empty.
func newKernelPolicy(t *testing.T, policy approvals.Policy) *kernel {
	return newKernelOptions(t, policy, false)
}

// newKernelOptions is newKernel with the engine's Options.Policy and
// Options.ReadOnly (a --sandbox read-only kernel).
func newKernelOptions(t *testing.T, policy approvals.Policy, readOnly bool) *kernel {
	t.Helper()
	dir := t.TempDir()
	tg := document.New(document.Options{DBPath: filepath.Join(dir, store.FileName), PatchPolicy: approvals.Never})
	t.Cleanup(func() { tg.Close() })
	eng, err := tx.Open(context.Background(), tx.Options{Targets: []tx.Target{tg}, DataDir: dir, Policy: policy, ReadOnly: readOnly, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &kernel{svc: document.NewService(eng, tg), eng: eng}
}

const recipeJSON = `{"title":"Salad","steps":[{"id":"s1","text":"Wash the leaves","status":"done"},{"id":"s2","text":"Scatter the walnuts","status":"todo"}],` +
	`"ingredients":[{"id":"i1","text":"1 lettuce"}],"userDefaults":{"hardAvoids":["walnut","goose"],"portions":2}}`

func (k *kernel) create(t *testing.T, id, typ, content string) {
	t.Helper()
	if _, err := k.svc.Create(context.Background(), &protocol.DocCreateParams{DocID: id, DocType: typ, Content: json.RawMessage(content)}); err != nil {
		t.Fatalf("doc/create %s: %v", id, err)
	}
}

func (k *kernel) revision(t *testing.T, id string) int64 {
	t.Helper()
	d, err := k.svc.Get(context.Background(), &protocol.DocParams{DocID: id})
	if err != nil {
		t.Fatal(err)
	}
	return d.Revision
}

func envelope(patchID string, rev int64, mode, ops string) json.RawMessage {
	m := ""
	if mode != "" {
		m = fmt.Sprintf(`,"mode":%q`, mode)
	}
	return json.RawMessage(fmt.Sprintf(`{"patch_id":%q,"expected_revision":%d%s,"operations":%s}`, patchID, rev, m, ops))
}

// wantKind fails unless err is an errs.Error of kind.
func wantKind(t *testing.T, what string, err error, kind errs.Kind) *errs.Error {
	t.Helper()
	e, ok := err.(*errs.Error)
	if !ok || e.Kind != kind {
		t.Fatalf("%s: %v, want a %s error", what, err, kind)
	}
	return e
}

// TestProposedNeverApplies: an envelope in PROPOSED mode (seed 000) is
// never applied, by patch/apply nor by the engine's apply (apply/execute).
func TestProposedNeverApplies(t *testing.T) {
	k, ctx := newKernel(t), context.Background()
	k.create(t, "deal", "json", `{"status":"OPEN"}`)
	env := envelope("p1", 0, protocol.ModeProposed, `[{"op":"replace","path":"/status","value":"CLOSED"}]`)
	v, err := k.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "deal", Patch: env})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := k.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env})
	if err != nil || !ar.Proposed || ar.OK {
		t.Fatalf("patch/apply of a PROPOSED envelope = %+v, %v; want proposed, not applied", ar, err)
	}
	_, err = k.eng.Apply(ctx, v.ValidationID)
	e := wantKind(t, "apply/execute of a PROPOSED envelope", err, errs.Validation)
	if d, ok := e.Data.(document.ProposedModeData); !ok || d.Reason != document.ReasonProposedMode {
		t.Errorf("data = %#v, want ProposedModeData", e.Data)
	}
	if rev := k.revision(t, "deal"); rev != 0 {
		t.Errorf("revision %d after a PROPOSED envelope, want 0", rev)
	}
}

// TestPatchSetAppliesOnlyByDecide: the engine's apply of a PatchSet's
// transaction is refused, pointing at patchset/decide; the decision
// applies it and records the PatchDecision with the revision.
func TestPatchSetAppliesOnlyByDecide(t *testing.T) {
	k, ctx := newKernel(t), context.Background()
	k.create(t, "salad", "recipe", recipeJSON)
	zero := int64(0)
	pr, err := k.svc.ProposePatchSet(ctx, &protocol.PatchSetProposeParams{DocID: "salad", RecipeVersion: &zero,
		PatchSet: json.RawMessage(`{"patchSetId":"ps1","patches":[{"op":"add_ingredient","text":"2 tomatoes"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // refused every time: no approval request is left behind
		_, err = k.eng.Apply(ctx, pr.TransactionID)
		e := wantKind(t, "apply/execute of a PatchSet", err, errs.PermissionDenied)
		if d, ok := e.Data.(document.DecideOnlyData); !ok || d.Method != protocol.MethodPatchSetDecide || d.PatchSetID != "ps1" {
			t.Errorf("data = %#v, want DecideOnlyData naming patchset/decide", e.Data)
		}
	}
	st, err := k.eng.Status(ctx, pr.TransactionID)
	if err != nil || len(st.PendingApprovals) != 0 {
		t.Fatalf("status = %+v, %v; want no approval request", st, err)
	}
	// approval/respond's words are refused, naming this method's own, and
	// decide nothing.
	for _, word := range []string{"approve", "deny", "Accepted"} {
		_, err := k.svc.DecidePatchSet(ctx, &protocol.PatchSetDecideParams{PatchSetID: "ps1", Decision: word})
		e := wantKind(t, "patchset/decide "+word, err, errs.Invalid)
		if d, ok := e.Data.(errs.InvalidData); !ok || d.Field != "decision" || strings.Join(d.Known, ",") != "accepted,rejected" || !strings.Contains(e.Error(), "approval/respond") {
			t.Errorf("patchset/decide %q: %v, data %#v", word, e, e.Data)
		}
	}
	tl, err := k.eng.List(ctx, protocol.TxListParams{})
	if err != nil || len(tl.Transactions) == 0 || !strings.Contains(tl.Transactions[0].Summary, "1 operation, 1 JSON Patch operation") {
		t.Errorf("tx/list = %+v, %v; want the PatchSet's own operation counted apart from its JSON Patch", tl, err)
	}
	dr, err := k.svc.DecidePatchSet(ctx, &protocol.PatchSetDecideParams{PatchSetID: "ps1", Decision: protocol.PatchSetAccepted})
	if err != nil || dr.Decision != protocol.PatchSetAccepted || dr.Revision != 1 {
		t.Fatalf("patchset/decide = %+v, %v; want accepted at revision 1", dr, err)
	}
	c, err := k.svc.PatchSetContext(ctx, &protocol.DocParams{DocID: "salad"})
	if err != nil || c.PatchSetID != "ps1" {
		t.Fatalf("patchset/context = %+v, %v", c, err)
	}
}

// TestPatchSetRejectedNeverApplies: a rejection denies the PatchSet, even
// under an engine policy that grants every patchset approval (the
// rejecting decide never reaches the commit record).
func TestPatchSetRejectedNeverApplies(t *testing.T) {
	for _, pol := range []approvals.Policy{"", approvals.Never} {
		t.Run(string(pol), func(t *testing.T) { rejectedNeverApplies(t, pol) })
	}
}

func rejectedNeverApplies(t *testing.T, pol approvals.Policy) {
	k, ctx := newKernelPolicy(t, pol), context.Background()
	k.create(t, "salad", "recipe", recipeJSON)
	zero := int64(0)
	pr, err := k.svc.ProposePatchSet(ctx, &protocol.PatchSetProposeParams{DocID: "salad", RecipeVersion: &zero,
		PatchSet: json.RawMessage(`{"patchSetId":"ps1","patches":[{"op":"add_ingredient","text":"2 tomatoes"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.svc.DecidePatchSet(ctx, &protocol.PatchSetDecideParams{PatchSetID: "ps1", Decision: protocol.PatchSetRejected}); err != nil {
		t.Fatal(err)
	}
	if rev := k.revision(t, "salad"); rev != 0 {
		t.Errorf("revision %d after a rejection, want 0", rev)
	}
	if _, err := k.eng.Apply(ctx, pr.TransactionID); err == nil {
		t.Error("a rejected PatchSet's transaction applied")
	}
}

// TestClosedPatchSetExpires: tx/close of a pending PatchSet records a
// decision "expired" of its own; review and decide say so (not a stale
// "revision 0, not the expected 0"), patchset/context reports it, and the
// recipe takes a new PatchSet.
func TestClosedPatchSetExpires(t *testing.T) {
	k, ctx := newKernel(t), context.Background()
	k.create(t, "salad", "recipe", recipeJSON)
	zero := int64(0)
	pr, err := k.svc.ProposePatchSet(ctx, &protocol.PatchSetProposeParams{DocID: "salad", RecipeVersion: &zero,
		PatchSet: json.RawMessage(`{"patchSetId":"ps1","patches":[{"op":"add_ingredient","text":"2 tomatoes"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.eng.CloseTx(ctx, pr.TransactionID); err != nil {
		t.Fatal(err)
	}
	_, err = k.svc.ReviewPatchSet(ctx, &protocol.PatchSetParams{PatchSetID: "ps1"})
	e := wantKind(t, "patchset/review of a closed PatchSet", err, errs.Closed)
	if d, ok := e.Data.(document.PatchSetData); !ok || d.State != "expired" || d.Reason != "closed" {
		t.Errorf("review data = %#v, want state expired, reason closed", e.Data)
	}
	_, err = k.svc.DecidePatchSet(ctx, &protocol.PatchSetDecideParams{PatchSetID: "ps1", Decision: protocol.PatchSetAccepted})
	wantKind(t, "patchset/decide of a closed PatchSet", err, errs.Closed)
	c, err := k.svc.PatchSetContext(ctx, &protocol.DocParams{DocID: "salad"})
	if err != nil {
		t.Fatal(err)
	}
	var last struct{ PatchSetID, Decision string }
	if err := json.Unmarshal(c.Context.LLM.LastPatchDecision, &last); err != nil || last.PatchSetID != "ps1" || last.Decision != "expired" {
		t.Errorf("lastPatchDecision = %s, want ps1 expired", c.Context.LLM.LastPatchDecision)
	}
	if _, err := k.svc.AckPatchSetContext(ctx, &protocol.PatchSetContextAckParams{DocID: "salad", PatchSetID: "ps1"}); err != nil {
		t.Errorf("patchset/context_ack of the expired decision: %v", err)
	}
	if _, err := k.svc.ProposePatchSet(ctx, &protocol.PatchSetProposeParams{DocID: "salad", RecipeVersion: &zero,
		PatchSet: json.RawMessage(`{"patchSetId":"ps2","patches":[{"op":"add_ingredient","text":"3 tomatoes"}]}`)}); err != nil {
		t.Errorf("a new PatchSet after the close: %v", err)
	}
}

// TestAppliedPatchIDRefusedAtPropose: a patch_id applied once is refused
// when proposed again, through turn/start (the engine's Propose) as
// through patch/validate, and no transaction is left to fail later.
func TestAppliedPatchIDRefusedAtPropose(t *testing.T) {
	k, ctx := newKernel(t), context.Background()
	k.create(t, "deal", "json", `{"status":"OPEN"}`)
	env := envelope("p1", 0, "", `[{"op":"replace","path":"/status","value":"CLOSED"}]`)
	v, err := k.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "deal", Patch: env})
	if err != nil {
		t.Fatal(err)
	}
	if ar, err := k.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env}); err != nil || !ar.OK {
		t.Fatalf("patch/apply = %+v, %v", ar, err)
	}
	again := envelope("p1", 1, "", `[{"op":"replace","path":"/status","value":"REOPENED"}]`)
	_, err = k.eng.Propose(ctx, jsonPatchInput(t, k.eng, map[string]any{"docId": "deal", "patch": again}))
	e := wantKind(t, "turn/start reusing an applied patch_id", err, errs.IdempotencyConflict)
	if d, ok := e.Data.(document.IdempotencyData); !ok || d.TransactionID != v.ValidationID || d.Revision != 1 {
		t.Errorf("data = %#v, want the apply that used p1", e.Data)
	}
	_, err = k.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "deal", Patch: again})
	wantKind(t, "patch/validate reusing an applied patch_id", err, errs.IdempotencyConflict)
	if rev := k.revision(t, "deal"); rev != 1 {
		t.Errorf("revision %d, want 1", rev)
	}
}

// TestNoChangePatchRefused: a patch with no operations, or whose
// operations leave the content as it was, is refused and makes no
// revision, through patch/validate and turn/start alike.
func TestNoChangePatchRefused(t *testing.T) {
	k, ctx := newKernel(t), context.Background()
	k.create(t, "deal", "json", `{"status":"OPEN","n":1}`)
	for i, ops := range []string{
		`[]`,
		`[{"op":"test","path":"/status","value":"OPEN"}]`,
		`[{"op":"replace","path":"/status","value":"OPEN"}]`,
		`[{"op":"add","path":"/n","value":1}]`,
		`[{"op":"replace","path":"/status","value":"X"},{"op":"replace","path":"/status","value":"OPEN"}]`,
	} {
		env := envelope(fmt.Sprintf("p%d", i), 0, "", ops)
		_, err := k.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "deal", Patch: env})
		e := wantKind(t, "patch/validate "+ops, err, errs.Validation)
		if d, ok := e.Data.(document.NoChangeData); !ok || d.Reason != document.ReasonNoChange {
			t.Errorf("%s: data = %#v, want NoChangeData", ops, e.Data)
		}
		_, err = k.eng.Propose(ctx, jsonPatchInput(t, k.eng, map[string]any{"docId": "deal", "patch": env}))
		wantKind(t, "turn/start "+ops, err, errs.Validation)
	}
	if rev := k.revision(t, "deal"); rev != 0 {
		t.Errorf("revision %d, want 0", rev)
	}
}

// TestHardAvoidOverrideNeedsPerson: a patch that lifts a recipe's hard
// avoid waits for a person's hard_avoid_override even under policy never;
// a patch of userDefaults that lifts none applies at once.
func TestHardAvoidOverrideNeedsPerson(t *testing.T) {
	for _, c := range []struct {
		name   string
		ops    string
		person bool
	}{
		{"override added", `[{"op":"add","path":"/overrides","value":{"hardAvoids":["walnut"]}}]`, true},
		{"avoid removed", `[{"op":"remove","path":"/userDefaults/hardAvoids/0"}]`, true},
		{"avoids replaced", `[{"op":"replace","path":"/userDefaults/hardAvoids","value":["goose"]}]`, true},
		{"userDefaults removed", `[{"op":"remove","path":"/userDefaults"}]`, true},
		{"portions changed", `[{"op":"replace","path":"/userDefaults/portions","value":4}]`, false},
		{"avoid added", `[{"op":"add","path":"/userDefaults/hardAvoids/-","value":"pecan"}]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, ctx := newKernel(t), context.Background()
			k.create(t, "salad", "recipe", recipeJSON)
			env := envelope("p1", 0, "", c.ops)
			v, err := k.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "salad", Patch: env})
			if err != nil {
				t.Fatal(err)
			}
			ar, err := k.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env})
			if err != nil {
				t.Fatal(err)
			}
			if !c.person {
				if !ar.OK || ar.Revision != 1 {
					t.Fatalf("patch/apply = %+v, want applied at revision 1", ar)
				}
				return
			}
			if ar.OK || len(ar.PendingApprovals) != 1 || ar.PendingApprovals[0].Kind != protocol.ApprovalHardAvoidOverride {
				t.Fatalf("patch/apply = %+v, want one pending hard_avoid_override", ar)
			}
			if rev := k.revision(t, "salad"); rev != 0 {
				t.Fatalf("revision %d before the person's approval", rev)
			}
			req := ar.PendingApprovals[0]
			if _, err := k.eng.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: v.ValidationID, ApprovalRequestID: req.ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
				t.Fatal(err)
			}
			ar, err = k.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env})
			if err != nil || !ar.OK || ar.Revision != 1 {
				t.Fatalf("patch/apply after the approval = %+v, %v", ar, err)
			}
		})
	}
}

// TestReadOnlyRejectsPatchSet: under a read-only sandbox a PatchSet is
// never accepted (the engine refuses the apply, -32004), but the person
// may still reject it: a rejection writes nothing to the recipe.
func TestReadOnlyRejectsPatchSet(t *testing.T) {
	k, ctx := newKernelOptions(t, "", true), context.Background()
	k.create(t, "salad", "recipe", recipeJSON)
	zero := int64(0)
	propose := func(id string) string {
		pr, err := k.svc.ProposePatchSet(ctx, &protocol.PatchSetProposeParams{DocID: "salad", RecipeVersion: &zero,
			PatchSet: json.RawMessage(`{"patchSetId":"` + id + `","patches":[{"op":"add_ingredient","text":"2 tomatoes"}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		return pr.PatchSetID
	}
	id := propose("ps1")
	_, err := k.svc.DecidePatchSet(ctx, &protocol.PatchSetDecideParams{PatchSetID: id, Decision: protocol.PatchSetAccepted})
	wantKind(t, "accepting in read-only", err, errs.Sandbox)
	dr, err := k.svc.DecidePatchSet(ctx, &protocol.PatchSetDecideParams{PatchSetID: id, Decision: protocol.PatchSetRejected})
	if err != nil || dr.Decision != protocol.PatchSetRejected {
		t.Fatalf("rejecting in read-only: %+v, %v", dr, err)
	}
	if rev := k.revision(t, "salad"); rev != 0 {
		t.Fatalf("revision %d after a rejection, want 0", rev)
	}
	propose("ps2") // the recipe takes a new PatchSet: the rejected one is done with
}

// jsonPatchInput is turn/start's json_patch proposal members as the
// kernel hands them to the engine: decoded into the kind's input type.
func jsonPatchInput(t *testing.T, eng *tx.Engine, members map[string]any) *tx.Input {
	t.Helper()
	in, ok := eng.NewInput(protocol.KindJSONPatch)
	if !ok {
		t.Fatal("the engine takes no json_patch from turn/start")
	}
	body, err := json.Marshal(members)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, in); err != nil {
		t.Fatal(err)
	}
	return &tx.Input{Kind: protocol.KindJSONPatch, Body: in}
}
