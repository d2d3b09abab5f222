package document_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/jsondoc/recipe"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
)

// clock is a settable time for document.Options.Now: the tests move it
// past a validation's expiry instead of sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newClockKernel is newKernel whose document target reads the time from c.
func newClockKernel(t *testing.T, c *clock) *kernel {
	t.Helper()
	dir := t.TempDir()
	tg := document.New(document.Options{DBPath: filepath.Join(dir, store.FileName), PatchPolicy: approvals.Never, Now: c.now})
	t.Cleanup(func() { tg.Close() })
	eng, err := tx.Open(context.Background(), tx.Options{Targets: []tx.Target{tg}, DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &kernel{svc: document.NewService(eng, tg), eng: eng}
}

// content is a document's content, decoded.
func (k *kernel) content(t *testing.T, id string) map[string]any {
	t.Helper()
	d, err := k.svc.Get(context.Background(), &protocol.DocParams{DocID: id})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(d.Content, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestApplyPreconditions is seed 000's apply preconditions, one row each
// (docs/RULES.md 000-2, 000-3, 000-4, 000-12): patch/apply without a
// validation_id, with one never issued, expired, or under two spellings
// that differ; with a payload other than the one validated (its hash
// differs); and after the document moved past expected_revision (at
// validate and at apply). Each is refused with its kind and data, and
// leaves the document's revision and content as they were; the seed's
// own spelling validation_id, alone, applies.
func TestApplyPreconditions(t *testing.T) {
	const validated = `[{"op":"replace","path":"/status","value":"CLOSED"}]`
	type setup struct {
		k   *kernel
		c   *clock
		env json.RawMessage // the envelope validated
		id  string          // its validation id
	}
	for _, tc := range []struct {
		name string
		// before runs between patch/validate and patch/apply.
		before func(t *testing.T, s *setup)
		apply  func(s *setup) *protocol.PatchApplyParams
		kind   errs.Kind // "" when the apply must succeed
		// data checks the error's data.
		data    func(t *testing.T, d any)
		wantRev int64
		status  string
	}{
		{
			name:  "validation_id missing (000-3)",
			apply: func(s *setup) *protocol.PatchApplyParams { return &protocol.PatchApplyParams{Patch: s.env} },
			kind:  errs.UnknownValidation,
			data: func(t *testing.T, d any) {
				if v, ok := d.(document.ValidationIDData); !ok || v.Reason != "missing" {
					t.Errorf("data = %#v, want reason missing", d)
				}
			},
			status: "OPEN",
		},
		{
			name: "validation_id unknown (000-3)",
			apply: func(s *setup) *protocol.PatchApplyParams {
				return &protocol.PatchApplyParams{ValidationID: "tx_0000000000000000", Patch: s.env}
			},
			kind: errs.UnknownValidation,
			data: func(t *testing.T, d any) {
				if v, ok := d.(document.ValidationIDData); !ok || v.Reason != "unknown" || v.ValidationID != "tx_0000000000000000" {
					t.Errorf("data = %#v, want reason unknown naming the id", d)
				}
			},
			status: "OPEN",
		},
		{
			name:   "validation_id expired (000-3)",
			before: func(t *testing.T, s *setup) { s.c.add(document.DefaultTTL + time.Second) },
			apply: func(s *setup) *protocol.PatchApplyParams {
				return &protocol.PatchApplyParams{ValidationID: s.id, Patch: s.env}
			},
			kind: errs.Expired,
			data: func(t *testing.T, d any) {
				if v, ok := d.(document.ExpiredData); !ok || v.ExpiresAt == "" {
					t.Errorf("data = %#v, want ExpiredData with expires_at", d)
				}
			},
			status: "OPEN",
		},
		{
			name: "validationId and validation_id differ (000-3)",
			apply: func(s *setup) *protocol.PatchApplyParams {
				return &protocol.PatchApplyParams{ValidationID: s.id, ValidationIDSeed: s.id + "x", Patch: s.env}
			},
			kind: errs.Invalid,
			data: func(t *testing.T, d any) {
				if v, ok := d.(document.AliasData); !ok || v.Reason != "conflicting-alias" {
					t.Errorf("data = %#v, want reason conflicting-alias", d)
				}
			},
			status: "OPEN",
		},
		{
			name: "payload not the one validated (000-4)",
			apply: func(s *setup) *protocol.PatchApplyParams {
				return &protocol.PatchApplyParams{ValidationID: s.id, Patch: envelope("p1", 0, "", `[{"op":"replace","path":"/status","value":"LOST"}]`)}
			},
			kind: errs.HashMismatch,
			data: func(t *testing.T, d any) {
				if v, ok := d.(document.HashData); !ok || v.ValidatedHash == v.PatchHash || v.ValidatedHash == "" {
					t.Errorf("data = %#v, want two different hashes", d)
				}
			},
			status: "OPEN",
		},
		{
			name: "revision moved after validate (000-2)",
			before: func(t *testing.T, s *setup) {
				other := envelope("p2", 0, "", `[{"op":"add","path":"/note","value":"x"}]`)
				v, err := s.k.svc.Validate(context.Background(), &protocol.PatchValidateParams{DocID: "deal", Patch: other})
				if err != nil {
					t.Fatal(err)
				}
				if ar, err := s.k.svc.Apply(context.Background(), &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: other}); err != nil || !ar.OK {
					t.Fatalf("the other patch: %+v, %v", ar, err)
				}
			},
			apply: func(s *setup) *protocol.PatchApplyParams {
				return &protocol.PatchApplyParams{ValidationID: s.id, Patch: s.env}
			},
			kind: errs.Stale,
			data: func(t *testing.T, d any) {
				if v, ok := d.(document.StaleData); !ok || v.ExpectedRevision != 0 || v.CurrentRevision != 1 {
					t.Errorf("data = %#v, want expected 0, current 1", d)
				}
			},
			wantRev: 1,
			status:  "OPEN",
		},
		{
			name: "the seed's spelling validation_id alone applies",
			apply: func(s *setup) *protocol.PatchApplyParams {
				return &protocol.PatchApplyParams{ValidationIDSeed: s.id, Patch: s.env}
			},
			wantRev: 1,
			status:  "CLOSED",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			s := &setup{k: newClockKernel(t, c), c: c, env: envelope("p1", 0, "", validated)}
			ctx := context.Background()
			s.k.create(t, "deal", "json", `{"status":"OPEN"}`)
			v, err := s.k.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "deal", Patch: s.env})
			if err != nil {
				t.Fatal(err)
			}
			s.id = v.ValidationID
			if tc.before != nil {
				tc.before(t, s)
			}
			ar, err := s.k.svc.Apply(ctx, tc.apply(s))
			if tc.kind == "" {
				if err != nil || !ar.OK {
					t.Fatalf("patch/apply = %+v, %v; want applied", ar, err)
				}
			} else {
				e := wantKind(t, "patch/apply", err, tc.kind)
				tc.data(t, e.Data)
			}
			if rev := s.k.revision(t, "deal"); rev != tc.wantRev {
				t.Errorf("revision %d, want %d", rev, tc.wantRev)
			}
			if got := s.k.content(t, "deal")["status"]; got != tc.status {
				t.Errorf("status %v, want %s", got, tc.status)
			}
		})
	}
}

