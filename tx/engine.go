// Package tx is the transaction engine for workspace changes (seed 001 and
// DESIGN.md §4): proposals that never touch the workspace, approvals kept in
// an append-only ledger, an all-or-nothing apply with a durable commit point,
// and recovery of interrupted applies at start-up.
//
// On disk, under <data-dir>/transactions/<txId>/:
//
//	transaction.json   metadata and pointers.proposal, replaced atomically
//	events.jsonl       the ledger: one checksummed event per line, seq 1..n
//	proposal.patch     the canonical unified diff, secrets redacted
//	blobs/<sha256>     the new content of each written file (mode 0600)
//
// The ledger is the source of truth. transaction.json is derived from it
// and rebuilt from it when it is missing or unreadable.
package tx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

// File names inside a transaction directory.
const (
	MetaFile  = "transaction.json"
	PatchFile = "proposal.patch"
	BlobDir   = "blobs"
)

// Failpoint names (internal/failpoint), one at each step of the apply
// protocol and of the ledger append.
const (
	fpAfterStaging        = "apply.after-staging"
	fpBeforeCommitRecord  = "apply.before-commit-record"
	fpAfterCommitRecord   = "apply.after-commit-record"
	fpBetweenRenames      = "apply.between-renames"
	fpBeforeDirFsync      = "apply.before-dir-fsync"
	fpLedgerMidAppend     = "ledger.mid-append"
	fpMetaMidReplace      = "meta.mid-replace"
	fpProposeBeforeRename = "propose.before-rename"
)

// Options configure an Engine.
type Options struct {
	Workspace  *sandbox.Workspace // the confined workspace; required
	DataDir    string             // absolute; created if missing
	Policy     approvals.Policy   // untrusted or never
	Failpoints *failpoint.Set     // nil in production
	Logger     *slog.Logger       // nil means slog.Default()
}

// Engine runs workspace transactions. It is safe for concurrent use: calls
// on one transaction are serialised by that transaction's lock; calls on
// different transactions run in parallel.
type Engine struct {
	opts    Options
	ws      *sandbox.Workspace
	txRoot  string
	lock    *dirLock
	reg     *approvals.Registry
	scanner *sandbox.Scanner
	log     *slog.Logger

	mu  sync.Mutex
	txs map[string]*transaction

	paths pathLocks // held by an apply from its base check to its last rename

	notifyMu sync.RWMutex
	notify   func(protocol.Event)
}

// transaction is one loaded transaction. sem is a one-slot lock that a
// waiting request can give up on when its context is cancelled.
type transaction struct {
	id      string
	dir     string
	sem     chan struct{}
	meta    protocol.TransactionFile
	led     *ledger
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
	p := t.meta.Pointers.Proposal
	t.summary.Store(&protocol.TxSummary{
		TransactionID:    t.id,
		State:            t.meta.State,
		CreatedAt:        t.meta.CreatedAt,
		UpdatedAt:        t.led.events[len(t.led.events)-1].TS,
		Kind:             p.Kind,
		TargetFiles:      p.TargetFiles,
		PendingApprovals: len(approvals.Fold(t.led.events).Pending()),
	})
}

func (t *transaction) acquire(ctx context.Context) error {
	select {
	case t.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *transaction) release() { <-t.sem }

// Open takes the data dir's lock, loads every transaction and recovers
// interrupted applies, all before it returns, so the kernel answers nothing
// until recovery is done. A transaction whose ledger is corrupt is kept, with
// its error, so tx/list can show it; it refuses every other call.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Workspace == nil {
		return nil, errors.New("tx: no workspace")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Policy == "" {
		opts.Policy = approvals.Untrusted
	}
	txRoot := filepath.Join(opts.DataDir, "transactions")
	if _, err := os.Stat(txRoot); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(txRoot, 0o700); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		// A new directory's entry lives in its parent: make the data dir
		// and transactions/ themselves durable once, when first created.
		for _, d := range []string{opts.DataDir, filepath.Dir(opts.DataDir)} {
			if err := syncDir(d); err != nil {
				return nil, fmt.Errorf("fsync %s: %w", d, err)
			}
		}
	} else if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	lock, err := lockDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		opts: opts, ws: opts.Workspace, txRoot: txRoot, lock: lock,
		reg: approvals.NewRegistry(), scanner: sandbox.NewScanner(),
		log: opts.Logger, txs: map[string]*transaction{},
	}
	if err := e.loadAll(ctx); err != nil {
		lock.release()
		return nil, err
	}
	return e, nil
}

// SetNotify sets the function that receives each event after it is durable.
// Events of one transaction arrive in seq order. fn must not call the Engine.
func (e *Engine) SetNotify(fn func(protocol.Event)) {
	e.notifyMu.Lock()
	e.notify = fn
	e.notifyMu.Unlock()
}

// Close releases the data dir lock and closes every ledger.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.txs {
		if t.led != nil {
			t.led.close()
		}
	}
	return e.lock.release()
}

// DataDir returns the data directory.
func (e *Engine) DataDir() string { return e.opts.DataDir }

