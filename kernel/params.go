package kernel

// This file decodes a method's by-name params into its typed struct and
// words a mismatch in JSON's types, never Go's.

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"

	"github.com/txkernel/txkernel/errs"
)

// decodeParams decodes by-name params into v. An unknown member, or one
// spelt in another case than its wire name, is refused with the known
// names (checkClosed), except unknown members of protocol.Open objects
// (initialize's). A type mismatch is errs.Invalid with data {field,
// expected, got} in JSON's words (object, array, string, integer, number,
// boolean, null), never a Go type name: a host's developer reads these.
func decodeParams(raw []byte, v any) error {
	if err := paramsObject(raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return paramsError(err, reflect.TypeOf(v), "")
	}
	return checkClosed(raw, reflect.TypeOf(v), "")
}

// paramsObject refuses params that are not an object, as decodeParams
// does before decoding them.
func paramsObject(raw []byte) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] != '{' {
		return errs.New(errs.Invalid, errs.InvalidData{Field: "", Expected: "object", Got: jsonKind(trimmed)},
			"params must be an object, got %s", jsonKind(trimmed))
	}
	return nil
}

// paramsError words err, from json.Unmarshal into a value of type t at
// the wire path prefix of the params ("" for params itself), as
// decodeParams answers it: a type mismatch in JSON's words, a syntax
// error, or a type's own refusal.
func paramsError(err error, t reflect.Type, prefix string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want, got := jsonType(te.Type), te.Value
		if got == "bool" {
			got = "boolean" // encoding/json's one Go-flavoured word
		}
		field := wirePath(t, te.Field)
		if prefix != "" {
			field = join(prefix, field)
			if te.Field == "" {
				field = prefix
			}
		}
		return errs.New(errs.Invalid, errs.InvalidData{Field: field, Expected: want, Got: got},
			"params.%s: expected %s, got %s", field, want, got)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errs.New(errs.Invalid, errs.InvalidData{Field: "", Reason: "syntax"}, "params are not valid JSON: %v", se)
	}
	// A type's own decoder (a selector, a query) refused its value;
	// its message is written for hosts.
	return errs.New(errs.Invalid, errs.InvalidData{Field: ""}, "invalid params: %v", err)
}

// jsonType names the JSON type that decodes into t.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string" // []byte decodes from a base64 string
		}
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "value"
}

// jsonKind names the JSON type of a raw value from its first byte.
func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
