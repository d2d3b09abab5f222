package mcpserver

// This file offers two tools shaped like the models' own edit tools
// (issue 36): apply_patch, Codex's tool (its one argument, input, is the
// "*** Begin Patch" envelope), and edit, Anthropic's text-editor commands
// (command, path, old_str, new_str, replace_all, insert_line, file_text,
// overwrite). Each proposes its change as turn/start does (kind
// apply_patch or edits), then runs apply_execute's flow on the new
// transaction: the person is asked when the client can elicit and the
// operator allows it; otherwise the result is ok:false with
// pendingApprovals and nothing is written. Neither tool approves.

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/protocol"
)

// ApplyPatchArgs are the apply_patch tool's arguments: Codex's.
type ApplyPatchArgs struct {
	// Input is the entire apply_patch envelope ("*** Begin Patch" …
	// "*** End Patch").
	Input string `json:"input"`
}

// Tool names of the edit tools.
const (
	ToolApplyPatch = "apply_patch"
	ToolEdit       = "edit"
)

// addEditTools adds apply_patch and edit to s.
func (f *facade) addEditTools(s *mcp.Server) error {
	out, err := outputSchema(reflect.TypeFor[protocol.ApplyResult]())
	if err != nil {
		return err
	}
	destructive, closedWorld := true, false
	ann := func(title string) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, DestructiveHint: &destructive, OpenWorldHint: &closedWorld}
	}
	s.AddTool(&mcp.Tool{
		Name:  ToolApplyPatch,
		Title: "apply_patch",
		Description: "Edit workspace files with an apply_patch envelope (*** Begin Patch / *** Add File: / *** Delete File: / *** Update File: / *** Move to: / @@ hunks / *** End of File / *** End Patch; paths relative). " +
			"The whole patch is proposed as one transaction and applied all-or-nothing once a person approves it (asked here when the client can elicit; otherwise ok:false with pendingApprovals, and nothing is written). Hunks found only by ignoring white space or normalising punctuation are listed for the reviewer.",
		InputSchema: &jsonschema.Schema{
			Type: "object",
			Properties: map[string]*jsonschema.Schema{
				"input": {Type: "string", Description: "The entire contents of the apply_patch command, from *** Begin Patch to *** End Patch."},
			},
			Required: []string{"input"},
		},
		OutputSchema: out,
		Annotations:  ann("apply_patch"),
	}, f.proposeApply(func(args json.RawMessage) (any, *protocol.Error) {
		var a ApplyPatchArgs
		if perr := strictArgs(args, &a); perr != nil {
			return nil, perr
		}
		return map[string]any{"kind": protocol.KindApplyPatch, "patch": a.Input}, nil
	}))
	str := func(d string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: d} }
	s.AddTool(&mcp.Tool{
		Name:  ToolEdit,
		Title: "edit",
		Description: "Edit one workspace file with a text-editor command: str_replace {path, old_str, new_str, replace_all?} (old_str must occur exactly once unless replace_all), insert {path, insert_line, new_str} (after that line; 0 is the top), create {path, file_text, overwrite?}, delete {path}. " +
			"The edit is proposed as a transaction and applied once a person approves it (asked here when the client can elicit; otherwise ok:false with pendingApprovals, and nothing is written). For several edits at once, use turn_start with kind edits.",
		InputSchema: &jsonschema.Schema{
			Type: "object",
			Properties: map[string]*jsonschema.Schema{
				"command":     {Type: "string", Enum: []any{"str_replace", "insert", "create", "delete"}},
				"path":        str("The file, relative to the workspace (or absolute inside it)."),
				"old_str":     str("str_replace: the exact text to replace, white space included."),
				"new_str":     str("str_replace: the replacement; insert: the text to insert."),
				"replace_all": {Type: "boolean", Description: "str_replace: replace every occurrence."},
				"insert_line": {Type: "integer", Minimum: jsonschema.Ptr(0.0), Description: "insert: the line to insert after; 0 is the top."},
				"file_text":   str("create: the whole content."),
				"overwrite":   {Type: "boolean", Description: "create: replace an existing file."},
			},
			Required: []string{"command", "path"},
		},
		OutputSchema: out,
		Annotations:  ann("edit"),
	}, f.proposeApply(func(args json.RawMessage) (any, *protocol.Error) {
		var e protocol.EditInput
		if perr := strictArgs(args, &e); perr != nil {
			return nil, perr
		}
		return map[string]any{"kind": protocol.KindEdits, "edits": []protocol.EditInput{e}}, nil
	}))
	return nil
}

// strictArgs decodes a tool's arguments into v, refusing unknown members
// (a misspelt old_str must not become a silent no-op).
func strictArgs(args json.RawMessage, v any) *protocol.Error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "arguments", "reason": "invalid"}, "arguments: %v", err)
	}
	return nil
}

// proposeApply returns an edit tool's handler: proposal turns the
// arguments into turn/start's proposal; the transaction it makes goes
// through apply_execute's flow (approveApply). When that flow asks the
// person, the transaction id is the request state, so the call that
// carries the answers applies that transaction rather than proposing
// again.
func (f *facade) proposeApply(proposal func(json.RawMessage) (any, *protocol.Error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		txID := req.Params.RequestState
		if txID == "" || len(req.Params.InputResponses) == 0 {
			prop, perr := proposal(req.Params.Arguments)
			if perr != nil {
				return toolError(perr), nil
			}
			params, _ := json.Marshal(map[string]any{"proposal": prop})
			res, perr := f.inv.Invoke(ctx, protocol.MethodTurnStart, params, f.session(ctx, req, ""))
			if perr != nil {
				return toolError(perr), nil
			}
			var ts protocol.TurnStartResult
			if err := json.Unmarshal(res, &ts); err != nil {
				return toolError(protocol.NewError(protocol.CodeInternalError, nil, "turn/start result: %v", err)), nil
			}
			txID = ts.TransactionID
		}
		args, _ := json.Marshal(protocol.TxParams{TransactionID: txID})
		out, err := f.approveApply(ctx, req, args)
		if out != nil && len(out.InputRequests) > 0 {
			out.RequestState = txID
		}
		return out, err
	}
}
