package document

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/jsondoc/recipe"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// PatchSet states in kernel.db. Expired is a PatchSet whose recipe moved
// on before it was decided (seed 003: "treated as invalid or expired"), or
// whose transaction was closed undecided (tx/close): the latter is
// recorded as a PatchDecision "expired" of its own (see settle).
const (
	stPending  = "pending"
	stAccepted = protocol.PatchSetAccepted
	stRejected = protocol.PatchSetRejected
	stExpired  = "expired"
)

// ProposePatchSet validates a recipe PatchSet and holds it for review
// (patchset/propose, seed 003). It must target the current recipeVersion
// (errs.Stale) and no other PatchSet may be pending on the recipe
// (errs.Pending); a failed validation lists every violated rule
// (errs.Validation). Proposing the same patchSetId with the same body
// again returns the first result; with another body it is
// errs.IdempotencyConflict.
func (s *Service) ProposePatchSet(ctx context.Context, p *protocol.PatchSetProposeParams) (*protocol.PatchSetProposeResult, error) {
	db, err := s.open(ctx, p.DocID)
	if err != nil {
		return nil, err
	}
	if p.RecipeVersion == nil {
		return nil, errs.InvalidField("recipeVersion", "recipeVersion is required: the recipe's current revision")
	}
	if len(p.PatchSet) == 0 || bytes.Equal(bytes.TrimSpace(p.PatchSet), []byte("null")) {
		return nil, errs.InvalidField("patchSet", "patchSet is required (emit no PatchSet rather than an empty one)")
	}
	ps, err := recipe.DecodePatchSet(p.PatchSet)
	if err != nil {
		return nil, err
	}
	s.proposeMu.Lock()
	defer s.proposeMu.Unlock()
	if row, err := db.PatchSet(ctx, ps.PatchSetID); err != nil {
		return nil, err
	} else if row != nil {
		if row.DocID != p.DocID || !bytes.Equal(row.Body, p.PatchSet) {
			return nil, errs.New(errs.IdempotencyConflict, IdempotencyData{DocID: p.DocID, PatchSetID: ps.PatchSetID, AppliedHash: sha256Hex(row.Body), PatchHash: sha256Hex(p.PatchSet)},
				"patchSetId %s was proposed before with a different PatchSet: use a new patchSetId", ps.PatchSetID)
		}
		return proposeResult(row), nil
	}
	pending, err := s.pendingPatchSet(ctx, p.DocID)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		return nil, errs.New(errs.Pending, PendingData{DocID: p.DocID, PatchSetID: pending.PatchSetID, Rule: recipe.RulePending},
			"recipe %s already has PatchSet %s pending review: decide it first", p.DocID, pending.PatchSetID)
	}
	res, err := s.eng.ProposeInternal(ctx, proposal(protocol.KindRecipePatchSet, input{DocID: p.DocID, RecipeVersion: p.RecipeVersion, PatchSet: p.PatchSet}))
	if err != nil {
		return nil, err
	}
	pl, err := plannedOf(res)
	if err != nil {
		return nil, err
	}
	r := pl.rec
	row := store.PatchSetRow{PatchSetID: ps.PatchSetID, DocID: p.DocID, TxID: res.TransactionID, RecipeVersion: r.ExpectedRevision,
		Body: p.PatchSet, Summary: r.Summary, State: stPending}
	if err := db.PutPatchSet(ctx, row); err != nil {
		// Not held for review after all: do not leave the transaction
		// proposed.
		s.eng.CloseTx(context.WithoutCancel(ctx), res.TransactionID)
		return nil, err
	}
	return proposeResult(&row), nil
}

func proposeResult(row *store.PatchSetRow) *protocol.PatchSetProposeResult {
	return &protocol.PatchSetProposeResult{PatchSetID: row.PatchSetID, DocID: row.DocID, RecipeVersion: row.RecipeVersion,
		TransactionID: row.TxID, State: row.State, Summary: row.Summary}
}

// pendingPatchSet returns the PatchSet pending on docID, first settling
// what a crash, a tx/close or a newer revision left behind (settle).
func (s *Service) pendingPatchSet(ctx context.Context, docID string) (*store.PatchSetRow, error) {
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	row, err := db.PendingPatchSet(ctx, docID)
	if err != nil || row == nil {
		return nil, err
	}
	if err := s.settle(ctx, row); err != nil {
		return nil, err
	}
	if row.State != stPending {
		return nil, nil
	}
	return row, nil
}

