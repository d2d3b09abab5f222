package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Memory methods (seed 002; PROTOCOL.md §13): curated agent memory with
// permission-trimmed, version-pinned retrieval and a propose → curate →
// publish flow. Params and results keep the seed's snake_case names,
// because agents hardcode against them.
const (
	MethodMemoryReadContext     = "memory/read_context"
	MethodMemoryIngest          = "memory/ingest"
	MethodMemoryPropose         = "memory/propose"
	MethodMemoryProposals       = "memory/proposals"
	MethodMemoryProposal        = "memory/proposal"
	MethodMemoryAccept          = "memory/accept"
	MethodMemoryReject          = "memory/reject"
	MethodMemoryRebase          = "memory/rebase"
	MethodMemoryPromote         = "memory/promote"
	MethodMemoryBaselines       = "memory/baselines"
	MethodMemoryVerifyCitations = "memory/verify_citations"
)

// Proposal kinds of the memory target. Only the memory service makes them:
// turn/start refuses them (they are internal kinds of the engine).
const (
	KindMemoryAccept  = "memory_accept"  // a curator's accept: a new ElementVersion
	KindMemoryPromote = "memory_promote" // a promote: a new baseline and the pointer moved
)

// Element types, relationship types and trust labels (seed 002).
const (
	ElementBacklogMD = "ameide:ingest.backlog_md"
	ElementProposal  = "ameide:curation.proposal"
	ElementDecision  = "ameide:curation.decision"

	RelationshipReference = "REFERENCE"
	RelTargetsVersion     = "ameide:curation.targets_version"
	RelRebasedTo          = "ameide:curation.rebased_to"
	RelAcceptedAs         = "ameide:curation.accepted_as"
	RelRejectedBecause    = "ameide:curation.rejected_because"
	RelDecidedBy          = "ameide:curation.decided_by"

	SourceIngestedEvidence = "INGESTED_EVIDENCE" // ingested: evidence, not curated truth
	SourceCurated          = "CURATED"           // a version a curator accepted
	SourceProposal         = "PROPOSAL"          // a proposal's body
	SourceDecision         = "DECISION"          // a decision artefact
)

// Actions a grant of --memory-policy allows.
const (
	ActionRead    = "read"
	ActionPropose = "propose"
	ActionCurate  = "curate"
	ActionPublish = "publish"
	ActionIngest  = "ingest"
)

// Proposal statuses.
const (
	ProposalOpen     = "open"
	ProposalAccepted = "accepted"
	ProposalRejected = "rejected"
	ProposalRebased  = "rebased"
)

// Why a memory item is included (seed 002's retrieval contract: PROTOCOL.md
// §13).
const (
	WhyRelationship = "relationship_path"
)

// MemoryScope is seed 002's scope: every level is required.
type MemoryScope struct {
	TenantID       string `json:"tenant_id"`
	OrganizationID string `json:"organization_id"`
	RepositoryID   string `json:"repository_id"`
}

// MemoryPrincipal is who asks: roles must be roles the policy names.
// Purpose is recorded with every decision.
type MemoryPrincipal struct {
	PrincipalID string   `json:"principal_id"`
	Roles       []string `json:"roles"`
	Purpose     string   `json:"purpose,omitempty"`
}

// MemoryRequest is what every memory method carries.
type MemoryRequest struct {
	Scope     *MemoryScope     `json:"scope"`
	Principal *MemoryPrincipal `json:"principal"`
}

// BaselineSelector is memory/read_context's selector: "published" (the
// default) or {"baseline_id": "..."}; both decode into it.
type BaselineSelector struct {
	Kind       string `json:"kind"` // published | baseline_id
	BaselineID string `json:"baseline_id,omitempty"`
}

// ReadContextParams are the params of memory/read_context: Query (keyword
// search, k items, default 10) or ElementID (a direct fetch).
type ReadContextParams struct {
	MemoryRequest
	// Selector is "published" (the default) or {"baseline_id": "..."};
	// kept raw so that a bad one is reported as field "selector".
	Selector  json.RawMessage `json:"selector,omitempty"`
	Query     string          `json:"query,omitempty"`
	ElementID string          `json:"element_id,omitempty"`
	K         int             `json:"k,omitempty"`
}

