package tx

import (
	"unicode/utf8"

	"github.com/txkernel/txkernel/errs"
)

// TxData is the data of errors about one transaction: NotFound (no such
// transaction) and Closed (it refuses the call in its state). An unknown
// id over 256 bytes is echoed cut there, with "…" after it.
type TxData struct {
	TransactionID string `json:"transactionId"`
	State         string `json:"state,omitempty"`
}

// ApprovalData is the data of errors about one approval request: NotFound
// (no such request in the transaction) and AlreadyDecided.
type ApprovalData struct {
	ApprovalRequestID string `json:"approvalRequestId"`
	TransactionID     string `json:"transactionId,omitempty"`
	Decision          string `json:"decision,omitempty"` // the decision already taken
}

// DeniedData is the data of a Denied error: the denied fingerprint and where
// its deny decision was recorded.
type DeniedData struct {
	Fingerprint       string `json:"fingerprint"`
	ApprovalRequestID string `json:"approvalRequestId"`
	TransactionID     string `json:"transactionId"`
}

// CorruptData is the data of a LedgerCorrupt error: the file, the 1-based
// line when the ledger has one bad line, and why.
type CorruptData struct {
	TransactionID string `json:"transactionId"`
	File          string `json:"file,omitempty"`
	Path          string `json:"path,omitempty"` // a workspace path recovery could not finish
	Line          int    `json:"line,omitempty"`
	Reason        string `json:"reason"`
}

// ValidationData is the data of a Validation error raised by the engine.
type ValidationData struct {
	Reason string `json:"reason"` // empty | unknown-kind
	Path   string `json:"path,omitempty"`
}

// KindData is the data of an Invalid proposal.kind: Field
// "proposal.kind", Reason "missing", "unknown-kind" or "internal-kind" (a
// kind only its service's own methods propose), the Kind sent, and
// Accepted, the kinds the caller may send (for turn/start, initialize's
// capabilities.proposalKinds).
type KindData struct {
	Field    string   `json:"field"`
	Reason   string   `json:"reason"`
	Kind     string   `json:"kind,omitempty"`
	Accepted []string `json:"accepted"`
}

// maxEchoedID bounds the bytes of an unknown transaction id that its
// NotFound error echoes, in its message and again in its data: a real id
// is 23 bytes, and a host that sent a megabyte of id got two back.
const maxEchoedID = 256

func notFoundTx(id string) error {
	if len(id) > maxEchoedID {
		cut := maxEchoedID
		for cut > 0 && !utf8.RuneStart(id[cut]) {
			cut--
		}
		id = id[:cut] + "…"
	}
	return errs.New(errs.NotFound, TxData{TransactionID: id}, "no transaction %q", id)
}

func corrupt(d CorruptData, format string, args ...any) error {
	return errs.New(errs.LedgerCorrupt, d, format, args...)
}

// planCorrupt is the load error of a transaction whose pointers.proposal,
// read from file, its target cannot load (Target.Load): err, with the
// transaction and the file named.
func planCorrupt(id, file string, err error) error {
	return errs.Wrap(errs.LedgerCorrupt, err, CorruptData{TransactionID: id, File: file, Reason: "target plan: " + err.Error()},
		"transaction %s: its target cannot load its plan: %v", id, err)
}
