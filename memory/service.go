// Package memory is txkernel's curated agent memory (seed 002; DESIGN.md
// §5, §6): permission-trimmed, version-pinned retrieval (read_context),
// proposals that execution agents make and curators accept or reject,
// baselines that a publish promotes, and the ingest of a markdown backlog
// as evidence.
//
// Every change that curators make is a transaction of the engine on the
// memory target (memory/target.go): an accept is guarded by target_version_id, a
// promote by the pointer's baseline; both are atomic, idempotent,
// recovered after a crash and listed by tx/list. Proposals, rejections
// and rebases are one SQL transaction each, with a decision artefact and
// a ledger event naming the principal.
//
// Who may do what comes from --memory-policy (policy.go). Without a
// policy every method is refused, naming the flag.
package memory

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/txkernel/txkernel/embedding"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
)

// Limits.
const (
	// MaxBodyBytes bounds a proposed or ingested body (1 MiB).
	MaxBodyBytes = 1 << 20
	// MaxIDBytes bounds an id, scope level or principal id.
	MaxIDBytes = 200
	// MaxSummaryBytes bounds a proposal's summary and a rationale.
	MaxSummaryBytes = 4096
	// DefaultK and MaxK bound read_context's k.
	DefaultK = 10
	MaxK     = 100
	// MaxCitations bounds one verify_citations call.
	MaxCitations = 1000
	// titleWeight is the BM25 weight of a chunk's heading against its
	// body (1), as in the corpus.
	titleWeight = 2.0
)

// PolicyFlag is the flag that configures grants; errors name it.
const PolicyFlag = "--memory-policy"

// Config configures a Service.
type Config struct {
	// Store returns the memory store (Store: kernel.db's
	// MemoryStore), opening it on first use.
	Store func(context.Context) (Store, error)
	// Engine runs accepts and promotes on its memory target.
	Engine *tx.Engine
	// Workspace confines ingest.
	Workspace *sandbox.Workspace
	// Policy holds the grants; nil refuses every method.
	Policy *Policy
	// Embedder, when set, makes read_context hybrid (keyword fused with
	// vectors); nil keeps it keyword-only.
	Embedder embedding.Embedder
	Logger   *slog.Logger
	// Failpoints, in a build with the tag failpoints, stop an ingest
	// between its batches (fpAfterIngestBatch) for the outage tests.
	Failpoints *failpoint.Set
	// Tenant, when set (--tenant), is the one tenant this kernel serves:
	// a request naming another scope.tenant_id is refused before any
	// SQL (errs.PermissionDenied, reason protocol.DeniedOtherTenant).
	// Row-level security is the database's backstop; this is the
	// kernel's own bound on what it asks for.
	Tenant string
	// StoreName is capabilities.memory.store: where Store keeps memory
	// ("" means protocol.MemoryStoreSQLite, kernel.db).
	StoreName string
}

// Service serves the memory methods. It is safe for concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger
	// writeMu serialises the writes that move an element's head or the
	// pointer (accept, rebase, promote, ingest), so that a base checked by
	// one is not moved by another before it commits.
	writeMu sync.Mutex
}

// New returns the memory service.
func New(cfg Config) *Service {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, log: log}
}

// DeniedOtherTenant is the reason of a refusal of a scope whose tenant is
// not the one --tenant binds the kernel to.
const DeniedOtherTenant = "other-tenant"

// ScopeData is the data of a permission refusal (-32018): Reason says
// which rule refused (protocol.DeniedNoGrant, DeniedRoleNotHeld,
// DeniedOwnProposal), with the principal, the action and the scope, and
// the role or the proposal at fault.
type ScopeData struct {
	Reason      string               `json:"reason"`
	Action      string               `json:"action"`
	Scope       protocol.MemoryScope `json:"scope"`
	PrincipalID string               `json:"principal_id"`
	Purpose     string               `json:"purpose,omitempty"`
	Role        string               `json:"role,omitempty"`
	ProposalID  string               `json:"proposal_id,omitempty"`
}

