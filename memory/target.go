// The engine's memory target (DESIGN.md §2, seed 002):
// a curator's accept, which makes a proposal's body the next
// ElementVersion of its target element, and a promote, which builds a new
// baseline and moves a repository's published pointer. Each is a
// transaction of the engine, so it is in the ledger, in tx/list, guarded
// by its base (target_version_id; the pointer's baseline) and recovered
// after a crash. Commit is one SQL transaction keyed by the transaction
// id, so committing twice has one effect.
//
// Only the memory service proposes these kinds: they are tx.Kind.Internal,
// so the engine refuses them from turn/start, and their input (change) is
// built by the service alone (Engine.ProposeInternal), after it checked
// the principal's grants: a turn/start cannot change memory around
// --memory-policy.

package memory

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/zeebo/blake3"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/tx/record"
	"github.com/txkernel/txkernel/unidiff"
)

// fpBeforeSQLCommit is hit inside Commit, after the commit record is
// durable and before the SQL transaction that writes the new version or
// baseline.
const fpBeforeSQLCommit = "memory.before-sql-commit"

// Target is the memory target. It implements tx.Target and is safe for
// concurrent use.
type Target struct {
	db func(context.Context) (Store, error)
	fp *failpoint.Set
}

var _ tx.Target = (*Target)(nil)

// NewTarget returns the memory target over kernel.db (db opens it on first use).
func NewTarget(db func(context.Context) (Store, error), fps *failpoint.Set) *Target {
	return &Target{db: db, fp: fps}
}

// Name implements tx.Target: "memory".
func (t *Target) Name() string { return protocol.TargetMemory }

// Kinds implements tx.Target: memory_accept and memory_promote, both
// internal to the memory service and under approval policy never: the
// curator's call is the decision, and the grants of --memory-policy say
// who may make it. Both take a change.
func (t *Target) Kinds() []tx.Kind {
	return []tx.Kind{
		{Name: protocol.KindMemoryAccept, DefaultPolicy: approvals.Never, Internal: true, Input: reflect.TypeFor[change]()},
		{Name: protocol.KindMemoryPromote, DefaultPolicy: approvals.Never, Internal: true, Input: reflect.TypeFor[change]()},
	}
}

// change is a memory transaction's input (tx.Input.Body, a *change): an accept of
// ProposalID, or a promote of Versions (every accepted version not yet
// published when empty) with Reason "promote" or "ingest". Only the
// memory service makes one (proposal), after checking the principal's
// grants.
type change struct {
	Scope      protocol.MemoryScope     `json:"scope"`
	Principal  protocol.MemoryPrincipal `json:"principal"`
	ProposalID string                   `json:"proposal_id,omitempty"`
	Versions   []string                 `json:"versions,omitempty"`
	Reason     string                   `json:"reason,omitempty"`
}

// proposal is c as the engine's envelope for kind.
func proposal(kind string, c change) *tx.Input {
	return &tx.Input{Kind: kind, Body: &c}
}

// Record is the memory target's pointers.proposal.target_plan: what the
// transaction was planned against (target_version_id, or the baseline the
// pointer was at) and what it will write. The ids it writes derive from
// the transaction id, so a repeated Commit writes the same ones.
type Record struct {
	Scope     protocol.MemoryScope     `json:"scope"`
	Principal protocol.MemoryPrincipal `json:"principal"`
	// accept
	ProposalID      string `json:"proposal_id,omitempty"`
	ElementID       string `json:"element_id,omitempty"`
	TargetVersionID string `json:"target_version_id,omitempty"`
	BodySHA256      string `json:"body_sha256,omitempty"`
	// promote
	ParentBaselineID string   `json:"parent_baseline_id,omitempty"`
	Versions         []string `json:"versions,omitempty"`
	Reason           string   `json:"reason,omitempty"`
}

// planned is a memory transaction as Load decoded it.
type planned struct {
	t   *Target
	ptr *record.Proposal
	rec *Record
}