// settle brings a pending row in line with its transaction and its
// recipe; row.State says what it is afterwards:
//   - its transaction completed: accepted (Commit recorded that already,
//     with the apply; this covers rows of older kernels);
//   - denied: rejected;
//   - closed (tx/close) while the recipe is still at its recipeVersion:
//     expired, recorded as a PatchDecision "expired" of its own, which
//     becomes the recipe's lastPatchDecision, so that patchset/review and
//     patchset/context report it; the recipe is free for a new PatchSet;
//   - the recipe moved on (closed or not): expired, with no decision (the
//     transaction is closed).
func (s *Service) settle(ctx context.Context, row *store.PatchSetRow) error {
	db, err := s.t.store(ctx)
	if err != nil {
		return err
	}
	if row.State != stPending {
		return nil
	}
	st, err := s.eng.Status(ctx, row.TxID)
	if err != nil && !errs.KindIs(err, errs.NotFound) {
		return err
	}
	state := stExpired
	if err == nil {
		switch st.State {
		case protocol.StateCompleted:
			state = stAccepted
		case protocol.StateDenied:
			state = stRejected
		case protocol.StateClosed:
			doc, err := db.Document(ctx, row.DocID)
			if err != nil {
				return err
			}
			if doc.Revision == row.RecipeVersion {
				// Closed undecided: a decision of its own.
				if err := db.DecidePatchSet(ctx, row.PatchSetID, stExpired); err != nil {
					return err
				}
				row.State = stExpired
				return nil
			}
		default:
			doc, err := db.Document(ctx, row.DocID)
			if err != nil {
				return err
			}
			if doc.Revision == row.RecipeVersion {
				return nil // still pending
			}
			if _, err := s.eng.CloseTx(ctx, row.TxID); err != nil && !errs.KindIs(err, errs.Closed) {
				return err
			}
		}
	}
	if state == stExpired {
		if err := db.ExpirePatchSet(ctx, row.PatchSetID); err != nil {
			return err
		}
	} else if err := db.DecidePatchSet(ctx, row.PatchSetID, state); err != nil {
		return err
	}
	row.State = state
	return nil
}

// ReviewPatchSet returns what a review UI renders (patchset/review, seed 003's
// rendering requirements: PROTOCOL.md §11): every added, modified and removed
// item in its original position, and the full end state. A PatchSet whose
// recipe moved on is expired (errs.Stale).
func (s *Service) ReviewPatchSet(ctx context.Context, p *protocol.PatchSetParams) (*recipe.ReviewResult, error) {
	id := p.PatchSetID
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	row, err := s.patchSet(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.settle(ctx, row); err != nil {
		return nil, err
	}
	doc, err := db.Document(ctx, row.DocID)
	if err != nil {
		return nil, err
	}
	if row.State == stExpired && doc.Revision == row.RecipeVersion {
		return nil, closedErr(row)
	}
	if row.State == stExpired || (row.State == stPending && doc.Revision != row.RecipeVersion) {
		return nil, staleErr(row.DocID, row.RecipeVersion, doc.Revision)
	}
	if row.State != stPending {
		return nil, errs.New(errs.Closed, PatchSetData{PatchSetID: id, State: row.State}, "PatchSet %s was %s", id, row.State)
	}
	ps, err := recipe.DecodePatchSet(row.Body)
	if err != nil {
		return nil, err
	}
	return recipe.Review(doc.Content, ps)
}

// PatchSetData is the data of an error about a PatchSet's state. Reason
// "closed" says an expired PatchSet's transaction was closed undecided
// (tx/close), not that its recipe moved on.
type PatchSetData struct {
	PatchSetID string `json:"patchSetId"`
	State      string `json:"state"`
	Reason     string `json:"reason,omitempty"`
}

// closedErr is the errs.Closed error of a PatchSet expired by a tx/close
// (its recipe is still at its recipeVersion).
func closedErr(row *store.PatchSetRow) error {
	return errs.New(errs.Closed, PatchSetData{PatchSetID: row.PatchSetID, State: stExpired, Reason: "closed"},
		"PatchSet %s expired: its transaction %s was closed before a decision; propose a new PatchSet", row.PatchSetID, row.TxID)
}

func (s *Service) patchSet(ctx context.Context, id string) (*store.PatchSetRow, error) {
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, errs.InvalidField("patchSetId", "patchSetId is required")
	}
	row, err := db.PatchSet(ctx, id)
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, errs.New(errs.NotFound, PatchSetData{PatchSetID: id}, "no PatchSet %s", id)
	}
	return row, nil
}