// MemoryExcerpt locates a chunk in a version's body: byte offsets [start, end).
type MemoryExcerpt struct {
	ChunkKey string `json:"chunk_key,omitempty"`
	Start    int    `json:"start"`
	End      int    `json:"end"`
}

// MemoryCitation is a version-pinned, machine-checkable citation.
type MemoryCitation struct {
	RepositoryID string         `json:"repository_id"`
	ElementID    string         `json:"element_id"`
	VersionID    string         `json:"version_id"`
	Excerpt      *MemoryExcerpt `json:"excerpt,omitempty"`
}

// ContextItem is one ElementVersion returned by memory/read_context.
// Content is the best-matching chunk for a query and the whole body for a
// direct fetch.
type ContextItem struct {
	RepositoryID string           `json:"repository_id"`
	ElementID    string           `json:"element_id"`
	VersionID    string           `json:"version_id"`
	Title        string           `json:"title"`
	Content      string           `json:"content"`
	Citations    []MemoryCitation `json:"citations"`
	WhyIncluded  string           `json:"why_included"`
	SourceKind   string           `json:"source_kind"`
	Type         string           `json:"type"`
	Provenance   any              `json:"provenance"`
	Score        *float64         `json:"score,omitempty"`
}

// ReadContextResult is the result of memory/read_context.
type ReadContextResult struct {
	Scope                MemoryScope      `json:"scope"`
	BaselineSelectorUsed BaselineSelector `json:"baseline_selector_used"`
	Items                []ContextItem    `json:"items"`
	// Mode is keyword or hybrid (keyword fused with the configured
	// embedder's vectors).
	Mode string `json:"mode,omitempty"`
	// Note says why a hybrid search fell back to keywords.
	Note string `json:"note,omitempty"`
}

// IngestParams are the params of memory/ingest: Path is a workspace
// directory (a git work tree, or any folder) and Glob is matched under it.
type IngestParams struct {
	MemoryRequest
	Path          string `json:"path"`
	Glob          string `json:"glob,omitempty"`
	WorkDoneToken any    `json:"workDoneToken,omitempty"`
}

// IngestSkip is a file ingest did not mirror, and why: not-utf8, binary,
// too-large, unreadable.
type IngestSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Offset *int   `json:"offset,omitempty"`
}

// IngestResult is the result of memory/ingest.
type IngestResult struct {
	Scope      MemoryScope `json:"scope"`
	SourceRepo string      `json:"source_repo"`
	CommitSHA  *string     `json:"commit_sha"`
	// Note says what a host would otherwise have to guess, joined by
	// "; ": that the glob matched no file, or that the path is not in a
	// git work tree (commit_sha null).
	Note        string `json:"note,omitempty"`
	Files       int    `json:"files"`
	Created     int    `json:"created"`
	NewVersions int    `json:"new_versions"`
	Unchanged   int    `json:"unchanged"`
	// ForReview counts the changed files whose element's current version
	// is curated: their evidence was recorded but not published, and
	// Review lists the proposals that put it before a curator.
	ForReview int            `json:"for_review,omitempty"`
	Review    []IngestReview `json:"review,omitempty"`
	Skipped   []IngestSkip   `json:"skipped"`
	// BaselineID is the baseline ingest published (empty when nothing
	// changed); TransactionID is its promote transaction.
	BaselineID    string `json:"baseline_id,omitempty"`
	TransactionID string `json:"transaction_id,omitempty"`
	// Embedded counts the chunks given vectors (an embedder configured);
	// EmbedError says why some were not: they stay keyword-only until the
	// next ingest.
	Embedded      int    `json:"embedded"`
	EmbedError    string `json:"embed_error,omitempty"`
	WorkDoneToken any    `json:"workDoneToken,omitempty"`
}

// IngestReview is one re-ingested file whose element holds curated
// truth: the new evidence version (recorded, not current, not published)
// and the open proposal that asks a curator to accept or reject it.
type IngestReview struct {
	ElementID  string `json:"element_id"`
	VersionID  string `json:"version_id"`
	ProposalID string `json:"proposal_id"`
}

