package protocol

import "encoding/json"

// Document methods (seeds 000 and 003; PROTOCOL.md §11). A document is a JSON
// value in kernel.db with a type, a revision and a patch log; every change
// to it is a transaction of the engine (target "document").
const (
	MethodDocCreate       = "doc/create"
	MethodDocGet          = "doc/get"
	MethodDocTypes        = "doc/types"
	MethodDocPaths        = "doc/paths"
	MethodPatchValidate   = "patch/validate"
	MethodPatchApply      = "patch/apply"
	MethodPatchLog        = "patch/log"
	MethodPatchProposed   = "patch/proposed"
	MethodPatchSetPropose = "patchset/propose"
	MethodPatchSetReview  = "patchset/review"
	MethodPatchSetDecide  = "patchset/decide"
	MethodPatchSetContext = "patchset/context"
	// MethodPatchSetContextAck clears a recipe's lastPatchDecision once
	// the host's LLM call that carried it succeeded (seed 003: "cleared
	// after the next successful LLM response").
	MethodPatchSetContextAck = "patchset/context_ack"
)

// Proposal kinds of the document target.
const (
	KindJSONPatch      = "json_patch"      // seed 000's envelope
	KindRecipePatchSet = "recipe_patchset" // seed 003's PatchSet
)

// Envelope modes (seed 000's optional PROPOSED mode: PROTOCOL.md §11).
const (
	ModeApply    = "APPLY"
	ModeProposed = "PROPOSED"
)

// PatchSet decisions (seed 003's decision context: PROTOCOL.md §11).
const (
	PatchSetAccepted = "accepted"
	PatchSetRejected = "rejected"
)

// DocParams names one document: doc/get, doc/paths, patch/proposed,
// patchset/context.
type DocParams struct {
	DocID string `json:"docId"`
}

// DocCreateParams are the params of doc/create. Content must be valid for
// DocType (see doc/types).
type DocCreateParams struct {
	DocID   string          `json:"docId"`
	DocType string          `json:"docType"`
	Content json.RawMessage `json:"content"`
}

// DocResult is a document at one revision: the result of doc/create
// (revision 0) and doc/get.
type DocResult struct {
	DocID    string          `json:"docId"`
	DocType  string          `json:"docType"`
	Revision int64           `json:"revision"`
	Content  json.RawMessage `json:"content"`
}

// DocType is one document type of doc/types: its name and JSON Schema
// (draft 2020-12; null for json, which accepts any value).
type DocType struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// DocTypesResult is the result of doc/types.
type DocTypesResult struct {
	Types []DocType `json:"types"`
}

// DocPathsResult is the result of doc/paths: the canonical path map of the
// document at Revision, RFC 6901 pointers by id (seed 000's open question).
type DocPathsResult struct {
	DocID    string `json:"docId"`
	Revision int64  `json:"revision"`
	Paths    any    `json:"paths"`
}

// PatchValidateParams are the params of patch/validate. Patch is seed 000's
// envelope: patch_id, expected_revision, mode, source_event, operations.
type PatchValidateParams struct {
	DocID string          `json:"docId"`
	Patch json.RawMessage `json:"patch"`
}

// PathPreview is the before/after of one operation's path: Before is the
// value before the whole patch and After the value after it; each is
// absent when the path does not exist then.
type PathPreview struct {
	OpIndex int             `json:"opIndex"`
	Op      string          `json:"op"`
	Path    string          `json:"path"`
	From    string          `json:"from,omitempty"`
	Before  json.RawMessage `json:"before,omitempty"`
	After   json.RawMessage `json:"after,omitempty"`
	Existed bool            `json:"existed"`
	Exists  bool            `json:"exists"`
}

// ResolvedTarget is one operation's path resolved against the document:
// Kind is member, element, append or root; an append ("-") is resolved to
// the index it appends at.
type ResolvedTarget struct {
	OpIndex int    `json:"opIndex"`
	Op      string `json:"op"`
	Path    string `json:"path"`
	Kind    string `json:"kind"`
	Exists  bool   `json:"exists"`
}

// PatchValidateResult is the result of patch/validate: the validation
// artefact of seed 000. ValidationID is the id of the proposed transaction
// that holds it (tx/status, tx/list); it expires at ExpiresAt (RFC 3339).
// PatchHash is "sha256:" and the hex sha256 of the envelope in RFC 8785
// canonical JSON. AlreadyApplied is set when this patch_id was applied
// before with the same payload: ValidationID is then that transaction, and
// patch/apply returns its original result.
type PatchValidateResult struct {
	ValidationID     string           `json:"validationId"`
	ExpiresAt        string           `json:"expiresAt"`
	DocID            string           `json:"docId"`
	PatchID          string           `json:"patchId"`
	ExpectedRevision int64            `json:"expectedRevision"`
	Mode             string           `json:"mode"`
	PatchHash        string           `json:"patchHash"`
	Targets          []ResolvedTarget `json:"targets"`
	Preview          []PathPreview    `json:"preview"`
	AlreadyApplied   bool             `json:"alreadyApplied,omitempty"`
}

// PatchApplyParams are the params of patch/apply: the validationId of
// patch/validate and the same envelope. ValidationIDSeed is the same id
// under seed 000's name, validation_id, so that a host written against the
// seed is understood; giving both with different values is refused.
type PatchApplyParams struct {
	ValidationID     string          `json:"validationId"`
	ValidationIDSeed string          `json:"validation_id,omitempty"`
	Patch            json.RawMessage `json:"patch"`
}

