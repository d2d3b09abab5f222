// Package wireschema generates JSON Schema (2020-12) for every message of
// the protocol from the method table's Go types (kernel.Methods), so the
// schemas cannot drift from what the kernel answers: one file per
// method's params and result, one per notification and ledger event, one
// per error data shape, a ClientRequest union and a bundle of all of them
// (PROTOCOL.md §2; as the Codex app-server's generate-json-schema does).
// `txkernel schema --out DIR` writes them; schema/ holds the checked-in
// copy, and tests compare it with a fresh run.
package wireschema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/jsondoc"
	"github.com/txkernel/txkernel/jsondoc/recipe"
	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/unidiff"
	"github.com/txkernel/txkernel/workspace"
)

// schemaDraft is the JSON Schema dialect of every file.
const schemaDraft = "https://json-schema.org/draft/2020-12/schema"

// IDBase prefixes every schema's $id: IDBase + its file name.
const IDBase = "https://txkernel.dev/schema/"

// anyJSON is the schema of a member that may hold any JSON value (a
// document's content, a JSON Patch, a query): every type named, so that
// the schema says so on purpose rather than by having no keyword (the MCP
// Inspector's --strict flags a bare {} as constraining nothing).
func anyJSON() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"object", "array", "string", "number", "boolean", "null"}, Description: "any JSON value"}
}

// options are the inference rules: json.RawMessage (a patch, a document,
// a query) and interfaces are any JSON value, never an array of bytes.
var options = &jsonschema.ForOptions{
	TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): anyJSON(),
		reflect.TypeFor[any]():             anyJSON(),
	},
}

// openType is protocol.Open: params objects that keep a host's own members.
var openType = reflect.TypeFor[protocol.Open]()

// progressToken is LSP's ProgressToken: an integer or a string.
func progressToken() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"string", "integer"}, Description: "a progress token (LSP's ProgressToken): an integer or a string"}
}

// patchSetSchema is seed 003's PatchSet, as recipe.DecodePatchSet reads it.
func patchSetSchema() *jsonschema.Schema {
	s, err := jsonschema.ForType(reflect.TypeFor[recipe.PatchSet](), options)
	if err != nil {
		return anyJSON()
	}
	s.Description = "a PatchSet (seed 003): {patchSetId, patches: [{op, …}], summary?} (PROTOCOL.md §11)"
	return s
}

// memberSchemas type the members that Go holds as raw JSON or an
// interface but whose wire shape is known, by the member's JSON name: in
// the struct types listed, or (under nil) wherever the name appears on a
// member held as raw JSON or an interface.
var memberSchemas = map[reflect.Type]map[string]func() *jsonschema.Schema{
	nil: {
		"workDoneToken": progressToken,
		"patchSet":      patchSetSchema,
	},
	reflect.TypeFor[protocol.ProgressParams](): {"token": progressToken},
	reflect.TypeFor[protocol.CorpusOpenParams](): {"governanceDir": func() *jsonschema.Schema {
		return &jsonschema.Schema{Types: []string{"null", "string"}, Description: "a workspace folder for the log's governance files; null keeps them in the data dir only"}
	}},
	reflect.TypeFor[protocol.Error](): {"data": func() *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Description: "the error's machine-readable data (PROTOCOL.md §9)"}
	}},
}

// errorData are the typed data of domain errors, by the name their file
// takes (errors/<name>.json). Errors whose data is an ad-hoc object are
// covered by the error envelope's free-form data.
var errorData = map[string]reflect.Type{
	"InvalidData":        reflect.TypeFor[errs.InvalidData](),
	"SandboxData":        reflect.TypeFor[workspace.SandboxData](),
	"PathData":           reflect.TypeFor[workspace.PathData](),
	"ConflictsData":      reflect.TypeFor[workspace.ConflictsData](),
	"WorkspaceStaleData": reflect.TypeFor[workspace.StaleData](),
	"DiffParseData":      reflect.TypeFor[unidiff.ParseData](),
	"DiffConflictData":   reflect.TypeFor[unidiff.ConflictData](),
	"TxData":             reflect.TypeFor[tx.TxData](),
	"ApprovalData":       reflect.TypeFor[tx.ApprovalData](),
	"DeniedData":         reflect.TypeFor[tx.DeniedData](),
	"CorruptData":        reflect.TypeFor[tx.CorruptData](),
	"KindData":           reflect.TypeFor[tx.KindData](),
	"DocumentStaleData":  reflect.TypeFor[document.StaleData](),
	"ExpiredData":        reflect.TypeFor[document.ExpiredData](),
	"ValidationIDData":   reflect.TypeFor[document.ValidationIDData](),
	"HashData":           reflect.TypeFor[document.HashData](),
	"IdempotencyData":    reflect.TypeFor[document.IdempotencyData](),
	"ProposedModeData":   reflect.TypeFor[document.ProposedModeData](),
	"DecideOnlyData":     reflect.TypeFor[document.DecideOnlyData](),
	"NoChangeData":       reflect.TypeFor[document.NoChangeData](),
	"SchemaData":         reflect.TypeFor[jsondoc.SchemaData](),
	"LimitData":          reflect.TypeFor[jsondoc.LimitData](),
	"MalformedData":      reflect.TypeFor[jsondoc.MalformedData](),
}

