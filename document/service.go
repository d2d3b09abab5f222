package document

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"unicode"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/jsondoc"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
)

// Service serves the document methods (PROTOCOL.md, "Documents") over the
// engine and kernel.db. Every change to a document is a transaction of the
// engine; Service adds the seeds' rules around it. It is safe for
// concurrent use.
type Service struct {
	eng *tx.Engine
	t   *Target
	// proposeMu serialises patchset/propose, so that checking for a
	// pending PatchSet and recording the new one are one step in this
	// process (kernel.db's unique index is the guard across processes).
	proposeMu sync.Mutex
}

// NewService returns the document service. t must be one of eng's targets.
func NewService(eng *tx.Engine, t *Target) *Service {
	return &Service{eng: eng, t: t}
}

// maxDocIDLen bounds a docId, in bytes.
const maxDocIDLen = 200

// checkDocID refuses an empty, overlong or unprintable docId.
func checkDocID(id string) error {
	if id == "" {
		return errs.InvalidField("docId", "docId is required")
	}
	if len(id) > maxDocIDLen {
		return errs.New(errs.Invalid, errs.InvalidData{Field: "docId", Reason: "too-long"}, "docId is longer than %d bytes", maxDocIDLen)
	}
	if strings.IndexFunc(id, func(r rune) bool { return !unicode.IsPrint(r) || r == '#' }) >= 0 {
		return errs.New(errs.Invalid, errs.InvalidData{Field: "docId", Reason: "unprintable"}, "docId must be printable and must not contain '#'")
	}
	return nil
}

// open is the preamble of every method that names a document: kernel.db's
// documents (opened on first use), once docID is a well-formed docId
// (checkDocID). A closed or unopenable kernel.db answers before a bad
// docId, as it always has.
func (s *Service) open(ctx context.Context, docID string) (*store.Documents, error) {
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkDocID(docID); err != nil {
		return nil, err
	}
	return db, nil
}

// openDoc is open, then the document docID names (errs.NotFound when
// there is none).
func (s *Service) openDoc(ctx context.Context, docID string) (*store.Documents, *store.Document, error) {
	db, err := s.open(ctx, docID)
	if err != nil {
		return nil, nil, err
	}
	doc, err := db.Document(ctx, docID)
	if err != nil {
		return nil, nil, err
	}
	return db, doc, nil
}

// Create creates a document at revision 0 (doc/create). The content must
// decode within the limits and be valid for its type.
func (s *Service) Create(ctx context.Context, p *protocol.DocCreateParams) (*protocol.DocResult, error) {
	db, err := s.open(ctx, p.DocID)
	if err != nil {
		return nil, err
	}
	if p.DocType == "" {
		return nil, errs.InvalidField("docType", "docType is required (see doc/types)")
	}
	if _, err := jsondoc.LookupType(p.DocType); err != nil {
		return nil, err
	}
	if len(p.Content) == 0 {
		return nil, errs.InvalidField("content", "content is required")
	}
	v, err := jsondoc.Decode(p.Content, s.t.lim)
	if err != nil {
		return nil, err
	}
	if err := jsondoc.ValidateDoc(p.DocType, v); err != nil {
		return nil, err
	}
	content, err := jsondoc.Encode(v)
	if err != nil {
		return nil, err
	}
	doc, err := db.CreateDocument(ctx, p.DocID, p.DocType, content, jsondoc.RulesDigest(p.DocType))
	if err != nil {
		return nil, err
	}
	// The first patch of the document starts from this value, validated.
	s.t.decoded.put(sha256Hex(content), decodedEntry{value: v, size: len(content), validFor: p.DocType})
	return docResult(doc), nil
}

func docResult(d *store.Document) *protocol.DocResult {
	return &protocol.DocResult{DocID: d.ID, DocType: d.Type, Revision: d.Revision, Content: d.Content}
}

// Get returns a document's current revision and content (doc/get).
func (s *Service) Get(ctx context.Context, p *protocol.DocParams) (*protocol.DocResult, error) {
	docID := p.DocID
	_, doc, err := s.openDoc(ctx, docID)
	if err != nil {
		return nil, err
	}
	return docResult(doc), nil
}

