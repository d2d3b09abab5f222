package kernel

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
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

// goTypeName matches what Go's reflection and encoding/json would put in a
// message: Go type names, package-qualified types and "Go struct field".
var goTypeName = regexp.MustCompile(`\b(u?int(8|16|32|64)?|uintptr|float(32|64)|bool|struct|interface|RawMessage)\b|map\[|\[\]|\b(protocol|json|errs|tx)\.[A-Z]|\bGo (struct|value)`)

// TestParamsNoGoTypeNamesOnWire sends every malformed params case of
// TestMalformedParamsEveryMethod to every method and checks the wire error
// (message and data) for Go type names (issue 7 §6).
func TestParamsNoGoTypeNamesOnWire(t *testing.T) {
	s := newTestServer(t)
	for _, name := range RequestMethods() {
		if name == "shutdown" {
			continue
		}
		cases := append(slices.Clone(malformedCommon), malformedByMethod[name]...)
		cases = append(cases, `{"transactionId":{},"proposal":[],"afterSeq":true,"limit":"x","decision":[1]}`)
		for _, p := range cases {
			raw := json.RawMessage(p)
			_, err := callRow(s, methods[name], raw)
			if err == nil {
				continue
			}
			we := s.toWire(err)
			text := we.Message
			if we.Data != nil {
				text += " " + string(we.Data.(json.RawMessage))
			}
			if m := goTypeName.FindString(text); m != "" {
				t.Errorf("%s(%s): Go type name %q on the wire: %s", name, p, m, text)
			}
		}
	}
}

// TestMethodTableTypes checks the method table: every request method
// records the Go types of its params and result (what JSON Schema and tool
// export reflect on), the result a pointer to a struct or a map.
func TestMethodTableTypes(t *testing.T) {
	for name, m := range methods {
		if m.notify {
			continue
		}
		if m.params == nil || m.result == nil {
			t.Errorf("%s: params %v, result %v: a row of a domain service must record both", name, m.params, m.result)
		}
		if m.result != nil && m.result.Kind() != reflect.Pointer && m.result.Kind() != reflect.Map {
			t.Errorf("%s: result type %v is not a pointer to a result struct", name, m.result)
		}
	}
}