// enums pin members whose values are protocol constants, by the Go type
// and the member's JSON name.
var enums = map[reflect.Type]map[string][]any{
	reflect.TypeFor[protocol.ApprovalRespondParams](): {"decision": {protocol.DecisionApprove, protocol.DecisionApproveForSession, protocol.DecisionDeny}},
	reflect.TypeFor[protocol.ApprovalDecision]():      {"decision": {protocol.DecisionApprove, protocol.DecisionApproveForSession, protocol.DecisionDeny}, "kind": {protocol.ApprovalPatchset, protocol.ApprovalSecretsOverride, protocol.ApprovalHardAvoidOverride}},
	reflect.TypeFor[protocol.ApprovalRequest]():       {"kind": {protocol.ApprovalPatchset, protocol.ApprovalSecretsOverride, protocol.ApprovalHardAvoidOverride}},
	reflect.TypeFor[protocol.CorpusSearchParams]():    {"mode": {protocol.SearchKeyword, protocol.SearchSemantic, protocol.SearchHybrid}},
	reflect.TypeFor[protocol.InitializeParams]():      {"caller": {protocol.CallerExternal, protocol.CallerResident}},
	reflect.TypeFor[protocol.Item]():                  {"type": {protocol.ItemPlan, protocol.ItemFileChange, protocol.ItemTurnDiff}},
	reflect.TypeFor[protocol.Event]():                 {"type": eventTypes()},
	reflect.TypeFor[protocol.ProposalInput]():         {"kind": {protocol.KindUnifiedDiff, protocol.KindFiles, protocol.KindRemoveTodoMulti, protocol.KindApplyPatch, protocol.KindEdits, protocol.KindJSONPatch}},
	reflect.TypeFor[protocol.EditInput]():             {"command": {"str_replace", "insert", "create", "delete"}},
}

// eventTypes are the ledger event types, each also a notification method.
func eventTypes() []any {
	return []any{protocol.EventTurnStart, protocol.EventTurnItem, protocol.EventTxStatus, protocol.EventApprovalRequest,
		protocol.EventApprovalDecision, protocol.EventApplyStart, protocol.EventApplyCommit, protocol.EventApplyComplete, protocol.EventTxClose}
}

