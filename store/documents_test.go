package store

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/errs"
)

func open(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

// TestCommitStagedOnce: committing a staged change twice (as recovery may)
// has one effect; a second transaction staged against the old revision is
// stale; a patch id reused with another hash is a conflict.
func TestCommitStagedOnce(t *testing.T) {
	ctx := context.Background()
	db, path := open(t)
	if _, err := db.Documents().CreateDocument(ctx, "d", "json", []byte(`{"n":1}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Documents().CreateDocument(ctx, "d", "json", []byte(`{}`), ""); !errs.KindIs(err, errs.Exists) {
		t.Fatalf("second create: %v", err)
	}
	stage := func(tx, patch, hash, content string) {
		t.Helper()
		if err := db.Documents().StageCommit(ctx, StagedCommit{TxID: tx, DocID: "d", Content: []byte(content), PatchID: patch, PatchHash: hash, Envelope: []byte(`{}`), Result: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	stage("tx1", "p1", "h1", `{"n":2}`)
	stage("tx2", "p2", "h2", `{"n":3}`)
	for range 2 {
		e, err := db.Documents().CommitStaged(ctx, "tx1")
		if err != nil || e.Revision != 1 {
			t.Fatalf("commit: %+v %v", e, err)
		}
	}
	if _, err := db.Documents().CommitStaged(ctx, "tx2"); !errs.KindIs(err, errs.Stale) {
		t.Fatalf("stale commit: %v", err)
	}
	db.Close()
	db2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	d, err := db2.Documents().Document(ctx, "d")
	if err != nil || d.Revision != 1 || string(d.Content) != `{"n":2}` {
		t.Fatalf("after reopen: %+v %v", d, err)
	}
	if log, _ := db2.Documents().PatchLog(ctx, "d", 0, 10); len(log) != 1 {
		t.Fatalf("log has %d rows, want 1", len(log))
	}
}

// TestConcurrentCommits: two transactions staged against one revision and
// committed at once: exactly one wins.
func TestConcurrentCommits(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	db.Documents().CreateDocument(ctx, "d", "json", []byte(`{}`), "")
	for _, tx := range []string{"a", "b"} {
		db.Documents().StageCommit(ctx, StagedCommit{TxID: tx, DocID: "d", Content: []byte(`{"by":"` + tx + `"}`), PatchID: tx, PatchHash: tx, Envelope: []byte(`{}`), Result: []byte(`{}`)})
	}
	var wg sync.WaitGroup
	errsOut := make([]error, 2)
	for i, tx := range []string{"a", "b"} {
		wg.Go(func() { _, errsOut[i] = db.Documents().CommitStaged(ctx, tx) })
	}
	wg.Wait()
	won := 0
	for _, err := range errsOut {
		if err == nil {
			won++
		} else if !errs.KindIs(err, errs.Stale) {
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d winners", won)
	}
}

// TestLastDecisionAck: the decision context stays until acknowledged;
// the acknowledgement survives a reopen, is idempotent, and never clears a
// newer decision; one PatchSet pending per recipe.
func TestLastDecisionAck(t *testing.T) {
	ctx := context.Background()
	db, path := open(t)
	db.Documents().CreateDocument(ctx, "r", "recipe", []byte(`{}`), "")
	if err := db.Documents().PutPatchSet(ctx, PatchSetRow{PatchSetID: "ps1", DocID: "r", TxID: "t1", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Documents().PutPatchSet(ctx, PatchSetRow{PatchSetID: "ps2", DocID: "r", TxID: "t2", Body: []byte(`{}`)}); !errs.KindIs(err, errs.Pending) {
		t.Fatalf("second pending: %v", err)
	}
	if err := db.Documents().DecidePatchSet(ctx, "ps1", "accepted"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if last, _ := db.Documents().LastDecision(ctx, "r"); !bytes.Contains(last, []byte(`"ps1"`)) {
			t.Fatalf("read %s, want ps1's decision, twice", last)
		}
	}
	db.Close()
	db, _ = Open(ctx, path)
	if last, _ := db.Documents().LastDecision(ctx, "r"); last == nil {
		t.Fatal("the decision did not survive a reopen")
	}
	// A newer decision replaces an unacknowledged one; acknowledging the
	// older one leaves it.
	if err := db.Documents().PutPatchSet(ctx, PatchSetRow{PatchSetID: "ps2", DocID: "r", TxID: "t2", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Documents().DecidePatchSet(ctx, "ps2", "rejected"); err != nil {
		t.Fatal(err)
	}
	if left, err := db.Documents().AckLastDecision(ctx, "r", "ps1"); err != nil || !bytes.Contains(left, []byte(`"ps2"`)) {
		t.Fatalf("ack of the older decision: %s, %v", left, err)
	}
	for range 2 {
		if left, err := db.Documents().AckLastDecision(ctx, "r", "ps2"); err != nil || left != nil {
			t.Fatalf("ack: %s, %v", left, err)
		}
	}
	db.Close()
	db2, _ := Open(ctx, path)
	defer db2.Close()
	if last, _ := db2.Documents().LastDecision(ctx, "r"); last != nil {
		t.Fatalf("acknowledged, yet read after a reopen: %s", last)
	}
}

// TestContentWrittenOnce: a staged content is the one the document points
// at once committed (no copy), the content it replaced is dropped, and an
// aborted staging leaves no content behind: one content row per document.
func TestContentWrittenOnce(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	docs := db.Documents()
	if _, err := docs.CreateDocument(ctx, "d", "json", []byte(`{"n":1}`), ""); err != nil {
		t.Fatal(err)
	}
	for _, tx := range []string{"tx1", "tx2"} {
		if err := docs.StageCommit(ctx, StagedCommit{TxID: tx, DocID: "d", Content: []byte(`{"by":"` + tx + `"}`), PatchID: tx, PatchHash: "h", Envelope: []byte(`{}`), Result: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := docs.CommitStaged(ctx, "tx1"); err != nil {
		t.Fatal(err)
	}
	if err := docs.AbortStaged(ctx, "tx2"); err != nil {
		t.Fatal(err)
	}
	if err := docs.AbortStaged(ctx, "tx1"); err != nil { // after its commit: changes nothing
		t.Fatal(err)
	}
	var ids []string
	rows, err := db.db.QueryContext(ctx, `SELECT content_id FROM doc_contents ORDER BY content_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) != 1 || ids[0] != "tx1" {
		t.Fatalf("content rows %v, want [tx1]", ids)
	}
	if d, err := docs.Document(ctx, "d"); err != nil || string(d.Content) != `{"by":"tx1"}` || d.Revision != 1 {
		t.Fatalf("document %+v %v", d, err)
	}
}

// TestMigrateDocumentContents: a kernel.db of schema 4, whose documents and
// staged commits hold their content inline, opens with every content
// readable and its staged commit still committable.
func TestMigrateDocumentContents(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:4] {
		if _, err := raw.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`PRAGMA user_version = 4`,
		`INSERT INTO documents (doc_id, doc_type, content, revision, created_at, updated_at) VALUES ('d', 'json', '{"n":1}', 0, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`,
		`INSERT INTO doc_staged (tx_id, doc_id, expected_revision, content, patch_id, patch_hash, envelope, result, created_at) VALUES ('tx1', 'd', 0, '{"n":2}', 'p1', 'h1', '{}', '{}', '2026-01-01T00:00:00Z')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if d, err := db.Documents().Document(ctx, "d"); err != nil || string(d.Content) != `{"n":1}` {
		t.Fatalf("migrated document %+v %v", d, err)
	}
	if _, err := db.Documents().CommitStaged(ctx, "tx1"); err != nil {
		t.Fatal(err)
	}
	if d, err := db.Documents().Document(ctx, "d"); err != nil || string(d.Content) != `{"n":2}` || d.Revision != 1 {
		t.Fatalf("after the migrated staging's commit %+v %v", d, err)
	}
}
