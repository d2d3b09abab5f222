package tx

import (
	"context"
	"errors"
	"slices"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// Apply applies a proposed transaction all-or-nothing (apply/execute). In
// order it:
//  1. refuses a closed or denied transaction, every apply when the kernel
//     is read-only (CheckWritable, for every target), whatever its target
//     refuses outright (Planned.Admit: an expired validation), and any
//     denied fingerprint (deny sticks; the transaction then becomes
//     denied);
//  2. when approvals are pending, records automatic grants and requests
//     the missing approvals, and returns OK false with the pending ones;
//  3. takes the target's lock keys and re-checks the base (Planned.CheckBase);
//  4. has the target prepare (the workspace stages and fsyncs each file);
//  5. appends the automatic grants, apply/start and the commit record
//     apply/commit and fsyncs the ledger: the commit point, after which
//     cancellation is ignored and recovery rolls forward (an apply that
//     fails before it appends the grants alone);
//  6. has the target commit (the workspace renames, then fsyncs the
//     directories), then deletes the blobs, which a target may need until
//     then (the workspace stages a damaged staged file again from them); a
//     commit the target refuses (refusedCommit: nothing took effect) is
//     rolled back and the transaction closed with reason "failed", never
//     left applying;
//  7. appends the turn/item upsert, apply/complete, tx/status applied and
//     completed, and tx/close, and retires the transaction.
//
// A second call on a completed transaction returns OK with AlreadyApplied.
func (e *Engine) Apply(ctx context.Context, id string) (*protocol.ApplyResult, error) {
	t, err := e.locked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer t.release()
	ptr := t.meta.Pointers.Proposal
	pl := t.planned
	switch t.meta.State {
	case protocol.StateCompleted:
		return &protocol.ApplyResult{OK: true, TransactionID: id, State: t.meta.State, AppliedFiles: pl.Files(), AlreadyApplied: true}, nil
	case protocol.StateClosed:
		return nil, errs.New(errs.Closed, TxData{TransactionID: id, State: t.meta.State},
			"transaction %s is closed and can no longer be applied", id)
	case protocol.StateDenied:
		return nil, e.deniedError(t)
	case protocol.StateApplying, protocol.StateApplied:
		// An earlier apply passed its commit point and then failed: finish it.
		unlock, err := e.keys.lock(ctx, e.lockKeys(t))
		if err != nil {
			return nil, errs.Wrap(errs.Cancelled, err, nil, "")
		}
		defer unlock()
		if err := e.finishCommitted(ctx, t, false); err != nil {
			return e.committedButDegraded(t, unwrapRolledBack(err))
		}
		return &protocol.ApplyResult{OK: true, TransactionID: id, State: t.meta.State, AppliedFiles: pl.Files()}, nil
	}
	if err := e.CheckWritable(); err != nil {
		return nil, err
	}
	if err := pl.Admit(); err != nil {
		return nil, err
	}

	reqs := pl.Approvals()
	e.observeDenials(reqs)
	plan := approvals.Evaluate(id, t.approvalState(), reqs, e.policy(ptr.Kind), e.reg)
	if plan.Denied != nil {
		// Deny sticks: this transaction can never apply. Make that its
		// state, so its blobs go and tx/list says so.
		if err := e.deny(t); err != nil {
			return nil, err
		}
		return nil, deniedErr(*plan.Denied)
	}
	var evs []record.Event
	for i, req := range plan.Auto {
		evs = append(evs, record.Event{Type: protocol.EventApprovalDecision, Decision: &protocol.ApprovalDecision{
			ApprovalRequestID: newID("apr"), Kind: req.Kind, Fingerprint: req.Fingerprint,
			Decision: protocol.DecisionApprove, Source: plan.AutoSource[i]}})
	}
	pending := plan.Pending
	for _, req := range plan.ToRequest {
		ar := protocol.ApprovalRequest{ApprovalRequestID: newID("apr"), Kind: req.Kind, Fingerprint: req.Fingerprint, Reason: req.Reason}
		evs = append(evs, record.Event{Type: protocol.EventApprovalRequest, Approval: &ar})
		pending = append(pending, ar)
	}
	if len(pending) > 0 {
		if len(evs) > 0 {
			if err := e.appendEvents(t, evs...); err != nil {
				return nil, err
			}
		}
		return &protocol.ApplyResult{OK: false, TransactionID: id, State: t.meta.State, PendingApprovals: pending}, nil
	}
	// Nothing waits for a person, so the automatic grants (evs) are
	// appended with the commit record, in its fsync round, not in one of
	// their own (RELIABILITY.md §10): nothing acts on a grant before the
	// commit, and a crash before it leaves a transaction whose approvals
	// its next apply evaluates again (the policy grants them again; a
	// session's grant ends with its process, so a person is asked). An
	// apply that stops before its commit record appends them alone
	// (failed), so its ledger says what was granted.
	granted := evs
	failed := func(err error) (*protocol.ApplyResult, error) {
		if len(granted) > 0 {
			if aerr := e.appendEvents(t, granted...); aerr != nil {
				e.log.Warn("recording the grants of a failed apply", "transactionId", id, "err", aerr)
			}
		}
		return nil, err
	}

	// From the base check to the commit, no other transaction may change
	// what this one changes (see keyLocks).
	unlock, err := e.keys.lock(ctx, e.lockKeys(t))
	if err != nil {
		return failed(errs.Wrap(errs.Cancelled, err, nil, ""))
	}
	defer unlock()
	if err := pl.CheckBase(ctx); err != nil {
		return failed(err)
	}
	if err := ctx.Err(); err != nil {
		return failed(errs.Wrap(errs.Cancelled, err, nil, ""))
	}
	c := e.change(t)
	rec, err := pl.Prepare(ctx, c)
	if err == nil {
		err = checkCommitRecord(rec)
	}
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
		// not need apply/start to be durable before Prepare: every
		// uncommitted transaction is aborted at start-up.
		err = e.appendEvents(t, append(granted, record.Event{Type: protocol.EventApplyStart},
			record.Event{Type: protocol.EventApplyCommit, Commit: rec})...)
		if err != nil {
			granted = nil // the ledger refused them with the commit record
		}
	}
	if err != nil {
		if aerr := pl.Abort(context.Background(), c); aerr != nil {
			e.log.Warn("abort after a failed apply", "transactionId", id, "err", aerr)
		}
		if errors.Is(err, context.Canceled) {
			return failed(errs.Wrap(errs.Cancelled, err, nil, ""))
		}
		return failed(err)
	}
	if err := e.opts.Failpoints.Hit(context.Background(), fpAfterCommitRecord); err != nil {
		return nil, err
	}
	// The blobs outlive the commit point until Commit is done
	// (finishCommitted deletes them): a staged file found damaged or
	// replaced is staged again from them (RELIABILITY.md §13). A failure
	// after the target committed is answered as applied, with the ledger
	// degraded (committedButDegraded).
	if err := e.finishCommitted(context.Background(), t, false); err != nil {
		return e.committedButDegraded(t, unwrapRolledBack(err))
	}
	return &protocol.ApplyResult{OK: true, TransactionID: id, State: t.meta.State, AppliedFiles: pl.Files()}, nil
}

