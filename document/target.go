// Package document is the engine's second target (DESIGN.md §2, seeds 000
// and 003): a JSON document in kernel.db, changed by seed 000's JSON Patch
// envelopes (kind json_patch) and by seed 003's recipe PatchSets (kind
// recipe_patchset, compiled to JSON Patch by jsondoc/recipe). It plans by
// dry-running the patch on a copy and validating the result against the
// document's type, checks expected_revision at apply, stages the new
// content in kernel.db, and commits it as one SQL transaction keyed by the
// transaction id, so that committing twice has one effect.
//
// Service is what the kernel's doc/*, patch/* and patchset/* methods call:
// it puts the seeds' rules (validation_id expiry, the patch hash,
// idempotency by patch_id, one pending PatchSet per recipe, the decision
// context) around the engine.
package document

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/jsondoc"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/tx/record"
)

// fpBeforeSQLCommit is hit inside Commit, after the commit record is
// durable and before the SQL transaction that publishes the staged content.
const fpBeforeSQLCommit = "document.before-sql-commit"

// DefaultTTL is how long a validation_id stays valid (seed 000: "for
// example 10 minutes").
const DefaultTTL = 10 * time.Minute

// Options configure the document target.
type Options struct {
	// DB returns kernel.db, opening it on first use (cmd's store.Opener),
	// so a kernel that never touches a document never creates it.
	DB func(context.Context) (*store.DB, error)
	// DBPath, when DB is nil, is kernel.db's path: the target opens it
	// itself, on first use, and closes it in Close (tests and benchmarks).
	DBPath     string
	Limits     jsondoc.Limits   // zero means jsondoc.DefaultLimits()
	TTL        time.Duration    // validation_id lifetime; zero means DefaultTTL
	Now        func() time.Time // nil means time.Now
	Failpoints *failpoint.Set   // nil in production
	// PatchPolicy is the approval policy of json_patch proposals (the
	// kernel's --document-approval-policy); empty means approvals.Never:
	// seed 000 makes approval optional. recipe_patchset always waits for
	// a person (seed 003: patchset/decide).
	PatchPolicy approvals.Policy
}

// Target is the document target. It implements tx.Target and is safe for
// concurrent use.
type Target struct {
	db      func(context.Context) (*store.DB, error)
	own     *store.Opener // the opener made from DBPath, closed by Close
	lim     jsondoc.Limits
	ttl     time.Duration
	now     func() time.Time
	fp      *failpoint.Set
	scanner *secrets.Scanner
	policy  approvals.Policy // json_patch's
	// validated holds recent dry runs' content, for their applies.
	validated validated
	// decoded holds recent contents' decoded values, for the next dry
	// run on them.
	decoded decoded
	// deciding holds the PatchSets whose patchset/decide is running: only
	// those may start an apply (Admit; seed 003: no PatchSet applies but
	// by the user's PatchDecision).
	deciding deciding
}

// deciding is the set of PatchSet ids a patchset/decide is deciding now,
// by decision, with how many calls decide each.
type deciding struct {
	mu  sync.Mutex
	ids map[[2]string]int // {patchSetId, decision}
}

// enter marks id as being decided (accepted or rejected) until the
// returned func is called.
func (d *deciding) enter(id, decision string) (leave func()) {
	k := [2]string{id, decision}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ids == nil {
		d.ids = map[[2]string]int{}
	}
	d.ids[k]++
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.ids[k]--; d.ids[k] <= 0 {
			delete(d.ids, k)
		}
	}
}

// has reports whether a patchset/decide is deciding id as decision, or,
// with decision "", at all.
func (d *deciding) has(id, decision string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if decision != "" {
		return d.ids[[2]string{id, decision}] > 0
	}
	return d.ids[[2]string{id, stAccepted}] > 0 || d.ids[[2]string{id, stRejected}] > 0
}

var _ tx.Target = (*Target)(nil)

