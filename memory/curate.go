package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// newID is prefix and 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Propose answers memory/propose (seed 002's propose loop; PROTOCOL.md §13): an ameide:curation.proposal
// element holding the full replacement body, with its targets_version
// relationship pinned to target_version_id. The kernel sets created_at. A
// proposal on a version that is no longer the current one is recorded
// (the result says stale); it must be rebased before it can be accepted.
// A principal without read in the scope gets one error (ErrNoTarget)
// whether the element is missing, outside the scope, no document, or has
// no such version: proposing is no existence oracle.
func (s *Service) Propose(ctx context.Context, p *protocol.ProposeParams) (*protocol.ProposeResult, error) {
	scope, pr, err := s.authorize(p.MemoryRequest, protocol.ActionPropose)
	if err != nil {
		return nil, err
	}
	if err := checkID("element_id", p.ElementID); err != nil {
		return nil, err
	}
	if err := checkID("target_version_id", p.TargetVersionID); err != nil {
		return nil, err
	}
	if p.Body == nil {
		return nil, errs.InvalidField("body", "body is required: the full replacement body")
	}
	if err := checkBody("body", *p.Body); err != nil {
		return nil, err
	}
	if p.Summary == "" {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "summary", Reason: "missing"}, "summary is required: a short summary for the curator")
	}
	if err := checkText("summary", p.Summary, MaxSummaryBytes); err != nil {
		return nil, err
	}
	if p.Provenance == nil {
		return nil, errs.InvalidField("provenance", "provenance {actor_type, actor_id, tool_id} is required")
	}
	if err := checkID("provenance.actor_type", p.Provenance.ActorType); err != nil {
		return nil, err
	}
	if err := checkID("provenance.actor_id", p.Provenance.ActorID); err != nil {
		return nil, err
	}
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	np := s.newProposal(scope, pr, p.ElementID, p.TargetVersionID, p.Summary, *p.Body, *p.Provenance)
	if err := db.Propose(ctx, np); err != nil {
		if !s.mayRead(pr, scope) {
			// A principal that may only propose learns nothing of which
			// element ids exist from the refusal.
			return nil, hideTarget(err, p.ElementID, p.TargetVersionID)
		}
		return nil, err
	}
	head, err := db.Head(ctx, scope, p.ElementID)
	if err != nil {
		return nil, err
	}
	return &protocol.ProposeResult{ProposalID: np.ProposalID, VersionID: np.Version.VersionID, Stale: head.VersionID != p.TargetVersionID}, nil
}

// checkBody refuses a body over MaxBodyBytes (errs.TooLarge) or not UTF-8.
func checkBody(field, body string) error {
	if err := checkText(field, body, MaxBodyBytes); err != nil {
		return err
	}
	if !utf8.ValidString(body) {
		return errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "not-utf8"}, "%s is not valid UTF-8", field)
	}
	return nil
}

// newProposal makes the record of a new proposal. Its body is not chunked:
// proposals are never in a baseline, so never retrieved as truth.
func (s *Service) newProposal(scope protocol.MemoryScope, pr protocol.MemoryPrincipal, elementID, targetVersion, summary, body string, prov protocol.ProposalProvenance) NewProposal {
	id := newID("prop_")
	prov.CreatedAt = time.Now().UTC().Format(time.RFC3339Nano)
	pj, _ := json.Marshal(prov)
	return NewProposal{
		Scope: scope, Principal: pr, ProposalID: id, TargetElementID: elementID, TargetVersionID: targetVersion, Summary: summary,
		Version: NewVersion{VersionID: newID("ver_"), Title: summary, Body: body, BodyHash: HashBody(body),
			SourceKind: protocol.SourceProposal, Provenance: pj},
	}
}

