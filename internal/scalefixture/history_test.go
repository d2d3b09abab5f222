package scalefixture

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
)

// TestHistoryIsReal builds a small History and opens the engine on it in
// process: every copy loads (its resealed checksums verify), the live ones
// are in tx/list's active filter with their approval request, every
// transaction answers tx/status under its own id, and a live copy applies.
func TestHistoryIsReal(t *testing.T) {
	h := BuildHistory(t, t.TempDir(), 50, 7)
	if len(h.LiveIDs) != 7 || len(h.Newest) != 50 {
		t.Fatalf("%d live ids, %d newest", len(h.LiveIDs), len(h.Newest))
	}
	active, _ := os.ReadDir(filepath.Join(h.DataDir, tx.ActiveDir))
	if len(active) != 7 {
		t.Fatalf("%d active/ markers", len(active))
	}
	w, err := sandbox.Open(h.WS, sandbox.WorkspaceWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e := open(t, w, h.DataDir, "")
	defer e.Close()
	all := ListAll(t, e, "")
	if len(all) != 50 {
		t.Fatalf("%d transactions listed", len(all))
	}
	var listed []string
	for _, r := range all {
		listed = append(listed, r.TransactionID)
		if r.State == "unavailable" {
			t.Fatalf("%s is unavailable: %v", r.TransactionID, r.LoadErr)
		}
	}
	if !slices.Equal(listed, h.Newest) {
		t.Fatalf("listed %v, want %v", listed, h.Newest)
	}
	var live []string
	for _, r := range ListAll(t, e, protocol.ListActive) {
		if r.PendingApprovals != 1 {
			t.Fatalf("live %s: %+v", r.TransactionID, r)
		}
		live = append([]string{r.TransactionID}, live...)
	}
	if !slices.Equal(live, h.LiveIDs) {
		t.Fatalf("active %v, want %v", live, h.LiveIDs)
	}
	ctx := context.Background()
	for _, id := range listed {
		st, err := e.Status(ctx, id)
		if err != nil || st.TransactionID != id {
			t.Fatalf("status of %s: %+v, %v", id, st, err)
		}
	}
	id := h.LiveIDs[0]
	st, _ := e.Status(ctx, id)
	if _, err := e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: id,
		ApprovalRequestID: st.PendingApprovals[0].ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Apply(ctx, id); err != nil || !res.OK {
		t.Fatalf("apply of a live copy: %+v, %v", res, err)
	}
}

// TestResealIsIdentity: resealing a real ledger line under its own id
// gives back the engine's bytes, so reseal computes the checksum as the
// engine does.
func TestResealIsIdentity(t *testing.T) {
	h := &History{WS: filepath.Join(t.TempDir(), "ws")}
	live, done := h.buildTemplates(t, t.TempDir(), 1, 2)
	for _, tm := range append(live, done...) {
		for _, line := range tm.ledger {
			got, err := reseal(line, tm.id, tm.id)
			if err != nil || !bytes.Equal(got, append(slices.Clone(line), '\n')) {
				t.Fatalf("reseal changed\n%s\ninto\n%s (%v)", line, got, err)
			}
		}
	}
}