// degradedError is a failure of finishCommitted after its target
// committed: the change is in place, only the record of it (the ledger,
// transaction.json, retiring) failed.
type degradedError struct{ err error }

func (d *degradedError) Error() string { return d.err.Error() }
func (d *degradedError) Unwrap() error { return d.err }

// committedButDegraded answers an apply whose finishCommitted failed with
// err. When the target had committed (degradedError), the host is told
// the outcome, applied, with why the ledger lags (LedgerDegraded): an
// error would make it believe nothing happened, or retry an apply that
// is done. The transaction stays in memory in state applying; the next
// apply/execute or start-up rolls it forward and appends what is missing.
// Any other error (the target's commit failed) is returned as it is.
func (e *Engine) committedButDegraded(t *transaction, err error) (*protocol.ApplyResult, error) {
	var d *degradedError
	if !errors.As(err, &d) {
		return nil, err
	}
	e.log.Error("apply committed, but its ledger could not record it; it is finished at the next start", "transactionId", t.id, "err", d.err)
	return &protocol.ApplyResult{OK: true, TransactionID: t.id, State: protocol.StateApplied, AppliedFiles: t.planned.Files(),
		LedgerDegraded: &protocol.LedgerDegraded{Reason: d.err.Error()}}, nil
}

// change is t as its Planned sees it during an apply.
func (e *Engine) change(t *transaction) *Change {
	r := &blobReader{t: t}
	return &Change{TxID: t.id, blob: r.read}
}

