package kernel_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/kernel"
)

// goWords are what a Go type or field name looks like in a message:
// "Go struct field", "[]string", "int64", a package-qualified type.
var goWords = regexp.MustCompile(`Go |\[\][a-z]|\bint64\b|\bfloat64\b|\bstruct \{|protocol\.|[A-Z][a-z]+[A-Z][A-Za-z]*\.[a-z]`)

// TestErrorsNameWireFields sends every request method, for every member
// of its params, a value of the wrong JSON type, and checks that the
// -32602 names that member as the wire spells it (never an embedded Go
// struct such as MemoryRequest) and that no Go type appears in the
// message.
func TestErrorsNameWireFields(t *testing.T) {
	t.Parallel()
	p, _ := start(t)
	sent := 0
	for _, m := range kernel.Methods() {
		if m.Notification || m.Effect == kernel.Session {
			continue
		}
		for _, f := range wireMembers(m.Params) {
			wrong, ok := wrongValue(f.typ)
			if !ok {
				continue
			}
			sent++
			resp, _ := p.Call(m.Name, map[string]any{f.name: wrong})
			e, _ := resp["error"].(map[string]any)
			if e == nil {
				t.Errorf("%s {%q: %s}: no error: %v", m.Name, f.name, wrong, resp["result"])
				continue
			}
			data, _ := e["data"].(map[string]any)
			msg, _ := e["message"].(string)
			if e["code"].(float64) != -32602 || data["field"] != f.name {
				t.Errorf("%s {%q: %s}: code %v data %v, want -32602 naming %q", m.Name, f.name, wrong, e["code"], data, f.name)
			}
			if goWords.MatchString(msg) {
				t.Errorf("%s {%q: %s}: the message names Go: %q", m.Name, f.name, wrong, msg)
			}
		}
	}
	if sent < 60 {
		t.Fatalf("only %d malformed requests sent: the table walk found too few members", sent)
	}
}

type member struct {
	name string
	typ  reflect.Type
}

// wireMembers lists a params struct's JSON members, embedded structs'
// promoted as encoding/json promotes them.
func wireMembers(t reflect.Type) []member {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []member
	if t.Kind() != reflect.Struct {
		return nil
	}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			out = append(out, wireMembers(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, member{name, f.Type})
	}
	return out
}

// wrongValue is a JSON value of another type than t decodes from; false
// for members that take any JSON (raw messages, interfaces) or decode
// themselves.
func wrongValue(t reflect.Type) (json.RawMessage, bool) {
	if t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface {
		return nil, false
	}
	if t.Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil, false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return json.RawMessage(`12345`), true
	case reflect.Bool, reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Uint32, reflect.Uint64:
		return json.RawMessage(`"not a number"`), true
	case reflect.Slice, reflect.Array, reflect.Map:
		return json.RawMessage(`"not a list"`), true
	case reflect.Struct:
		return json.RawMessage(`"not an object"`), true
	}
	return nil, false
}
