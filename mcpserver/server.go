// Package mcpserver is txkernel's Model Context Protocol facade (PROTOCOL.md
// §14): the kernel's agent-facing methods as MCP tools, built from the one
// method table (kernel.Methods), on the official Go SDK. It runs methods in
// process through kernel.Invoker, so a tool answers exactly what the
// JSON-RPC method answers.
//
// What the facade adds, and why:
//   - Decisions are never tools. approval/respond, patchset/decide and
//     memory/accept|reject|rebase|promote are a person's (kernel.Decides):
//     a model must not be able to approve its own change.
//   - apply_execute asks the person through the client's elicitation when
//     the operator said the client's answers are a person's
//     (Options.ApproveByElicitation) and the client offers it, and records
//     the answer with source "elicitation"; otherwise it returns ok:false
//     with pendingApprovals and leaves the workspace untouched. Over HTTP
//     the client may be the model's own program, answering its own
//     question, so there it is off unless the operator turns it on.
//   - The memory principal is fixed by the host at start-up (Options.Principal),
//     never taken from tool arguments, so a model cannot claim to be someone
//     else.
//   - A kernel error is a tool error (isError, with the kernel's code,
//     message and data as structured content), never a transport failure.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/protocol"
)

// Options configure a facade.
type Options struct {
	// Principal is the memory principal every memory tool acts as. Nil: no
	// memory tool is offered (a memory call needs a principal, and the
	// model may not name one).
	Principal *protocol.MemoryPrincipal
	// Scope, when set, is the memory scope every memory tool acts in,
	// fixed by the host like Principal (`--scope tenant/org/repo`): the
	// tools' input schemas then have no scope member, and whatever scope
	// a call sends is replaced, so a model never has to guess one.
	Scope *protocol.MemoryScope
	// Caller is the caller kind of every call (protocol.CallerResident for
	// a stdio host's own agent, CallerExternal for HTTP callers): it picks
	// the corpus's default route (seed 004).
	Caller string
	// ApproveByElicitation: an answer to apply_execute's elicitation
	// counts as a person's decision. True for a stdio host (the client is
	// the person's own editor); false by default over HTTP, where any
	// program holding the token could answer its own question. When
	// false, apply_execute never asks and answers ok:false with
	// pendingApprovals.
	ApproveByElicitation bool
	// ReviewURL, when set (the review desk is on, PROTOCOL.md §15),
	// returns the desk's page of a transaction: apply_execute's ok:false
	// answer with pendingApprovals carries it as reviewUrl, so the host
	// can send its person there.
	ReviewURL func(txID string) string
	// Version is reported as the server's version.
	Version string
	// Logger receives the facade's logs; nil means slog.Default().
	Logger *slog.Logger
}

// New returns an MCP server whose tools are inv's served agent-facing
// methods. Every tool has explicit input and output schemas derived from
// the method's Go types (schema.go).
func New(inv *kernel.Invoker, opts Options) (*mcp.Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "txkernel", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       opts.Logger,
		// Any resource may be subscribed to: a transaction's ledger
		// changes with each event (see TxURI and cmd's engine hook).
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	f := &facade{inv: inv, opts: opts}
	for _, m := range inv.Served() {
		t, ok, err := f.tool(m)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		h := f.call(m)
		if m.Name == protocol.MethodApplyExecute {
			h = f.applyExecute
		}
		s.AddTool(t, h)
	}
	if err := f.addEditTools(s); err != nil {
		return nil, err
	}
	f.addResources(s)
	return s, nil
}

// instructions tell the client's model what the server is for.
const instructions = "txkernel turns intended changes into reviewable proposals (turn_start), applies them all-or-nothing once a person approved them (apply_execute), and serves JSON documents, a markdown corpus and a curated memory. Approvals are a person's: no tool approves."

// facade holds what every tool handler needs.
type facade struct {
	inv  *kernel.Invoker
	opts Options
}

// ToolName is a method's tool name: "/" replaced by "_" (turn/start →
// turn_start), since MCP tool names allow neither "/" nor "$".
func ToolName(method string) string { return strings.ReplaceAll(method, "/", "_") }

// tool builds m's tool, or reports false for a method no model may call:
// a decision, a session method, or a memory method without a fixed
// principal.
func (f *facade) tool(m kernel.Method) (*mcp.Tool, bool, error) {
	switch m.Effect {
	case kernel.Decides, kernel.Session:
		return nil, false, nil
	}
	memoryTool := m.Service == "memory"
	if memoryTool && f.opts.Principal == nil {
		return nil, false, nil
	}
	in, err := inputSchema(m.Params, memoryTool, memoryTool && f.opts.Scope != nil)
	if err != nil {
		return nil, false, fmt.Errorf("mcpserver: %s params: %w", m.Name, err)
	}
	out, err := outputSchema(m.Result)
	if err != nil {
		return nil, false, fmt.Errorf("mcpserver: %s result: %w", m.Name, err)
	}
	readOnly := m.Effect == kernel.Reads
	destructive := m.Effect == kernel.Destroys
	closedWorld := false
	return &mcp.Tool{
		Name:         ToolName(m.Name),
		Title:        m.Name,
		Description:  describe(m),
		InputSchema:  in,
		OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{
			Title:           m.Name,
			ReadOnlyHint:    readOnly,
			DestructiveHint: &destructive,
			OpenWorldHint:   &closedWorld,
		},
	}, true, nil
}

