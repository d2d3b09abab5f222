package store

import (
	"context"
	"encoding/json"
	"testing"
)

// TestPatchSetCommitRecordsDecision: a PatchSet's apply (patch-log key
// PatchSetLogPrefix + its id) writes its accepted PatchDecision in the
// same SQL transaction as the revision (seed 003: the decision "must be
// recorded"), so no crash can leave one without the other; an ordinary
// patch touches no PatchSet.
func TestPatchSetCommitRecordsDecision(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	docs := db.Documents()
	if _, err := docs.CreateDocument(ctx, "r", "recipe", []byte(`{}`), ""); err != nil {
		t.Fatal(err)
	}
	if err := docs.PutPatchSet(ctx, PatchSetRow{PatchSetID: "ps1", DocID: "r", TxID: "tx-ps1", Body: []byte(`{}`), Summary: []byte(`{"title":"t"}`)}); err != nil {
		t.Fatal(err)
	}
	stage := func(tx, patch, content string, rev int64) {
		t.Helper()
		if err := docs.StageCommit(ctx, StagedCommit{TxID: tx, DocID: "r", ExpectedRevision: rev, Content: []byte(content), PatchID: patch, PatchHash: "h", Envelope: []byte(`{}`), Result: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	stage("tx-p", "p1", `{"a":1}`, 0)
	if _, err := docs.CommitStaged(ctx, "tx-p"); err != nil {
		t.Fatal(err)
	}
	if row, _ := docs.PatchSet(ctx, "ps1"); row.State != "pending" {
		t.Fatalf("an ordinary patch decided ps1: %s", row.State)
	}
	stage("tx-ps1", PatchSetLogPrefix+"ps1", `{"a":2}`, 1)
	if _, err := docs.CommitStaged(ctx, "tx-ps1"); err != nil {
		t.Fatal(err)
	}
	row, err := docs.PatchSet(ctx, "ps1")
	if err != nil || row.State != "accepted" || row.DecidedAt.IsZero() {
		t.Fatalf("ps1 after its apply = %+v, %v; want accepted", row, err)
	}
	last, err := docs.LastDecision(ctx, "r")
	var d lastDecision
	if err != nil || json.Unmarshal(last, &d) != nil || d.PatchSetID != "ps1" || d.Decision != "accepted" {
		t.Fatalf("lastPatchDecision = %s, %v; want ps1 accepted", last, err)
	}
	// A second commit (recovery) changes nothing.
	if e, err := docs.CommitStaged(ctx, "tx-ps1"); err != nil || e.Revision != 2 {
		t.Fatalf("commit again: %+v, %v", e, err)
	}
}
