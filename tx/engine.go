// Package tx is txkernel's transaction engine (DESIGN.md §2, §4; seed 001):
// one lifecycle for every target,
//
//	propose (no side effects) → approvals → apply (atomic) → close
//
// with each step recorded in the transaction's append-only ledger, so that
// approvals survive a restart and an interrupted apply is recovered before
// the kernel answers anything. The engine owns the lifecycle, the ledger,
// transaction.json, approvals, the lock table, blobs and recovery; what is
// specific to the thing being changed sits behind the Target interface
// (target.go). Workspace files are the first target (workspace).
//
// On disk, under the data dir:
//
//	transactions/<txId>/transaction.json   metadata and pointers.proposal, replaced atomically
//	transactions/<txId>/events.jsonl       the ledger: one checksummed event per line, seq 1..n
//	transactions/<txId>/proposal.patch     the reviewable change, secrets redacted
//	transactions/<txId>/blobs              exact new bytes (mode 0600), deleted once nothing needs them (blobs.go)
//	active/<txId>                          an empty marker per transaction that is not terminal
//	denied/<sha256 of fingerprint>         one per denied fingerprint, so deny sticks without reading history
//
// The ledger is the source of truth. transaction.json is derived from it
// and rebuilt from it when it is missing or unreadable; the markers are an
// index that start-up rebuilds from the ledgers when active/ is absent.
//
// Bounded resources: only non-terminal transactions are held in memory, and
// a ledger file is open only while an append runs. A terminal transaction
// (completed, closed, denied) is read from disk when someone asks for it.
package tx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// File and directory names in the data dir and in a transaction directory.
const (
	MetaFile  = record.TransactionFile
	patchFile = "proposal.patch"
	TxDir     = "transactions"
	ActiveDir = "active"
	DeniedDir = "denied"
)

// Failpoint names (internal/failpoint), one at each step of the apply
// protocol, of the ledger append and of retiring a terminal transaction.
// The workspace target has its own (workspace).
const (
	fpAfterStaging        = "apply.after-staging"
	fpBeforeCommitRecord  = "apply.before-commit-record"
	fpAfterCommitRecord   = "apply.after-commit-record"
	fpAfterBlobsDeleted   = "apply.after-blobs-deleted"
	fpLedgerMidAppend     = "ledger.mid-append"
	fpLedgerNoSpace       = "ledger.no-space" // error: the append fails as on a full disk (ENOSPC)
	fpMetaMidReplace      = "meta.mid-replace"
	fpProposeBeforeRename = "propose.before-rename"
	fpRetireBeforeUnmark  = "retire.before-unmark"
)

// Options configure an Engine.
type Options struct {
	Targets []Target // at least one; proposal kinds must not overlap
	DataDir string   // absolute; created if missing
	// Policy, when set (untrusted or never), overrides the default
	// approval policy of every kind (Kind.DefaultPolicy): one policy for
	// everything, for tests and tools. The kernel leaves it empty and
	// configures each target instead (its --approval-policy and
	// --document-approval-policy flags).
	Policy     approvals.Policy
	Failpoints *failpoint.Set // nil in production
	// ReadOnly is the kernel's --sandbox read-only: every apply of every
	// target is refused (CheckWritable), while proposals are still made
	// (seed 001, "read-only sandbox disallows apply entirely").
	ReadOnly bool
	Logger   *slog.Logger // nil means slog.Default()
}

// Engine runs transactions. It is safe for concurrent use: calls on one
// transaction are serialised by that transaction's lock; calls on
// different transactions run in parallel, and applies that change the same
// thing are serialised by their lock keys.
type Engine struct {
	opts      Options
	txRoot    string
	activeDir string
	deniedDir string
	lock      *dirLock
	reg       *approvals.Registry
	log       *slog.Logger
	targets   map[string]Target // by Name
	byKind    map[string]Target // proposal kind → target
	kinds     []string          // every kind, in the targets' order
	kindInfo  map[string]Kind   // proposal kind → its Kind

	mu  sync.Mutex
	txs map[string]*transaction // the non-terminal transactions, and those that failed to load

	keys keyLocks // held by an apply from its base check to its commit
	ids  idClock  // makes new transaction ids

	notifyMu sync.RWMutex
	notify   func(protocol.Event)
}

