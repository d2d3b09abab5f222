package document_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// TestApplyRechecksContent: an apply commits the validated content only
// while the document holds the bytes it was validated on. Content changed
// behind the kernel's back at the same revision (what seed 000's TOCTOU
// re-check guards against) is refused with a conflict and left as it is,
// whether or not the validated result is still kept.
func TestApplyRechecksContent(t *testing.T) {
	bb := newBench(t)
	ctx := context.Background()
	if _, err := bb.svc.Create(ctx, &protocol.DocCreateParams{DocID: "d", DocType: "json", Content: []byte(`{"n":0,"m":{"k":[1]}}`)}); err != nil {
		t.Fatal(err)
	}
	env := func(id string, rev int64) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"patch_id": id, "expected_revision": rev,
			"operations": []any{map[string]any{"op": "add", "path": "/m/k/-", "value": 2}}})
		return b
	}
	// The plain path: validate, apply, and the content is the patched one.
	v, err := bb.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "d", Patch: env("p1", 0)})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := bb.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env("p1", 0)}); err != nil || !r.OK {
		t.Fatalf("apply: %+v %v", r, err)
	}
	if got := bb.content(t); got != `{"m":{"k":[1,2]},"n":0}` {
		t.Fatalf("content %s", got)
	}
	// Validate again, then change the content without moving the revision.
	v, err = bb.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "d", Patch: env("p2", 1)})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", bb.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE doc_contents SET content = ? WHERE content_id = (SELECT content_id FROM documents WHERE doc_id = 'd')`, `{"m":{"k":[]},"n":9}`); err != nil {
		t.Fatal(err)
	}
	_, err = bb.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env("p2", 1)})
	if !errs.KindIs(err, errs.Conflict) {
		t.Fatalf("apply on changed content: %v, want a conflict", err)
	}
	if got := bb.content(t); got != `{"m":{"k":[]},"n":9}` {
		t.Fatalf("content after the refused apply: %s", got)
	}
}

// content is document d's stored content.
func (bb *bench) content(t *testing.T) string {
	t.Helper()
	db, err := sql.Open("sqlite3", bb.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var c string
	if err := db.QueryRow(`SELECT c.content FROM documents d JOIN doc_contents c ON c.content_id = d.content_id WHERE d.doc_id = 'd'`).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRulesDigestTrusted: after a restart (the decoded values forgotten),
// a content the store records as validated under this kernel's rules is
// validated only where a patch changes it, and a content without that
// record is validated whole. The untouched issue made invalid behind the
// kernel's back shows which happened.
func TestRulesDigestTrusted(t *testing.T) {
	for _, tc := range []struct {
		digest string // what the store says after the tampering: "keep" or ""
		valid  bool   // whether the patch of the other issue then passes
	}{{"keep", true}, {"", false}} {
		bb := newBench(t)
		ctx := context.Background()
		doc := `{"issues_by_id":{"a":{"status":"OPEN"},"b":{"status":"OPEN"}},"entries_by_id":{}}`
		if _, err := bb.svc.Create(ctx, &protocol.DocCreateParams{DocID: "d", DocType: "closing_checklist", Content: []byte(doc)}); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite3", bb.path)
		if err != nil {
			t.Fatal(err)
		}
		set := `content = '{"entries_by_id":{},"issues_by_id":{"a":{"status":"OPEN"},"b":{"status":7}}}'`
		if tc.digest == "" {
			set += `, rules_digest = ''`
		}
		if _, err := db.Exec(`UPDATE doc_contents SET ` + set); err != nil {
			t.Fatal(err)
		}
		db.Close()
		document.ForgetDecoded(bb.target)
		env, _ := json.Marshal(map[string]any{"patch_id": "p", "expected_revision": 0,
			"operations": []any{map[string]any{"op": "replace", "path": "/issues_by_id/a/status", "value": "CLOSED"}}})
		_, err = bb.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "d", Patch: env})
		if tc.valid && err != nil {
			t.Fatalf("digest kept: the untouched issue was validated again: %v", err)
		}
		if !tc.valid && !errs.KindIs(err, errs.Validation) {
			t.Fatalf("no digest: want the whole document validated (a validation error), got %v", err)
		}
	}
}