func (e *Engine) loadAll(ctx context.Context) error {
	entries, err := os.ReadDir(e.txRoot)
	if err != nil {
		return err
	}
	removed := false
	var ids []string
	for _, ent := range entries {
		name := ent.Name()
		if strings.HasPrefix(name, ".tmp-") {
			// A proposal that crashed before its directory was renamed into
			// place was never acknowledged: drop it.
			if err := os.RemoveAll(filepath.Join(e.txRoot, name)); err != nil {
				return fmt.Errorf("remove unfinished proposal %s: %w", name, err)
			}
			removed = true
			continue
		}
		if ent.IsDir() && validTxID(name) {
			ids = append(ids, name)
		}
	}
	// Transactions are independent files: load them concurrently (reading
	// and verifying ledgers is most of the start-up time with many).
	loaded := make([]*transaction, len(ids))
	_ = parallel(len(ids), func(i int) error {
		loaded[i] = e.loadTx(ids[i])
		return nil
	})
	for i, t := range loaded {
		e.txs[ids[i]] = t
		if t.loadErr != nil {
			e.log.Error("transaction refused", "transactionId", t.id, "err", t.loadErr)
			continue
		}
		for _, ev := range t.led.events {
			if ev.Type == protocol.EventApprovalDecision && ev.Decision != nil {
				e.reg.Observe(t.id, *ev.Decision, false)
			}
		}
	}
	// Recovery is mostly fsyncs, which are faster issued together; the
	// path locks keep apart two transactions that touch the same file.
	_ = parallel(len(loaded), func(i int) error {
		t := loaded[i]
		if t.loadErr != nil {
			return nil
		}
		unlock, err := e.paths.lock(ctx, t.meta.Pointers.Proposal.TargetFiles)
		if err == nil {
			err = e.recover(ctx, t)
			unlock()
		}
		if err != nil {
			e.log.Error("recovery failed", "transactionId", t.id, "err", err)
			t.loadErr = err
		}
		return nil
	})
	if !removed {
		return nil
	}
	return syncDir(e.txRoot)
}

