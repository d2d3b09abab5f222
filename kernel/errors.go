package kernel

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx/unidiff"
)

// toWire maps any error a service returns to exactly one JSON-RPC error
// object. It is the only place that chooses wire codes for errors that are
// not already *protocol.Error, and it never returns code 0.
func (s *Server) toWire(err error) *jsonrpc2.Error {
	var (
		pe *protocol.Error
		se *sandbox.PathError
		de *unidiff.ParseError
		ce *unidiff.ConflictError
	)
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &se):
		pe = protocol.NewError(protocol.CodeSandboxViolation,
			map[string]any{"path": se.Path, "reason": se.Reason, "sandbox": string(s.cfg.Workspace.Mode())},
			"sandbox violation: %v", se)
	case errors.As(err, &ce):
		pe = protocol.NewError(protocol.CodeValidationFailed,
			map[string]any{"path": ce.Path, "hunk": ce.Hunk, "reason": ce.Reason},
			"the diff does not apply to %s (hunk %d): %s", ce.Path, ce.Hunk, ce.Reason)
	case errors.As(err, &de):
		pe = protocol.NewError(protocol.CodeValidationFailed,
			map[string]any{"line": de.Line, "reason": de.Reason},
			"the diff cannot be parsed: %v", de)
	case errors.Is(err, context.Canceled):
		pe = protocol.NewError(protocol.CodeRequestCancelled, nil, "request cancelled")
	default:
		s.log.Error("internal error", "err", err)
		pe = protocol.NewError(protocol.CodeInternalError, nil, "internal error: %v", err)
	}
	// Error text can quote the host's input (a diff line that does not
	// parse, a path): redact it like everything else the kernel echoes.
	msg, _ := s.scanner.RedactString(pe.Message)
	out := &jsonrpc2.Error{Code: pe.Code, Message: msg}
	if out.Code == 0 {
		out.Code = protocol.CodeInternalError
	}
	if pe.Data != nil {
		if raw, mErr := json.Marshal(pe.Data); mErr == nil {
			red, _ := s.scanner.RedactString(string(raw))
			if !json.Valid([]byte(red)) {
				red = string(raw) // redaction never splits JSON here, but stay safe
			}
			rm := json.RawMessage(red)
			out.Data = &rm
		}
	}
	return out
}