// Capabilities is capabilities.memory for initialize: whether memory is
// served (only under a policy), its store, how roles are established and
// whether self-curation is allowed.
func (s *Service) Capabilities() protocol.MemoryCapabilities {
	c := protocol.MemoryCapabilities{Store: s.cfg.StoreName, PolicyMode: protocol.MemoryPolicyNone}
	if c.Store == "" {
		c.Store = protocol.MemoryStoreSQLite
	}
	if s.cfg.Policy != nil {
		c.Enabled, c.PolicyMode, c.AllowSelfCuration = true, s.cfg.Policy.Mode(), s.cfg.Policy.AllowSelfCuration()
	}
	return c
}

// authorize checks req's scope and principal and that the principal holds
// action in the scope. Errors: errs.PermissionDenied naming the flag when
// there is no policy; errs.Invalid for a missing scope level or principal
// id, or a role the policy does not know; errs.PermissionDenied with
// ScopeData for a claimed role the policy does not give the principal
// (role-not-held) and when no grant allows the action (no-grant).
func (s *Service) authorize(req protocol.MemoryRequest, action string) (protocol.MemoryScope, protocol.MemoryPrincipal, error) {
	var none protocol.MemoryScope
	var nobody protocol.MemoryPrincipal
	if s.cfg.Policy == nil {
		return none, nobody, errs.New(errs.PermissionDenied, map[string]any{"flag": PolicyFlag, "reason": protocol.DeniedNoPolicy},
			"memory is disabled: start txkernel with %s FILE (a JSON file of grants) to use memory methods", PolicyFlag)
	}
	if req.Scope == nil {
		return none, nobody, errs.InvalidField("scope", "scope {tenant_id, organization_id, repository_id} is required")
	}
	sc := *req.Scope
	for _, f := range []struct{ name, v string }{{"tenant_id", sc.TenantID}, {"organization_id", sc.OrganizationID}, {"repository_id", sc.RepositoryID}} {
		if err := checkID("scope."+f.name, f.v); err != nil {
			return none, nobody, err
		}
		if f.v == Wildcard {
			return none, nobody, errs.New(errs.Invalid, errs.InvalidData{Field: "scope." + f.name, Reason: "wildcard"}, "scope.%s must name one %s; %q is for grants", f.name, f.name, Wildcard)
		}
	}
	if t := s.cfg.Tenant; t != "" && sc.TenantID != t {
		return none, nobody, errs.New(errs.PermissionDenied, map[string]any{"reason": DeniedOtherTenant, "tenant_id": sc.TenantID, "served_tenant_id": t, "flag": "--tenant"},
			"this kernel serves memory for tenant %s only (--tenant); scope.tenant_id %s is refused", t, sc.TenantID)
	}
	if req.Principal == nil {
		return none, nobody, errs.InvalidField("principal", "principal {principal_id, roles, purpose} is required")
	}
	pr := *req.Principal
	if err := checkID("principal.principal_id", pr.PrincipalID); err != nil {
		return none, nobody, err
	}
	if pr.Purpose != "" {
		// A grant's purposes match it, and refusals echo it: an id's limits.
		if err := checkID("principal.purpose", pr.Purpose); err != nil {
			return none, nobody, err
		}
	}
	pol := s.cfg.Policy
	known := pol.Roles()
	for i, r := range pr.Roles {
		if !slices.Contains(known, r) {
			return none, nobody, errs.New(errs.Invalid, map[string]any{"field": "principal.roles", "index": i, "role": r, "reason": "unknown-role", "known_roles": known},
				"unknown role %q: the policy knows %s", r, strings.Join(known, ", "))
		}
	}
	denied := ScopeData{Action: action, Scope: sc, PrincipalID: pr.PrincipalID, Purpose: pr.Purpose}
	for _, r := range pr.Roles {
		if !pol.Holds(pr.PrincipalID, r) {
			denied.Reason, denied.Role = protocol.DeniedRoleNotHeld, r
			return none, nobody, errs.New(errs.PermissionDenied, denied,
				"principal %s claims role %s, which the memory policy does not give it", pr.PrincipalID, r)
		}
	}
	if !pol.Allows(pr, sc, action) {
		denied.Reason = protocol.DeniedNoGrant
		return none, nobody, errs.New(errs.PermissionDenied, denied,
			"principal %s may not %s in %s/%s/%s", pr.PrincipalID, action, sc.TenantID, sc.OrganizationID, sc.RepositoryID)
	}
	return sc, pr, nil
}