// lockKeys are t's target's lock keys, prefixed with the target's name.
func (e *Engine) lockKeys(t *transaction) []string {
	keys := t.planned.LockKeys()
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = t.target.Name() + ":" + k
	}
	return out
}

func deniedErr(d approvals.Denial) error {
	return errs.New(errs.Denied,
		DeniedData{Fingerprint: d.Decision.Fingerprint, ApprovalRequestID: d.Decision.ApprovalRequestID, TransactionID: d.TransactionID},
		"approval %s was denied (transaction %s); a denied fingerprint is never retried", d.Decision.Fingerprint, d.TransactionID)
}

// deniedError explains why a denied transaction refuses to apply: its own
// deny decision, or the persisted one of another transaction.
func (e *Engine) deniedError(t *transaction) error {
	for _, d := range t.approvalState().Decisions {
		if d.Decision == protocol.DecisionDeny {
			return deniedErr(approvals.Denial{TransactionID: t.id, Decision: d})
		}
	}
	reqs := t.planned.Approvals()
	e.observeDenials(reqs)
	if plan := approvals.Evaluate(t.id, t.approvalState(), reqs, e.policy(t.meta.Pointers.Proposal.Kind), e.reg); plan.Denied != nil {
		return deniedErr(*plan.Denied)
	}
	return errs.New(errs.Denied, TxData{TransactionID: t.id, State: t.meta.State}, "transaction %s was denied", t.id)
}

// deny makes t terminal in state denied, then retires it. The caller holds
// t's lock.
func (e *Engine) deny(t *transaction, decision ...record.Event) error {
	evs := append(decision,
		record.Event{Type: protocol.EventTxStatus, Status: protocol.StateDenied},
		record.Event{Type: protocol.EventTxClose, Reason: protocol.StateDenied})
	if err := e.appendWithMeta(t, evs...); err != nil {
		return err
	}
	return e.retire(t)
}

// lastCommit returns the newest commit record and the events after it.
func lastCommit(evs []record.Event) (*record.Commit, []record.Event) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == protocol.EventApplyCommit {
			return evs[i].Commit, evs[i+1:]
		}
	}
	return nil, nil
}

// finishCommitted rolls a committed apply forward: it has the target commit
// (idempotent) unless apply/complete says it did, appends whichever closing
// events are missing, and retires the transaction.
func (e *Engine) finishCommitted(ctx context.Context, t *transaction, recovered bool) error {
	commit, after := lastCommit(t.led.events)
	if commit == nil {
		return errors.New("no commit record")
	}
	has := func(typ string) bool {
		return slices.ContainsFunc(after, func(ev record.Event) bool { return ev.Type == typ })
	}
	if !has(protocol.EventApplyComplete) {
		if err := t.planned.Commit(ctx, e.change(t), commit); err != nil {
			if refusedCommit(err) {
				return e.rollBack(t, err)
			}
			return err
		}
	}
	// The change is in place: what fails from here on is its record.
	if err := e.recordCommitted(t, recovered, after); err != nil {
		return &degradedError{err}
	}
	return nil
}