// Generate returns every schema file by its path under the output
// directory ("methods/turn_start.params.json", "bundle.json", …), each
// indented JSON with a final newline. It fails only when a Go type of the
// table cannot be described.
func Generate() (map[string][]byte, error) {
	files := map[string]*jsonschema.Schema{}
	var requests []*jsonschema.Schema
	for _, m := range kernel.Methods() {
		base := "methods/" + fileName(m.Name)
		if m.Params != nil {
			s, err := ForType(m.Params)
			if err != nil {
				return nil, fmt.Errorf("%s params: %w", m.Name, err)
			}
			s.Title = m.Name + " params"
			files[base+".params.json"] = s
			if !m.Notification {
				requests = append(requests, &jsonschema.Schema{
					Type:       "object",
					Properties: map[string]*jsonschema.Schema{"method": {Const: jsonschema.Ptr[any](m.Name)}, "params": {Ref: IDBase + base + ".params.json"}},
					Required:   []string{"method"},
				})
			}
		}
		if m.Result != nil {
			s, err := ForType(m.Result)
			if err != nil {
				return nil, fmt.Errorf("%s result: %w", m.Name, err)
			}
			s.Title = m.Name + " result"
			files[base+".result.json"] = s
		}
	}
	for _, typ := range eventTypes() {
		s, err := ForType(reflect.TypeFor[protocol.Event]())
		if err != nil {
			return nil, err
		}
		s.Title = typ.(string) + " notification"
		s.Properties["type"] = &jsonschema.Schema{Const: jsonschema.Ptr(typ)}
		files["notifications/"+fileName(typ.(string))+".json"] = s
	}
	progress, err := ForType(reflect.TypeFor[protocol.ProgressParams]())
	if err != nil {
		return nil, err
	}
	progress.Title = "$/progress notification"
	files["notifications/progress.json"] = progress
	for name, t := range errorData {
		s, err := ForType(t)
		if err != nil {
			return nil, fmt.Errorf("error data %s: %w", name, err)
		}
		s.Title = name
		files["errors/"+name+".json"] = s
	}
	rpcErr, err := ForType(reflect.TypeFor[protocol.Error]())
	if err != nil {
		return nil, err
	}
	rpcErr.Title = "Error"
	rpcErr.Description = "a JSON-RPC error object: code, message and data (one of errors/*.json for a domain error, or an object of its own)"
	files["Error.json"] = rpcErr
	files["ClientRequest.json"] = &jsonschema.Schema{Title: "ClientRequest", Description: "any request a client sends: its method and params", OneOf: requests}
	out := map[string][]byte{}
	bundle := &jsonschema.Schema{Title: "txkernel protocol " + protocol.Version, Defs: map[string]*jsonschema.Schema{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := files[name]
		s.Schema, s.ID = schemaDraft, IDBase+name
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = append(b, '\n')
		c := *s
		c.Schema = ""
		bundle.Defs[strings.TrimSuffix(strings.ReplaceAll(name, "/", "."), ".json")] = &c
	}
	bundle.Schema, bundle.ID = schemaDraft, IDBase+"bundle.json"
	b, err := json.MarshalIndent(bundle, "", "  ")
	if err != nil {
		return nil, err
	}
	out["bundle.json"] = append(b, '\n')
	return out, nil
}

// fileName is a method's or event's file name: "/" → "_", "$/" dropped.
func fileName(method string) string {
	return strings.ReplaceAll(strings.TrimPrefix(method, "$/"), "/", "_")
}

// ForType infers t's schema (through pointers: a result is never null),
// pins the enums of its members to the protocol's constants and makes its
// maps nullable as encoding/json writes them. It is how every schema here
// and every MCP tool's schema (mcpserver) is made.
func ForType(t reflect.Type) (*jsonschema.Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, err := jsonschema.ForType(t, options)
	if err != nil {
		return nil, err
	}
	pinEnums(t, s, map[reflect.Type]bool{})
	return s, nil
}

// pinEnums sets the enums of t's members, and of the struct types inside
// it, from the enums table, and makes map members nullable as encoding/json
// writes them.
func pinEnums(t reflect.Type, s *jsonschema.Schema, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
		if s.Items != nil {
			s = s.Items
		}
	}
	if t.Kind() != reflect.Struct || s == nil || seen[t] {
		return
	}
	seen[t] = true
	if t.Implements(openType) || reflect.PointerTo(t).Implements(openType) {
		// The kernel takes members it does not know here (protocol.Open):
		// the schema must not refuse what the kernel accepts.
		s.AdditionalProperties = nil
	}
	for name, values := range enums[t] {
		if p := s.Properties[name]; p != nil {
			p.Enum = values
		}
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			pinEnums(f.Type, s, seen)
			continue
		}
		p := s.Properties[name]
		if p == nil {
			continue
		}
		if raw := f.Type == reflect.TypeFor[json.RawMessage]() || f.Type.Kind() == reflect.Interface; raw {
			mk := memberSchemas[t][name]
			if mk == nil {
				mk = memberSchemas[nil][name]
			}
			if mk != nil {
				p = mk()
				s.Properties[name] = p
				continue
			}
		}
		if f.Type.Kind() == reflect.Map && p.Type == "object" {
			// A nil Go map encodes as null (a document proposal has no
			// base_sha256_by_path): say so.
			p.Types, p.Type = []string{"null", "object"}, ""
		}
		pinEnums(f.Type, p, seen)
	}
}