func (e *Engine) loadTx(id string) *transaction {
	dir := filepath.Join(e.txRoot, id)
	t := &transaction{id: id, dir: dir, sem: make(chan struct{}, 1)}
	led, err := loadLedger(filepath.Join(dir, LedgerFile), id, e.opts.Failpoints)
	if errors.Is(err, fs.ErrNotExist) {
		err = protocol.NewError(protocol.CodeLedgerCorrupt,
			map[string]any{"transactionId": id, "file": filepath.Join(dir, LedgerFile), "reason": "missing"},
			"transaction %s has no %s", id, LedgerFile)
	}
	if err != nil {
		t.loadErr = err
		return t
	}
	t.led = led
	rebuilt := e.metaFromLedger(t)
	if rebuilt.Pointers.Proposal == nil {
		t.loadErr = protocol.NewError(protocol.CodeLedgerCorrupt,
			map[string]any{"transactionId": id, "file": led.path, "reason": "no turn/start event with a proposal"},
			"transaction %s has no proposal in its ledger", id)
		return t
	}
	raw, err := os.ReadFile(filepath.Join(dir, MetaFile))
	var onDisk protocol.TransactionFile
	if err == nil {
		err = json.Unmarshal(raw, &onDisk)
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
func (e *Engine) metaFromLedger(t *transaction) protocol.TransactionFile {
	m := protocol.TransactionFile{SchemaVersion: 1, TransactionID: t.id, WorkspaceRoot: e.ws.Dir()}
	evs := t.led.events
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
func deriveState(evs []protocol.Event) (state, since string) {
	state = protocol.StateProposed
	committed, commitTS := false, ""
	for _, ev := range evs {
		switch ev.Type {
		case protocol.EventTxStatus:
			state, since = ev.Status, ev.TS
		case protocol.EventApplyCommit:
			committed, commitTS = true, ev.TS
		case protocol.EventApplyComplete:
			committed = false
		}
	}
	if committed {
		return protocol.StateApplying, commitTS
	}
	return state, since
}

func (e *Engine) writeMeta(t *transaction) error {
	return replaceFileAtomic(e.opts.Failpoints, filepath.Join(t.dir, MetaFile), metaJSON(t.meta))
}

// appendWithMeta appends events that change the state and rewrites
// transaction.json to match, with the ledger fsync and the metadata
// replace running side by side. They are independent: if the append fails
// after the metadata landed, the next start sees the mismatch and rebuilds
// transaction.json from the ledger, which stays the source of truth.
func (e *Engine) appendWithMeta(t *transaction, evs ...protocol.Event) error {
	ts := now()
	for i := range evs {
		evs[i].TS = ts
	}
	next := t.meta
	next.State, next.UpdatedAt = deriveState(append(slices.Clone(t.led.events), evs...))
	path := filepath.Join(t.dir, MetaFile)
	return parallel(2, func(i int) error {
		if i == 0 {
			return e.appendEvents(t, evs...)
		}
		return replaceFileAtomic(e.opts.Failpoints, path, metaJSON(next))
	})
}

// metaJSON renders transaction.json, indented for people who read it.
func metaJSON(m protocol.TransactionFile) []byte {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(err) // plain structs of strings, maps and slices always encode
	}
	return append(data, '\n')
}

// get returns a loaded, healthy transaction or a NotFound / LedgerCorrupt
// error.
func (e *Engine) get(id string) (*transaction, error) {
	e.mu.Lock()
	t, ok := e.txs[id]
	e.mu.Unlock()
	if !ok {
		return nil, protocol.NewError(protocol.CodeNotFound, map[string]any{"transactionId": id},
			"no transaction %q", id)
	}
	if t.loadErr != nil {
		return nil, t.loadErr
	}
	return t, nil
}

// locked returns a healthy transaction with its lock held, waiting for the
// lock until ctx is done. The caller must call t.release.
func (e *Engine) locked(ctx context.Context, id string) (*transaction, error) {
	t, err := e.get(id)
	if err != nil {
		return nil, err
	}
	if err := t.acquire(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// appendEvents makes evs durable in t's ledger, refreshes the derived
// metadata, notifies the host, and then publishes t's new tx/list entry
// (after the notifications, as when List waited for t's lock: a host never
// sees a state in tx/list before the event that entered it). The caller
// holds t's lock.
func (e *Engine) appendEvents(t *transaction, evs ...protocol.Event) error {
	out, err := t.led.append(evs...)
	if err != nil {
		return err
	}
	t.meta.State, t.meta.UpdatedAt = deriveState(t.led.events)
	e.emit(out)
	t.publish()
	return nil
}

func (e *Engine) emit(evs []protocol.Event) {
	e.notifyMu.RLock()
	fn := e.notify
	e.notifyMu.RUnlock()
	if fn == nil {
		return
	}
	for _, ev := range evs {
		ev.Checksum = ""
		fn(ev)
	}
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
	st := approvals.Fold(t.led.events)
	decisions := st.Decisions
	if decisions == nil {
		decisions = []protocol.ApprovalDecision{}
	}
	return &protocol.TxStatusResult{
		TransactionID:    t.id,
		State:            t.meta.State,
		CreatedAt:        t.meta.CreatedAt,
		UpdatedAt:        t.led.events[len(t.led.events)-1].TS,
		LastSeq:          t.led.lastSeq(),
		Pointers:         t.meta.Pointers,
		PendingApprovals: st.Pending(),
		Decisions:        decisions,
	}
}

// List returns every transaction in the data dir, newest first (tx/list).
// A transaction that could not be loaded is listed with its error.
//
// List takes no transaction's lock: it reads the entry each transaction
// published after its last event (transaction.publish), so it never waits
// for a call in progress (an apply holds its transaction's lock through
// every fsync, and a failpoint or a slow disk can make that long). An entry
// is a snapshot: it shows the state as of the transaction's last event
// already sent, exactly as a List that had waited for the lock would have,
// with a call in progress either not started or finished. ctx is unused,
// since nothing here blocks.
func (e *Engine) List(ctx context.Context) (*protocol.TxListResult, error) {
	e.mu.Lock()
	all := make([]*transaction, 0, len(e.txs))
	for _, t := range e.txs {
		all = append(all, t)
	}
	e.mu.Unlock()
	out := make([]protocol.TxSummary, 0, len(all))
	for _, t := range all {
		if t.loadErr != nil {
			var pe *protocol.Error
			if !errors.As(t.loadErr, &pe) {
				pe = protocol.NewError(protocol.CodeInternalError, nil, "%v", t.loadErr)
			}
			out = append(out, protocol.TxSummary{TransactionID: t.id, State: "unavailable", TargetFiles: []string{}, Error: pe})
			continue
		}
		if s := t.summary.Load(); s != nil {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b protocol.TxSummary) int {
		if c := strings.Compare(b.CreatedAt, a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.TransactionID, a.TransactionID)
	})
	return &protocol.TxListResult{Transactions: out}, nil
}

// Events returns the events with seq > afterSeq (tx/events), for a host that
// reconnects. Checksums are not sent.
func (e *Engine) Events(ctx context.Context, id string, afterSeq int64) (*protocol.TxEventsResult, error) {
	if afterSeq < 0 {
		return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "afterSeq"}, "afterSeq must be >= 0")
	}
	t, err := e.locked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer t.release()
	res := &protocol.TxEventsResult{TransactionID: id, Events: []protocol.Event{}, LastSeq: t.led.lastSeq()}
	if afterSeq < int64(len(t.led.events)) {
		for _, ev := range t.led.events[afterSeq:] {
			ev.Checksum = ""
			res.Events = append(res.Events, ev)
		}
	}
	return res, nil
}

// validTxID accepts the ids newID makes: "tx-" then [0-9A-Za-z-].
func validTxID(s string) bool {
	if !strings.HasPrefix(s, "tx-") || len(s) > 64 {
		return false
	}
	for _, c := range s[3:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// newID returns prefix + "-" + 16 random hex digits (64 bits from
// crypto/rand). Ids carry no time: tx/list sorts by created_at.
func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux ≥ 3.17
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}
