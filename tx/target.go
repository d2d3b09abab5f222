package tx

import (
	"context"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
)

// Target is one kind of thing a transaction changes (DESIGN.md §2): the
// workspace's files today (workspace), a JSON document in SQLite and a
// memory element version next. The Engine owns the lifecycle, the ledger,
// transaction.json, approvals, the lock table, blob storage and recovery; a
// Target owns only what is specific to it, and is called in this order:
//
//	propose:  Plan (reads, never writes)
//	apply:    Admit → approvals (Approvals) → lock (LockKeys) → CheckBase →
//	          Prepare → [commit record in the ledger: the commit point] →
//	          Commit
//	recover:  Commit again when the ledger holds a commit record without
//	          apply/complete; Abort when it holds none
//
// How the next two targets fit (DESIGN.md §2):
//   - a JSON document (seeds 000, 003): Plan resolves every RFC 6901 pointer
//     and dry-runs the patch on a copy, storing {docId, expected_revision,
//     new content's sha256} in ProposalPointer.TargetPlan and the new
//     content as a blob; LockKeys is the document id; CheckBase compares
//     expected_revision; Prepare returns a record naming the blob; Commit is
//     one SQLite transaction that writes the content, revision + 1 and a
//     patch-log row keyed by the transaction id, and does nothing when that
//     row already exists; Abort has nothing to undo.
//   - a memory element version (seed 002): Plan pins target_version_id;
//     LockKeys is the element id; CheckBase checks the pinned version is
//     still the selected one; Commit is one SQLite transaction writing the
//     new ElementVersion and its decision artefact, keyed by the transaction
//     id.
//
// Every method must be safe for concurrent use on different transactions.
// Methods that take a *Change are called with that transaction's lock held
// and, from CheckBase to Commit, with its LockKeys held.
type Target interface {
	// Name is the target's name on the wire and in transaction.json
	// (protocol.TargetWorkspace, ...).
	Name() string

	// Kinds lists the proposal kinds (ProposalInput.Kind) Plan accepts,
	// in the order error messages list them.
	Kinds() []string

	// Plan resolves in strictly, with no guessing and no side effects,
	// and returns what the transaction will change. Errors carry an
	// errs.Kind: Invalid for malformed input, NotFound, Sandbox,
	// Validation or Conflict when the change cannot be planned.
	Plan(ctx context.Context, in *protocol.ProposalInput) (*Plan, error)

	// Admit refuses an apply before any approval is requested, for
	// reasons approvals cannot change (a read-only sandbox: errs.Sandbox).
	Admit(p *protocol.ProposalPointer) error

	// Approvals lists the approvals an apply of p needs, derived from p
	// alone so that they are the same after a restart.
	Approvals(p *protocol.ProposalPointer) []approvals.Requirement

	// LockKeys names what two transactions must not change at once
	// (case-folded paths, a document id, an element id). The engine
	// prefixes them with Name, so keys of different targets never meet.
	LockKeys(p *protocol.ProposalPointer) []string

	// CheckBase reports an errs.Stale error when the target is no longer
	// what p was planned against (base sha256, expected_revision,
	// target_version_id). It must report every stale part at once.
	CheckBase(ctx context.Context, p *protocol.ProposalPointer) error

	// Prepare makes everything Commit needs durable without changing what
	// anyone can observe (the workspace stages and fsyncs files), and
	// returns the commit record the engine appends as the commit point.
	// An error leaves the transaction proposed; the engine calls Abort.
	Prepare(ctx context.Context, c *Change) (*protocol.CommitRecord, error)

	// Commit makes rec take effect. It is idempotent: recovery calls it
	// again after a crash at any point of an earlier call, and committing
	// twice has one effect. It does not read blobs: Prepare put what it
	// needs where Commit finds it, and the engine deletes the blobs as
	// soon as rec is durable.
	Commit(ctx context.Context, c *Change, rec *protocol.CommitRecord) error

	// Abort removes whatever Prepare left of an apply whose commit record
	// never became durable. It is idempotent and also runs at start-up
	// for every proposed transaction, where Prepare may have died.
	Abort(ctx context.Context, c *Change) error

	// Summary is one line for people, as tx/list shows it ("modify 2
	// files, add 1").
	Summary(p *protocol.ProposalPointer) string
}

// Plan is what Target.Plan resolved: everything the engine persists for a
// new transaction.
type Plan struct {
	// Pointer carries the target's own fields of pointers.proposal
	// (TargetFiles, BaseSHA256ByPath, Changes, Needle, WorkspaceRoot for
	// files; TargetPlan for the others). The engine fills in the ids, the
	// kind, the target, PatchID and the fingerprint.
	Pointer protocol.ProposalPointer
	// Changes are the reviewable items of the fileChange turn item: for
	// files one per path; other targets name what they change in Path.
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
}

// Change is a transaction as a Target sees it during an apply.
type Change struct {
	// TxID is the transaction id: the key that makes Commit idempotent.
	TxID string
	// Proposal is pointers.proposal as persisted by the proposal.
	Proposal *protocol.ProposalPointer
	blob     func(sum string) ([]byte, error)
}

// Blob returns the verified bytes stored for sum (sha256 hex) by the
// proposal. It fails with errs.LedgerCorrupt if the blob is damaged, and
// with errs.Internal once the engine has deleted the blobs.
func (c *Change) Blob(sum string) ([]byte, error) { return c.blob(sum) }