// recordCommitted is finishCommitted's record of a committed apply: the
// closing events that are missing, transaction.json, and retiring.
func (e *Engine) recordCommitted(t *transaction, recovered bool, after []record.Event) error {
	ptr := t.meta.Pointers.Proposal
	applied, err := appliedItem(t)
	if err != nil {
		return err
	}
	// The closing events are appended in one write, so after a torn write
	// the ones present are a prefix of this list.
	tail := []record.Event{
		{Type: protocol.EventTurnItem, TurnID: ptr.ProposalTurnID, Item: applied},
		{Type: protocol.EventApplyComplete, AppliedFiles: t.planned.Files(), Recovered: recovered},
		{Type: protocol.EventTxStatus, Status: protocol.StateApplied},
		{Type: protocol.EventTxStatus, Status: protocol.StateCompleted},
		{Type: protocol.EventTxClose, Reason: "completed"},
	}
	n := 0
	for n < len(tail) && n < len(after) && after[n].Type == tail[n].Type && after[n].Status == tail[n].Status {
		n++
	}
	// Commit is done: nothing needs the blobs any more. The closing
	// transaction.json replace below fsyncs this directory, which makes
	// the deletion durable without a fsync of its own.
	if err := e.dropBlobs(t, false); err != nil {
		return err
	}
	if err := e.opts.Failpoints.Hit(context.Background(), fpAfterBlobsDeleted); err != nil {
		return err
	}
	if n < len(tail) {
		err = e.appendWithMeta(t, tail[n:]...)
	} else {
		err = e.writeMeta(t)
	}
	if err != nil {
		return err
	}
	return e.retire(t)
}

// checkCommitRecord refuses a commit record that holds a secret: the
// ledger stores it redacted, so recovery would roll forward another record
// than the one Prepare made. Only a target's bug makes one (names and
// digests are what a record holds; content is in the blobs), and the apply
// stops before its commit point.
func checkCommitRecord(rec *record.Commit) error {
	if _, changed, err := rec.Redacted(); err != nil || changed {
		if err == nil {
			err = errors.New("the commit record holds a secret")
		}
		return errs.Wrap(errs.Internal, err, nil, "commit record: %v", err)
	}
	return nil
}

// refusedCommit reports whether err, from Planned.Commit, is the target
// refusing the commit because of what the transaction asks (its base moved
// at the last moment, a patch id already applied with another payload, a
// proposal decided meanwhile): the kinds of Target's contract for Commit,
// which a target returns only when nothing took effect. Any other error
// (I/O, a sandbox violation met mid-rename, an unavailable database) may
// leave the commit half done, so the apply stays committed and is rolled
// forward later.
func refusedCommit(err error) bool {
	for _, k := range []errs.Kind{errs.Stale, errs.IdempotencyConflict, errs.Conflict, errs.Validation, errs.Invalid, errs.Closed, errs.PermissionDenied} {
		if errs.KindIs(err, k) {
			return true
		}
	}
	return false
}

// rolledBack is the error of an apply whose target refused its commit
// after the commit record: the transaction was closed (tx/close reason
// "failed") and nothing took effect. It unwraps to the target's error,
// whose kind the caller gets.
type rolledBack struct{ err error }

func (r *rolledBack) Error() string { return r.err.Error() }
func (r *rolledBack) Unwrap() error { return r.err }

// rollBack ends a committed apply whose target refused the commit
// (refusedCommit): it appends tx/status closed and tx/close with reason
// "failed" (so deriveState no longer sees an apply in flight, and recovery
// never tries the commit again), then aborts what Prepare left and retires
// the transaction. The close comes first: a crash before it is durable
// leaves the commit record alone, and recovery's Commit, which still finds
// what Prepare staged, refuses again and ends here; a crash after it
// leaves at most what Prepare staged, which recovery aborts
// (abortFailed). It returns cause wrapped in *rolledBack, or the error
// that kept the transaction from closing.
func (e *Engine) rollBack(t *transaction, cause error) error {
	e.log.Warn("the target refused a committed apply; rolled back and closed", "transactionId", t.id, "err", cause)
	if err := e.appendWithMeta(t,
		record.Event{Type: protocol.EventTxStatus, Status: protocol.StateClosed},
		record.Event{Type: protocol.EventTxClose, Reason: CloseFailed}); err != nil {
		return err
	}
	e.abortFailed(t)
	if err := e.retire(t); err != nil {
		return err
	}
	return &rolledBack{err: cause}
}