// New returns the document target over opts.DB.
func New(opts Options) *Target {
	t := &Target{db: opts.DB, lim: opts.Limits, ttl: opts.TTL, now: opts.Now, fp: opts.Failpoints, scanner: secrets.NewScanner(), policy: opts.PatchPolicy}
	if t.db == nil {
		t.own = store.NewOpener(opts.DBPath)
		t.db = t.own.Open
	}
	if t.policy == "" {
		t.policy = approvals.Never
	}
	if t.lim == (jsondoc.Limits{}) {
		t.lim = jsondoc.DefaultLimits()
	}
	if t.ttl <= 0 {
		t.ttl = DefaultTTL
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// store returns kernel.db's document view, opening the database on first
// use.
func (d *Target) store(ctx context.Context) (*store.Documents, error) {
	db, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return db.Documents(), nil
}

// Close closes kernel.db when the target opened it itself (Options.DBPath);
// a database from Options.DB is its opener's to close.
func (d *Target) Close() error {
	if d.own == nil {
		return nil
	}
	return d.own.Close()
}

// Name implements tx.Target: "document".
func (d *Target) Name() string { return protocol.TargetDocument }

// Kinds implements tx.Target: json_patch, under Options.PatchPolicy, and
// recipe_patchset, which always waits for a person and is internal: only
// patchset/propose makes one (seed 003: one pending PatchSet per recipe,
// and the decision context), never turn/start. Both take an input.
func (d *Target) Kinds() []tx.Kind {
	return []tx.Kind{
		{Name: protocol.KindJSONPatch, DefaultPolicy: d.policy, Input: reflect.TypeFor[input]()},
		{Name: protocol.KindRecipePatchSet, DefaultPolicy: approvals.Untrusted, Internal: true, Input: reflect.TypeFor[input]()},
	}
}

// input is the document target's proposal input (tx.Input.Body, an
// *input), named as turn/start's proposal members: a json_patch names
// DocID and Patch (seed 000's envelope); a recipe_patchset names DocID,
// RecipeVersion and PatchSet (seed 003). Patch and PatchSet stay raw:
// their decoders match member names by exact case and refuse unknown
// members, which encoding/json cannot, and the exact bytes are kept as
// the blob and the patch log's envelope.
type input struct {
	DocID         string          `json:"docId,omitempty"`
	Patch         json.RawMessage `json:"patch,omitempty"`
	RecipeVersion *int64          `json:"recipeVersion,omitempty"`
	PatchSet      json.RawMessage `json:"patchSet,omitempty"`
}

// proposal is in as the engine's envelope for kind.
func proposal(kind string, in input) *tx.Input {
	return &tx.Input{Kind: kind, Body: &in}
}

// planRecord is the document target's pointers.proposal.target_plan: what
// the proposal was validated against and what it will do. Stored names
// follow the seeds (expected_revision, patch_id).
type planRecord struct {
	DocID            string                    `json:"doc_id"`
	DocType          string                    `json:"doc_type"`
	ExpectedRevision int64                     `json:"expected_revision"`
	PatchID          string                    `json:"patch_id,omitempty"`     // seed 000's patch_id
	PatchSetID       string                    `json:"patch_set_id,omitempty"` // seed 003's patchSetId
	PatchHash        string                    `json:"patch_hash"`             // sha256: of the RFC 8785 input
	Mode             string                    `json:"mode,omitempty"`
	ExpiresAt        string                    `json:"expires_at,omitempty"` // RFC 3339; json_patch only
	InputSHA256      string                    `json:"input_sha256"`         // the blob holding the exact input
	ContentSHA256    string                    `json:"content_sha256"`       // the new content, compact JSON
	Targets          []protocol.ResolvedTarget `json:"targets"`
	Preview          []protocol.PathPreview    `json:"preview,omitempty"`
	Summary          json.RawMessage           `json:"summary,omitempty"` // a PatchSet's, impacted by the kernel
	// HardAvoidOverrides are the recipe's hard avoids the change lifts
	// (recipe.Lifted): each needs a person's hard_avoid_override approval
	// (seed 003: "unless the user explicitly overrides it").
	HardAvoidOverrides []string `json:"hard_avoid_overrides,omitempty"`
	// PatchSetOps is the number of operations the PatchSet proposed (its
	// patches), which is what a person reviews; Targets counts the JSON
	// Patch operations they compile to. 0 in records of older kernels.
	PatchSetOps int `json:"patch_set_ops,omitempty"`
}

// planned is a document transaction as Load decoded it: its pointer, its
// plan record and, for a json_patch, when its validation expires.
type planned struct {
	d       *Target
	ptr     *record.Proposal
	rec     *planRecord
	expires time.Time // zero: never (a recipe PatchSet)
}

// Load implements tx.Target: it decodes pointers.proposal.target_plan
// (planRecord) and its expires_at, once. Either unreadable is
// errs.LedgerCorrupt.
func (d *Target) Load(p *record.Proposal) (tx.Planned, error) {
	var r planRecord
	if err := json.Unmarshal(p.TargetPlan, &r); err != nil {
		return nil, errs.Wrap(errs.LedgerCorrupt, err, nil, "document target plan: %v", err)
	}
	if r.DocID == "" {
		return nil, errs.New(errs.LedgerCorrupt, nil, "document target plan: no doc_id")
	}
	pl := &planned{d: d, ptr: p, rec: &r}
	if r.ExpiresAt != "" {
		exp, err := time.Parse(time.RFC3339Nano, r.ExpiresAt)
		if err != nil {
			return nil, errs.Wrap(errs.LedgerCorrupt, err, nil, "document target plan: expires_at: %v", err)
		}
		pl.expires = exp
	}
	return pl, nil
}

// load is Load for the service, which reads back a transaction it made:
// the document plan of p.
func (d *Target) load(p *record.Proposal) (*planned, error) {
	pl, err := d.Load(p)
	if err != nil {
		return nil, err
	}
	return pl.(*planned), nil
}

// plannedOf is the document plan of a transaction the service proposed.
func plannedOf(res *tx.Proposed) (*planned, error) {
	pl, ok := res.Planned.(*planned)
	if !ok {
		return nil, errs.New(errs.Internal, nil, "transaction %s is not a document transaction", res.TransactionID)
	}
	return pl, nil
}

// Admit implements tx.Planned. It refuses, before any approval is asked
// for, what no approval can make applicable:
//   - an envelope in PROPOSED mode (seed 000: it "stores patch intent and
//     validation output without mutating checklist state"), through every
//     door, apply/execute too (errs.Validation, ProposedModeData);
//   - a recipe PatchSet outside its patchset/decide (seed 003: it "must not
//     be applied to Recipe State until the user explicitly approves", and
//     the decision is recorded as a PatchDecision): apply/execute on its
//     transaction is errs.PermissionDenied, DecideOnlyData pointing at
//     patchset/decide;
//   - an expired validation_id (errs.Expired).
func (pl *planned) Admit() error {
	if err := pl.checkApplicable(); err != nil {
		return err
	}
	return pl.checkExpiry()
}

// checkApplicable is Admit's refusal of a PROPOSED envelope and of a
// PatchSet no patchset/decide is deciding; Prepare checks it again, the
// last step before the commit point (checkAccepted).
func (pl *planned) checkApplicable() error {
	r := pl.rec
	if r.Mode == protocol.ModeProposed {
		return errs.New(errs.Validation, ProposedModeData{DocID: r.DocID, PatchID: r.PatchID, Mode: r.Mode, Reason: ReasonProposedMode},
			"patch %s was validated in PROPOSED mode: it is stored for review and never changes the document; validate it again with mode APPLY to apply it", r.PatchID)
	}
	if pl.ptr.Kind == protocol.KindRecipePatchSet && !pl.d.deciding.has(r.PatchSetID, "") {
		return errs.New(errs.PermissionDenied, DecideOnlyData{DocID: r.DocID, PatchSetID: r.PatchSetID, Method: protocol.MethodPatchSetDecide, Reason: ReasonDecideOnly},
			"PatchSet %s applies only by the user's decision: call %s with decision accepted (or rejected)", r.PatchSetID, protocol.MethodPatchSetDecide)
	}
	return nil
}

// checkAccepted is checkApplicable, and for a PatchSet a decision that
// accepts it: a patchset/decide that rejects a PatchSet asks Apply only
// for the approval requests it then denies, and whatever the policy
// grants, the PatchSet never reaches its commit record (errs.Denied).
func (pl *planned) checkAccepted() error {
	if err := pl.checkApplicable(); err != nil {
		return err
	}
	r := pl.rec
	if pl.ptr.Kind == protocol.KindRecipePatchSet && !pl.d.deciding.has(r.PatchSetID, stAccepted) {
		return errs.New(errs.Denied, PatchSetData{PatchSetID: r.PatchSetID, State: stRejected}, "PatchSet %s is being rejected: it does not apply", r.PatchSetID)
	}
	return nil
}

// checkExpiry is errs.Expired once a json_patch's validation expired.
func (pl *planned) checkExpiry() error {
	if pl.expires.IsZero() || pl.d.now().Before(pl.expires) {
		return nil
	}
	return errs.New(errs.Expired, ExpiredData{ExpiresAt: pl.rec.ExpiresAt},
		"the validation expired at %s: validate the patch again", pl.rec.ExpiresAt)
}

// Approvals implements tx.Planned: the patchset approval, whose reason
// names the document and its revision (see approvalReason), and a
// secrets_override when the new values hold secrets. Whether a person must
// give the first is the kind's policy (Kinds).
//
// A change that lifts a recipe's hard avoids (planRecord.HardAvoidOverrides)
// also needs a hard_avoid_override, which no policy grants.
func (pl *planned) Approvals() []approvals.Requirement {
	reqs := approvals.RequiredFor(pl.ptr.PatchID, approvalReason(pl.rec), pl.ptr.ContainsSecretIntroductions)
	if len(pl.rec.HardAvoidOverrides) > 0 {
		reqs = append(reqs, approvals.HardAvoidOverride(pl.ptr.PatchID, pl.rec.DocID, pl.rec.HardAvoidOverrides))
	}
	return reqs
}

// Files implements tx.Planned: a document is no workspace file.
func (pl *planned) Files() []string { return nil }

// approvalReason says what approving r does: `patch document "d" at
// revision 3 (2 operations)`, or `apply PatchSet "ps" to recipe "r" at
// revision 3 (4 operations, 7 JSON Patch operations)`.
func approvalReason(r *planRecord) string {
	ops := plural(len(r.Targets), "operation")
	if r.PatchSetID != "" {
		if r.PatchSetOps > 0 {
			// What the person proposed, then what it compiles to: a
			// remove_ingredient is one operation a person reads and two
			// JSON Patch operations the store applies.
			ops = plural(r.PatchSetOps, "operation") + ", " + plural(len(r.Targets), "JSON Patch operation")
		}
		return fmt.Sprintf("apply PatchSet %q to recipe %q at revision %d (%s)", r.PatchSetID, r.DocID, r.ExpectedRevision, ops)
	}
	return fmt.Sprintf("patch document %q at revision %d (%s)", r.DocID, r.ExpectedRevision, ops)
}

// plural is "1 operation" or "2 operations".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// LockKeys implements tx.Planned: the document id.
func (pl *planned) LockKeys() []string { return []string{pl.rec.DocID} }

// CheckBase implements tx.Planned: the document's revision must still be
// expected_revision (seed 000's optimistic concurrency). errs.Stale with
// StaleData otherwise; errs.NotFound if the document is gone. The patch's
// patch_id must not be in the document's patch log (seed 000: "enforce
// idempotency (patch_id uniqueness)"): errs.IdempotencyConflict, checked
// here under the document's lock so that Commit, past the commit point,
// never meets it.
func (pl *planned) CheckBase(ctx context.Context) error {
	r := pl.rec
	db, err := pl.d.store(ctx)
	if err != nil {
		return err
	}
	doc, err := db.Document(ctx, r.DocID)
	if err != nil {
		return err
	}
	if doc.Revision != r.ExpectedRevision {
		return staleErr(r.DocID, r.ExpectedRevision, doc.Revision)
	}
	return checkNotApplied(ctx, db, r.DocID, logPatchID(r), r.PatchHash)
}

// checkNotApplied is errs.IdempotencyConflict when docID's patch log has
// patchID already (seed 000: "Replaying the same patch_id must not
// duplicate effects"): whatever its payload, a patch_id applied once is
// never applied again, and the error names the transaction that did.
func checkNotApplied(ctx context.Context, db *store.Documents, docID, patchID, hash string) error {
	prior, err := db.PatchByPatchID(ctx, docID, patchID)
	if err != nil || prior == nil {
		return err
	}
	return errs.New(errs.IdempotencyConflict, IdempotencyData{DocID: docID, PatchID: patchID, AppliedHash: prior.PatchHash, PatchHash: hash, TransactionID: prior.TxID, Revision: prior.Revision},
		"patch_id %s was applied to %s already (transaction %s, revision %d): a patch_id applies once; use a new patch_id for a new change", patchID, docID, prior.TxID, prior.Revision)
}

func staleErr(docID string, expected, current int64) error {
	return errs.New(errs.Stale, StaleData{DocID: docID, ExpectedRevision: expected, CurrentRevision: current},
		"document %s is at revision %d, not the expected %d: validate again against the current revision", docID, current, expected)
}

// Prepare implements tx.Planned. The revision was just checked (CheckBase);
// the content's hash is checked too (seed 000's TOCTOU re-check). When
// this kernel dry-ran the same input on the same bytes, that result is
// used; otherwise (after a restart, or once it was dropped) the patch is
// run on the current content and the result validated again. Either way
// the new content must be the one the dry run produced. It then stages the content in kernel.db, durably and
// invisibly, where Commit finds it.
func (pl *planned) Prepare(ctx context.Context, c *tx.Change) (*record.Commit, error) {
	d, r := pl.d, pl.rec
	// The commit point follows: nothing a caller sent may fail Commit.
	if err := pl.checkAccepted(); err != nil {
		return nil, err
	}
	input, err := c.Blob(r.InputSHA256)
	if err != nil {
		return nil, err
	}
	db, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := db.Document(ctx, r.DocID)
	if err != nil {
		return nil, err
	}
	content, err := pl.content(doc, input)
	if err != nil {
		return nil, err
	}
	result, _ := json.Marshal(appliedResult{PatchHash: r.PatchHash})
	if err := db.StageCommit(ctx, store.StagedCommit{
		TxID: c.TxID, DocID: r.DocID, ExpectedRevision: r.ExpectedRevision, Content: content,
		// content is the dry run's, validated against this kernel's rules.
		RulesDigest: jsondoc.RulesDigest(r.DocType),
		PatchID:     logPatchID(r), PatchHash: r.PatchHash, Envelope: input, Result: result,
	}); err != nil {
		return nil, err
	}
	rec, _ := json.Marshal(commitRecord{DocID: r.DocID, ExpectedRevision: r.ExpectedRevision, ContentSHA256: r.ContentSHA256})
	return &record.Commit{Record: rec}, nil
}

// content is the new content of doc, which is at the validated revision:
// the dry run's own result when this kernel validated the same input on
// the same bytes (validated), or else the patch run and validated again.
// Either must be the content the plan recorded (errs.Conflict).
func (pl *planned) content(doc *store.Document, input []byte) ([]byte, error) {
	d, r := pl.d, pl.rec
	content, ok := d.validated.take(validatedKey(pl.ptr.Kind, doc.Type, sha256Hex(doc.Content), r.InputSHA256), d.now())
	if !ok {
		res, err := d.dryRun(pl.ptr.Kind, doc, input)
		if err != nil {
			return nil, err
		}
		content = res.content
	}
	if sum := sha256Hex(content); sum != r.ContentSHA256 {
		return nil, errs.New(errs.Conflict, nil, "document %s: the patch no longer gives the validated content (%s, validated %s)", r.DocID, sum, r.ContentSHA256)
	}
	return content, nil
}

// appliedResult is what the patch log keeps as the result of an apply.
type appliedResult struct {
	PatchHash string `json:"patchHash"`
}

// logPatchID is the patch log's idempotency key: seed 000's patch_id, or
// "patchset:" and seed 003's patchSetId.
func logPatchID(r *planRecord) string {
	if r.PatchSetID != "" {
		return store.PatchSetLogPrefix + r.PatchSetID
	}
	return r.PatchID
}

// commitRecord is the document target's apply/commit record.
type commitRecord struct {
	DocID            string `json:"doc_id"`
	ExpectedRevision int64  `json:"expected_revision"`
	ContentSHA256    string `json:"content_sha256"`
}

// Commit implements tx.Planned: one SQL transaction writes the staged
// content, revision + 1 and the patch-log row keyed by the transaction
// id, and for a PatchSet its accepted PatchDecision (store.CommitStaged:
// the PatchSet applies with its decision or not at all). When that row
// exists already it does nothing, so recovery may call it again. What a
// caller sent was checked before the commit record (Admit, CheckBase,
// Prepare): Commit fails only when kernel.db does.
func (pl *planned) Commit(ctx context.Context, c *tx.Change, _ *record.Commit) error {
	if err := pl.d.fp.Hit(ctx, fpBeforeSQLCommit); err != nil {
		return err
	}
	db, err := pl.d.store(ctx)
	if err != nil {
		return err
	}
	_, err = db.CommitStaged(ctx, c.TxID)
	return err
}

// Abort implements tx.Planned: it drops the staged content, if any.
func (pl *planned) Abort(ctx context.Context, c *tx.Change) error {
	db, err := pl.d.store(ctx)
	if err != nil {
		return err
	}
	return db.AbortStaged(ctx, c.TxID)
}

// Summary implements tx.Planned (tx/list's summary): "patch
// closing_checklist deal-1 at revision 12: 2 operations", or for a
// PatchSet the operations the person proposed, then the JSON Patch
// operations they compile to: "PatchSet ps1 on recipe r at revision 3: 4
// operations, 7 JSON Patch operations".
func (pl *planned) Summary() string {
	r := pl.rec
	ops := plural(len(r.Targets), "operation")
	if r.PatchSetID == "" {
		return fmt.Sprintf("patch %s %s at revision %d: %s", r.DocType, r.DocID, r.ExpectedRevision, ops)
	}
	if r.PatchSetOps > 0 {
		ops = plural(r.PatchSetOps, "operation") + ", " + plural(len(r.Targets), "JSON Patch operation")
	}
	return fmt.Sprintf("PatchSet %s on %s %s at revision %d: %s", r.PatchSetID, r.DocType, r.DocID, r.ExpectedRevision, ops)
}
