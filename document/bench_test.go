package document_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
)

// bench is a real engine with the document target over a real kernel.db
// in a temporary data dir (fsync and all).
type bench struct {
	svc    *document.Service
	target *document.Target
	path   string
}

func newBench(b testing.TB) *bench {
	b.Helper()
	dir := b.TempDir()
	path := filepath.Join(dir, store.FileName)
	t := document.New(document.Options{DBPath: path})
	b.Cleanup(func() { t.Close() })
	eng, err := tx.Open(context.Background(), tx.Options{Targets: []tx.Target{t}, DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	return &bench{svc: document.NewService(eng, t), target: t, path: path}
}

// checklist is a closing checklist of about size bytes.
func checklist(size int) []byte {
	issues := map[string]any{}
	for i := 0; ; i++ {
		issues[fmt.Sprintf("iss_%05d", i)] = map[string]any{"status": "OPEN", "title": fmt.Sprintf("Issue %d of the disclosure schedule, clause %d", i, i%97),
			"citations": []any{map[string]any{"text": "Counsel confirmed the position in the thread of 12 March.", "link": "https://mail.example.com/deeplink?id=" + fmt.Sprint(i)}}}
		if i%100 == 99 {
			raw, _ := json.Marshal(map[string]any{"issues_by_id": issues, "entries_by_id": map[string]any{}})
			if len(raw) >= size {
				return raw
			}
		}
	}
}

// ops20 is a 20-operation patch: 10 status replaces and 10 citations.
func ops20() []any {
	var ops []any
	for i := 0; i < 10; i++ {
		ops = append(ops, map[string]any{"op": "replace", "path": fmt.Sprintf("/issues_by_id/iss_%05d/status", i*37), "value": "CLOSED"})
		ops = append(ops, map[string]any{"op": "add", "path": fmt.Sprintf("/issues_by_id/iss_%05d/citations/-", i*41), "value": map[string]any{"text": "Agreed.", "filepath": "/mail/x.eml"}})
	}
	return ops
}

func (bb *bench) validateApply(b testing.TB, docID, patchID string, rev int64, ops []any) *protocol.PatchApplyResult {
	env, _ := json.Marshal(map[string]any{"patch_id": patchID, "expected_revision": rev, "operations": ops})
	ctx := context.Background()
	v, err := bb.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: docID, Patch: env})
	if err != nil {
		b.Fatal(err)
	}
	r, err := bb.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env})
	if err != nil || !r.OK {
		b.Fatalf("apply: %+v %v", r, err)
	}
	return r
}

// BenchmarkPatch20Ops is seed 000's validate + apply of a 20-operation
// patch on a closing checklist of 100 KB, 1 MB and 10 MB through the
// engine (impl=txkernel: the dry run, the schema check, the proposed
// transaction, the apply's SQL transactions and every fsync), beside
// evanphx/json-patch applying the same operations to the same bytes in
// memory (impl=evanphx). impl=txkernel is a host's long-lived kernel: each
// patch starts from the value the previous one produced and validated, so
// it decodes nothing and validates only what it changed; impl=txkernel-cold
// forgets those values before each patch, as after a restart, and so
// decodes the document (the store's rules digest still spares it
// validating what the patch did not change). Compare with
// benchstat -col /impl -filter .name:Patch20Ops.
func BenchmarkPatch20Ops(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"100KB", 100 << 10}, {"1MB", 1 << 20}, {"10MB", 10 << 20}} {
		doc := checklist(size.bytes)
		ops := ops20()
		for _, impl := range []string{"txkernel", "txkernel-cold"} {
			b.Run("size="+size.name+"/impl="+impl, func(b *testing.B) {
				bb := newBench(b)
				ctx := context.Background()
				if _, err := bb.svc.Create(ctx, &protocol.DocCreateParams{DocID: "d", DocType: "closing_checklist", Content: doc}); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(doc)))
				rev := int64(0)
				for b.Loop() {
					if impl == "txkernel-cold" {
						document.ForgetDecoded(bb.target)
					}
					bb.validateApply(b, "d", fmt.Sprintf("p%d", rev), rev, ops)
					rev++
				}
			})
		}
		b.Run("size="+size.name+"/impl=evanphx", func(b *testing.B) {
			raw, _ := json.Marshal(ops)
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				p, err := jsonpatch.DecodePatch(raw)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Apply(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplay is patch/apply of a patch_id already applied: the
// original result, no second effect.
func BenchmarkReplay(b *testing.B) {
	bb := newBench(b)
	ctx := context.Background()
	bb.svc.Create(ctx, &protocol.DocCreateParams{DocID: "d", DocType: "json", Content: []byte(`{"n":0}`)})
	env, _ := json.Marshal(map[string]any{"patch_id": "p", "expected_revision": 0, "operations": []any{map[string]any{"op": "replace", "path": "/n", "value": 1}}})
	v, _ := bb.svc.Validate(ctx, &protocol.PatchValidateParams{DocID: "d", Patch: env})
	bb.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env})
	for b.Loop() {
		r, err := bb.svc.Apply(ctx, &protocol.PatchApplyParams{ValidationID: v.ValidationID, Patch: env})
		if err != nil || !r.AlreadyApplied || r.Revision != 1 {
			b.Fatalf("%+v %v", r, err)
		}
	}
}

// BenchmarkRevisions measures get, and validate + apply, on a document
// with 10 and with 10,000 revisions in its patch log: both must stay flat.
// The long log is written straight into kernel.db (one SQL transaction),
// since applying 10,000 patches through the engine would only time the
// set-up.
func BenchmarkRevisions(b *testing.B) {
	for _, n := range []int{10, 10000} {
		bb := newBench(b)
		ctx := context.Background()
		bb.svc.Create(ctx, &protocol.DocCreateParams{DocID: "d", DocType: "json", Content: []byte(`{"n":0,"list":[]}`)})
		seedLog(b, bb.path, "d", n)
		b.Run(fmt.Sprintf("op=get/revisions=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := bb.svc.Get(ctx, &protocol.DocParams{DocID: "d"}); err != nil {
					b.Fatal(err)
				}
			}
		})
		rev := int64(n)
		b.Run(fmt.Sprintf("op=validate+apply/revisions=%d", n), func(b *testing.B) {
			for b.Loop() {
				bb.validateApply(b, "d", fmt.Sprintf("q%d", rev), rev, []any{map[string]any{"op": "replace", "path": "/n", "value": rev}})
				rev++
			}
		})
	}
}

// seedLog gives document docID n revisions: n patch-log rows and revision
// n, as n applies would have left them.
func seedLog(b *testing.B, path, docID string, n int) {
	b.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	t, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, err := t.Exec(`INSERT INTO patch_log (doc_id, revision, tx_id, patch_id, patch_hash, envelope, result, applied_at) VALUES (?, ?, ?, ?, 'h', '{}', '{}', '2026-11-23T00:00:00Z')`,
			docID, i, fmt.Sprintf("seed-%d", i), fmt.Sprintf("seed-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := t.Exec(`UPDATE documents SET revision = ? WHERE doc_id = ?`, n, docID); err != nil {
		b.Fatal(err)
	}
	if err := t.Commit(); err != nil {
		b.Fatal(err)
	}
}