// PatchApplyResult is the result of patch/apply. OK false means approvals
// are pending (PendingApprovals, answered with approval/respond); Proposed
// means the envelope's mode is PROPOSED and it was stored, not applied.
// Revision is the document's revision after the patch (its current one when
// nothing was applied). AlreadyApplied marks an idempotent replay.
type PatchApplyResult struct {
	OK               bool              `json:"ok"`
	ValidationID     string            `json:"validationId"`
	DocID            string            `json:"docId"`
	PatchID          string            `json:"patchId"`
	Revision         int64             `json:"revision"`
	AlreadyApplied   bool              `json:"alreadyApplied,omitempty"`
	Proposed         bool              `json:"proposed,omitempty"`
	PendingApprovals []ApprovalRequest `json:"pendingApprovals,omitempty"`
}

// PatchLogParams are the params of patch/log. Entries with seq > AfterSeq
// are returned, oldest first, at most Limit (default 100, at most 1000).
type PatchLogParams struct {
	DocID    string `json:"docId"`
	AfterSeq int64  `json:"afterSeq,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// PatchLogEntry is one applied patch: the revision it produced, its
// envelope and the transaction that applied it.
type PatchLogEntry struct {
	Seq           int64           `json:"seq"`
	Revision      int64           `json:"revision"`
	PatchID       string          `json:"patchId"`
	PatchHash     string          `json:"patchHash"`
	TransactionID string          `json:"transactionId"`
	AppliedAt     string          `json:"appliedAt"`
	Patch         json.RawMessage `json:"patch"`
}

// PatchLogResult is the result of patch/log. NextAfterSeq is set when more
// entries follow.
type PatchLogResult struct {
	DocID        string          `json:"docId"`
	Entries      []PatchLogEntry `json:"entries"`
	NextAfterSeq int64           `json:"nextAfterSeq,omitempty"`
}

// ProposedPatch is an envelope validated in PROPOSED mode: stored with its
// validation output, the document untouched.
type ProposedPatch struct {
	PatchID      string              `json:"patchId"`
	ValidationID string              `json:"validationId"`
	PatchHash    string              `json:"patchHash"`
	Patch        json.RawMessage     `json:"patch"`
	Validation   PatchValidateResult `json:"validation"`
	CreatedAt    string              `json:"createdAt"`
}

// PatchProposedResult is the result of patch/proposed.
type PatchProposedResult struct {
	DocID   string          `json:"docId"`
	Patches []ProposedPatch `json:"patches"`
}

// PatchSetProposeParams are the params of patchset/propose (seed 003):
// PatchSet is {patchSetId, patches, summary?}; RecipeVersion must be the
// recipe's current revision.
type PatchSetProposeParams struct {
	DocID         string          `json:"docId"`
	RecipeVersion *int64          `json:"recipeVersion"`
	PatchSet      json.RawMessage `json:"patchSet"`
}

// PatchSetParams names one PatchSet: patchset/review.
type PatchSetParams struct {
	PatchSetID string `json:"patchSetId"`
}

// PatchSetDecideParams are the params of patchset/decide. Decision is
// accepted or rejected.
type PatchSetDecideParams struct {
	PatchSetID string `json:"patchSetId"`
	Decision   string `json:"decision"`
}

// PatchSetProposeResult is the result of patchset/propose: the PatchSet is
// pending review as transaction TransactionID. Summary is the caller's with
// impacted counted by the kernel.
type PatchSetProposeResult struct {
	PatchSetID    string          `json:"patchSetId"`
	DocID         string          `json:"docId"`
	RecipeVersion int64           `json:"recipeVersion"`
	TransactionID string          `json:"transactionId"`
	State         string          `json:"state"`
	Summary       json.RawMessage `json:"summary"`
}

// PatchSetDecideResult is the result of patchset/decide: the recorded
// PatchDecision and the recipe's revision after it.
type PatchSetDecideResult struct {
	PatchSetID    string          `json:"patchSetId"`
	Decision      string          `json:"decision"`
	DocID         string          `json:"docId"`
	TransactionID string          `json:"transactionId"`
	Revision      int64           `json:"revision"`
	Summary       json.RawMessage `json:"summary,omitempty"`
}

// PatchSetContextResult is the result of patchset/context: seed 003's
// context.llm for the next LLM request. LastPatchDecision stays until
// patchset/context_ack acknowledges it; PatchSetID is the PatchSet it
// belongs to (the one to acknowledge), absent with it.
type PatchSetContextResult struct {
	DocID      string     `json:"docId"`
	PatchSetID string     `json:"patchSetId,omitempty"`
	Context    LLMContext `json:"context"`
}

// LLMContext is seed 003's context: {llm: {lastPatchDecision?}}.
type LLMContext struct {
	LLM struct {
		LastPatchDecision json.RawMessage `json:"lastPatchDecision,omitempty"`
	} `json:"llm"`
}

// PatchSetContextAckParams are the params of patchset/context_ack: the
// recipe and the PatchSet whose decision the host's LLM call carried.
type PatchSetContextAckParams struct {
	DocID      string `json:"docId"`
	PatchSetID string `json:"patchSetId"`
}

// PatchSetContextAckResult is the result of patchset/context_ack:
// PatchSetID is the PatchSet acknowledged, and Context what is left for
// the next LLM request: nothing, or a newer decision the acknowledgement
// did not clear.
type PatchSetContextAckResult struct {
	DocID      string     `json:"docId"`
	PatchSetID string     `json:"patchSetId"`
	Context    LLMContext `json:"context"`
}