// call returns the handler of a plain tool: the method's result as
// structured content, or its error as a tool error.
func (f *facade) call(m kernel.Method) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := f.arguments(m, req.Params.Arguments, req.Params.GetProgressToken())
		if err != nil {
			return toolError(err), nil
		}
		res, perr := f.inv.Invoke(ctx, m.Name, args, f.session(ctx, req, ""))
		if perr != nil {
			return toolError(perr), nil
		}
		return toolResult(res), nil
	}
}

// arguments returns the params the method gets: the tool's arguments,
// with the fixed principal put in for a memory method whatever the
// arguments said, and the call's MCP progress token as the method's
// workDoneToken (LSP's client-initiated progress) when it takes one.
func (f *facade) arguments(m kernel.Method, args json.RawMessage, progressToken any) (json.RawMessage, *protocol.Error) {
	memory := m.Service == "memory"
	wantsProgress := progressToken != nil && hasMember(m.Params, "workDoneToken")
	fixScope := memory && f.opts.Scope != nil && hasMember(m.Params, "scope")
	if !memory && !wantsProgress {
		return args, nil
	}
	obj := map[string]json.RawMessage{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &obj); err != nil {
			return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": ""}, "arguments must be an object")
		}
	}
	if memory {
		pr, err := json.Marshal(f.opts.Principal)
		if err != nil {
			return nil, protocol.NewError(protocol.CodeInternalError, nil, "principal: %v", err)
		}
		obj["principal"] = pr
	}
	if fixScope {
		sc, err := json.Marshal(f.opts.Scope)
		if err != nil {
			return nil, protocol.NewError(protocol.CodeInternalError, nil, "scope: %v", err)
		}
		obj["scope"] = sc
	}
	if wantsProgress {
		tok, err := json.Marshal(progressToken)
		if err != nil {
			return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "_meta.progressToken"}, "progress token: %v", err)
		}
		obj["workDoneToken"] = tok
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, protocol.NewError(protocol.CodeInternalError, nil, "arguments: %v", err)
	}
	return out, nil
}

// session is the protocol.Session of one tool call: the facade's caller
// kind, MCP progress when the client sent a progress token, and the
// source a person's decision is recorded with.
func (f *facade) session(ctx context.Context, req *mcp.CallToolRequest, decisionSource string) protocol.Session {
	sess := protocol.Session{Caller: f.opts.Caller, DecisionSource: decisionSource}
	ptok := req.Params.GetProgressToken()
	if ptok == nil || req.Session == nil {
		return sess
	}
	sess.Progress = func(token any, job string) (any, func(protocol.ProgressValue)) {
		if token == nil {
			token = ptok
		}
		step := 0.0
		return token, func(v protocol.ProgressValue) {
			// MCP wants progress to increase; a value without a
			// percentage still counts as one step.
			step++
			p := &mcp.ProgressNotificationParams{ProgressToken: ptok, Progress: step, Message: progressMessage(job, v)}
			if v.Percentage != nil {
				p.Progress, p.Total = float64(*v.Percentage), 100
			}
			if err := req.Session.NotifyProgress(ctx, p); err != nil {
				f.opts.Logger.Debug("progress not sent", "err", err)
			}
		}
	}
	return sess
}

func progressMessage(job string, v protocol.ProgressValue) string {
	switch {
	case v.Message != "":
		return v.Message
	case v.Title != "":
		return v.Title
	}
	return job + " " + v.Kind
}

// toolResult is a successful call: the result as structured content and
// as its JSON text (for clients that read only content).
func toolResult(res json.RawMessage) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		StructuredContent: res,
		Content:           []mcp.Content{&mcp.TextContent{Text: string(res)}},
	}
}

// toolError is a kernel error as a tool error: isError, the message as
// text, and {code, message, data} as structured content, so a client can
// act on the code and data as a JSON-RPC host would.
func toolError(e *protocol.Error) *mcp.CallToolResult {
	body := map[string]any{"code": e.Code, "message": e.Message}
	if e.Data != nil {
		body["data"] = e.Data
	}
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: body,
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("error %d: %s", e.Code, e.Message)}},
	}
}

// hasMember reports whether a params type has the JSON member, its own or
// an embedded struct's: workDoneToken (the long methods: corpus/open,
// corpus/rebuild, memory/ingest) or scope (the memory methods that take
// one).
func hasMember(t reflect.Type, member string) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return false
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == member {
			return true
		}
		if f.Anonymous && name == "" && hasMember(f.Type, member) {
			return true
		}
	}
	return false
}