// TestValidateStaleRevision: patch/validate refuses an envelope whose
// expected_revision is not the document's current revision (seed 000:
// "Apply fails if current revision differs"; docs/RULES.md 000-2), before
// anything is staged, for a revision behind and ahead alike.
func TestValidateStaleRevision(t *testing.T) {
	k, ctx := newKernel(t), context.Background()
	k.create(t, "deal", "json", `{"status":"OPEN"}`)
	first := envelope("p0", 0, "", `[{"op":"replace","path":"/status","value":"HELD"}]`)
	v, err := k.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "deal", Patch: first})
	if err != nil {
		t.Fatal(err)
	}
	if ar, err := k.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: first}); err != nil || !ar.OK {
		t.Fatalf("patch/apply = %+v, %v", ar, err)
	}
	for _, expected := range []int64{0, 2, 7} {
		env := envelope("p1", expected, "", `[{"op":"replace","path":"/status","value":"CLOSED"}]`)
		_, err := k.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "deal", Patch: env})
		e := wantKind(t, "patch/validate at the wrong revision", err, errs.Stale)
		if d, ok := e.Data.(document.StaleData); !ok || d.ExpectedRevision != expected || d.CurrentRevision != 1 {
			t.Errorf("expected_revision %d: data = %#v, want expected %d, current 1", expected, e.Data, expected)
		}
	}
	if rev := k.revision(t, "deal"); rev != 1 {
		t.Errorf("revision %d, want 1", rev)
	}
}

// violation checks that an error's data lists a violation of rule
// (jsondoc/recipe's rule names), as the wire shows it.
func violation(rule string) func(t *testing.T, d any) {
	return func(t *testing.T, d any) {
		t.Helper()
		b, _ := json.Marshal(d)
		var v struct {
			Violations []struct{ Rule string } `json:"violations"`
		}
		if err := json.Unmarshal(b, &v); err != nil || len(v.Violations) == 0 || v.Violations[0].Rule != rule {
			t.Errorf("data = %s, want a %s violation", b, rule)
		}
	}
}

