package tx

import (
	"context"
	"reflect"
	"sync/atomic"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// Target is one kind of thing a transaction changes (DESIGN.md §2): the
// workspace's files (package workspace), a JSON document in kernel.db
// (package document) and curated memory (package memory). The Engine owns
// the lifecycle, the ledger, transaction.json, approvals, the lock table,
// blob storage and recovery; a Target owns only what is specific to it.
// The engine knows nothing of any target's input, plan or files: it moves
// opaque values between the target's methods.
//
// The contract, in the order the engine calls it:
//
//	register: Kinds, once, at Open: the proposal kinds the target plans,
//	          each with its input type (Kind.Input), its default approval
//	          policy and whether only the target's own service may
//	          propose it (Kind.Internal).
//	propose:  Plan(kind, in) reads, never writes, and returns a *Plan:
//	          the target's fields of pointers.proposal (TargetPlan, or the
//	          workspace's file fields), the reviewable items, the canonical
//	          bytes whose sha256 is the patch id, and the blobs. The engine
//	          completes the pointer, calls Load on it (a target that cannot
//	          load what it just planned is a bug, reported as such) and only
//	          then persists the transaction.
//	load:     Load(pointer) decodes the persisted pointers.proposal ONCE,
//	          whenever the engine loads a transaction (start-up, a terminal
//	          transaction read back for tx/status or tx/list, a new
//	          proposal). It invents nothing: a pointer it cannot decode is
//	          an errs.LedgerCorrupt error, which the engine keeps as the
//	          transaction's load error (tx/list shows it unavailable; every
//	          other call on it is refused with it).
//	apply:    on the Planned: Admit → approvals (Approvals) → lock
//	          (LockKeys) → CheckBase → Prepare → [commit record in the
//	          ledger: the commit point] → Commit.
//	recover:  Commit again when the ledger holds a commit record without
//	          apply/complete; Abort when it holds none.
//	report:   Summary (tx/list, tx/status, turn/start) and Files (the
//	          files an apply changes: apply/complete's appliedFiles,
//	          apply/execute's result and tx/list's targetFiles; nil for a
//	          target that changes no files).
//
// Each kind declares its input type (Kind.Input): Plan gets the proposal's
// kind and its input, a pointer to a value of that type (Input.Body).
// For turn/start the kernel decodes the wire's proposal object once,
// straight into that type (Engine.NewInput); a target's service builds
// the input of its own proposals as a Go value. A kind marked Internal is never planned
// from turn/start (Engine.Propose refuses it): only its service, which
// checks its own grants, proposes it, through Engine.ProposeInternal.
//
// Every method must be safe for concurrent use on different transactions.
// Methods of a Planned are called with that transaction's lock held and,
// from CheckBase to Commit, with its LockKeys held.
type Target interface {
	// Name is the target's name on the wire and in transaction.json
	// (protocol.TargetWorkspace, ...).
	Name() string

	// Kinds lists the proposal kinds (Input.Kind) Plan accepts, in the
	// order error messages list them, each with its default approval
	// policy.
	Kinds() []Kind

	// Plan resolves a proposal of kind, whose input is in (a pointer to a
	// value of the kind's Kind.Input type; the engine checks the type
	// before it calls Plan), strictly, with no guessing and no side
	// effects, and returns what the transaction will change. Plan may
	// keep what it derives in *in (the input is its own from then on).
	// Errors carry an errs.Kind: Invalid for malformed input, NotFound,
	// Sandbox, Validation or Conflict when the change cannot be planned.
	Plan(ctx context.Context, kind string, in any) (*Plan, error)

	// Load decodes a persisted pointers.proposal of this target, once per
	// loaded transaction, into the value every later call works on. A
	// pointer it cannot decode is an errs.LedgerCorrupt error; Load never
	// substitutes a value for one it cannot read.
	Load(p *record.Proposal) (Planned, error)
}

// Kind is one proposal kind a target plans.
type Kind struct {
	// Name is the kind on the wire (proposal.kind) and in
	// transaction.json (pointers.proposal.kind).
	Name string
	// DefaultPolicy is the approval policy of this kind's proposals
	// (approvals.Untrusted or approvals.Never) unless Options.Policy
	// overrides every kind's. A target whose policy the operator chooses
	// (--approval-policy, --document-approval-policy) reports the chosen
	// one here.
	DefaultPolicy approvals.Policy
	// Internal kinds are proposed only by the target's own service
	// (Engine.ProposeInternal), which checks its own grants;
	// Engine.Propose (turn/start) refuses them with errs.Invalid on
	// proposal.kind.
	Internal bool
	// Input is the kind's input type, a struct type (reflect.TypeFor of
	// the target's input): Input.Body is a pointer to a value of it.
	// turn/start's proposal object is decoded once, straight into a new
	// one (Engine.NewInput), its members by their `json` names. Open
	// refuses a kind without one.
	Input reflect.Type
}

// Planned is one transaction's plan as its target decoded it (Target.Load).
// The engine calls it for the transaction's whole life in memory; it holds
// everything the methods need, so none of them decodes the pointer again.
type Planned interface {
	// Admit refuses an apply before any approval is requested, for
	// reasons approvals cannot change (a read-only sandbox: errs.Sandbox;
	// an expired validation: errs.Expired).
	Admit() error

	// Approvals lists the approvals an apply needs, derived from the
	// persisted plan alone so that they are the same after a restart.
	Approvals() []approvals.Requirement

	// LockKeys names what two transactions must not change at once
	// (case-folded paths, a document id, an element id). The engine
	// prefixes them with the target's name, so keys of different targets
	// never meet.
	LockKeys() []string

	// CheckBase reports an errs.Stale error when the target is no longer
	// what the plan was made against (base sha256, expected_revision,
	// target_version_id). It must report every stale part at once.
	CheckBase(ctx context.Context) error

	// Prepare makes everything Commit needs durable without changing what
	// anyone can observe (the workspace stages and fsyncs files), and
	// returns the commit record the engine appends as the commit point.
	// An error leaves the transaction proposed; the engine calls Abort.
	Prepare(ctx context.Context, c *Change) (*record.Commit, error)

	// Commit makes rec take effect. It is idempotent: recovery calls it
	// again after a crash at any point of an earlier call, and committing
	// twice has one effect. An error of kind errs.Stale,
	// IdempotencyConflict, Conflict, Validation, Invalid, Closed or
	// PermissionDenied says the target refuses the commit and that nothing
	// took effect (its one SQL transaction rolled back): the engine then
	// calls Abort and closes the transaction (tx/close reason "failed")
	// instead of leaving it applying. A target whose commit can be half
	// done (the workspace's renames) never returns those kinds from
	// Commit; any other error leaves the apply committed, to be rolled
	// forward. Prepare put what it needs where Commit finds it; the blobs
	// are still there (the engine deletes them once Commit has returned
	// nil), for a target that finds what Prepare left damaged and must
	// rebuild it.
	Commit(ctx context.Context, c *Change, rec *record.Commit) error

	// Abort removes whatever Prepare left of an apply whose commit record
	// never became durable. It is idempotent and also runs at start-up
	// for every proposed transaction, where Prepare may have died.
	Abort(ctx context.Context, c *Change) error

	// Summary is one line for people, as tx/list shows it ("modify 2
	// files, add 1").
	Summary() string

	// Files are the workspace-relative paths an apply changes, in plan
	// order (apply/complete's appliedFiles, tx/list's targetFiles); nil
	// for a target that changes no files.
	Files() []string
}

// Input is one proposal as the engine takes it: the envelope of a target's
// own input. The kernel makes it from turn/start's params (Body is the
// wire's proposal object, Plan its decoded, redacted plan); a target's
// service makes it for its own proposals.
type Input struct {
	// Kind selects the target (Kind.Name).
	Kind string
	// Body is the kind's input: a pointer to a value of its Kind.Input
	// type (errs.Internal otherwise, a bug of the caller).
	Body any
	// Plan is turn/start's plan, recorded as a plan item before the
	// fileChange item (seed 001); nil when there is none. It is the
	// engine's, never a target's.
	Plan *protocol.TurnPlan
}

// Proposed is what Propose persisted: turn/start's result, embedded, and
// the transaction's pointers.proposal and Planned, so that a service reads
// its own plan without asking the engine again. Pointer and Planned must
// not be modified.
type Proposed struct {
	*protocol.TurnStartResult
	// Pointer is pointers.proposal as persisted.
	Pointer *record.Proposal
	// Planned is Pointer as the target loaded it (Target.Load).
	Planned Planned
}

// Plan is what Target.Plan resolved: everything the engine persists for a
// new transaction.
type Plan struct {
	// Pointer carries the target's own fields of pointers.proposal
	// (TargetFiles, BaseSHA256ByPath, Changes, Needle, WorkspaceRoot for
	// files; TargetPlan for the others). The engine fills in the ids, the
	// kind, the target, PatchID and the fingerprint.
	Pointer record.Proposal
	// Changes are the reviewable items of the fileChange turn item: for
	// files one per path; other targets name what they change in Path.
	// The applied fileChange item repeats them.
	Changes []protocol.FileChange
	// Canonical is the canonical rendering of the change; PatchID is its
	// sha256, so the same change always has the same fingerprint.
	Canonical []byte
	// Redacted is the reviewable text (proposal.patch, the turnDiff item,
	// the turn/start result), secrets redacted.
	Redacted []byte
	// Findings locate the secrets that Canonical introduces.
	Findings []protocol.SecretFinding
	// Blobs are the exact bytes Prepare needs, by sha256 hex. The engine
	// keeps them in blobs/ (mode 0600) and deletes them as soon as nothing
	// can need them.
	Blobs map[string][]byte
	// Hunks reports the hunks that applied at an offset (unified diffs).
	Hunks []protocol.HunkOffset
	// Tolerances report what was accepted only by a tolerance (the edit
	// formats, PROTOCOL.md §4.1), for the reviewer.
	Tolerances []protocol.Tolerance
}

// Change is a transaction as a Planned sees it during an apply: its id
// and the blobs its proposal stored.
type Change struct {
	// TxID is the transaction id: the key that makes Commit idempotent.
	TxID string
	blob func(sum string) ([]byte, error)
	// removed counts what Abort reported removing (Removed).
	removed atomic.Int64
}

// Removed is how an Abort reports what it removed of an apply that never
// committed (n staged files, or rows), so that start-up's recovery line
// says what it cleaned up instead of "aborted=0". Safe for concurrent use.
func (c *Change) Removed(n int) { c.removed.Add(int64(n)) }

// Blob returns the verified bytes stored for sum (sha256 hex) by the
// proposal. It fails with errs.LedgerCorrupt if the blob is damaged, and
// with errs.Internal once the engine has deleted the blobs.
func (c *Change) Blob(sum string) ([]byte, error) { return c.blob(sum) }
