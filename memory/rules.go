package memory

import (
	"encoding/json"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// What every Store implementation answers the same way, whatever
// its SQL: the errors (kind, data and message) and the JSON it writes in
// decision artefacts, provenance and ledger events. Both stores call
// these, so the conformance suite (memory/memorytest) and the hosts see one
// behaviour.

// EvidenceOverCurated reports whether a version of source_kind kind may not be
// published because its element's published version (pubKind) or current
// version (headKind) is CURATED while it is not: ingested evidence never
// replaces curated truth (seed 002's ingest loop, docs/DESIGN.md §7), whoever
// promotes it. A curator who wants the evidence as truth accepts its review
// proposal, which makes it a CURATED version.
func EvidenceOverCurated(kind, pubKind, headKind string) bool {
	return kind != protocol.SourceCurated && (pubKind == protocol.SourceCurated || headKind == protocol.SourceCurated)
}

// ErrElementNotFound is the one error for an element that does not exist
// and one outside the caller's scope or baseline: no existence leak.
func ErrElementNotFound(id string) error {
	return errs.New(errs.NotFound, map[string]any{"element_id": id}, "element %s not found in this scope", id)
}

// ErrNoTarget is the one error a principal that may not read the scope
// gets for a proposal whose target it cannot use: an element that does
// not exist, one outside the scope, one that is no document, and a
// target_version_id that is not a version of the element all answer the
// same kind, message and data, so that proposing never tells such a
// principal which element ids exist (memory.Service.Propose).
func ErrNoTarget(elementID, versionID string) error {
	return errs.New(errs.NotFound, map[string]any{"element_id": elementID, "target_version_id": versionID},
		"element %s has no version %s in this scope", elementID, versionID)
}

// ErrElementExists is errs.Exists for an element id taken in its scope.
func ErrElementExists(id string) error {
	return errs.New(errs.Exists, map[string]any{"element_id": id}, "element %s exists", id)
}

// ErrIngestType is errs.Conflict for an ingest onto an element of
// another type than ameide:ingest.backlog_md.
func ErrIngestType(id, typ string) error {
	return errs.New(errs.Conflict, map[string]any{"element_id": id, "type": typ},
		"element %s exists with type %s; ingest makes only %s elements", id, typ, protocol.ElementBacklogMD)
}

// ErrVersionNotFound is errs.NotFound for a version id outside the scope.
func ErrVersionNotFound(id string) error {
	return errs.New(errs.NotFound, map[string]any{"version_id": id}, "version %s not found in this scope", id)
}

// ErrNotDocumentVersion is errs.NotFound for a promote naming a version
// that is no document version of the scope.
func ErrNotDocumentVersion(id string) error {
	return errs.New(errs.NotFound, map[string]any{"field": "versions", "version_id": id}, "version %s is not a document version in this scope", id)
}

// ErrProposalNotFound is errs.NotFound for a proposal outside the scope.
func ErrProposalNotFound(id string) error {
	return errs.New(errs.NotFound, map[string]any{"proposal_id": id}, "proposal %s not found in this scope", id)
}

// ErrProposalExists is errs.Exists for a proposal id taken.
func ErrProposalExists(id string) error {
	return errs.New(errs.Exists, map[string]any{"proposal_id": id}, "proposal %s exists", id)
}

// ErrProposalNotOpen is errs.Closed for a proposal that was decided.
func ErrProposalNotOpen(id, status string) error {
	return errs.New(errs.Closed, map[string]any{"proposal_id": id, "status": status}, "proposal %s is %s, not open", id, status)
}

// ErrBaselineNotFound is errs.NotFound for a baseline outside the scope.
func ErrBaselineNotFound(id string) error {
	return errs.New(errs.NotFound, map[string]any{"baseline_id": id}, "baseline %s not found in this scope", id)
}

// ErrChunkNotFound is errs.NotFound for a chunk outside the scope.
func ErrChunkNotFound(id int64) error {
	return errs.New(errs.NotFound, map[string]any{"chunk_id": id}, "chunk %d not found in this scope", id)
}

// ErrNotADocument is errs.Invalid for a proposal targeting a proposal or
// a decision.
func ErrNotADocument(elementID, typ string) error {
	return errs.New(errs.Invalid, errs.InvalidData{Field: "element_id", Reason: "not-a-document"},
		"element %s is a %s: proposals target documents", elementID, typ)
}

// ErrOtherElement is errs.Invalid for a target_version_id that is not a
// version of the proposal's element.
func ErrOtherElement(versionID, elementID string) error {
	return errs.New(errs.Invalid, errs.InvalidData{Field: "target_version_id", Reason: "other-element"},
		"target_version_id %s is not a version of element %s", versionID, elementID)
}

// ErrRebaseMoved is errs.Stale for an element that moved during a rebase.
func ErrRebaseMoved(oldID, elementID string) error {
	return errs.New(errs.Stale, map[string]any{"proposal_id": oldID, "element_id": elementID}, "element %s moved while rebasing: rebase again", elementID)
}

// ErrRebaseNotStale is errs.Conflict for a rebase of a proposal that
// already targets the current version.
func ErrRebaseNotStale(oldID, targetVersionID string) error {
	return errs.New(errs.Conflict, map[string]any{"proposal_id": oldID, "reason": "not-stale", "target_version_id": targetVersionID},
		"proposal %s already targets the current version %s: accept it instead", oldID, targetVersionID)
}

// ErrClaimed is errs.Conflict (ClaimedData) for a claim txID holds.
func ErrClaimed(key, txID string) error {
	return errs.New(errs.Conflict, ClaimedData{Reason: "claimed", Key: key, TransactionID: txID},
		"another curation transaction (%s) is changing %s; try again once it is done", txID, key)
}

// ErrClaimMoved is errs.Stale for a claim whose base moved: the element
// to current, or (elementID empty) the published pointer.
func ErrClaimMoved(elementID, current string) error {
	if elementID != "" {
		return errs.New(errs.Stale, nil, "element %s moved to %s", elementID, current)
	}
	return errs.New(errs.Stale, nil, "the published pointer moved to %s", current)
}

// DecisionVersion is d's decision artefact as written at ts: its one
// version (the JSON body, indented, with the principal as provenance),
// and the body again for the ledger event.
func DecisionVersion(d Decision, ts string) (NewVersion, []byte) {
	body := map[string]any{"decision": d.Type, "subject": d.Subject, "principal": d.Principal, "decided_at": ts}
	for k, v := range d.Body {
		body[k] = v
	}
	b, _ := json.MarshalIndent(body, "", "  ")
	prov, _ := json.Marshal(map[string]any{"actor_type": "principal", "actor_id": d.Principal.PrincipalID, "purpose": d.Principal.Purpose})
	return NewVersion{VersionID: d.DecisionID + "@1", Title: d.Type + " " + d.Subject, Body: string(b), SourceKind: protocol.SourceDecision, Provenance: prov}, b
}

// AcceptProvenance is the provenance of the version a accepts, replacing
// previousVersionID.
func AcceptProvenance(a Accept, previousVersionID string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"accepted_from": a.ProposalID, "accepted_by": a.Principal.PrincipalID, "previous_version_id": previousVersionID, "transaction_id": a.TxID})
	return b
}

// ProposeLedgerData is the data of p's memory/propose ledger event.
func ProposeLedgerData(p NewProposal, proposer string) []byte {
	b, _ := json.Marshal(map[string]any{"element_id": p.TargetElementID, "target_version_id": p.TargetVersionID, "summary": p.Summary, "proposed_by": proposer})
	return b
}

// RelationshipMetadata is a relationship's metadata as stored: meta as
// JSON, {} when nil.
func RelationshipMetadata(meta any) string {
	if meta == nil {
		return "{}"
	}
	b, _ := json.Marshal(meta)
	return string(b)
}
