package tx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

// Apply applies a proposed transaction all-or-nothing (apply/execute). In
// order it:
//  1. refuses a read-only sandbox, a closed transaction and any denied
//     fingerprint (deny sticks);
//  2. records automatic grants, requests missing approvals, and returns
//     OK false with the pending ones;
//  3. re-checks every base sha256 (an added file must still be absent);
//  4. stages each new content next to its target and fsyncs it;
//  5. appends apply/start and the commit record apply/commit and fsyncs the
//     ledger: the commit point, after which cancellation is ignored and
//     recovery rolls forward;
//  6. renames each staged file over its target (or removes the target), then
//     fsyncs each parent directory;
//  7. appends the turn/item upsert, apply/complete, tx/status applied and
//     completed, and tx/close.
//
// A second call on a completed transaction returns OK with AlreadyApplied.
func (e *Engine) Apply(ctx context.Context, id string) (*protocol.ApplyResult, error) {
	t, err := e.locked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer t.release()

	switch t.meta.State {
	case protocol.StateCompleted, protocol.StateApplied:
		return &protocol.ApplyResult{OK: true, TransactionID: id, State: t.meta.State, AlreadyApplied: true, AppliedFiles: t.meta.Pointers.Proposal.TargetFiles}, nil
	case protocol.StateClosed:
		return nil, protocol.NewError(protocol.CodeTransactionClosed, map[string]any{"transactionId": id, "state": t.meta.State},
			"transaction %s is closed and can no longer be applied", id)
	case protocol.StateApplying:
		// An earlier apply passed its commit point and then failed: finish it.
		unlock, err := e.paths.lock(ctx, t.meta.Pointers.Proposal.TargetFiles)
		if err != nil {
			return nil, err
		}
		defer unlock()
		if err := e.finishCommitted(t, false); err != nil {
			return nil, err
		}
		return &protocol.ApplyResult{OK: true, TransactionID: id, State: t.meta.State, AppliedFiles: t.meta.Pointers.Proposal.TargetFiles}, nil
	}
	if e.ws.Mode() == sandbox.ReadOnly {
		return nil, protocol.NewError(protocol.CodeSandboxViolation, map[string]any{"reason": "read-only", "sandbox": string(sandbox.ReadOnly)},
			"the sandbox is read-only: apply is refused (restart with --sandbox workspace-write to apply)")
	}

	ptr := t.meta.Pointers.Proposal
	plan := approvals.Evaluate(id, approvals.Fold(t.led.events), approvals.Required(ptr.PatchID, ptr.ContainsSecretIntroductions), e.opts.Policy, e.reg)
	if plan.Denied != nil {
		d := plan.Denied
		return nil, protocol.NewError(protocol.CodeApprovalDenied,
			map[string]any{"fingerprint": d.Decision.Fingerprint, "approvalRequestId": d.Decision.ApprovalRequestID, "transactionId": d.TransactionID},
			"approval %s was denied (transaction %s); a denied fingerprint is never retried", d.Decision.Fingerprint, d.TransactionID)
	}
	var evs []protocol.Event
	for i, req := range plan.Auto {
		evs = append(evs, protocol.Event{Type: protocol.EventApprovalDecision, Decision: &protocol.ApprovalDecision{
			ApprovalRequestID: newID("apr"), Kind: req.Kind, Fingerprint: req.Fingerprint,
			Decision: protocol.DecisionApprove, Source: plan.AutoSource[i]}})
	}
	pending := plan.Pending
	for _, req := range plan.ToRequest {
		ar := protocol.ApprovalRequest{ApprovalRequestID: newID("apr"), Kind: req.Kind, Fingerprint: req.Fingerprint, Reason: req.Reason}
		evs = append(evs, protocol.Event{Type: protocol.EventApprovalRequest, Approval: &ar})
		pending = append(pending, ar)
	}
	if len(evs) > 0 {
		if err := e.appendEvents(t, evs...); err != nil {
			return nil, err
		}
	}
	if len(pending) > 0 {
		return &protocol.ApplyResult{OK: false, TransactionID: id, State: t.meta.State, PendingApprovals: pending}, nil
	}

	// From the base check to the last rename, no other transaction may
	// apply to these files (see pathLocks).
	unlock, err := e.paths.lock(ctx, ptr.TargetFiles)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := e.checkBase(ptr); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ops, err := e.stage(ctx, t)
	if err == nil {
		err = e.opts.Failpoints.Hit(ctx, fpAfterStaging)
	}
	if err == nil {
		err = e.opts.Failpoints.Hit(ctx, fpBeforeCommitRecord)
	}
	if err == nil {
		err = ctx.Err() // the last moment at which a cancel can stop the apply
	}
	if err == nil {
		// apply/start and the commit record share one fsync. Recovery does
		// not need apply/start to be durable before staging: staged names
		// are deterministic, and every uncommitted transaction is swept.
		err = e.appendEvents(t, protocol.Event{Type: protocol.EventApplyStart},
			protocol.Event{Type: protocol.EventApplyCommit, Commit: &protocol.CommitRecord{Ops: ops}})
	}
	if err != nil {
		e.unstage(t)
		return nil, err
	}
	if err := e.opts.Failpoints.Hit(context.Background(), fpAfterCommitRecord); err != nil {
		return nil, err
	}
	if err := e.finishCommitted(t, false); err != nil {
		return nil, err
	}
	return &protocol.ApplyResult{OK: true, TransactionID: id, State: t.meta.State, AppliedFiles: ptr.TargetFiles}, nil
}