// TestProposePatchSetRules is seed 003's rules of patchset/propose, one
// row each (docs/RULES.md 003-4, 003-5, 003-10): a PatchSet proposed
// while another is pending review is refused (errs.Pending naming it); one
// against another recipeVersion is refused (errs.Stale); one that fails
// validation is refused (errs.Validation) and nothing is held for review,
// so the recipe takes a valid one next. The recipe's revision never moves.
func TestProposePatchSetRules(t *testing.T) {
	zero, one := int64(0), int64(1)
	for _, tc := range []struct {
		name string
		// first, when set, is proposed (and must be accepted) before ps2.
		first   string
		version *int64
		ps2     string
		kind    errs.Kind
		data    func(t *testing.T, d any)
		// heldAfter: is ps2 held for review afterwards (a third PatchSet
		// is then refused as pending)?
		heldAfter bool
	}{
		{
			name:    "another PatchSet pending (003-4)",
			first:   `{"patchSetId":"ps1","patches":[{"op":"add_ingredient","text":"2 tomatoes"}]}`,
			version: &zero,
			ps2:     `{"patchSetId":"ps2","patches":[{"op":"add_ingredient","text":"1 cucumber"}]}`,
			kind:    errs.Pending,
			data: func(t *testing.T, d any) {
				if v, ok := d.(document.PendingData); !ok || v.PatchSetID != "ps1" {
					t.Errorf("data = %#v, want the pending ps1", d)
				}
			},
			heldAfter: true, // ps1 still is
		},
		{
			name:    "recipeVersion not current (003-5)",
			version: &one,
			ps2:     `{"patchSetId":"ps2","patches":[{"op":"add_ingredient","text":"1 cucumber"}]}`,
			kind:    errs.Stale,
			data: func(t *testing.T, d any) {
				if v, ok := d.(document.StaleData); !ok || v.ExpectedRevision != 1 || v.CurrentRevision != 0 {
					t.Errorf("data = %#v, want expected 1, current 0", d)
				}
			},
		},
		{
			name:    "step done is not updated (003-10, 003-6)",
			version: &zero,
			ps2:     `{"patchSetId":"ps2","patches":[{"op":"update_step","step_id":"s1","text":"Wash twice"}]}`,
			kind:    errs.Validation,
			data:    violation(recipe.RuleDoneStep),
		},
		{
			name:    "unknown ingredient (003-10, 003-7)",
			version: &zero,
			ps2:     `{"patchSetId":"ps2","patches":[{"op":"remove_ingredient","id":"i9"}]}`,
			kind:    errs.Validation,
			data:    violation(recipe.RuleUnknownID),
		},
		{
			name:    "a valid PatchSet is held",
			version: &zero,
			ps2:     `{"patchSetId":"ps2","patches":[{"op":"add_ingredient","text":"1 cucumber"}]}`,
			// kind "": accepted
			heldAfter: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, ctx := newKernel(t), context.Background()
			k.create(t, "salad", "recipe", recipeJSON)
			if tc.first != "" {
				if _, err := k.svc.ProposePatchSet(ctx, &protocol.PatchSetProposeParams{DocID: "salad", RecipeVersion: &zero, PatchSet: json.RawMessage(tc.first)}); err != nil {
					t.Fatal(err)
				}
			}
			_, err := k.svc.ProposePatchSet(ctx, &protocol.PatchSetProposeParams{DocID: "salad", RecipeVersion: tc.version, PatchSet: json.RawMessage(tc.ps2)})
			if tc.kind == "" {
				if err != nil {
					t.Fatalf("patchset/propose: %v", err)
				}
			} else {
				e := wantKind(t, "patchset/propose", err, tc.kind)
				tc.data(t, e.Data)
			}
			// Is something held for review now? A third PatchSet says.
			_, err = k.svc.ProposePatchSet(ctx, &protocol.PatchSetProposeParams{DocID: "salad", RecipeVersion: &zero,
				PatchSet: json.RawMessage(`{"patchSetId":"ps3","patches":[{"op":"add_ingredient","text":"salt"}]}`)})
			if held := errs.KindIs(err, errs.Pending); held != tc.heldAfter {
				t.Errorf("a PatchSet is held for review: %v (ps3: %v), want %v", held, err, tc.heldAfter)
			}
			if rev := k.revision(t, "salad"); rev != 0 {
				t.Errorf("revision %d, want 0: proposing applies nothing", rev)
			}
		})
	}
}