// Load implements tx.Target: it decodes pointers.proposal.target_plan
// (Record) once. A plan that is neither an accept (proposal_id) nor a
// promote (versions) is errs.LedgerCorrupt, as is one that does not
// decode.
func (t *Target) Load(p *record.Proposal) (tx.Planned, error) {
	var r Record
	if err := json.Unmarshal(p.TargetPlan, &r); err != nil {
		return nil, errs.Wrap(errs.LedgerCorrupt, err, nil, "memory target plan: %v", err)
	}
	if r.ProposalID == "" && len(r.Versions) == 0 {
		return nil, errs.New(errs.LedgerCorrupt, nil, "memory target plan: neither an accept nor a promote")
	}
	return &planned{t: t, ptr: p, rec: &r}, nil
}

// recordOf is the plan record of a transaction the service proposed.
func recordOf(res *tx.Proposed) (*Record, error) {
	pl, ok := res.Planned.(*planned)
	if !ok {
		return nil, errs.New(errs.Internal, nil, "transaction %s is not a memory transaction", res.TransactionID)
	}
	return pl.rec, nil
}

// derive makes the id of what transaction txID writes: prefix and 24 hex
// digits of BLAKE3(txID, what).
func derive(prefix, txID, what string) string {
	s := blake3.Sum256([]byte(txID + "\x00" + what))
	return prefix + hex.EncodeToString(s[:12])
}

// VersionID is the id of the version accept transaction txID makes.
func VersionID(txID string) string { return derive("ver_", txID, "version") }

// DecisionID is the id of the decision artefact transaction txID writes.
func DecisionID(txID string) string { return derive("dec_", txID, "decision") }

// BaselineID is the id of the baseline promote transaction txID makes.
func BaselineID(txID string) string { return derive("bl_", txID, "baseline") }

// Plan implements tx.Target: body is a *change (errs.Internal
// otherwise). For an accept it pins the proposal's target_version_id; for
// a promote, the baseline the pointer is at and the versions to publish
// (errs.Validation when there are none).
func (t *Target) Plan(ctx context.Context, kind string, body any) (*tx.Plan, error) {
	m, ok := body.(*change)
	if !ok || m == nil {
		return nil, errs.New(errs.Internal, nil, "a memory proposal takes a *memory.change, not a %T", body)
	}
	db, err := t.db(ctx)
	if err != nil {
		return nil, err
	}
	r := Record{Scope: m.Scope, Principal: m.Principal}
	var changes []protocol.FileChange
	var text string
	switch kind {
	case protocol.KindMemoryAccept:
		p, err := db.Proposal(ctx, m.Scope, m.ProposalID)
		if err != nil {
			return nil, err
		}
		if p.Status != protocol.ProposalOpen {
			return nil, ErrProposalNotOpen(p.ProposalID, p.Status)
		}
		target, err := db.VersionByID(ctx, m.Scope, p.TargetVersionID)
		if err != nil {
			return nil, err
		}
		r.ProposalID, r.ElementID, r.TargetVersionID, r.BodySHA256 = p.ProposalID, p.ElementID, p.TargetVersionID, HashBody(p.Body)
		changes = []protocol.FileChange{{Path: elementPath(m.Scope, p.ElementID), Kind: protocol.ChangeModify}}
		text = string(unidiff.FileDiff(p.ElementID, p.ElementID, []byte(target.Body), []byte(p.Body), true, true, 0o644, 0o644))
	case protocol.KindMemoryPromote:
		parent, bid, err := db.Pointer(ctx, m.Scope)
		if err != nil {
			return nil, err
		}
		versions, err := db.Promotable(ctx, m.Scope, bid, m.Versions)
		if err != nil {
			return nil, err
		}
		if len(versions) == 0 {
			return nil, errs.New(errs.Validation, map[string]any{"reason": "nothing-to-promote", "published": parent},
				"nothing to promote: every accepted version is published already")
		}
		r.ParentBaselineID, r.Versions, r.Reason = parent, versions, m.Reason
		changes = []protocol.FileChange{{Path: "memory://" + scopePath(m.Scope) + "#published", Kind: protocol.ChangeModify}}
		text = fmt.Sprintf("promote %d version(s) onto %s:\n%s\n", len(versions), orNone(parent), strings.Join(versions, "\n"))
	default:
		return nil, errs.InvalidField("proposal.kind", "unknown memory kind %q", kind)
	}
	rec, _ := json.Marshal(r)
	return &tx.Plan{
		Pointer:   record.Proposal{TargetPlan: rec},
		Changes:   changes,
		Canonical: rec,
		Redacted:  []byte(text),
	}, nil
}

