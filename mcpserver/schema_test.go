package mcpserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/kernel"
)

// keywords are the JSON Schema keywords that constrain a value; a schema
// object with none of them accepts anything, which the MCP Inspector's
// --strict flags ("carries no validation keyword at all").
var keywords = []string{"type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf", "not", "properties", "items", "required", "additionalProperties"}

// TestToolSchemasPortable: every tool's input and output schema, for every
// method of the table, has a validation keyword on every node and no
// `type` array (each type is its own anyOf branch), so `inspector --strict`
// reports no warning (make mcp-inspector runs the real one).
func TestToolSchemasPortable(t *testing.T) {
	for _, m := range kernel.Methods() {
		if m.Notification || m.Params == nil {
			continue
		}
		in, err := inputSchema(m.Params, m.Service == "memory", false)
		if err != nil {
			t.Fatalf("%s: input schema: %v", m.Name, err)
		}
		out, err := outputSchema(m.Result)
		if err != nil {
			t.Fatalf("%s: output schema: %v", m.Name, err)
		}
		for side, s := range map[string]any{"inputSchema": in, "outputSchema": out} {
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			for _, problem := range portability(v, side) {
				t.Errorf("%s: %s", m.Name, problem)
			}
		}
	}
}

// portability lists the nodes of schema s (decoded JSON) under path that
// have no keyword or a type array.
func portability(s any, path string) []string {
	obj, ok := s.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	has := false
	for _, k := range keywords {
		if _, ok := obj[k]; ok {
			has = true
		}
	}
	if !has {
		out = append(out, path+": no validation keyword")
	}
	if _, ok := obj["type"].([]any); ok {
		out = append(out, path+": type is an array")
	}
	if props, ok := obj["properties"].(map[string]any); ok {
		for name, p := range props {
			out = append(out, portability(p, path+".properties."+name)...)
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		out = append(out, portability(obj[k], path+"."+k)...)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		list, _ := obj[k].([]any)
		for i, x := range list {
			out = append(out, portability(x, fmt.Sprintf("%s.%s[%d]", path, k, i))...)
		}
	}
	if strings.Contains(path, "$defs") {
		return out
	}
	if defs, ok := obj["$defs"].(map[string]any); ok {
		for name, d := range defs {
			out = append(out, portability(d, path+".$defs."+name)...)
		}
	}
	return out
}

// TestFixedScopeSchema: with a fixed scope, no memory tool's input schema
// has a scope or principal member; without one, the tools that take a
// scope still list it.
func TestFixedScopeSchema(t *testing.T) {
	scoped := 0
	for _, m := range kernel.Methods() {
		if m.Service != "memory" || m.Notification {
			continue
		}
		open, err := inputSchema(m.Params, true, false)
		if err != nil {
			t.Fatal(err)
		}
		fixed, err := inputSchema(m.Params, true, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := open.Properties["scope"]; ok {
			scoped++
		}
		for _, name := range []string{"scope", "principal"} {
			if _, ok := fixed.Properties[name]; ok {
				t.Errorf("%s: fixed-scope schema lists %s", m.Name, name)
			}
			if slices.Contains(fixed.Required, name) {
				t.Errorf("%s: fixed-scope schema requires %s", m.Name, name)
			}
		}
	}
	if scoped == 0 {
		t.Fatal("no memory tool takes a scope: the test checks nothing")
	}
}
