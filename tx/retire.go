package tx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
)

// denialRecord is one file of denied/: a denied fingerprint and where the
// deny decision is in the ledgers. The ledger stays the source of truth;
// this file lets a deny stick for a new transaction with the same patch
// without reading every ledger at start-up.
type denialRecord struct {
	Fingerprint       string `json:"fingerprint"`
	TransactionID     string `json:"transactionId"`
	ApprovalRequestID string `json:"approvalRequestId"`
}

func (e *Engine) denialPath(fingerprint string) string {
	sum := sha256.Sum256([]byte(fingerprint))
	return filepath.Join(e.deniedDir, hex.EncodeToString(sum[:]))
}

// recordDenials writes, durably, a denied/ file for each deny decision in
// t's ledger that has none yet. It runs before t is retired, so a deny can
// never be forgotten: until the marker is gone, start-up reloads t and
// observes its decisions again.
func (e *Engine) recordDenials(t *transaction) error {
	wrote := false
	for _, d := range t.approvalState().Decisions {
		if d.Decision != protocol.DecisionDeny {
			continue
		}
		path := e.denialPath(d.Fingerprint)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		rec, _ := json.Marshal(denialRecord{Fingerprint: d.Fingerprint, TransactionID: t.id, ApprovalRequestID: d.ApprovalRequestID})
		if err := writeFileSync(path, append(rec, '\n'), 0o600); err != nil {
			return err
		}
		wrote = true
	}
	if wrote {
		return syncDir(e.deniedDir)
	}
	return nil
}

// observeDenials tells the approval registry about persisted denials of the
// fingerprints an apply needs (a lookup per fingerprint; denials are never
// all held in memory).
func (e *Engine) observeDenials(reqs []approvals.Requirement) {
	for _, r := range reqs {
		raw, err := os.ReadFile(e.denialPath(r.Fingerprint))
		if err != nil {
			continue
		}
		var rec denialRecord
		if json.Unmarshal(raw, &rec) != nil || rec.Fingerprint != r.Fingerprint {
			e.log.Warn("unreadable denial record", "fingerprint", r.Fingerprint)
			continue
		}
		e.reg.Observe(rec.TransactionID, protocol.ApprovalDecision{
			ApprovalRequestID: rec.ApprovalRequestID, Kind: r.Kind, Fingerprint: r.Fingerprint, Decision: protocol.DecisionDeny,
		}, false)
	}
}

// dropBlobs deletes t's blob file (or an earlier release's blobs/
// directory): the exact new bytes, secrets included, kept only so that an
// approved apply can stage them. With sync, the removal is made durable
// before dropBlobs returns; without, the caller's next fsync of t's
// directory does it (the apply's closing transaction.json replace).
func (e *Engine) dropBlobs(t *transaction, sync bool) error {
	dir := filepath.Join(t.dir, BlobFile)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return syncDir(t.dir)
}

// retire finishes a transaction that became terminal: its denials are
// recorded, its blobs deleted durably, and then its active/ marker removed
// and its memory released. From then on it is read from disk when asked
// for. Every step is idempotent; a crash anywhere leaves the marker, so the
// next start retires it again. The caller holds t's lock.
func (e *Engine) retire(t *transaction) error {
	if err := e.recordDenials(t); err != nil {
		return err
	}
	if err := e.dropBlobs(t, true); err != nil {
		return err
	}
	if err := e.opts.Failpoints.Hit(context.Background(), fpRetireBeforeUnmark); err != nil {
		return err
	}
	// No fsync: a marker that comes back after a crash only makes the
	// next start read this terminal transaction once more.
	if err := os.Remove(filepath.Join(e.activeDir, t.id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	e.mu.Lock()
	if e.txs[t.id] == t {
		delete(e.txs, t.id)
	}
	e.mu.Unlock()
	return nil
}
