package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/protocol"
)

// applyExecute is apply_execute's handler. The apply runs as apply/execute
// does. When it waits for approvals and the client can ask its person
// (elicitation), the handler asks: it returns one form per pending
// approval as input requests (MCP's multi round-trip requests; the SDK
// turns them into elicitation/create for clients of older protocol
// versions) and is called again with the person's answers. Each answer is
// recorded as approval/respond with source "elicitation", and the apply
// runs again. Without elicitation, or when the person dismisses the
// question, the result is apply/execute's ok:false with pendingApprovals:
// nothing is written, and the host can ask the person itself. Unless
// Options.ApproveByElicitation, the handler never asks: the client's
// answer would not be known to be a person's.
func (f *facade) applyExecute(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return f.approveApply(ctx, req, req.Params.Arguments)
}

// approveApply is apply_execute's flow for apply/execute's params args;
// the edit tools (edittools.go) run it on the transaction they proposed.
func (f *facade) approveApply(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	res, perr := f.inv.Invoke(ctx, protocol.MethodApplyExecute, args, f.session(ctx, req, ""))
	if perr != nil {
		return toolError(perr), nil
	}
	var ar protocol.ApplyResult
	if err := json.Unmarshal(res, &ar); err != nil || ar.OK || len(ar.PendingApprovals) == 0 || !f.opts.ApproveByElicitation || !canElicit(req) {
		return toolResult(f.withReviewURL(res)), nil
	}
	answers := req.Params.InputResponses
	if len(answers) == 0 {
		summary := f.summary(ctx, req, ar.TransactionID)
		asks := mcp.InputRequestMap{}
		for _, pa := range ar.PendingApprovals {
			asks[inputID(pa)] = question(ar.TransactionID, summary, pa)
		}
		return &mcp.CallToolResult{InputRequests: asks}, nil
	}
	answered := false
	for _, pa := range ar.PendingApprovals {
		er, ok := answers[inputID(pa)].(*mcp.ElicitResult)
		if !ok {
			continue
		}
		decision, err := decisionOf(er)
		if err != nil {
			return toolError(protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "decision"}, "%v", err)), nil
		}
		if decision == "" { // dismissed: the approval stays pending
			continue
		}
		params, _ := json.Marshal(protocol.ApprovalRespondParams{TransactionID: ar.TransactionID, ApprovalRequestID: pa.ApprovalRequestID, Decision: decision})
		if _, perr := f.inv.Invoke(ctx, protocol.MethodApprovalRespond, params, f.session(ctx, req, protocol.SourceElicitation)); perr != nil {
			return toolError(perr), nil
		}
		answered = true
		if decision == protocol.DecisionDeny {
			break
		}
	}
	if !answered {
		return toolResult(f.withReviewURL(res)), nil
	}
	res, perr = f.inv.Invoke(ctx, protocol.MethodApplyExecute, args, f.session(ctx, req, ""))
	if perr != nil {
		return toolError(perr), nil
	}
	return toolResult(f.withReviewURL(res)), nil
}

// withReviewURL adds the review desk's page (reviewUrl) to an
// apply/execute result that waits for approvals, when the desk is on:
// over HTTP, where elicitation is no person's answer, it is where the
// person decides.
func (f *facade) withReviewURL(res json.RawMessage) json.RawMessage {
	if f.opts.ReviewURL == nil {
		return res
	}
	var ar protocol.ApplyResult
	if err := json.Unmarshal(res, &ar); err != nil || ar.OK || len(ar.PendingApprovals) == 0 {
		return res
	}
	ar.ReviewURL = f.opts.ReviewURL(ar.TransactionID)
	out, err := json.Marshal(ar)
	if err != nil {
		return res
	}
	return out
}

// inputID names the input request of one approval.
func inputID(pa protocol.ApprovalRequest) string { return "approval:" + pa.ApprovalRequestID }

// canElicit reports whether the client said it can ask its person.
func canElicit(req *mcp.CallToolRequest) bool {
	if req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// summary is tx/status's one-line summary of the change, for the question.
func (f *facade) summary(ctx context.Context, req *mcp.CallToolRequest, txID string) string {
	params, _ := json.Marshal(protocol.TxParams{TransactionID: txID})
	res, perr := f.inv.Invoke(ctx, protocol.MethodTxStatus, params, f.session(ctx, req, ""))
	if perr != nil {
		return ""
	}
	var st protocol.TxStatusResult
	if json.Unmarshal(res, &st) != nil {
		return ""
	}
	parts := []string{st.Summary}
	if p := st.Pointers.Proposal; p != nil && len(p.TargetFiles) > 0 {
		parts = append(parts, "files: "+strings.Join(p.TargetFiles, ", "))
	}
	return strings.TrimSpace(strings.Join(parts, "; "))
}

// decisionSchema is the form the person answers: one of the three
// decisions of approval/respond.
var decisionSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{
			"type":        "string",
			"title":       "Decision",
			"description": "approve this change once, approve this fingerprint for the rest of the session, or deny it (a deny sticks: the same change fails fast)",
			"enum":        []string{protocol.DecisionApprove, protocol.DecisionApproveForSession, protocol.DecisionDeny},
		},
	},
	"required": []string{"decision"},
}

// question is the form that puts one approval to the person: the
// transaction, a summary of the change, the fingerprint and why it needs
// them.
func question(txID, summary string, pa protocol.ApprovalRequest) *mcp.ElicitParams {
	msg := fmt.Sprintf("Approve %s for transaction %s?\n%s\nFingerprint: %s", pa.Kind, txID, summary, pa.Fingerprint)
	if pa.Reason != "" {
		msg += "\nWhy it needs you: " + pa.Reason
	}
	return &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: decisionSchema}
}

// decisionOf reads the person's answer: the form's decision on accept,
// deny on decline, "" when the person dismissed the question.
func decisionOf(er *mcp.ElicitResult) (string, error) {
	switch er.Action {
	case "accept":
		d, _ := er.Content["decision"].(string)
		switch d {
		case protocol.DecisionApprove, protocol.DecisionApproveForSession, protocol.DecisionDeny:
			return d, nil
		}
		return "", fmt.Errorf("the form's decision %q is not approve, approve_for_session or deny", d)
	case "decline":
		return protocol.DecisionDeny, nil
	}
	return "", nil
}