// abortFailed has the target drop what Prepare left of t, whose commit it
// refused; Abort is idempotent, and a failure only leaves garbage the
// next start-up tries again, so it is logged, not returned.
func (e *Engine) abortFailed(t *transaction) {
	if err := t.planned.Abort(context.Background(), e.change(t)); err != nil {
		e.log.Warn("abort after a refused commit", "transactionId", t.id, "err", err)
	}
}

// unwrapRolledBack is the target's own error of a rolled-back apply (the
// caller gets its kind and data), or err.
func unwrapRolledBack(err error) error {
	if rb := (*rolledBack)(nil); errors.As(err, &rb) {
		return rb.err
	}
	return err
}

// CloseFailed is tx/close's reason for a transaction whose target refused
// its commit after the commit record (PROTOCOL.md §5): nothing took
// effect, and the transaction is closed.
const CloseFailed = "failed"

// appliedItem is the upsert of t's proposal item that an apply appends:
// the fileChange item turn/start recorded (pointers.proposal names it),
// read back from the ledger with metadata.applied set, so that it keeps
// every change the proposal listed, whatever the target. A ledger without
// that item is corrupt.
func appliedItem(t *transaction) (*protocol.Item, error) {
	ptr := t.meta.Pointers.Proposal
	for _, ev := range t.led.events {
		if ev.Type == protocol.EventTurnItem && ev.Item != nil && ev.Item.ID == ptr.ProposalItemID && ev.Item.Type == protocol.ItemFileChange {
			item := *ev.Item
			item.Changes = slices.Clone(item.Changes)
			item.Metadata.Applied = true
			return &item, nil
		}
	}
	return nil, corrupt(CorruptData{TransactionID: t.id, File: t.led.path, Reason: "no fileChange item " + ptr.ProposalItemID},
		"transaction %s: its ledger has no fileChange item %s to mark applied", t.id, ptr.ProposalItemID)
}

// recover finishes what a crash interrupted: a committed apply is rolled
// forward; what Prepare left of an apply that never committed is aborted;
// a deny recorded by an earlier release without its state is completed;
// a terminal transaction that was not retired yet is retired. rolled
// reports a roll-forward (for start-up's recovery line).
func (e *Engine) recover(ctx context.Context, t *transaction) (rolled bool, removed int64, err error) {
	if commit, after := lastCommit(t.led.events); commit != nil {
		if !slices.ContainsFunc(after, func(ev record.Event) bool { return ev.Type == protocol.EventTxClose }) {
			e.log.Info("rolling forward a committed apply", "transactionId", t.id)
			err := e.finishCommitted(ctx, t, true)
			if rb := (*rolledBack)(nil); errors.As(err, &rb) {
				// The target refused what the caller asked: the transaction
				// is closed, not unavailable.
				return false, 0, nil
			}
			return true, 0, err
		}
	}
	if protocol.Terminal(t.meta.State) {
		if last := t.led.events[len(t.led.events)-1]; last.Type == protocol.EventTxClose && last.Reason == CloseFailed {
			// Closed after a refused commit, maybe without its abort.
			e.abortFailed(t)
		}
		return false, 0, e.retire(t)
	}
	if t.meta.State == protocol.StateProposed {
		// An apply may have prepared and died before its commit record;
		// nothing in the ledger says so, and Abort is idempotent.
		c := e.change(t)
		if err := t.planned.Abort(ctx, c); err != nil {
			return false, c.removed.Load(), err
		}
		removed = c.removed.Load()
		for _, d := range t.approvalState().Decisions {
			if d.Decision == protocol.DecisionDeny {
				return false, removed, e.deny(t)
			}
		}
	}
	return false, removed, ctx.Err()
}