// checkBase verifies that every target still has its base sha256 and that
// every added file is still absent. It reports all stale paths at once.
func (e *Engine) checkBase(ptr *protocol.ProposalPointer) error {
	type stale struct {
		Path     string `json:"path"`
		Reason   string `json:"reason"` // changed | missing | exists
		Expected string `json:"expectedSha256,omitempty"`
		Actual   string `json:"actualSha256,omitempty"`
	}
	var out []stale
	var paths []string
	for _, c := range ptr.Changes {
		sum, exists, err := e.ws.FileSHA256(c.Path)
		if err != nil {
			return err
		}
		want, hadBase := ptr.BaseSHA256ByPath[c.Path]
		switch {
		case !hadBase && exists:
			out = append(out, stale{Path: c.Path, Reason: "exists", Actual: sum})
		case hadBase && !exists:
			out = append(out, stale{Path: c.Path, Reason: "missing", Expected: want})
		case hadBase && sum != want:
			out = append(out, stale{Path: c.Path, Reason: "changed", Expected: want, Actual: sum})
		default:
			continue
		}
		paths = append(paths, c.Path)
	}
	if len(out) == 0 {
		return nil
	}
	return protocol.NewError(protocol.CodeStaleBase, map[string]any{"stalePaths": paths, "stale": out},
		"stale base: %d file(s) changed since the proposal: %v", len(paths), paths)
}