// DecidePatchSet records a person's PatchDecision (patchset/decide, seed
// 003). Accepted applies the PatchSet atomically through the engine (the
// decision is the approval it asks for); rejected denies it, so the same
// PatchSet can never apply. Either way the decision becomes the recipe's
// lastPatchDecision. Repeating a decision returns the same result; a
// different one is errs.AlreadyDecided.
func (s *Service) DecidePatchSet(ctx context.Context, p *protocol.PatchSetDecideParams) (*protocol.PatchSetDecideResult, error) {
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	if p.Decision != stAccepted && p.Decision != stRejected {
		// approval/respond's words (approve, deny) are the likeliest
		// mistake: the error names this method's own.
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "decision", Reason: "unknown-decision", Known: []string{stAccepted, stRejected}},
			"patchset/decide takes decision accepted or rejected, not %q (approval/respond's approve, approve_for_session and deny are that method's words)", p.Decision)
	}
	row, err := s.patchSet(ctx, p.PatchSetID)
	if err != nil {
		return nil, err
	}
	if err := s.settle(ctx, row); err != nil {
		return nil, err
	}
	switch row.State {
	case stPending:
	case p.Decision:
		return s.decided(ctx, row)
	case stExpired:
		doc, err := db.Document(ctx, row.DocID)
		if err != nil {
			return nil, err
		}
		if doc.Revision == row.RecipeVersion {
			return nil, closedErr(row)
		}
		return nil, staleErr(row.DocID, row.RecipeVersion, doc.Revision)
	default:
		return nil, errs.New(errs.AlreadyDecided, PatchSetData{PatchSetID: row.PatchSetID, State: row.State},
			"PatchSet %s was already %s", row.PatchSetID, row.State)
	}
	// Only this decision may apply the PatchSet (planned.Admit), and its
	// Commit records the accepted PatchDecision with the new revision.
	leave := s.t.deciding.enter(row.PatchSetID, p.Decision)
	defer leave()
	ar, err := s.eng.Apply(ctx, row.TxID)
	for err == nil && !ar.OK {
		decision := protocol.DecisionApprove
		if p.Decision == stRejected {
			decision = protocol.DecisionDeny
		}
		for _, req := range ar.PendingApprovals {
			if _, err = s.eng.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: row.TxID, ApprovalRequestID: req.ApprovalRequestID, Decision: decision}); err != nil {
				break
			}
		}
		if err != nil || p.Decision == stRejected {
			break
		}
		ar, err = s.eng.Apply(ctx, row.TxID)
	}
	if p.Decision == stAccepted && err != nil {
		if errs.KindIs(err, errs.Stale) {
			if serr := s.settle(ctx, row); serr != nil {
				return nil, serr
			}
		}
		return nil, err
	}
	// A rejection writes nothing to the recipe, so a read-only sandbox
	// (the engine refuses the apply that would have asked for the
	// approvals it denies) does not stop it: the transaction is closed and
	// the decision recorded below.
	if p.Decision == stRejected && err != nil && !errs.KindIs(err, errs.Denied) && !errs.KindIs(err, errs.Sandbox) {
		return nil, err
	}
	if p.Decision == stRejected {
		// Denied by the person's deny, or, when a policy granted every
		// approval, refused before its commit record (checkAccepted):
		// either way it is done with (CloseTx leaves a denied one as it is).
		if _, err := s.eng.CloseTx(ctx, row.TxID); err != nil && !errs.KindIs(err, errs.Closed) {
			return nil, err
		}
	}
	if err := db.DecidePatchSet(ctx, row.PatchSetID, p.Decision); err != nil {
		return nil, err
	}
	row.State = p.Decision
	return s.decided(ctx, row)
}