func orNone(s string) string {
	if s == "" {
		return "(no baseline)"
	}
	return s
}

func scopePath(s protocol.MemoryScope) string {
	return s.TenantID + "/" + s.OrganizationID + "/" + s.RepositoryID
}

func elementPath(s protocol.MemoryScope, id string) string {
	return "memory://" + scopePath(s) + "/" + id
}

// Admit implements tx.Planned: nothing refuses a memory change before its
// approvals; the grants were checked by the memory service.
func (pl *planned) Admit() error { return nil }

// Files implements tx.Planned: memory is no workspace file.
func (pl *planned) Files() []string { return nil }

// Approvals implements tx.Planned: the patchset approval, whose reason
// names the element and version (or the baseline) it changes. The memory
// kinds run under approval policy never: the curator's call is the
// decision.
func (pl *planned) Approvals() []approvals.Requirement {
	return approvals.RequiredFor(pl.ptr.PatchID, approvalReason(pl.rec), false)
}

// approvalReason says what approving r does: "accept proposal p as the
// next version of element e (after version v)", or "promote 3 version(s)
// of t/o/r onto baseline b".
func approvalReason(r *Record) string {
	if r.ProposalID != "" {
		return fmt.Sprintf("accept proposal %s as the next version of element %s (after version %s)", r.ProposalID, r.ElementID, r.TargetVersionID)
	}
	if r.ParentBaselineID == "" {
		return fmt.Sprintf("promote %d version(s) of %s as its first baseline", len(r.Versions), scopePath(r.Scope))
	}
	return fmt.Sprintf("promote %d version(s) of %s onto baseline %s", len(r.Versions), scopePath(r.Scope), r.ParentBaselineID)
}

// LockKeys implements tx.Planned: the element for an accept, the
// repository's pointer for a promote.
func (pl *planned) LockKeys() []string {
	r := pl.rec
	if r.ProposalID != "" {
		return []string{scopePath(r.Scope) + "/" + r.ElementID}
	}
	return []string{scopePath(r.Scope) + "#published"}
}

// StaleData is the data of a stale accept or promote.
type StaleData struct {
	ProposalID       string `json:"proposal_id,omitempty"`
	ElementID        string `json:"element_id,omitempty"`
	TargetVersionID  string `json:"target_version_id,omitempty"`
	CurrentVersionID string `json:"current_version_id,omitempty"`
	Status           string `json:"status,omitempty"`
	Rebase           string `json:"rebase,omitempty"` // the method that fixes it: memory/rebase
	ExpectedBaseline string `json:"expected_baseline_id,omitempty"`
	CurrentBaseline  string `json:"current_baseline_id,omitempty"`
}

