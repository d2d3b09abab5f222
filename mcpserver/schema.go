package mcpserver

import (
	"encoding/json"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaOptions are the inference rules for every txkernel type: a
// json.RawMessage (a patch, a document, a query that is a string or a
// vector) is any JSON value, an object schema without "type", where plain
// inference would say "an array of bytes" and refuse every patch a model
// sends. (The empty schema would encode as `true`, which some clients
// do not read as a schema; a description keeps it an object.)
var schemaOptions = &jsonschema.ForOptions{
	TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {Description: "any JSON value"},
		reflect.TypeFor[any]():             {Description: "any JSON value"},
	},
}

// inputSchema is a tool's input schema: the params type's, an object. For
// a memory tool the principal member is left out: the facade fixes it.
func inputSchema(t reflect.Type, memoryTool bool) (*jsonschema.Schema, error) {
	s, err := forType(t)
	if err != nil {
		return nil, err
	}
	if memoryTool {
		delete(s.Properties, "principal")
		s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return n == "principal" })
	}
	// Members may be added by newer kernels and older hosts may send
	// members a kernel ignores (PROTOCOL.md §2): the schema does not
	// close the object.
	s.AdditionalProperties = nil
	return s, nil
}

// outputSchema is a tool's output schema: the result type's.
func outputSchema(t reflect.Type) (*jsonschema.Schema, error) {
	return forType(t)
}

// forType infers t's schema (through pointers: a result is never null)
// as an object schema.
func forType(t reflect.Type) (*jsonschema.Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, err := jsonschema.ForType(t, schemaOptions)
	if err != nil {
		return nil, err
	}
	if s.Type == "" && len(s.Types) == 0 {
		s.Type = "object"
	}
	return s, nil
}