// ProposalProvenance is who made a proposal, with what.
type ProposalProvenance struct {
	ActorType string `json:"actor_type"`
	ActorID   string `json:"actor_id"`
	ToolID    string `json:"tool_id,omitempty"`
	CreatedAt string `json:"created_at,omitempty"` // set by the kernel
}

// ProposeParams are the params of memory/propose: a full replacement body
// for ElementID, pinned to TargetVersionID.
type ProposeParams struct {
	MemoryRequest
	ElementID       string              `json:"element_id"`
	TargetVersionID string              `json:"target_version_id"`
	Body            *string             `json:"body"`
	Summary         string              `json:"summary"`
	Provenance      *ProposalProvenance `json:"provenance"`
}

// ProposeResult is the result of memory/propose.
type ProposeResult struct {
	ProposalID string `json:"proposal_id"`
	VersionID  string `json:"version_id"` // the proposal element's version
	Stale      bool   `json:"stale"`      // the target is not the element's current version
}

// ProposalsParams are the params of memory/proposals.
type ProposalsParams struct {
	MemoryRequest
	Status string `json:"status,omitempty"`
}

// ProposalParams name one proposal: memory/proposal, memory/accept,
// memory/rebase.
type ProposalParams struct {
	MemoryRequest
	ProposalID string `json:"proposal_id"`
}

// RejectParams are the params of memory/reject.
type RejectParams struct {
	MemoryRequest
	ProposalID string `json:"proposal_id"`
	Rationale  string `json:"rationale"`
}

// ProposalInfo is a proposal as memory/proposals lists it.
type ProposalInfo struct {
	ProposalID        string             `json:"proposal_id"`
	Status            string             `json:"status"`
	ElementID         string             `json:"element_id"`
	TargetVersionID   string             `json:"target_version_id"`
	CurrentVersionID  string             `json:"current_version_id"`
	Stale             bool               `json:"stale"`
	Summary           string             `json:"summary"`
	Provenance        ProposalProvenance `json:"provenance"`
	ProposedBy        string             `json:"proposed_by"`
	AcceptedVersionID string             `json:"accepted_version_id,omitempty"`
	RebasedTo         string             `json:"rebased_to,omitempty"`
	DecisionID        string             `json:"decision_id,omitempty"`
}

// ProposalsResult is the result of memory/proposals, newest first.
type ProposalsResult struct {
	Proposals []ProposalInfo `json:"proposals"`
}

// VersionInfo is an ElementVersion in full.
type VersionInfo struct {
	RepositoryID string `json:"repository_id"`
	ElementID    string `json:"element_id"`
	VersionID    string `json:"version_id"`
	Title        string `json:"title"`
	Body         string `json:"body"`
	SourceKind   string `json:"source_kind"`
	CreatedAt    string `json:"created_at"`
	Provenance   any    `json:"provenance"`
}

// ProposalResult is the result of memory/proposal: the proposal, the
// pinned target version, the proposed body and a unified diff from the
// target's body to it.
type ProposalResult struct {
	ProposalInfo
	Target       VersionInfo `json:"target"`
	ProposedBody string      `json:"proposed_body"`
	Diff         string      `json:"diff"`
	// Withheld names the fields emptied because they would show a
	// version that was accepted but never published to a principal that
	// neither curates nor publishes in the scope ("target.body",
	// "proposed_body", "diff"); absent when nothing was withheld.
	Withheld []string `json:"withheld,omitempty"`
	// History is the proposal's ledger events (propose, accept, reject,
	// rebase), oldest first, each naming its principal.
	History []any `json:"history"`
}

// AcceptResult is the result of memory/accept. AlreadyAccepted is set
// when the proposal was accepted before: the first result is returned.
type AcceptResult struct {
	ProposalID      string `json:"proposal_id"`
	VersionID       string `json:"version_id"`
	DecisionID      string `json:"decision_id"`
	TransactionID   string `json:"transaction_id"`
	AlreadyAccepted bool   `json:"already_accepted"`
}

// RejectResult is the result of memory/reject.
type RejectResult struct {
	ProposalID string `json:"proposal_id"`
	DecisionID string `json:"decision_id"`
}

