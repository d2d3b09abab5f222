package protocol

import (
	"errors"
	"fmt"
)

// Standard JSON-RPC 2.0 error codes (JSON-RPC 2.0 §5.1) and the LSP
// cancellation code.
const (
	CodeParseError       int64 = -32700 // invalid JSON; answered with id null
	CodeInvalidRequest   int64 = -32600 // not a valid Request object, or too large
	CodeMethodNotFound   int64 = -32601 // no such method
	CodeInvalidParams    int64 = -32602 // params do not decode; data.field names the field
	CodeInternalError    int64 = -32603 // a bug or an I/O failure inside the kernel
	CodeRequestCancelled int64 = -32800 // cancelled by $/cancelRequest (LSP RequestCancelled)
)

// Application error codes, in the server range -32000..-32099. Each is stable
// and documented in PROTOCOL.md with the shape of its data.
const (
	// CodeStaleBase: a target file no longer matches base_sha256_by_path, or an
	// added file now exists. data: {"stalePaths": [...]}.
	CodeStaleBase int64 = -32001
	// CodeNotFound: unknown transactionId or approvalRequestId, or a target file
	// that must exist does not. data: {"transactionId"|"approvalRequestId"|"path"}.
	CodeNotFound int64 = -32002
	// CodeApprovalDenied: a fingerprint this apply needs has a deny decision
	// in the ledger. data: {"fingerprint","approvalRequestId","transactionId"}.
	CodeApprovalDenied int64 = -32003
	// CodeSandboxViolation: the path escapes the workspace, names a protected
	// path, passes through a symlink, or the sandbox is read-only.
	// data: {"path","reason","sandbox"}.
	CodeSandboxViolation int64 = -32004
	// CodeValidationFailed: the proposal does not apply to the current files
	// (hunk mismatch, bad diff, needle absent). data: {"path","hunk","reason"}.
	CodeValidationFailed int64 = -32005
	// CodeTransactionClosed: the transaction was closed or discarded and can
	// no longer change. data: {"transactionId","state"}.
	CodeTransactionClosed int64 = -32006
	// CodeAlreadyDecided: approval/respond on a request that already has a
	// different decision. data: {"approvalRequestId","decision"}.
	CodeAlreadyDecided int64 = -32007
	// CodeLedgerCorrupt: a transaction's events.jsonl or transaction.json is
	// corrupt beyond a torn final line. data: {"transactionId","file","line"}.
	CodeLedgerCorrupt int64 = -32008
	// CodeNotInitialized: a method other than initialize arrived before
	// initialize. data: {"method"}.
	CodeNotInitialized int64 = -32009
	// CodeShuttingDown: a request arrived after shutdown. data: {"method"}.
	CodeShuttingDown int64 = -32010
	// CodeValidationExpired: patch/apply with a validationId past its
	// expiresAt. data: {"validationId","expiresAt"}.
	CodeValidationExpired int64 = -32011
	// CodeUnknownValidation: patch/apply with a validationId the kernel never
	// issued for this document. data: {"validationId"}.
	CodeUnknownValidation int64 = -32012
	// CodePatchHashMismatch: the patch sent to patch/apply differs from the
	// validated one. data: {"validationId","validatedHash","patchHash"}.
	CodePatchHashMismatch int64 = -32013
	// CodeIdempotencyConflict: a patch_id or patchSetId reused with a
	// different payload. data: {"patchId","appliedHash","patchHash"}.
	CodeIdempotencyConflict int64 = -32014
	// CodeTooLarge: a document over the size limit or nested deeper than the
	// depth limit. data: {"limit","max","actual"}.
	CodeTooLarge int64 = -32015
	// CodePending: a recipe already has a PatchSet pending review.
	// data: {"docId","patchSetId"}.
	CodePending int64 = -32016
	// CodeExists: doc/create of a docId that exists. data: {"docId"}.
	CodeExists int64 = -32017
	// CodePermissionDenied: the principal holds no grant of --memory-policy
	// for this action in this scope (reason no-grant), claims a role the
	// policy does not give it (role-not-held), accepts or rejects its own
	// proposal (own-proposal), or the kernel runs without a policy
	// (no-policy). data: {"reason", "action", "scope", "principal_id",
	// "purpose"?, "role"?, "proposal_id"?} or {"flag", "reason"}.
	CodePermissionDenied int64 = -32018
	// CodeUnavailable: a service the request needs is out of reach for
	// now: the team's memory database (--memory-store postgres://…) is
	// down, restarting or unreachable. Sending the request again once it
	// is back is safe. data: {"service": "memory-store", "reason":
	// "unreachable"|"connection-lost"|"shutting-down", "outcomeUnknown"?}.
	CodeUnavailable int64 = -32019
)

// Error is a JSON-RPC 2.0 error object (JSON-RPC 2.0 §5.1). Services return it
// (wrapped or not) to choose the wire code; the kernel sends Code, Message and
// Data unchanged. Data is machine-readable and never holds secrets.
type Error struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Is reports whether target is a *Error with the same code, so that
// errors.Is(err, &Error{Code: CodeStaleBase}) matches any stale-base error.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code
}

// NewError returns an *Error with the given code, data and formatted message.
func NewError(code int64, data any, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Data: data}
}

// ErrCode returns a sentinel that matches any *Error with code, for errors.Is.
func ErrCode(code int64) error { return &Error{Code: code} }