// Types lists the document types with their JSON Schemas (doc/types). It
// takes no params and cannot fail; it has the handler shape of every
// method.
func (s *Service) Types(context.Context, *struct{}) (*protocol.DocTypesResult, error) {
	var out protocol.DocTypesResult
	for _, t := range jsondoc.Types() {
		schema := t.Schema
		if schema == nil {
			schema = json.RawMessage("null")
		}
		out.Types = append(out.Types, protocol.DocType{Name: t.Name, Description: t.Description, Schema: schema})
	}
	return &out, nil
}

// Paths returns the canonical path map of a document (doc/paths).
func (s *Service) Paths(ctx context.Context, p *protocol.DocParams) (*protocol.DocPathsResult, error) {
	docID := p.DocID
	_, doc, err := s.openDoc(ctx, docID)
	if err != nil {
		return nil, err
	}
	v, err := jsondoc.Decode(doc.Content, s.t.lim)
	if err != nil {
		return nil, err
	}
	return &protocol.DocPathsResult{DocID: doc.ID, Revision: doc.Revision, Paths: jsondoc.Paths(doc.Type, v)}, nil
}

// Validate dry-runs an envelope (patch/validate, seed 000's dry-run:
// PROTOCOL.md §11). The result is a proposed transaction of the engine, whose
// id is the validationId. A patch_id applied before with the same payload
// returns that apply's transaction with AlreadyApplied; with another payload
// it is errs.IdempotencyConflict. In PROPOSED mode the envelope and this
// output are also stored for patch/proposed.
func (s *Service) Validate(ctx context.Context, p *protocol.PatchValidateParams) (*protocol.PatchValidateResult, error) {
	db, err := s.open(ctx, p.DocID)
	if err != nil {
		return nil, err
	}
	if len(p.Patch) == 0 {
		return nil, errs.InvalidField("patch", "patch is required: the envelope {patch_id, expected_revision, mode?, operations}")
	}
	env, err := jsondoc.DecodeEnvelope(p.Patch)
	if err != nil {
		return nil, err
	}
	hash, err := jsondoc.PatchHash(p.Patch)
	if err != nil {
		return nil, err
	}
	if prior, err := s.replay(ctx, p.DocID, env.PatchID, hash); err != nil || prior != nil {
		if err != nil {
			return nil, err
		}
		ptr, _, err := s.eng.Proposal(ctx, prior.TxID)
		if err != nil {
			return nil, err
		}
		pl, err := s.t.load(ptr)
		if err != nil {
			return nil, err
		}
		return validation(prior.TxID, pl.rec, true), nil
	}
	res, err := s.eng.Propose(ctx, proposal(protocol.KindJSONPatch, input{DocID: p.DocID, Patch: p.Patch}))
	if err != nil {
		return nil, err
	}
	pl, err := plannedOf(res)
	if err != nil {
		return nil, err
	}
	out := validation(res.TransactionID, pl.rec, false)
	if out.Mode == protocol.ModeProposed {
		val, _ := json.Marshal(out)
		if err := db.PutProposed(ctx, store.ProposedPatch{DocID: p.DocID, PatchID: env.PatchID, TxID: res.TransactionID,
			PatchHash: out.PatchHash, Envelope: p.Patch, Validation: val}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replay looks patchID up in docID's patch log: the entry when it was
// applied with hash, errs.IdempotencyConflict when with another payload,
// nil when never.
func (s *Service) replay(ctx context.Context, docID, patchID, hash string) (*store.PatchLogEntry, error) {
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	prior, err := db.PatchByPatchID(ctx, docID, patchID)
	if err != nil || prior == nil {
		return nil, err
	}
	if prior.PatchHash != hash {
		return nil, errs.New(errs.IdempotencyConflict, IdempotencyData{DocID: docID, PatchID: patchID, AppliedHash: prior.PatchHash, PatchHash: hash},
			"patch_id %s was applied to %s with a different payload: use a new patch_id for a new change", patchID, docID)
	}
	return prior, nil
}

// validation is the validation artefact of transaction id, whose plan
// record is r.
func validation(id string, r *planRecord, replay bool) *protocol.PatchValidateResult {
	return &protocol.PatchValidateResult{
		ValidationID: id, ExpiresAt: r.ExpiresAt, DocID: r.DocID, PatchID: r.PatchID,
		ExpectedRevision: r.ExpectedRevision, Mode: r.Mode, PatchHash: r.PatchHash,
		Targets: r.Targets, Preview: r.Preview, AlreadyApplied: replay,
	}
}

// Apply applies a validated envelope (patch/apply, seed 000's apply:
// PROTOCOL.md §11). It refuses, each with its own kind: a missing or unknown
// validationId (errs.UnknownValidation), an expired one (errs.Expired), a
// patch whose hash is not the validated one (errs.HashMismatch), a moved
// revision (errs.Stale, from the engine's base check) and a patch_id applied
// with another payload (errs.IdempotencyConflict). A patch_id applied with the
// same payload returns the original result with AlreadyApplied. An envelope in
// PROPOSED mode is not applied: the result says Proposed.
func (s *Service) Apply(ctx context.Context, p *protocol.PatchApplyParams) (*protocol.PatchApplyResult, error) {
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validationID(p)
	if err != nil {
		return nil, err
	}
	p = &protocol.PatchApplyParams{ValidationID: id, Patch: p.Patch}
	if len(p.Patch) == 0 {
		return nil, errs.InvalidField("patch", "patch is required: the same envelope that was validated")
	}
	ptr, state, err := s.eng.Proposal(ctx, p.ValidationID)
	if errs.KindIs(err, errs.NotFound) {
		return nil, errs.New(errs.UnknownValidation, ValidationIDData{ValidationID: p.ValidationID, Reason: "unknown"},
			"validationId %s is unknown: call patch/validate first", p.ValidationID)
	}
	if err != nil {
		return nil, err
	}
	if ptr == nil || ptr.TargetName() != protocol.TargetDocument || ptr.Kind != protocol.KindJSONPatch {
		return nil, errs.New(errs.UnknownValidation, ValidationIDData{ValidationID: p.ValidationID, Reason: "not-a-document-patch"},
			"%s is a transaction but not a patch/validate validationId", p.ValidationID)
	}
	pl, err := s.t.load(ptr)
	if err != nil {
		return nil, err
	}
	r := pl.rec
	if _, err := jsondoc.DecodeEnvelope(p.Patch); err != nil {
		return nil, err
	}
	hash, err := jsondoc.PatchHash(p.Patch)
	if err != nil {
		return nil, err
	}
	if hash != r.PatchHash {
		return nil, errs.New(errs.HashMismatch, HashData{ValidationID: p.ValidationID, ValidatedHash: r.PatchHash, PatchHash: hash},
			"the patch is not the one validated as %s: validate it again", p.ValidationID)
	}
	out := &protocol.PatchApplyResult{ValidationID: p.ValidationID, DocID: r.DocID, PatchID: r.PatchID}
	if state == protocol.StateCompleted {
		return s.applied(ctx, out, p.ValidationID, true)
	}
	if err := pl.checkExpiry(); err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			if d, ok := e.Data.(ExpiredData); ok {
				d.ValidationID = p.ValidationID
				e.Data = d
			}
		}
		// An expired validation can never apply: retire it now.
		if _, cerr := s.eng.CloseTx(ctx, p.ValidationID); cerr != nil && !errs.KindIs(cerr, errs.Closed) {
			return nil, cerr
		}
		return nil, err
	}
	if r.Mode == protocol.ModeProposed {
		doc, err := db.Document(ctx, r.DocID)
		if err != nil {
			return nil, err
		}
		out.Proposed, out.Revision = true, doc.Revision
		return out, nil
	}
	if prior, err := s.replay(ctx, r.DocID, r.PatchID, hash); err != nil || prior != nil {
		if err != nil {
			return nil, err
		}
		// The same patch was applied by another validation: this one
		// must not apply it twice.
		if _, err := s.eng.CloseTx(ctx, p.ValidationID); err != nil && !errs.KindIs(err, errs.Closed) {
			return nil, err
		}
		out.ValidationID = prior.TxID
		return s.applied(ctx, out, prior.TxID, true)
	}
	ar, err := s.eng.Apply(ctx, p.ValidationID)
	if err != nil {
		return nil, err
	}
	if !ar.OK {
		doc, err := db.Document(ctx, r.DocID)
		if err != nil {
			return nil, err
		}
		out.Revision, out.PendingApprovals = doc.Revision, ar.PendingApprovals
		return out, nil
	}
	return s.applied(ctx, out, p.ValidationID, ar.AlreadyApplied)
}

// Names of patch/apply's validation id: the wire's and seed 000's.
const (
	fieldValidationID     = "validationId"
	fieldValidationIDSeed = "validation_id"
)

// validationID is patch/apply's validation id, given as validationId or
// under seed 000's name validation_id (an empty string counts as not
// given). Both with different values is errs.Invalid naming both fields;
// neither is errs.UnknownValidation with reason "missing".
func validationID(p *protocol.PatchApplyParams) (string, error) {
	id, seed := p.ValidationID, p.ValidationIDSeed
	switch {
	case id != "" && seed != "" && id != seed:
		return "", errs.New(errs.Invalid, AliasData{Field: fieldValidationIDSeed, Fields: []string{fieldValidationID, fieldValidationIDSeed},
			Values: []string{id, seed}, Reason: "conflicting-alias"},
			"validationId %q and validation_id %q differ: they are one field (validation_id is the envelope's spelling of it); give one, or the same id in both", id, seed)
	case id != "":
		return id, nil
	case seed != "":
		return seed, nil
	}
	return "", errs.New(errs.UnknownValidation, ValidationIDData{Reason: "missing", Field: fieldValidationID, Alias: fieldValidationIDSeed},
		"validationId is required (validation_id is accepted too): call patch/validate first and pass its validationId")
}

// applied completes out from the patch-log entry of transaction txID.
func (s *Service) applied(ctx context.Context, out *protocol.PatchApplyResult, txID string, replay bool) (*protocol.PatchApplyResult, error) {
	db, err := s.t.store(ctx)
	if err != nil {
		return nil, err
	}
	e, err := db.PatchByTx(ctx, txID)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, errs.New(errs.Internal, nil, "transaction %s completed without a patch-log entry", txID)
	}
	out.OK, out.Revision, out.AlreadyApplied = true, e.Revision, replay
	return out, nil
}

