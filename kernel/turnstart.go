package kernel

import (
	"context"
	"encoding/json"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx"
)

// turnStart answers turn/start: it turns the wire's params, already decoded
// into p (which checked every member's JSON type), into the engine's
// envelope: the kind, the proposal object exactly as the host sent it in
// raw, the params (the kind's target decodes its own members), and the
// plan, decoded and redacted. The result is the engine's turn/start
// result.
func (s *services) turnStart(ctx context.Context, p *protocol.TurnStartParams, raw json.RawMessage) (*protocol.TurnStartResult, error) {
	if p.Proposal == nil || raw == nil {
		return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "proposal"}, "proposal is required")
	}
	// A PatchSet has its own flow (seed 003): one pending per recipe and
	// a lastPatchDecision for the model's next turn, which
	// patchset/propose and patchset/decide keep. turn/start would
	// propose one around both. (The engine refuses it too, as an internal
	// kind; this names the method to use.)
	if p.Proposal.Kind == protocol.KindRecipePatchSet {
		return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "proposal.kind", "reason": "use-patchset-propose", "kind": p.Proposal.Kind},
			"a recipe PatchSet is proposed with patchset/propose, which keeps one pending PatchSet per recipe and the decision context")
	}
	plan, err := decodePlan(p.Plan)
	if err != nil {
		return nil, err
	}
	// The proposal as the host sent it, cut out of the params that p
	// decoded from (rawMember scans them without decoding them again).
	proposal, ok := rawMember(raw, "proposal")
	if !ok {
		// p decoded from the same bytes, so this does not happen.
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "proposal"}, "invalid params: no proposal")
	}
	res, err := s.cfg.Engine.Propose(ctx, &tx.Input{Kind: p.Proposal.Kind, Body: proposal, Plan: redactPlan(s.scanner, plan)})
	if err != nil {
		return nil, err
	}
	return res.TurnStartResult, nil
}

// rawMember returns the raw value of the member name of obj, a JSON object
// already known to be valid (decodeTyped decoded it), or false when obj
// has no such member; the last of duplicate members wins. turn/start's
// proposal is the params minus a few bytes, often a diff of megabytes, and
// a second json.Unmarshal just to cut it out cost as much as decoding it.
// FuzzRawMember checks it against json.Unmarshal.
func rawMember(obj []byte, name string) (found json.RawMessage, ok bool) {
	if !eachMember(obj, func(key, val []byte) {
		if string(keyName(key)) == name {
			found, ok = val, true
		}
	}) {
		return nil, false
	}
	return found, ok
}