// CheckBase implements tx.Planned. An accept of a proposal that is no
// longer open is errs.Closed. An accept is stale (errs.Stale with
// StaleData naming memory/rebase) when its target_version_id is no longer
// the element's newest version: an accepted version not yet published
// counts, so an accept never overwrites newer truth. A promote is stale
// when the pointer moved since it was planned.
func (pl *planned) CheckBase(ctx context.Context) error {
	r := pl.rec
	db, err := pl.t.db(ctx)
	if err != nil {
		return err
	}
	if r.ProposalID == "" {
		cur, _, err := db.Pointer(ctx, r.Scope)
		if err != nil {
			return err
		}
		if cur != r.ParentBaselineID {
			return errs.New(errs.Stale, StaleData{ExpectedBaseline: r.ParentBaselineID, CurrentBaseline: cur},
				"the published pointer moved to %s since this promote was planned on %s: promote again", cur, orNone(r.ParentBaselineID))
		}
		return nil
	}
	prop, err := db.Proposal(ctx, r.Scope, r.ProposalID)
	if err != nil {
		return err
	}
	if prop.Status != protocol.ProposalOpen {
		return ErrProposalNotOpen(r.ProposalID, prop.Status)
	}
	head, err := db.Head(ctx, r.Scope, r.ElementID)
	if err != nil {
		return err
	}
	if head.VersionID != r.TargetVersionID {
		return StaleAccept(r.ProposalID, r.ElementID, r.TargetVersionID, head.VersionID)
	}
	return nil
}

// StaleAccept is the errs.Stale error of an accept whose proposal targets
// version target of element while current is the element's newest
// version; its data names memory/rebase.
func StaleAccept(proposalID, element, target, current string) error {
	return errs.New(errs.Stale, StaleData{ProposalID: proposalID, ElementID: element, TargetVersionID: target, CurrentVersionID: current, Rebase: protocol.MethodMemoryRebase},
		"proposal %s targets version %s of %s, but the current version is %s: call memory/rebase, then accept the new proposal", proposalID, target, element, current)
}

// commitRecord is the memory target's apply/commit record: the ids the
// commit writes.
type commitRecord struct {
	VersionID  string `json:"version_id,omitempty"`
	BaselineID string `json:"baseline_id,omitempty"`
	DecisionID string `json:"decision_id"`
}

// claimWait bounds how long Prepare waits for another kernel's claim on
// the same element or pointer: its accept or promote commits in
// milliseconds, after which this one is stale, as it would have been had
// it come second.
const claimWait = 2 * time.Second

// Prepare implements tx.Planned. Nothing needs staging: Commit reads the
// proposal's immutable body from the store. It claims what the
// transaction changes (Claim), checking again, in the claim's SQL
// transaction, what CheckBase checked: kernels sharing a memory then
// cannot both pass the check, and the second is stale (errs.Stale, with
// memory/rebase for an accept), or, when the first accepted the same
// proposal, finds it closed (the service answers already_accepted).
// Commit drops the claim with its writes, and commits only while it holds
// it (ErrClaimLost, rolled back); Abort drops it.
func (pl *planned) Prepare(ctx context.Context, c *tx.Change) (*record.Commit, error) {
	r := pl.rec
	db, err := pl.t.db(ctx)
	if err != nil {
		return nil, err
	}
	claim := Claim{Scope: r.Scope, TxID: c.TxID, ProposalID: r.ProposalID, ElementID: r.ElementID, TargetVersionID: r.TargetVersionID, Pointer: r.ParentBaselineID}
	if r.ProposalID == "" {
		claim.ElementID, claim.TargetVersionID = "", ""
	}
	deadline := time.Now().Add(claimWait)
	for {
		current, err := db.Claim(ctx, claim)
		switch {
		case err == nil:
		case errs.KindIs(err, errs.Stale) && r.ProposalID != "":
			return nil, StaleAccept(r.ProposalID, r.ElementID, r.TargetVersionID, current)
		case errs.KindIs(err, errs.Stale):
			return nil, errs.New(errs.Stale, StaleData{ExpectedBaseline: r.ParentBaselineID, CurrentBaseline: current},
				"the published pointer moved to %s since this promote was planned on %s: promote again", current, orNone(r.ParentBaselineID))
		case isClaimed(err) && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		default:
			return nil, err
		}
		break
	}
	cr := commitRecord{DecisionID: DecisionID(c.TxID)}
	if r.ProposalID != "" {
		cr.VersionID = VersionID(c.TxID)
	} else {
		cr.BaselineID = BaselineID(c.TxID)
	}
	rec, _ := json.Marshal(cr)
	return &record.Commit{Record: rec}, nil
}