func (s *Service) decided(ctx context.Context, row *store.PatchSetRow) (*protocol.PatchSetDecideResult, error) {
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := db.Document(ctx, row.DocID)
	if err != nil {
		return nil, err
	}
	return &protocol.PatchSetDecideResult{PatchSetID: row.PatchSetID, Decision: row.State, DocID: row.DocID,
		TransactionID: row.TxID, Revision: doc.Revision, Summary: row.Summary}, nil
}

// PatchSetContext returns the recipe's lastPatchDecision and the PatchSet it
// belongs to (patchset/context, seed 003's decision context: PROTOCOL.md §11),
// without clearing it: only the host knows when the LLM response that carried
// it succeeded, and says so with patchset/context_ack. A PatchSet a crash left
// pending after its apply is settled first, so its decision is not missed.
func (s *Service) PatchSetContext(ctx context.Context, p *protocol.DocParams) (*protocol.PatchSetContextResult, error) {
	docID := p.DocID
	db, _, err := s.openDoc(ctx, docID)
	if err != nil {
		return nil, err
	}
	if _, err := s.pendingPatchSet(ctx, docID); err != nil {
		return nil, err
	}
	last, err := db.LastDecision(ctx, docID)
	if err != nil {
		return nil, err
	}
	out := &protocol.PatchSetContextResult{DocID: docID, PatchSetID: decisionOf(last)}
	out.Context.LLM.LastPatchDecision = last
	return out, nil
}

// decisionOf is the patchSetId of a stored lastPatchDecision ("" for none).
func decisionOf(last []byte) string {
	var d struct {
		PatchSetID string `json:"patchSetId"`
	}
	if last == nil || json.Unmarshal(last, &d) != nil {
		return ""
	}
	return d.PatchSetID
}

// AckData is the data of an errs.NotFound error of patchset/context_ack:
// no decision of that PatchSet on that recipe. State is the PatchSet's
// when it exists but was never decided (pending or expired).
type AckData struct {
	DocID      string `json:"docId"`
	PatchSetID string `json:"patchSetId"`
	State      string `json:"state,omitempty"`
}

// AckPatchSetContext clears the recipe's lastPatchDecision once the LLM
// response that carried it succeeded (patchset/context_ack, seed 003: "must
// only be included once (cleared after the next successful LLM
// response)"). It clears only the decision of p.PatchSetID: a newer
// decision, which replaced an unacknowledged one, stays and is returned
// as what is left. Acknowledging again changes nothing and returns the
// same. The PatchSet must be a decided PatchSet of the recipe
// (errs.NotFound otherwise).
func (s *Service) AckPatchSetContext(ctx context.Context, p *protocol.PatchSetContextAckParams) (*protocol.PatchSetContextAckResult, error) {
	db, err := s.open(ctx, p.DocID)
	if err != nil {
		return nil, err
	}
	if p.PatchSetID == "" {
		return nil, errs.InvalidField("patchSetId", "patchSetId is required: the lastPatchDecision's patchSetId (patchset/context)")
	}
	doc, err := db.Document(ctx, p.DocID)
	if err != nil {
		return nil, err
	}
	row, err := db.PatchSet(ctx, p.PatchSetID)
	if err != nil {
		return nil, err
	}
	if row == nil || row.DocID != p.DocID {
		return nil, errs.New(errs.NotFound, AckData{DocID: p.DocID, PatchSetID: p.PatchSetID}, "recipe %s has no PatchSet %s", p.DocID, p.PatchSetID)
	}
	if err := s.settle(ctx, row); err != nil {
		return nil, err
	}
	decided := row.State == stAccepted || row.State == stRejected
	if row.State == stExpired {
		// Expired by a tx/close, it has a decision of its own (settle).
		last, err := db.LastDecision(ctx, p.DocID)
		if err != nil {
			return nil, err
		}
		decided = doc.Revision == row.RecipeVersion || decisionOf(last) == p.PatchSetID
	}
	if !decided {
		return nil, errs.New(errs.NotFound, AckData{DocID: p.DocID, PatchSetID: p.PatchSetID, State: row.State},
			"PatchSet %s is %s: it has no decision to acknowledge", p.PatchSetID, row.State)
	}
	left, err := db.AckLastDecision(ctx, p.DocID, p.PatchSetID)
	if err != nil {
		return nil, err
	}
	out := &protocol.PatchSetContextAckResult{DocID: p.DocID, PatchSetID: p.PatchSetID}
	out.Context.LLM.LastPatchDecision = left
	return out, nil
}