// stage writes every new content to its staged sibling and fsyncs it. The
// files are staged concurrently (see parallel); ops keep the plan's order.
func (e *Engine) stage(ctx context.Context, t *transaction) ([]protocol.CommitOp, error) {
	changes := t.meta.Pointers.Proposal.Changes
	ops := make([]protocol.CommitOp, len(changes))
	err := parallel(len(changes), func(i int) error {
		c := changes[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.Kind == protocol.ChangeDelete {
			ops[i] = protocol.CommitOp{Path: c.Path, Op: protocol.OpDelete}
			return nil
		}
		data, err := t.readBlob(c.NewSHA256)
		if err != nil {
			return err
		}
		staged := sandbox.StagedName(c.Path, t.id)
		if err := e.ws.StageFile(c.Path, staged, data, fs.FileMode(c.NewMode)); err != nil {
			return err
		}
		ops[i] = protocol.CommitOp{Path: c.Path, Op: protocol.OpWrite, Staged: staged, SHA256: c.NewSHA256, Mode: c.NewMode}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// fsync of a staged file makes its bytes durable, not its name: that
	// lives in the directory. Without this, a power cut after the commit
	// record could keep the record and lose the staged files it names
	// (found by the power-loss model, TestPowerLoss). Staging may also have
	// created directories, whose names live in their parents.
	var paths []string
	for _, op := range ops {
		if op.Op == protocol.OpWrite {
			paths = append(paths, op.Path)
		}
	}
	if err := e.syncParents(paths); err != nil {
		return nil, err
	}
	return ops, nil
}

// syncParents fsyncs, concurrently, the parent directory of every path and
// all of their ancestors up to the workspace root.
func (e *Engine) syncParents(paths []string) error {
	dirs := map[string]bool{}
	for _, p := range paths {
		for d := path.Dir(p); ; d = path.Dir(d) {
			dirs[d] = true
			if d == "." {
				break
			}
		}
	}
	sorted := slices.Sorted(maps.Keys(dirs))
	return parallel(len(sorted), func(i int) error {
		if err := e.ws.SyncDir(sorted[i]); err != nil {
			return fmt.Errorf("fsync directory %s: %w", sorted[i], err)
		}
		return nil
	})
}

// unstage removes staged files of an apply that did not reach its commit
// point. Their names are deterministic, so this works after a crash too.
func (e *Engine) unstage(t *transaction) {
	for _, c := range t.meta.Pointers.Proposal.Changes {
		if c.Kind == protocol.ChangeDelete {
			continue
		}
		staged := sandbox.StagedName(c.Path, t.id)
		if ok, err := e.ws.Exists(staged); err != nil || !ok {
			continue // never staged, or its directory is not there
		}
		e.log.Info("removing a staged file of an uncommitted apply", "transactionId", t.id, "staged", staged)
		if err := e.ws.Remove(staged); err != nil {
			e.log.Warn("could not remove staged file", "transactionId", t.id, "staged", staged, "err", err)
		}
	}
}

// lastCommit returns the newest commit record and the events after it.
func lastCommit(evs []protocol.Event) (*protocol.CommitRecord, []protocol.Event) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == protocol.EventApplyCommit {
			return evs[i].Commit, evs[i+1:]
		}
	}
	return nil, nil
}

// finishCommitted rolls a committed apply forward: it performs the renames
// and removals that are not done yet (each is idempotent), fsyncs the parent
// directories, and appends whichever closing events are missing.
func (e *Engine) finishCommitted(t *transaction, recovered bool) error {
	commit, after := lastCommit(t.led.events)
	if commit == nil {
		return errors.New("no commit record")
	}
	has := func(typ, status string) bool {
		return slices.ContainsFunc(after, func(ev protocol.Event) bool { return ev.Type == typ && ev.Status == status })
	}
	if !has(protocol.EventApplyComplete, "") {
		if err := e.rollForward(t, commit); err != nil {
			return err
		}
	}
	ptr := t.meta.Pointers.Proposal
	var changes []protocol.FileChange
	for _, c := range ptr.Changes {
		changes = append(changes, protocol.FileChange{Path: c.Path, Kind: c.Kind})
	}
	// The closing events are appended in one write, so after a torn write
	// the ones present are a prefix of this list.
	tail := []protocol.Event{
		{Type: protocol.EventTurnItem, TurnID: ptr.ProposalTurnID, Item: &protocol.Item{ID: ptr.ProposalItemID, Type: protocol.ItemFileChange, Changes: changes, Metadata: protocol.ItemMetadata{Applied: true}}},
		{Type: protocol.EventApplyComplete, AppliedFiles: ptr.TargetFiles, Recovered: recovered},
		{Type: protocol.EventTxStatus, Status: protocol.StateApplied},
		{Type: protocol.EventTxStatus, Status: protocol.StateCompleted},
		{Type: protocol.EventTxClose, Reason: "completed"},
	}
	n := 0
	for n < len(tail) && n < len(after) && after[n].Type == tail[n].Type && after[n].Status == tail[n].Status {
		n++
	}
	if n < len(tail) {
		return e.appendWithMeta(t, tail[n:]...)
	}
	return e.writeMeta(t)
}

func (e *Engine) rollForward(t *transaction, commit *protocol.CommitRecord) error {
	var paths []string
	for i, op := range commit.Ops {
		switch op.Op {
		case protocol.OpWrite:
			ok, err := e.ws.Exists(op.Staged)
			if err != nil {
				return err
			}
			if ok {
				if err := e.ws.Rename(op.Staged, op.Path); err != nil {
					return err
				}
			} else {
				// Renamed before the crash: the target must hold the new bytes.
				sum, exists, err := e.ws.FileSHA256(op.Path)
				if err != nil {
					return err
				}
				if !exists || sum != op.SHA256 {
					return protocol.NewError(protocol.CodeLedgerCorrupt,
						map[string]any{"transactionId": t.id, "path": op.Path, "reason": "staged file missing and target does not hold the new content"},
						"cannot roll forward %s: staged file %s is gone and %s does not hold the committed content", t.id, op.Staged, op.Path)
				}
			}
		case protocol.OpDelete:
			if err := e.ws.Remove(op.Path); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown commit op %q", op.Op)
		}
		paths = append(paths, op.Path)
		if i < len(commit.Ops)-1 {
			if err := e.opts.Failpoints.Hit(context.Background(), fpBetweenRenames); err != nil {
				return err
			}
		}
	}
	if err := e.opts.Failpoints.Hit(context.Background(), fpBeforeDirFsync); err != nil {
		return err
	}
	// Sync every parent and ancestor: the renames and removals live in
	// the directories, and staging may have created some of them.
	return e.syncParents(paths)
}

// recover finishes what a crash interrupted: a committed apply is rolled
// forward; staged files of an apply that never committed are removed.
func (e *Engine) recover(ctx context.Context, t *transaction) error {
	if commit, after := lastCommit(t.led.events); commit != nil {
		if !slices.ContainsFunc(after, func(ev protocol.Event) bool { return ev.Type == protocol.EventTxClose }) {
			e.log.Info("rolling forward a committed apply", "transactionId", t.id)
			return e.finishCommitted(t, true)
		}
		return nil
	}
	if t.meta.State == protocol.StateProposed {
		// An apply may have staged files and died before its commit record;
		// nothing in the ledger says so, but the names are deterministic.
		e.unstage(t)
	}
	return ctx.Err()
}

// Respond records a decision on an approval request (approval/respond).
// Repeating the same decision is a no-op; a different one is refused.
func (e *Engine) Respond(ctx context.Context, p protocol.ApprovalRespondParams) (*protocol.ApprovalRespondResult, error) {
	if !approvals.ValidDecision(p.Decision) {
		return nil, invalidParams("decision", "unknown decision %q (want approve, approve_for_session or deny)", p.Decision)
	}
	t, err := e.locked(ctx, p.TransactionID)
	if err != nil {
		return nil, err
	}
	defer t.release()
	st := approvals.Fold(t.led.events)
	req, ok := st.Request(p.ApprovalRequestID)
	if !ok {
		return nil, protocol.NewError(protocol.CodeNotFound, map[string]any{"approvalRequestId": p.ApprovalRequestID, "transactionId": p.TransactionID},
			"transaction %s has no approval request %q", p.TransactionID, p.ApprovalRequestID)
	}
	if prev, ok := st.DecisionFor(req.ApprovalRequestID); ok {
		if prev.Decision != p.Decision {
			return nil, protocol.NewError(protocol.CodeAlreadyDecided, map[string]any{"approvalRequestId": req.ApprovalRequestID, "decision": prev.Decision},
				"approval request %s was already decided: %s", req.ApprovalRequestID, prev.Decision)
		}
		return &protocol.ApprovalRespondResult{TransactionID: t.id, Decision: prev, PendingApprovals: st.Pending()}, nil
	}
	switch t.meta.State {
	case protocol.StateProposed:
	default:
		return nil, protocol.NewError(protocol.CodeTransactionClosed, map[string]any{"transactionId": t.id, "state": t.meta.State},
			"transaction %s is %s; it takes no more decisions", t.id, t.meta.State)
	}
	d := protocol.ApprovalDecision{ApprovalRequestID: req.ApprovalRequestID, Kind: req.Kind, Fingerprint: req.Fingerprint, Decision: p.Decision, Source: "user"}
	if err := e.appendEvents(t, protocol.Event{Type: protocol.EventApprovalDecision, Decision: &d}); err != nil {
		return nil, err
	}
	e.reg.Observe(t.id, d, true)
	return &protocol.ApprovalRespondResult{TransactionID: t.id, Decision: d, PendingApprovals: approvals.Fold(t.led.events).Pending()}, nil
}

// CloseTx discards a transaction that will not be applied (tx/close). It is
// idempotent on a closed or completed transaction, and refused while an
// apply is past its commit point.
func (e *Engine) CloseTx(ctx context.Context, id string) (*protocol.TxStatusResult, error) {
	t, err := e.locked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer t.release()
	switch t.meta.State {
	case protocol.StateClosed, protocol.StateCompleted:
		return e.statusLocked(t), nil
	case protocol.StateApplying, protocol.StateApplied:
		return nil, protocol.NewError(protocol.CodeTransactionClosed, map[string]any{"transactionId": id, "state": t.meta.State},
			"transaction %s is being applied and cannot be discarded", id)
	}
	if err := e.appendWithMeta(t,
		protocol.Event{Type: protocol.EventTxStatus, Status: protocol.StateClosed},
		protocol.Event{Type: protocol.EventTxClose, Reason: "discarded"}); err != nil {
		return nil, err
	}
	return e.statusLocked(t), nil
}