// checkCurator refuses a principal deciding (accept, reject) its own
// proposal unless the policy allows self-curation: an execution agent
// proposes, someone else publishes (seed 002, separation of duties).
// verb ("accept", "reject") is for the message; data.action is curate.
func (s *Service) checkCurator(scope protocol.MemoryScope, pr protocol.MemoryPrincipal, verb string, row *ProposalRow) error {
	if row.PrincipalID != pr.PrincipalID || s.cfg.Policy.AllowSelfCuration() {
		return nil
	}
	return errs.New(errs.PermissionDenied, ScopeData{Reason: protocol.DeniedOwnProposal, Action: protocol.ActionCurate, Scope: scope, PrincipalID: pr.PrincipalID, Purpose: pr.Purpose, ProposalID: row.ProposalID},
		"principal %s proposed %s and may not %s it: another curator decides (the memory policy does not allow self-curation)", pr.PrincipalID, row.ProposalID, verb)
}

// mayRead reports whether pr holds read in scope. A principal that does
// not is told nothing about what exists in the scope beyond what it made
// itself (hideTarget, Rebase).
func (s *Service) mayRead(pr protocol.MemoryPrincipal, scope protocol.MemoryScope) bool {
	return s.cfg.Policy.Allows(pr, scope, protocol.ActionRead)
}

// reviews reports whether pr curates or publishes in scope: only such a
// principal reads a version that was accepted but never published (seed
// 002: agents propose; curators review and publish).
func (s *Service) reviews(pr protocol.MemoryPrincipal, scope protocol.MemoryScope) bool {
	return s.cfg.Policy.Allows(pr, scope, protocol.ActionCurate) || s.cfg.Policy.Allows(pr, scope, protocol.ActionPublish)
}

// hideTarget turns every error that would tell a principal without read
// whether a proposal's target exists (element not found, not a document,
// a version of another element) into the one ErrNoTarget.
func hideTarget(err error, elementID, versionID string) error {
	kind, data := errs.KindOf(err)
	switch kind {
	case errs.NotFound:
		return ErrNoTarget(elementID, versionID)
	case errs.Invalid:
		if d, ok := data.(errs.InvalidData); ok && (d.Reason == "other-element" || d.Reason == "not-a-document") {
			return ErrNoTarget(elementID, versionID)
		}
	}
	return err
}

// checkID refuses an empty, overlong or unprintable id.
func checkID(field, v string) error {
	if v == "" {
		return errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "missing"}, "%s is required", field)
	}
	if len(v) > MaxIDBytes {
		return errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "too-long"}, "%s is longer than %d bytes", field, MaxIDBytes)
	}
	if strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "unprintable"}, "%s must be printable", field)
	}
	return nil
}

// checkText refuses a text over limit bytes (errs.TooLarge).
func checkText(field, v string, limit int) error {
	if len(v) > limit {
		return errs.New(errs.TooLarge, map[string]any{"field": field, "limit": limit, "size": len(v)}, "%s is %d bytes, over the limit of %d", field, len(v), limit)
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }

// onProposal is the start of every method on one proposal: the grant of
// action, a well-formed proposal id, and kernel.db.
func (s *Service) onProposal(ctx context.Context, req protocol.MemoryRequest, action, proposalID string) (protocol.MemoryScope, protocol.MemoryPrincipal, Store, error) {
	scope, pr, err := s.authorize(req, action)
	if err != nil {
		return scope, pr, nil, err
	}
	if err := checkID("proposal_id", proposalID); err != nil {
		return scope, pr, nil, err
	}
	db, err := s.cfg.Store(ctx)
	return scope, pr, db, err
}