// Accept answers memory/accept (seed 002's accept/reject; PROTOCOL.md §13): a transaction of the
// engine on the memory target makes the proposal's body the target
// element's next version, with accepted_as, a decision artefact and a
// ledger event, atomically. Its proposer may not accept it unless the
// policy allows self-curation (errs.PermissionDenied, own-proposal). A stale proposal (its target is not the
// element's current version, an accepted but unpublished version
// included) is refused with errs.Stale naming memory/rebase. Accepting an
// accepted proposal returns the first result; a transaction a crash cut
// off is finished, not repeated.
func (s *Service) Accept(ctx context.Context, p *protocol.ProposalParams) (*protocol.AcceptResult, error) {
	scope, pr, db, err := s.onProposal(ctx, p.MemoryRequest, protocol.ActionCurate, p.ProposalID)
	if err != nil {
		return nil, err
	}
	// An accept is an apply: a read-only kernel refuses it before it
	// proposes a transaction (tx.Engine.CheckWritable).
	if err := s.cfg.Engine.CheckWritable(); err != nil {
		return nil, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	row, err := db.Proposal(ctx, scope, p.ProposalID)
	if err != nil {
		return nil, err
	}
	if err := s.checkCurator(scope, pr, "accept", row); err != nil {
		return nil, err
	}
	switch row.Status {
	case protocol.ProposalAccepted:
		return &protocol.AcceptResult{ProposalID: row.ProposalID, VersionID: row.AcceptedVersionID, DecisionID: row.DecisionID, TransactionID: row.AcceptTxID, AlreadyAccepted: true}, nil
	case protocol.ProposalRejected, protocol.ProposalRebased:
		data := map[string]any{"proposal_id": row.ProposalID, "status": row.Status}
		if row.RebasedTo != "" {
			data["rebased_to"] = row.RebasedTo
		}
		return nil, errs.New(errs.Closed, data, "proposal %s is %s and cannot be accepted", row.ProposalID, row.Status)
	}
	if row.TargetVersionID != row.CurrentVersionID {
		// Refused before a transaction is made; the engine's base check
		// is the guard for a move between here and the commit.
		return nil, StaleAccept(row.ProposalID, row.ElementID, row.TargetVersionID, row.CurrentVersionID)
	}
	txID := ""
	if row.AcceptTxID != "" {
		// An accept of this proposal was proposed before and cut off:
		// finish that transaction if it can still apply.
		st, err := s.cfg.Engine.Status(ctx, row.AcceptTxID)
		if err == nil && !protocol.Terminal(st.State) {
			txID = row.AcceptTxID
		}
	}
	if txID == "" {
		res, err := s.cfg.Engine.ProposeInternal(ctx, proposal(protocol.KindMemoryAccept, change{Scope: scope, Principal: pr, ProposalID: row.ProposalID}))
		if err != nil {
			return nil, err
		}
		txID = res.TransactionID
		if err := db.SetAcceptTx(ctx, scope, row.ProposalID, txID); err != nil {
			return nil, err
		}
	}
	if err := s.apply(ctx, txID); err != nil {
		if errs.KindIs(err, errs.Stale) || errs.KindIs(err, errs.Closed) {
			// Another kernel accepted this very proposal between the
			// check above and this one's claim: in a serial order this
			// accept came second, and is told so, not to rebase.
			if now, rerr := db.Proposal(ctx, scope, p.ProposalID); rerr == nil && now.Status == protocol.ProposalAccepted {
				return &protocol.AcceptResult{ProposalID: now.ProposalID, VersionID: now.AcceptedVersionID, DecisionID: now.DecisionID, TransactionID: now.AcceptTxID, AlreadyAccepted: true}, nil
			}
		}
		return nil, err
	}
	if _, err := s.embedVersions(ctx, scope, []string{VersionID(txID)}); err != nil {
		// The version is committed; it is embedded by the next ingest
		// or accept that finds it without vectors.
		s.log.Warn("memory/accept: embedding failed; the version is searchable by keyword", "version_id", VersionID(txID), "err", err)
	}
	return &protocol.AcceptResult{ProposalID: row.ProposalID, VersionID: VersionID(txID), DecisionID: DecisionID(txID), TransactionID: txID}, nil
}

// apply applies memory transaction txID. A transaction whose base went
// stale, whose proposal was decided meanwhile, or that met a claim it
// could not wait out, is closed, so it never lingers, and the error
// returned.
func (s *Service) apply(ctx context.Context, txID string) error {
	ar, err := s.cfg.Engine.Apply(ctx, txID)
	if errs.KindIs(err, errs.Stale) || errs.KindIs(err, errs.Closed) || errs.KindIs(err, errs.Conflict) {
		if _, cerr := s.cfg.Engine.CloseTx(context.WithoutCancel(ctx), txID); cerr != nil && !errs.KindIs(cerr, errs.Closed) {
			s.log.Warn("close stale memory transaction", "transactionId", txID, "err", cerr)
		}
		return err
	}
	if err != nil {
		return err
	}
	if !ar.OK {
		return errs.New(errs.Internal, map[string]any{"transaction_id": txID}, "memory transaction %s waits for approvals; memory kinds run under approval policy never", txID)
	}
	return nil
}

// Reject answers memory/reject: a decision artefact holding the rationale,
// linked by rejected_because, and the proposal closed. Its proposer may
// not reject it unless the policy allows self-curation
// (errs.PermissionDenied, own-proposal).
func (s *Service) Reject(ctx context.Context, p *protocol.RejectParams) (*protocol.RejectResult, error) {
	scope, pr, err := s.authorize(p.MemoryRequest, protocol.ActionCurate)
	if err != nil {
		return nil, err
	}
	if err := checkID("proposal_id", p.ProposalID); err != nil {
		return nil, err
	}
	if p.Rationale == "" {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "rationale", Reason: "missing"}, "rationale is required: why the proposal is rejected")
	}
	if err := checkText("rationale", p.Rationale, MaxSummaryBytes); err != nil {
		return nil, err
	}
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	// Who proposed it never changes, so it is checked outside the SQL
	// transaction that rejects it.
	row, err := db.Proposal(ctx, scope, p.ProposalID)
	if err != nil {
		return nil, err
	}
	if err := s.checkCurator(scope, pr, "reject", row); err != nil {
		return nil, err
	}
	dec := newID("dec_")
	// Serialised with accepts: an accept whose base was checked must not
	// find its proposal rejected when it commits.
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// An accept on another kernel holding the proposal's element is
	// waited for (waitClaimed): the reject then finds the proposal
	// accepted, never slipping between that accept's check and commit.
	if err := waitClaimed(ctx, func() error {
		return db.Reject(ctx, scope, p.ProposalID, p.Rationale, Decision{DecisionID: dec, Principal: pr})
	}); err != nil {
		return nil, err
	}
	return &protocol.RejectResult{ProposalID: p.ProposalID, DecisionID: dec}, nil
}