// Log pages through a document's patch log, oldest first (patch/log).
func (s *Service) Log(ctx context.Context, p *protocol.PatchLogParams) (*protocol.PatchLogResult, error) {
	db, err := s.open(ctx, p.DocID)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > 1000:
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "limit", Reason: "out-of-range"}, "limit must be between 1 and 1000")
	}
	if _, err := db.Document(ctx, p.DocID); err != nil {
		return nil, err
	}
	rows, err := db.PatchLog(ctx, p.DocID, p.AfterSeq, limit+1)
	if err != nil {
		return nil, err
	}
	out := &protocol.PatchLogResult{DocID: p.DocID, Entries: []protocol.PatchLogEntry{}}
	for i, e := range rows {
		if i == limit {
			out.NextAfterSeq = rows[i-1].Seq
			break
		}
		out.Entries = append(out.Entries, protocol.PatchLogEntry{Seq: e.Seq, Revision: e.Revision, PatchID: e.PatchID, PatchHash: e.PatchHash,
			TransactionID: e.TxID, AppliedAt: e.AppliedAt.UTC().Format(timeFormat), Patch: e.Envelope})
	}
	return out, nil
}

// Proposed lists the envelopes validated in PROPOSED mode (patch/proposed).
func (s *Service) Proposed(ctx context.Context, p *protocol.DocParams) (*protocol.PatchProposedResult, error) {
	docID := p.DocID
	db, _, err := s.openDoc(ctx, docID)
	if err != nil {
		return nil, err
	}
	rows, err := db.ProposedPatches(ctx, docID)
	if err != nil {
		return nil, err
	}
	out := &protocol.PatchProposedResult{DocID: docID, Patches: []protocol.ProposedPatch{}}
	for _, r := range rows {
		pp := protocol.ProposedPatch{PatchID: r.PatchID, ValidationID: r.TxID, PatchHash: r.PatchHash, Patch: r.Envelope,
			CreatedAt: r.CreatedAt.UTC().Format(timeFormat)}
		if err := json.Unmarshal(r.Validation, &pp.Validation); err != nil {
			return nil, errs.Wrap(errs.Internal, err, nil, "proposed patch %s", r.PatchID)
		}
		out.Patches = append(out.Patches, pp)
	}
	return out, nil
}

// TypeNames lists the names of the document types doc/create accepts
// (initialize's capabilities.documentTypes), in doc/types' order.
func (s *Service) TypeNames() []string {
	out := []string{}
	for _, t := range jsondoc.Types() {
		out = append(out, t.Name)
	}
	return out
}
