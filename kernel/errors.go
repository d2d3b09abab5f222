package kernel

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// codes is the one table from a domain error's kind to its JSON-RPC code
// (DESIGN.md §2, "Errors"). No package below the kernel chooses a code.
var codes = map[errs.Kind]int64{
	errs.Internal:       protocol.CodeInternalError,
	errs.Invalid:        protocol.CodeInvalidParams,
	errs.NotFound:       protocol.CodeNotFound,
	errs.Stale:          protocol.CodeStaleBase,
	errs.Denied:         protocol.CodeApprovalDenied,
	errs.Sandbox:        protocol.CodeSandboxViolation,
	errs.Validation:     protocol.CodeValidationFailed,
	errs.Conflict:       protocol.CodeValidationFailed,
	errs.Closed:         protocol.CodeTransactionClosed,
	errs.AlreadyDecided: protocol.CodeAlreadyDecided,
	errs.LedgerCorrupt:  protocol.CodeLedgerCorrupt,
	errs.Cancelled:      protocol.CodeRequestCancelled,

	errs.Expired:             protocol.CodeValidationExpired,
	errs.UnknownValidation:   protocol.CodeUnknownValidation,
	errs.HashMismatch:        protocol.CodePatchHashMismatch,
	errs.IdempotencyConflict: protocol.CodeIdempotencyConflict,
	errs.TooLarge:            protocol.CodeTooLarge,
	errs.Pending:             protocol.CodePending,
	errs.Exists:              protocol.CodeExists,
	errs.PermissionDenied:    protocol.CodePermissionDenied,
	errs.Unavailable:         protocol.CodeUnavailable,
}

// wireError maps any error a service returns to a protocol.Error: a
// *protocol.Error the kernel built itself (session and framing errors)
// passes through; a domain error gets its kind's code and its data; a
// bare context cancellation is -32800; anything else is an internal
// error whose text is logged and reported.
func (s *services) wireError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	var k errs.Kinded
	if errors.As(err, &k) {
		code, ok := codes[k.ErrorKind()]
		if !ok {
			code = protocol.CodeInternalError
		}
		if k.ErrorKind() == errs.Internal {
			s.log.Error("internal error", "err", err)
		}
		return &protocol.Error{Code: code, Message: k.Error(), Data: k.ErrorData()}
	}
	if errors.Is(err, context.Canceled) {
		return protocol.NewError(protocol.CodeRequestCancelled, nil, "request cancelled")
	}
	s.log.Error("internal error", "err", err)
	return protocol.NewError(protocol.CodeInternalError, nil, "internal error: %v", err)
}

// toWire is err as the wire carries it: its code (never 0), and its
// message and data redacted: error text can quote the host's input (a
// diff line that does not parse, a path) or a file's content (a
// conflict's expected and actual text).
func (s *services) toWire(err error) *protocol.Error {
	return s.redact(s.wireError(err))
}

// redact returns pe with secrets redacted in its message and data. Data is
// redacted as JSON text; if that ever produced invalid JSON the unredacted
// data would be dropped rather than sent.
func (s *services) redact(pe *protocol.Error) *protocol.Error {
	msg, _ := s.scanner.RedactString(pe.Message)
	out := &protocol.Error{Code: pe.Code, Message: msg}
	if out.Code == 0 {
		out.Code = protocol.CodeInternalError
	}
	if pe.Data != nil {
		raw, err := json.Marshal(pe.Data)
		if err == nil {
			red, _ := s.scanner.RedactString(string(raw))
			if json.Valid([]byte(red)) {
				out.Data = json.RawMessage(red)
			}
		}
	}
	return out
}