// isClaimed reports ErrClaimed: a live claim of another
// transaction, which ends in milliseconds when its holder commits.
func isClaimed(err error) bool {
	kind, data := errs.KindOf(err)
	d, ok := data.(ClaimedData)
	return kind == errs.Conflict && ok && d.Reason == "claimed"
}

// waitClaimed runs fn again while it meets a live claim (isClaimed), up
// to claimWait: a decision or an ingest takes its turn after the accept
// or promote that holds the claim, as it would have had it come second.
// After claimWait the claim's error is returned (-32005, reason claimed).
func waitClaimed(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(claimWait)
	for {
		err := fn()
		if !isClaimed(err) || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errs.Wrap(errs.Cancelled, ctx.Err(), nil, "")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Commit implements tx.Planned: one SQL transaction writes the new version
// with its relationships and decision artefact (accept), or the new
// baseline, the pointer move and the decision artefact (promote). When the
// transaction's rows exist already it does nothing.
func (pl *planned) Commit(ctx context.Context, c *tx.Change, _ *record.Commit) error {
	if err := pl.t.fp.Hit(ctx, fpBeforeSQLCommit); err != nil {
		return err
	}
	r := pl.rec
	db, err := pl.t.db(ctx)
	if err != nil {
		return err
	}
	if r.ProposalID != "" {
		return db.CommitAccept(ctx, Accept{Scope: r.Scope, Principal: r.Principal, ProposalID: r.ProposalID, TxID: c.TxID,
			VersionID: VersionID(c.TxID), DecisionID: DecisionID(c.TxID), Chunks: Chunks})
	}
	return db.CommitPromote(ctx, Promote{Scope: r.Scope, Principal: r.Principal, TxID: c.TxID, BaselineID: BaselineID(c.TxID),
		ParentBaselineID: r.ParentBaselineID, Versions: r.Versions, Reason: r.Reason, DecisionID: DecisionID(c.TxID)})
}

// Abort implements tx.Planned: it drops the claim Prepare took, if any.
func (pl *planned) Abort(ctx context.Context, c *tx.Change) error {
	db, err := pl.t.db(ctx)
	if err != nil {
		return err
	}
	return db.Unclaim(ctx, pl.rec.Scope, c.TxID)
}

// Summary implements tx.Planned: "accept proposal p on element e (version
// v)" or "promote 3 versions of t/o/r".
func (pl *planned) Summary() string {
	r := pl.rec
	if r.ProposalID != "" {
		return fmt.Sprintf("accept proposal %s on element %s (version %s) by %s", r.ProposalID, r.ElementID, r.TargetVersionID, r.Principal.PrincipalID)
	}
	return fmt.Sprintf("%s %d version(s) of %s by %s", r.Reason, len(r.Versions), scopePath(r.Scope), r.Principal.PrincipalID)
}

// Chunks splits a version's body into structure-aware chunks by heading
// path (markdown.Split, stable chunk keys). A body Split refuses
// (not UTF-8) is one chunk; an empty body has none.
func Chunks(title, body string) []Chunk {
	cs, err := markdown.Split(title, []byte(body))
	if err != nil || len(cs) == 0 {
		if body == "" {
			return nil
		}
		return []Chunk{{Key: markdown.PreambleKey, Title: title, Text: body, Start: 0, End: len(body)}}
	}
	out := make([]Chunk, len(cs))
	for i, c := range cs {
		out[i] = Chunk{Key: c.Key, HeadingPath: strings.Join(c.HeadingPath, " > "), Title: c.Title, Text: c.Body, Start: c.Start, End: c.End}
	}
	return out
}