// Rebase answers memory/rebase (seed 002's staleness and rebase; PROTOCOL.md §13): a new proposal with the
// same body on the element's current version, the old one linked to it by
// rebased_to and closed, and a decision artefact. The new proposal keeps
// the old one's proposer, so the curator who rebases an agent's proposal
// may still accept it, and a proposer cannot launder its own proposal
// through a rebase. A proposal that is not stale is refused
// (errs.Conflict): accept it instead. A principal without read in the
// scope may rebase only its own proposals; another's is the same
// errs.NotFound as a proposal that does not exist.
func (s *Service) Rebase(ctx context.Context, p *protocol.ProposalParams) (*protocol.RebaseResult, error) {
	scope, pr, db, err := s.onProposal(ctx, p.MemoryRequest, protocol.ActionPropose, p.ProposalID)
	if err != nil {
		return nil, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	old, err := db.Proposal(ctx, scope, p.ProposalID)
	if err != nil {
		return nil, err
	}
	if old.PrincipalID != pr.PrincipalID && !s.mayRead(pr, scope) {
		// Another's proposal does not exist for a principal that may
		// not read the scope: the same error as a missing one.
		return nil, ErrProposalNotFound(p.ProposalID)
	}
	var prov protocol.ProposalProvenance
	_ = json.Unmarshal(old.Provenance, &prov)
	next := s.newProposal(scope, pr, old.ElementID, old.CurrentVersionID, old.Summary, old.Body, prov)
	next.ProposedBy = old.PrincipalID
	dec := newID("dec_")
	if err := waitClaimed(ctx, func() error {
		return db.Rebase(ctx, old.ProposalID, next, Decision{DecisionID: dec, Principal: pr})
	}); err != nil {
		return nil, err
	}
	return &protocol.RebaseResult{ProposalID: next.ProposalID, PreviousProposalID: old.ProposalID, TargetVersionID: old.CurrentVersionID, DecisionID: dec}, nil
}

// Promote answers memory/promote (seed 002's publish loop; PROTOCOL.md §13): a transaction of the engine
// builds a new baseline from the published one plus versions (by default
// every accepted version not yet published) and moves the pointer,
// atomically, with a decision artefact.
func (s *Service) Promote(ctx context.Context, p *protocol.PromoteParams) (*protocol.PromoteResult, error) {
	scope, pr, err := s.authorize(p.MemoryRequest, protocol.ActionPublish)
	if err != nil {
		return nil, err
	}
	for i, v := range p.Versions {
		if err := checkID("versions["+itoa(i)+"]", v); err != nil {
			return nil, err
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.promote(ctx, scope, pr, p.Versions, "promote")
}

// promote runs a promote transaction; the caller holds writeMu.
func (s *Service) promote(ctx context.Context, scope protocol.MemoryScope, pr protocol.MemoryPrincipal, versions []string, reason string) (*protocol.PromoteResult, error) {
	return s.promoteTx(ctx, scope, pr, versions, reason, true)
}

// promoteTx is promote; settle allows it to end, once, an earlier
// transaction of this kernel's that holds the pointer's claim.
func (s *Service) promoteTx(ctx context.Context, scope protocol.MemoryScope, pr protocol.MemoryPrincipal, versions []string, reason string, settle bool) (*protocol.PromoteResult, error) {
	// A promote is an apply: a read-only kernel refuses it before it
	// proposes a transaction (tx.Engine.CheckWritable).
	if err := s.cfg.Engine.CheckWritable(); err != nil {
		return nil, err
	}
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	prev, _, err := db.Pointer(ctx, scope)
	if err != nil {
		return nil, err
	}
	res, err := s.cfg.Engine.ProposeInternal(ctx, proposal(protocol.KindMemoryPromote,
		change{Scope: scope, Principal: pr, Versions: versions, Reason: reason}))
	if err != nil {
		return nil, err
	}
	r, err := recordOf(res)
	if err != nil {
		return nil, err
	}
	err = s.apply(ctx, res.TransactionID)
	if holder := s.ownClaim(ctx, err); holder != "" && settle {
		// The pointer's claim is this kernel's own earlier promote,
		// cut off by an outage (it answered -32019): finish or drop that
		// one first, then promote again, so a promote that saw -32019
		// is safe to send again.
		rolled := s.settle(ctx, db, scope, holder)
		res, err := s.promoteTx(ctx, scope, pr, versions, reason, false)
		if rolled && errs.KindIs(err, errs.Validation) {
			// The earlier promote published everything: it was this
			// request, sent before the outage; its result is the answer.
			if ptr, _, perr := s.cfg.Engine.Proposal(ctx, holder); perr == nil {
				var r Record
				if json.Unmarshal(ptr.TargetPlan, &r) == nil {
					return &protocol.PromoteResult{BaselineID: BaselineID(holder), PreviousBaselineID: r.ParentBaselineID, Published: len(r.Versions),
						TransactionID: holder, DecisionID: DecisionID(holder)}, nil
				}
			}
		}
		return res, err
	}
	if err != nil {
		return nil, err
	}
	return &protocol.PromoteResult{BaselineID: BaselineID(res.TransactionID), PreviousBaselineID: prev, Published: len(r.Versions),
		TransactionID: res.TransactionID, DecisionID: DecisionID(res.TransactionID)}, nil
}

// ownClaim is the holder of the claim err reports (ErrClaimed) when
// it is a transaction of this kernel's that is not terminal: a promote or
// accept an outage cut off. "" otherwise.
func (s *Service) ownClaim(ctx context.Context, err error) string {
	if !errs.KindIs(err, errs.Conflict) {
		return ""
	}
	_, data := errs.KindOf(err)
	d, ok := data.(ClaimedData)
	if !ok || d.Reason != "claimed" || d.TransactionID == "" {
		return ""
	}
	st, serr := s.cfg.Engine.Status(ctx, d.TransactionID)
	if serr != nil || protocol.Terminal(st.State) {
		return ""
	}
	return d.TransactionID
}

// settle ends this kernel's own transaction txID that holds a claim: one
// past its commit point is rolled forward (its commit is idempotent, and
// refused cleanly when its base moved); one before it is closed and its
// claim dropped.
// It reports a roll-forward that committed.
func (s *Service) settle(ctx context.Context, db Store, scope protocol.MemoryScope, txID string) bool {
	st, err := s.cfg.Engine.Status(ctx, txID)
	if err != nil {
		return false
	}
	if st.State == protocol.StateApplying || st.State == protocol.StateApplied {
		if _, err := s.cfg.Engine.Apply(ctx, txID); err != nil {
			s.log.Warn("memory: finishing an earlier transaction cut off by an outage", "transactionId", txID, "err", err)
			return false
		}
		return true
	}
	if _, err := s.cfg.Engine.CloseTx(ctx, txID); err != nil && !errs.KindIs(err, errs.Closed) {
		s.log.Warn("memory: closing an earlier transaction cut off by an outage", "transactionId", txID, "err", err)
	}
	if err := db.Unclaim(ctx, scope, txID); err != nil {
		s.log.Warn("memory: dropping the claim of an earlier transaction", "transactionId", txID, "err", err)
	}
	return false
}
