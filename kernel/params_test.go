package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// TestParamsErrorsInJSONWords: a type mismatch names JSON types, never Go
// types (issue 7 §6).
func TestParamsErrorsInJSONWords(t *testing.T) {
	cases := []struct {
		raw, field, expected, got string
		into                      any
	}{
		{`{"proposal":"x"}`, "proposal", "object", "string", &protocol.TurnStartParams{}},
		{`{"afterSeq":"1"}`, "afterSeq", "integer", "string", &protocol.TxEventsParams{}},
		{`{"afterSeq":1.5}`, "afterSeq", "integer", "number 1.5", &protocol.TxEventsParams{}},
		{`{"transactionId":7}`, "transactionId", "string", "number", &protocol.TxParams{}},
		{`{"transactionId":true}`, "transactionId", "string", "boolean", &protocol.TxParams{}},
		{`{"proposal":{"files":{}}}`, "proposal.files", "array", "object", &protocol.TurnStartParams{}},
		{`{"proposal":{"files":[{"delete":"yes"}]}}`, "proposal.files.delete", "boolean", "string", &protocol.TurnStartParams{}},
		{`[1]`, "", "object", "array", &protocol.TxParams{}},
		{`"x"`, "", "object", "string", &protocol.TxParams{}},
	}
	for _, c := range cases {
		err := decodeParams([]byte(c.raw), c.into)
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Invalid {
			t.Fatalf("%s: %v", c.raw, err)
		}
		d := e.Data.(errs.InvalidData)
		if d.Field != c.field || d.Expected != c.expected || d.Got != c.got {
			t.Errorf("%s: data %+v, want field %q expected %q got %q", c.raw, d, c.field, c.expected, c.got)
		}
		if strings.Contains(e.Message, "protocol.") || strings.Contains(e.Message, "int64") || strings.Contains(e.Message, "[]") {
			t.Errorf("%s: Go type name in %q", c.raw, e.Message)
		}
	}
}