// transaction is one loaded transaction. sem is a one-slot lock that a
// waiting request can give up on when its context is cancelled.
type transaction struct {
	id      string
	dir     string
	sem     chan struct{}
	meta    record.Transaction
	led     *ledger
	target  Target
	planned Planned // the proposal as its target loaded it (Target.Load)
	loadErr error

	// summary is the transaction's tx/list entry as of its last event
	// sent to the host. It is replaced, never modified, by publish (which
	// runs under sem), so List reads it without taking sem and never waits
	// behind an apply or any other call in progress. nil until the
	// proposal's own events are out: List skips the transaction until then.
	summary atomic.Pointer[protocol.TxSummary]
}

// publish refreshes t's tx/list entry from its metadata and ledger. The
// caller holds t's lock (or is loading t, before anyone else can see it).
func (t *transaction) publish() {
	t.summary.Store(t.listEntry())
}

func (t *transaction) listEntry() *protocol.TxSummary {
	p := t.meta.Pointers.Proposal
	return &protocol.TxSummary{
		TransactionID:    t.id,
		State:            t.meta.State,
		CreatedAt:        t.meta.CreatedAt,
		UpdatedAt:        t.led.events[len(t.led.events)-1].TS,
		Target:           p.TargetName(),
		Kind:             p.Kind,
		Summary:          t.planned.Summary(),
		TargetFiles:      listFiles(t.planned),
		PendingApprovals: len(t.pending()),
	}
}

// pending lists the approval requests still waiting; none once terminal.
func (t *transaction) pending() []protocol.ApprovalRequest {
	if protocol.Terminal(t.meta.State) {
		return []protocol.ApprovalRequest{}
	}
	return t.approvalState().Pending()
}

// approvalState folds t's ledger into the approval state: the engine
// adapts its record events to approvals' own Event, so that approvals does
// not import tx/record.
func (t *transaction) approvalState() *approvals.State {
	st := &approvals.State{}
	for _, ev := range t.led.events {
		st.Add(approvals.Event{Type: ev.Type, Approval: ev.Approval, Decision: ev.Decision})
	}
	return st
}

// Open takes the data dir's lock, loads every transaction that is not
// terminal and recovers interrupted applies, all before it returns, so the
// kernel answers nothing until recovery is done. A transaction whose ledger
// is corrupt is kept, with its error, so tx/list can show it; it refuses
// every other call. It fails if another kernel holds the data dir
// (ErrDataDirLocked).
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if len(opts.Targets) == 0 {
		return nil, errors.New("tx: no targets")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{
		opts:      opts,
		txRoot:    filepath.Join(opts.DataDir, TxDir),
		activeDir: filepath.Join(opts.DataDir, ActiveDir),
		deniedDir: filepath.Join(opts.DataDir, DeniedDir),
		reg:       approvals.NewRegistry(),
		log:       opts.Logger,
		targets:   map[string]Target{},
		byKind:    map[string]Target{},
		kindInfo:  map[string]Kind{},
		txs:       map[string]*transaction{},
	}
	for _, tg := range opts.Targets {
		if _, dup := e.targets[tg.Name()]; dup {
			return nil, fmt.Errorf("tx: two targets named %q", tg.Name())
		}
		e.targets[tg.Name()] = tg
		for _, k := range tg.Kinds() {
			if _, dup := e.byKind[k.Name]; dup {
				return nil, fmt.Errorf("tx: two targets accept proposal kind %q", k.Name)
			}
			if k.Input == nil || k.Input.Kind() != reflect.Struct {
				return nil, fmt.Errorf("tx: proposal kind %q declares no input struct type", k.Name)
			}
			if k.DefaultPolicy == "" {
				k.DefaultPolicy = approvals.Untrusted
			}
			if opts.Policy != "" {
				k.DefaultPolicy = opts.Policy
			}
			e.byKind[k.Name] = tg
			e.kindInfo[k.Name] = k
			e.kinds = append(e.kinds, k.Name)
		}
	}
	if err := ensureDir(e.txRoot, opts.DataDir, filepath.Dir(opts.DataDir)); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	e.lock = lock
	if err := e.start(ctx); err != nil {
		lock.release()
		return nil, err
	}
	return e, nil
}