// Respond records a decision on an approval request (approval/respond).
// Repeating the same decision is a no-op; a different one is refused. A
// deny is final: the transaction becomes denied and is retired.
func (e *Engine) Respond(ctx context.Context, p protocol.ApprovalRespondParams) (*protocol.ApprovalRespondResult, error) {
	if !approvals.ValidDecision(p.Decision) {
		return nil, errs.InvalidField("decision", "unknown decision %q (want approve, approve_for_session or deny)", p.Decision)
	}
	t, err := e.locked(ctx, p.TransactionID)
	if err != nil {
		return nil, err
	}
	defer t.release()
	st := t.approvalState()
	req, ok := st.Request(p.ApprovalRequestID)
	if !ok {
		return nil, errs.New(errs.NotFound, ApprovalData{ApprovalRequestID: p.ApprovalRequestID, TransactionID: p.TransactionID},
			"transaction %s has no approval request %q", p.TransactionID, p.ApprovalRequestID)
	}
	if prev, ok := st.DecisionFor(req.ApprovalRequestID); ok {
		if prev.Decision != p.Decision {
			return nil, errs.New(errs.AlreadyDecided, ApprovalData{ApprovalRequestID: req.ApprovalRequestID, Decision: prev.Decision},
				"approval request %s was already decided: %s", req.ApprovalRequestID, prev.Decision)
		}
		return &protocol.ApprovalRespondResult{TransactionID: t.id, Decision: prev, PendingApprovals: t.pending()}, nil
	}
	if t.meta.State != protocol.StateProposed {
		return nil, errs.New(errs.Closed, TxData{TransactionID: t.id, State: t.meta.State},
			"transaction %s is %s; it takes no more decisions", t.id, t.meta.State)
	}
	d := protocol.ApprovalDecision{ApprovalRequestID: req.ApprovalRequestID, Kind: req.Kind, Fingerprint: req.Fingerprint, Decision: p.Decision, Source: decisionSource(ctx)}
	ev := record.Event{Type: protocol.EventApprovalDecision, Decision: &d}
	if p.Decision == protocol.DecisionDeny {
		err = e.deny(t, ev)
	} else {
		err = e.appendEvents(t, ev)
	}
	if err != nil {
		return nil, err
	}
	e.reg.Observe(t.id, d, true)
	return &protocol.ApprovalRespondResult{TransactionID: t.id, Decision: d, PendingApprovals: t.pending()}, nil
}

// CloseTx discards a transaction that will not be applied (tx/close). It is
// idempotent on a terminal transaction, and refused while an apply is past
// its commit point. Its blobs are deleted.
func (e *Engine) CloseTx(ctx context.Context, id string) (*protocol.TxStatusResult, error) {
	t, err := e.locked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer t.release()
	switch t.meta.State {
	case protocol.StateClosed, protocol.StateCompleted, protocol.StateDenied:
		return e.statusLocked(t), nil
	case protocol.StateApplying, protocol.StateApplied:
		return nil, errs.New(errs.Closed, TxData{TransactionID: id, State: t.meta.State},
			"transaction %s is being applied and cannot be discarded", id)
	}
	if err := e.appendWithMeta(t,
		record.Event{Type: protocol.EventTxStatus, Status: protocol.StateClosed},
		record.Event{Type: protocol.EventTxClose, Reason: "discarded"}); err != nil {
		return nil, err
	}
	if err := e.retire(t); err != nil {
		return nil, err
	}
	return e.statusLocked(t), nil
}

// decisionSource is the source a person's decision is recorded with: the
// session's (the MCP facade's "elicitation"), "user" by default.
func decisionSource(ctx context.Context) string {
	if src := protocol.SessionOf(ctx).DecisionSource; src != "" {
		return src
	}
	return protocol.SourceUser
}