// RebaseResult is the result of memory/rebase: the new proposal, pinned
// to the element's current version.
type RebaseResult struct {
	ProposalID         string `json:"proposal_id"`
	PreviousProposalID string `json:"previous_proposal_id"`
	TargetVersionID    string `json:"target_version_id"`
	DecisionID         string `json:"decision_id"`
}

// PromoteParams are the params of memory/promote: Versions to publish
// (default: every accepted version not yet published).
type PromoteParams struct {
	MemoryRequest
	Versions []string `json:"versions,omitempty"`
}

// PromoteResult is the result of memory/promote.
type PromoteResult struct {
	BaselineID         string `json:"baseline_id"`
	PreviousBaselineID string `json:"previous_baseline_id,omitempty"`
	Published          int    `json:"published"`
	TransactionID      string `json:"transaction_id"`
	DecisionID         string `json:"decision_id"`
}

// BaselineInfo is one baseline.
type BaselineInfo struct {
	BaselineID       string `json:"baseline_id"`
	ParentBaselineID string `json:"parent_baseline_id,omitempty"`
	CreatedAt        string `json:"created_at"`
	PrincipalID      string `json:"principal_id"`
	Reason           string `json:"reason"`
	Items            int    `json:"items"`
	TransactionID    string `json:"transaction_id"`
}

// PointerMove is one move of the published pointer.
type PointerMove struct {
	BaselineID         string `json:"baseline_id"`
	PreviousBaselineID string `json:"previous_baseline_id,omitempty"`
	MovedAt            string `json:"moved_at"`
	PrincipalID        string `json:"principal_id"`
	Reason             string `json:"reason"`
}

// BaselinesResult is the result of memory/baselines: the baselines newest
// first, the published pointer and its history, newest first.
type BaselinesResult struct {
	Published string         `json:"published,omitempty"`
	Baselines []BaselineInfo `json:"baselines"`
	History   []PointerMove  `json:"pointer_history"`
}

// VerifyCitationsParams are the params of memory/verify_citations.
type VerifyCitationsParams struct {
	MemoryRequest
	Citations []MemoryCitation `json:"citations"`
}

// CitationCheck is one citation's verdict: Returned is whether
// memory/read_context ever returned it to this principal.
type CitationCheck struct {
	MemoryCitation
	Returned bool   `json:"returned"`
	Reason   string `json:"reason,omitempty"` // never-returned | unknown-version | other-element | other-repository
}

// VerifyCitationsResult is the result of memory/verify_citations. AllReturned is
// true when every citation was returned.
type VerifyCitationsResult struct {
	Results     []CitationCheck `json:"results"`
	AllReturned bool            `json:"all_returned"`
}