// ensureDir creates dir (0700) if missing and makes its entry durable by
// fsyncing each of parents, which must be its parent and their ancestors.
func ensureDir(dir string, parents ...string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, d := range parents {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("fsync %s: %w", d, err)
		}
	}
	return nil
}

// SetNotify sets the function that receives each event, as the host sees
// it (record.Event.Wire), after it is durable.
// Events of one transaction arrive in seq order. fn must not call the Engine.
func (e *Engine) SetNotify(fn func(protocol.Event)) {
	e.notifyMu.Lock()
	e.notify = fn
	e.notifyMu.Unlock()
}

// Close releases the data dir lock. No file of any transaction is open
// between calls, so there is nothing else to close.
func (e *Engine) Close() error {
	return e.lock.release()
}

// policy is the approval policy for proposals of kind: its target's
// default (Kind.DefaultPolicy), or Options.Policy when set. A kind no
// target accepts any more (a transaction of an earlier configuration)
// asks a person.
func (e *Engine) policy(kind string) approvals.Policy {
	if k, ok := e.kindInfo[kind]; ok {
		return k.DefaultPolicy
	}
	return approvals.Untrusted
}

// DataDir returns the data directory.
func (e *Engine) DataDir() string { return e.opts.DataDir }

// Kinds returns the proposal kinds Propose (turn/start) accepts, sorted:
// every kind of the engine's targets except the Internal ones, which a
// flow of their own proposes (initialize's capabilities.proposalKinds).
func (e *Engine) Kinds() []string {
	out := []string{}
	for _, k := range e.kinds {
		if !e.kindInfo[k].Internal {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// targetOf returns the target a persisted proposal names.
func (e *Engine) targetOf(p *record.Proposal) (Target, error) {
	tg, ok := e.targets[p.TargetName()]
	if !ok {
		return nil, fmt.Errorf("no target %q in this kernel", p.TargetName())
	}
	return tg, nil
}

// loadTx reads one transaction from disk: its ledger (verified; a torn
// final line is set aside) and transaction.json, rebuilt from the ledger
// when it disagrees. No file stays open. Errors are kept in loadErr.
func (e *Engine) loadTx(id string) *transaction {
	dir := filepath.Join(e.txRoot, id)
	t := &transaction{id: id, dir: dir, sem: make(chan struct{}, 1)}
	led, err := loadLedger(filepath.Join(dir, LedgerFile), id, e.opts.Failpoints)
	if errors.Is(err, fs.ErrNotExist) {
		err = corrupt(CorruptData{TransactionID: id, File: filepath.Join(dir, LedgerFile), Reason: "missing"},
			"transaction %s has no %s", id, LedgerFile)
	}
	if err != nil {
		t.loadErr = err
		return t
	}
	t.led = led
	rebuilt := metaFromLedger(id, led.events)
	if rebuilt.Pointers.Proposal == nil {
		t.loadErr = corrupt(CorruptData{TransactionID: id, File: led.path, Reason: "no turn/start event with a proposal"},
			"transaction %s has no proposal in its ledger", id)
		return t
	}
	if t.target, err = e.targetOf(rebuilt.Pointers.Proposal); err != nil {
		t.loadErr = corrupt(CorruptData{TransactionID: id, File: led.path, Reason: "unknown target"}, "transaction %s: %v", id, err)
		return t
	}
	if t.planned, err = t.target.Load(rebuilt.Pointers.Proposal); err != nil {
		t.loadErr = planCorrupt(id, led.path, err)
		return t
	}
	raw, err := os.ReadFile(filepath.Join(dir, MetaFile))
	var onDisk record.Transaction
	if err == nil {
		onDisk, err = record.DecodeTransaction(raw)
	}
	if err != nil {
		e.log.Warn("transaction.json unreadable; rebuilt from the ledger", "transactionId", id, "err", err)
	}
	t.meta = rebuilt
	if err != nil || onDisk.State != rebuilt.State || onDisk.UpdatedAt != rebuilt.UpdatedAt {
		if werr := e.writeMeta(t); werr != nil {
			t.loadErr = werr
		}
	}
	t.publish()
	return t
}

// metaFromLedger derives transaction.json from the ledger alone.
func metaFromLedger(id string, evs []record.Event) record.Transaction {
	m := record.Transaction{SchemaVersion: record.SchemaVersion, TransactionID: id}
	if len(evs) > 0 {
		m.CreatedAt = evs[0].TS
	}
	for _, ev := range evs {
		if ev.Type == protocol.EventTurnStart && ev.Proposal != nil {
			m.Pointers.Proposal = ev.Proposal
			m.WorkspaceRoot = ev.Proposal.WorkspaceRoot
		}
	}
	m.State, m.UpdatedAt = deriveState(evs)
	return m
}

// deriveState is the transaction's state as its ledger tells it, and the
// time it took that state: the last tx/status, except that a commit record
// without apply/complete means the apply is still in flight. Approval
// events do not change the state, so transaction.json (whose updated_at is
// this time) need not be rewritten for them.
func deriveState(evs []record.Event) (state, since string) {
	state = protocol.StateProposed
	committed, commitTS := false, ""
	for _, ev := range evs {
		switch ev.Type {
		case protocol.EventTxStatus:
			state, since = ev.Status, ev.TS
		case protocol.EventApplyCommit:
			committed, commitTS = true, ev.TS
		case protocol.EventApplyComplete, protocol.EventTxClose:
			// tx/close after a commit record without apply/complete: the
			// target refused the commit and it was rolled back (rollBack).
			committed = false
		}
	}
	if committed {
		return protocol.StateApplying, commitTS
	}
	return state, since
}

func (e *Engine) writeMeta(t *transaction) error {
	data, err := t.meta.Encode()
	if err != nil {
		return err
	}
	return replaceMeta(e.opts.Failpoints, filepath.Join(t.dir, MetaFile), data)
}

// maxInFlight bounds the engine's concurrent I/O calls, mostly fsyncs.
// Independent fsyncs issued together let the file system commit them in
// one journal transaction instead of one each: on ext4 here that is
// several times faster, with the same durability, because every call
// still returns only after its own fsync.
const maxInFlight = 16

// appendWithMeta appends events that change the state and rewrites
// transaction.json to match, with the ledger fsync and the metadata
// replace running side by side. They are independent: if the append fails
// after the metadata landed, the next start sees the mismatch and rebuilds
// transaction.json from the ledger, which stays the source of truth.
func (e *Engine) appendWithMeta(t *transaction, evs ...record.Event) error {
	ts := now()
	for i := range evs {
		evs[i].TS = ts
	}
	next := t.meta
	next.State, next.UpdatedAt = deriveState(append(slices.Clone(t.led.events), evs...))
	path := filepath.Join(t.dir, MetaFile)
	data, err := next.Encode()
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.Go(func() error { return e.appendEvents(t, evs...) })
	g.Go(func() error { return replaceMeta(e.opts.Failpoints, path, data) })
	return g.Wait()
}

// get returns a healthy transaction: a loaded one, or a terminal one read
// from disk now. It fails with NotFound, or the transaction's load error.
func (e *Engine) get(id string) (*transaction, error) {
	e.mu.Lock()
	t, ok := e.txs[id]
	e.mu.Unlock()
	if !ok {
		if !validTxID(id) {
			return nil, notFoundTx(id)
		}
		if _, err := os.Stat(filepath.Join(e.txRoot, id)); err != nil {
			return nil, notFoundTx(id)
		}
		t = e.loadTx(id)
		if t.loadErr == nil && !protocol.Terminal(t.meta.State) {
			// Retired between our lookup and the load (its ledger is then
			// terminal), or created and not yet registered: look again.
			e.mu.Lock()
			live, ok := e.txs[id]
			e.mu.Unlock()
			if !ok {
				return nil, notFoundTx(id)
			}
			t = live
		}
	}
	if t.loadErr != nil {
		return nil, t.loadErr
	}
	return t, nil
}

// appendEvents makes evs durable in t's ledger, refreshes the derived
// metadata, notifies the host, and then publishes t's new tx/list entry
// (after the notifications, as when List waited for t's lock: a host never
// sees a state in tx/list before the event that entered it). The caller
// holds t's lock.
func (e *Engine) appendEvents(t *transaction, evs ...record.Event) error {
	out, err := t.led.append(evs...)
	if err != nil {
		return err
	}
	t.meta.State, t.meta.UpdatedAt = deriveState(t.led.events)
	e.emit(out)
	t.publish()
	return nil
}

func (e *Engine) emit(evs []record.Event) {
	e.notifyMu.RLock()
	fn := e.notify
	e.notifyMu.RUnlock()
	if fn == nil {
		return
	}
	for _, ev := range evs {
		fn(ev.Wire())
	}
}

// Proposal returns a transaction's persisted proposal pointer and its
// state: how a service finds the plan it made in an earlier call (a
// validationId given back to patch/apply, a replayed patch). The pointer
// is the engine's own: callers must not modify it. Errors are those of
// Status.
func (e *Engine) Proposal(ctx context.Context, id string) (*record.Proposal, string, error) {
	t, err := e.locked(ctx, id)
	if err != nil {
		return nil, "", err
	}
	defer t.release()
	return t.meta.Pointers.Proposal, t.meta.State, nil
}

// Status returns a transaction's state, pointers.proposal, pending approvals
// and decisions (tx/status).
func (e *Engine) Status(ctx context.Context, id string) (*protocol.TxStatusResult, error) {
	t, err := e.locked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer t.release()
	return e.statusLocked(t), nil
}

func (e *Engine) statusLocked(t *transaction) *protocol.TxStatusResult {
	st := t.approvalState()
	decisions := st.Decisions
	if decisions == nil {
		decisions = []protocol.ApprovalDecision{}
	}
	p := t.meta.Pointers.Proposal
	return &protocol.TxStatusResult{
		TransactionID:    t.id,
		State:            t.meta.State,
		CreatedAt:        t.meta.CreatedAt,
		UpdatedAt:        t.led.events[len(t.led.events)-1].TS,
		LastSeq:          t.led.lastSeq(),
		Target:           p.TargetName(),
		Kind:             p.Kind,
		Summary:          t.planned.Summary(),
		Pointers:         protocol.Pointers{Proposal: t.meta.Pointers.Proposal.Wire()},
		PendingApprovals: t.pending(),
		Decisions:        decisions,
	}
}

// Events returns the events with seq > afterSeq (tx/events), for a host that
// reconnects. Checksums are not sent.
func (e *Engine) Events(ctx context.Context, id string, afterSeq int64) (*protocol.TxEventsResult, error) {
	if afterSeq < 0 {
		return nil, errs.InvalidField("afterSeq", "afterSeq must be >= 0")
	}
	t, err := e.locked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer t.release()
	res := &protocol.TxEventsResult{TransactionID: id, Events: []protocol.Event{}, LastSeq: t.led.lastSeq()}
	if afterSeq < int64(len(t.led.events)) {
		evs, err := loadDiffs(t, t.led.events[afterSeq:])
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			res.Events = append(res.Events, ev.Wire())
		}
	}
	return res, nil
}

// SandboxData is the data of the engine's errs.Sandbox error: Reason
// "read-only" and the sandbox mode, as the workspace target reports its
// own sandbox errors.
type SandboxData struct {
	Reason  string `json:"reason"`
	Sandbox string `json:"sandbox"`
}

// CheckWritable refuses, with errs.Sandbox (-32004, data.reason
// "read-only"), any write that is an apply when the kernel runs read-only
// (Options.ReadOnly): Apply calls it first for every target, so
// apply/execute, patch/apply, patchset/decide and memory's accept, promote
// and ingest publishing are all refused at this one point. A service that
// would write before it reaches Apply (memory/ingest's evidence) calls it
// first too, so that nothing is half done.
func (e *Engine) CheckWritable() error {
	if e == nil || !e.opts.ReadOnly {
		return nil
	}
	return errs.New(errs.Sandbox, SandboxData{Reason: "read-only", Sandbox: "read-only"},
		"the sandbox is read-only: apply is refused (restart with --sandbox workspace-write to apply)")
}
