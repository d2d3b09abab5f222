package mcpserver

import (
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/txkernel/txkernel/wireschema"
)

// inputSchema is a tool's input schema: the params type's, an object. For
// a memory tool the principal member is left out, and the scope member
// too when fixedScope: the facade fixes them.
func inputSchema(t reflect.Type, memoryTool, fixedScope bool) (*jsonschema.Schema, error) {
	s, err := forType(t)
	if err != nil {
		return nil, err
	}
	var fixed []string
	if memoryTool {
		fixed = append(fixed, "principal")
	}
	if fixedScope {
		fixed = append(fixed, "scope")
	}
	for _, name := range fixed {
		delete(s.Properties, name)
		s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return n == name })
	}
	// Members may be added by newer kernels and older hosts may send
	// members a kernel ignores (PROTOCOL.md §2): the schema does not
	// close the object.
	s.AdditionalProperties = nil
	return s, nil
}

// outputSchema is a tool's output schema: the result type's, or a
// kernel error's {code, message, data} (toolError), since a tool error
// carries the error as its structured content and clients check that
// against the output schema too.
func outputSchema(t reflect.Type) (*jsonschema.Schema, error) {
	res, err := forType(t)
	if err != nil {
		return nil, err
	}
	return &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{res, errorSchema()}}, nil
}

// errorSchema is a tool error's structured content: the kernel error's
// JSON-RPC code, its message and its data (PROTOCOL.md §9).
func errorSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:        "object",
		Description: "a kernel error (isError): its JSON-RPC code, message and data",
		Properties: map[string]*jsonschema.Schema{
			"code":    {Type: "integer"},
			"message": {Type: "string"},
			"data":    {Type: "object", Description: "the error's machine-readable data, as over JSON-RPC (PROTOCOL.md §9)"},
		},
		Required:             []string{"code", "message"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
}

// forType is wireschema's schema of t (the one derivation of the
// protocol's schemas) as an object schema, with nullable types spelt as
// anyOf.
func forType(t reflect.Type) (*jsonschema.Schema, error) {
	s, err := wireschema.ForType(t)
	if err != nil {
		return nil, err
	}
	if s.Type == "" && len(s.Types) == 0 {
		s.Type = "object"
	}
	splitNullable(s)
	return s, nil
}

// splitNullable rewrites every `"type": [T1, T2, …]` into `anyOf:
// [{"type": T1, …}, {"type": T2, …}]`: inference's `["null", T]` for a Go
// slice, map or pointer (null first, bare), a progress token's `["string",
// "integer"]`, and an any-JSON member's six types. The same set of values,
// in the spelling that every client's schema reader takes (the MCP
// Inspector's portability check flags the array form).
func splitNullable(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) >= 2 {
		// Each type its own branch; "null" first and bare, as the
		// nullable spelling has always been.
		types := slices.Clone(s.Types)
		slices.SortStableFunc(types, func(a, b string) int {
			return boolInt(b == "null") - boolInt(a == "null")
		})
		branches := make([]*jsonschema.Schema, 0, len(types))
		for _, typ := range types {
			if typ == "null" {
				branches = append(branches, &jsonschema.Schema{Type: "null"})
				continue
			}
			inner := *s
			inner.Types, inner.Type = nil, typ
			inner.Description, inner.Title = "", ""
			splitNullable(&inner)
			branches = append(branches, &inner)
		}
		*s = jsonschema.Schema{Description: s.Description, Title: s.Title, AnyOf: branches}
		return
	}
	for _, p := range s.Properties {
		splitNullable(p)
	}
	splitNullable(s.Items)
	splitNullable(s.AdditionalProperties)
	for _, list := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf, s.AllOf, s.PrefixItems} {
		for _, x := range list {
			splitNullable(x)
		}
	}
	for _, d := range s.Defs {
		splitNullable(d)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