// UnmarshalJSON accepts seed 002's two spellings of a selector: the string
// "published", or an object {"baseline_id": "..."} (or {"kind": ...}).
func (s *BaselineSelector) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		if str != SelectorPublished {
			return fmt.Errorf("selector must be %q or {\"baseline_id\": ...}, not %q", SelectorPublished, str)
		}
		*s = BaselineSelector{Kind: SelectorPublished}
		return nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return fmt.Errorf("selector must be %q or {\"baseline_id\": ...}", SelectorPublished)
	}
	for _, k := range slices.Sorted(maps.Keys(members)) {
		if k != "kind" && k != SelectorBaselineID {
			// A misspelt member would otherwise select the published
			// baseline: a different answer, silently.
			return &UnknownMemberError{Member: k, Known: []string{SelectorBaselineID, "kind"}}
		}
	}
	var o struct {
		Kind       string `json:"kind"`
		BaselineID string `json:"baseline_id"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("selector must be %q or {\"baseline_id\": ...}", SelectorPublished)
	}
	switch {
	case o.BaselineID != "" && (o.Kind == "" || o.Kind == SelectorBaselineID):
		*s = BaselineSelector{Kind: SelectorBaselineID, BaselineID: o.BaselineID}
	case o.BaselineID == "" && (o.Kind == "" || o.Kind == SelectorPublished):
		*s = BaselineSelector{Kind: SelectorPublished}
	default:
		return fmt.Errorf("selector must be %q or {\"baseline_id\": ...}", SelectorPublished)
	}
	return nil
}

// UnknownMemberError is a Closed object's decoder refusing a member it
// does not have (see Closed): Member is the member as sent, Known the
// members the object takes.
type UnknownMemberError struct {
	Member string
	Known  []string
}

// Error says which member is unknown and which are known.
func (e *UnknownMemberError) Error() string {
	return fmt.Sprintf("no member %q (it takes %s)", e.Member, strings.Join(e.Known, ", "))
}

// Selector kinds.
const (
	SelectorPublished  = "published"
	SelectorBaselineID = "baseline_id"
)

// How roles are established (capabilities.memory.policyMode of initialize).
const (
	// MemoryRolesPolicy: the policy's "roles" lists who holds each role; a
	// claimed role the principal does not hold is refused (role-not-held).
	MemoryRolesPolicy = "policy"
	// MemoryRolesAsserted: the policy has no "roles"; the roles a request
	// claims are taken as the host asserts them.
	MemoryRolesAsserted = "asserted"
)

// Reasons of a -32018 permission refusal (data.reason).
const (
	// DeniedNoPolicy: the kernel runs without --memory-policy.
	DeniedNoPolicy = "no-policy"
	// DeniedNoGrant: no grant of the principal allows the action in the
	// scope for its purpose.
	DeniedNoGrant = "no-grant"
	// DeniedRoleNotHeld: the principal claims a role the policy does not
	// list it in.
	DeniedRoleNotHeld = "role-not-held"
	// DeniedOwnProposal: a principal accepting or rejecting its own
	// proposal, which the policy does not allow (allow_self_curation).
	DeniedOwnProposal = "own-proposal"
)

// MemoryCapabilities is capabilities.memory of initialize: whether the
// memory/* methods are served, where memory lives, and how roles are
// established. It is always present, so a host learns why the memory
// methods are missing from capabilities.methods (Enabled false: no
// --memory-policy).
type MemoryCapabilities struct {
	// Enabled reports whether the memory/* methods are served (and listed
	// in capabilities.methods): only under a --memory-policy.
	Enabled bool `json:"enabled"`
	// Store names where memory state is kept: MemoryStoreSQLite (the data
	// dir's kernel.db) or MemoryStorePostgres (a team's database).
	Store string `json:"store"`
	// PolicyMode is MemoryRolesPolicy or MemoryRolesAsserted, or
	// MemoryPolicyNone when Enabled is false.
	PolicyMode string `json:"policyMode"`
	// AllowSelfCuration reports whether a principal may accept or reject
	// its own proposals (false without a policy).
	AllowSelfCuration bool `json:"allowSelfCuration"`
}

// Values of MemoryCapabilities.Store and PolicyMode beyond the role modes.
const (
	// MemoryStoreSQLite: memory lives in the data dir's kernel.db.
	MemoryStoreSQLite = "sqlite"
	// MemoryStorePostgres: memory lives in a team's PostgreSQL database
	// (serve --memory-store postgres://…), shared by its kernels.
	MemoryStorePostgres = "postgres"
	// MemoryPolicyNone: no --memory-policy; every memory method is refused.
	MemoryPolicyNone = "none"
)

// EmbeddingCapabilities is capabilities.embedding of initialize: the
// embedder behind the corpus's semantic and hybrid search (and memory's
// hybrid read_context under --embed-url). Members are named as the corpus
// records them on every row (seed 004: embedding_model_version).
type EmbeddingCapabilities struct {
	// Model is the model's name: "txkernel-lsa" for the built-in
	// embedder, or --embed-model.
	Model string `json:"model"`
	// ModelVersion is the embedding_model_version recorded on every row.
	// The built-in embedder is trained per corpus, so here it is its
	// family ("txkernel-lsa-1"); each corpus's full version (the family,
	// a colon and a hash of the trained model) is in corpus/status.
	ModelVersion string `json:"embedding_model_version"`
	// Dims is the vector length; 0 for a server whose length is learned
	// from its first answer.
	Dims int `json:"dims"`
	// Method says in a few words how vectors are made.
	Method string `json:"method"`
}
