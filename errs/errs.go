// Package errs is txkernel's domain error: an error with a Kind and typed,
// machine-readable Data (DESIGN.md §2, "Errors"). Packages below the kernel
// return these and never choose a JSON-RPC code; the kernel maps each Kind
// to exactly one wire code in one table (kernel/errors.go).
//
// A package that keeps an error type of its own (sandbox.PathError,
// unidiff.ConflictError) implements Kinded instead, so callers can still
// errors.As to the concrete type. errs imports the standard library only,
// so every package may use it.
package errs

import (
	"errors"
	"fmt"
)

// Kind classifies a domain error. The kernel's table maps each Kind to one
// stable wire code; the Kind itself never appears on the wire.
type Kind string

// The kinds. Each names what went wrong from the caller's side, not where.
const (
	// Internal: a bug or an I/O failure inside the kernel (-32603).
	Internal Kind = "internal"
	// Invalid: the request's params are malformed or incomplete (-32602).
	// Data: InvalidData.
	Invalid Kind = "invalid"
	// NotFound: an id or a target that must exist does not (-32002).
	NotFound Kind = "not_found"
	// Stale: a target changed since the proposal: base sha256, revision or
	// selected version (-32001). Data: the target's stale report.
	Stale Kind = "stale"
	// Denied: a fingerprint this apply needs was denied (-32003).
	Denied Kind = "denied"
	// Sandbox: a path escapes the workspace, is protected, or the sandbox
	// is read-only (-32004).
	Sandbox Kind = "sandbox"
	// Validation: the proposal is well-formed but cannot be planned: it
	// changes nothing, twice, or something that already exists (-32005).
	Validation Kind = "validation"
	// Conflict: a change does not apply to the target's current content,
	// such as a diff hunk whose context is not found (-32005).
	Conflict Kind = "conflict"
	// Closed: the transaction is terminal or past its commit point and
	// refuses the call (-32006).
	Closed Kind = "closed"
	// AlreadyDecided: an approval request already has a different
	// decision (-32007).
	AlreadyDecided Kind = "already_decided"
	// LedgerCorrupt: a ledger, transaction.json or blob is corrupt beyond
	// a torn final line (-32008).
	LedgerCorrupt Kind = "ledger_corrupt"
	// Cancelled: the request's context was cancelled (-32800).
	Cancelled Kind = "cancelled"
	// Expired: a validation_id past its expiresAt (seed 000's validation
	// artefact: PROTOCOL.md §11); validate again (-32011).
	Expired Kind = "expired"
	// UnknownValidation: a validation_id the kernel never issued, or one
	// issued for another document (-32012).
	UnknownValidation Kind = "unknown_validation"
	// HashMismatch: the patch sent to patch/apply is not the one that was
	// validated: its RFC 8785 sha256 differs (-32013).
	HashMismatch Kind = "hash_mismatch"
	// IdempotencyConflict: a patch_id already used with a different payload
	// (the Idempotency-Key rule) (-32014).
	IdempotencyConflict Kind = "idempotency_conflict"
	// TooLarge: an input over a configured limit: document size, nesting
	// depth (-32015). Data names the limit and the value.
	TooLarge Kind = "too_large"
	// Pending: something of which only one may be pending already is: a
	// recipe's PatchSet (seed 003) (-32016).
	Pending Kind = "pending"
	// Exists: a create of something that already exists, such as a docId
	// (-32017).
	Exists Kind = "exists"
	// PermissionDenied: the principal holds no grant for the action in the
	// scope (seed 002's permission-trimmed retrieval: PROTOCOL.md §13), claims
	// a role the policy does not give it, decides its own proposal, or memory
	// runs without a policy (-32018). Data names the reason.
	PermissionDenied Kind = "permission_denied"
	// Unavailable: a service the request needs is out of reach for now,
	// such as the team's memory database while its server restarts
	// (-32019). Nothing was changed unless data says the outcome is
	// unknown; the request may be sent again. Data: UnavailableData.
	Unavailable Kind = "unavailable"
)

// UnavailableData is the data of an Unavailable error: what is out of
// reach (Service, such as "memory-store"), why (Reason: "unreachable"
// when no connection could be made, "connection-lost" when it broke
// during the request, "shutting-down" when the server refused it), and
// whether the request's writes may have been committed anyway
// (OutcomeUnknown: the connection broke while they were committing; the
// request is idempotent to send again when it names its own ids).
type UnavailableData struct {
	Service        string `json:"service"`
	Reason         string `json:"reason"`
	OutcomeUnknown bool   `json:"outcomeUnknown,omitempty"`
	// Written, for a request that commits in steps (memory/ingest's
	// batches), counts what was committed before the outage and is kept:
	// sending the request again finishes it.
	Written int `json:"written,omitempty"`
}

// Error is a domain error: a Kind, a message for people, typed Data for
// programs (encoded as JSON-RPC error.data), and an optional cause.
type Error struct {
	Kind    Kind
	Message string
	Data    any   // a struct with json tags, or nil; never holds secrets unredacted
	Err     error // the cause, for errors.Is/As; not sent on the wire
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorKind implements Kinded.
func (e *Error) ErrorKind() Kind { return e.Kind }

// ErrorData implements Kinded.
func (e *Error) ErrorData() any { return e.Data }

// Is reports whether target is an *Error of the same Kind with no message,
// so that errors.Is(err, errs.E(errs.Stale)) matches any stale error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Data == nil && t.Err == nil && t.Kind == e.Kind
}

// New returns an *Error with the given kind, data and formatted message.
func New(kind Kind, data any, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Data: data}
}

// Wrap returns an *Error of kind around cause; the message is cause's text
// unless format is given.
func Wrap(kind Kind, cause error, data any, format string, args ...any) *Error {
	msg := ""
	if format != "" {
		msg = fmt.Sprintf(format, args...)
	} else if cause != nil {
		msg = cause.Error()
	}
	return &Error{Kind: kind, Message: msg, Data: data, Err: cause}
}

// Kinded is implemented by error types that carry a Kind without being an
// *Error (sandbox.PathError, unidiff.ConflictError).
type Kinded interface {
	error
	ErrorKind() Kind
	ErrorData() any
}

// KindOf returns the Kind and Data of the first Kinded error in err's chain,
// or (Internal, nil) when there is none.
func KindOf(err error) (Kind, any) {
	var k Kinded
	if errors.As(err, &k) {
		return k.ErrorKind(), k.ErrorData()
	}
	return Internal, nil
}

// KindIs reports whether err is a non-nil error of kind k (KindOf).
func KindIs(err error, k Kind) bool {
	if err == nil {
		return false
	}
	got, _ := KindOf(err)
	return got == k
}

// InvalidData is the data of an Invalid error: the params field at fault
// (a dotted path such as "proposal.files[2].path"), and for a type mismatch
// the JSON type expected and the JSON type received.
type InvalidData struct {
	Field    string `json:"field"`
	Expected string `json:"expected,omitempty"` // object, array, string, integer, number, boolean
	Got      string `json:"got,omitempty"`
	Path     string `json:"path,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Known lists the members an object takes, when Reason is
	// "unknown-member" (a misspelt filter or selector member).
	Known []string `json:"known,omitempty"`
}

// InvalidField returns an Invalid error naming field.
func InvalidField(field, format string, args ...any) *Error {
	return New(Invalid, InvalidData{Field: field}, format, args...)
}
