package tx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// Issue 7 §3, bounded resources: a ledger is open only during an append,
// only non-terminal transactions are held in memory, a data dir written
// before active/ existed is migrated, and Prune removes old terminal
// transactions only.

// openFDsUnder returns the targets of this process's open descriptors
// that lie in dir. It skips t where /proc/self/fd does not exist.
func openFDsUnder(t testing.TB, dir string) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors through /proc/self/fd")
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var out []string
	for _, ent := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", ent.Name()))
		if err != nil {
			continue // closed since ReadDir listed it (the directory's own fd)
		}
		if target == dir || strings.HasPrefix(target, dir+string(filepath.Separator)) {
			out = append(out, target)
		}
	}
	return out
}

// maxDataDirFDs is how many descriptors into its data dir an idle engine
// may hold: the data dir and kernel.lock (both locked, lock.go), and one
// spare for a descriptor another test's goroutine has not closed yet (the
// tests here do not run in parallel).
const maxDataDirFDs = 3

// loadedIDs returns the ids of the transactions the engine holds in memory.
func loadedIDs(e *Engine) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.txs))
}

// TestLedgerOpenOnlyDuringAppend proposes 200 transactions, completes 50
// and closes 50: the engine then holds no descriptor into its data dir
// but kernel.lock, and none after a restart either (issue 7: 200
// transactions held 209 descriptors, live and after a restart).
func TestLedgerOpenOnlyDuringAppend(t *testing.T) {
	f := newKVFixture(t, approvals.Never)
	ctx := context.Background()
	var proposed []string
	for i := range 200 {
		id := f.propose(fmt.Sprintf("k%d", i), "v")
		if i < 50 {
			f.apply(id) // applied at once, so the next is planned on the new revision
			continue
		}
		proposed = append(proposed, id)
	}
	for _, id := range proposed[:50] {
		if _, err := f.e.CloseTx(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string) {
		t.Helper()
		fds := openFDsUnder(t, f.data())
		if len(fds) > maxDataDirFDs {
			t.Fatalf("%s: %d descriptors into the data dir, want at most %d: %v", step, len(fds), maxDataDirFDs, fds)
		}
		if !slices.Contains(fds, filepath.Join(f.data(), lockFile)) {
			t.Fatalf("%s: kernel.lock is not held: %v", step, fds)
		}
		if n := len(loadedIDs(f.e)); n != 100 {
			t.Fatalf("%s: %d transactions in memory, want the 100 proposed", step, n)
		}
	}
	check("live")
	// Every transaction is readable, which reads ledgers from disk: still
	// no descriptor stays open.
	for _, row := range listAll(t, f.e, protocol.TxListParams{}) {
		if _, err := f.e.Events(ctx, row.TransactionID, 0); err != nil {
			t.Fatal(err)
		}
	}
	check("after reading every ledger")
	f.open("")
	check("reopened")
	if err := f.e.Close(); err != nil {
		t.Fatal(err)
	}
	if fds := openFDsUnder(t, f.data()); len(fds) != 0 {
		t.Fatalf("after Close: %v", fds)
	}
	f.e = nil
}

// TestTerminalNotHeldInMemory completes, closes and denies transactions:
// each leaves the engine's memory (and its active/ marker and blobs go)
// when it becomes terminal, yet tx/status, tx/events, tx/list,
// apply/execute and tx/close still answer for it from disk, before and
// after a restart; the non-terminal ones stay in memory.
func TestTerminalNotHeldInMemory(t *testing.T) {
	f := newKVFixture(t, approvals.Untrusted)
	ctx := context.Background()
	completed := f.propose("a", "1")
	f.decide(completed, protocol.DecisionApprove)
	if res := f.apply(completed); !res.OK {
		t.Fatalf("apply: %+v", res)
	}
	closed := f.propose("b", "2")
	if _, err := f.e.CloseTx(ctx, closed); err != nil {
		t.Fatal(err)
	}
	denied := f.propose("c", "3")
	f.decide(denied, protocol.DecisionDeny)
	waiting := f.propose("d", "4")
	f.apply(waiting)
	proposed := f.propose("e", "5")

	terminal := map[string]string{completed: protocol.StateCompleted, closed: protocol.StateClosed, denied: protocol.StateDenied}
	live := []string{waiting, proposed}
	slices.Sort(live)
	check := func(step string) {
		t.Helper()
		if got := loadedIDs(f.e); !slices.Equal(got, live) {
			t.Fatalf("%s: in memory %v, want only the non-terminal %v", step, got, live)
		}
		active, _ := readNames(filepath.Join(f.data(), ActiveDir), func(string) bool { return true })
		if !slices.Equal(active, live) {
			t.Fatalf("%s: active/ holds %v, want %v", step, active, live)
		}
		rows := map[string]protocol.TxSummary{}
		for _, r := range listAll(t, f.e, protocol.TxListParams{}) {
			rows[r.TransactionID] = r
		}
		if len(rows) != 5 {
			t.Fatalf("%s: tx/list shows %d transactions, want 5", step, len(rows))
		}
		for id, state := range terminal {
			st, err := f.e.Status(ctx, id)
			if err != nil || st.State != state || len(st.PendingApprovals) != 0 {
				t.Fatalf("%s: status of %s: %+v, %v; want %s", step, id, st, err, state)
			}
			ev, err := f.e.Events(ctx, id, 0)
			if err != nil || int64(len(ev.Events)) != st.LastSeq || ev.LastSeq != st.LastSeq {
				t.Fatalf("%s: events of %s: %+v, %v", step, id, ev, err)
			}
			last := ev.Events[len(ev.Events)-1]
			if last.Type != protocol.EventTxClose {
				t.Fatalf("%s: the last event of %s is %+v", step, id, last)
			}
			if after, err := f.e.Events(ctx, id, st.LastSeq-1); err != nil || len(after.Events) != 1 {
				t.Fatalf("%s: events of %s after seq %d: %+v, %v", step, id, st.LastSeq-1, after, err)
			}
			if r := rows[id]; r.State != state || r.UpdatedAt != st.UpdatedAt || r.Summary != st.Summary {
				t.Fatalf("%s: %s listed as %+v, status %+v", step, id, r, st)
			}
			if _, err := os.Stat(filepath.Join(f.txDir(id), BlobFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s: %s is %s and still has blobs (%v)", step, id, state, err)
			}
			if cs, err := f.e.CloseTx(ctx, id); err != nil || cs.State != state {
				t.Fatalf("%s: tx/close of %s %s: %+v, %v", step, state, id, cs, err)
			}
		}
		if res, err := f.e.Apply(ctx, completed); err != nil || !res.OK || !res.AlreadyApplied {
			t.Fatalf("%s: apply of the completed transaction: %+v, %v", step, res, err)
		}
		if _, err := f.e.Apply(ctx, closed); kindOf(err) != string(errs.Closed) {
			t.Fatalf("%s: apply of the closed transaction: %v", step, err)
		}
		if _, err := f.e.Apply(ctx, denied); deniedBy(err) != denied {
			t.Fatalf("%s: apply of the denied transaction: %v", step, err)
		}
		for _, id := range live {
			if _, err := os.Stat(filepath.Join(f.txDir(id), BlobFile)); err != nil {
				t.Fatalf("%s: the blobs of the proposed %s: %v", step, id, err)
			}
		}
		// Reading them from disk did not bring them back into memory.
		if got := loadedIDs(f.e); !slices.Equal(got, live) {
			t.Fatalf("%s: after reading, in memory %v, want %v", step, got, live)
		}
	}
	check("live")
	f.open("")
	check("reopened")
	if _, err := f.e.Status(ctx, "tx-"+strings.Repeat("0", 20)); kindOf(err) != string(errs.NotFound) {
		t.Fatalf("status of an unknown id: %v", err)
	}
	if _, err := f.e.Status(ctx, "tx-../../x"); kindOf(err) != string(errs.NotFound) {
		t.Fatalf("status of a path-like id: %v", err)
	}
}

// deniedBy returns the transaction whose deny decision err reports, or ""
// unless err is an errs.Denied error with DeniedData.
func deniedBy(err error) string {
	if k, d := kindData(err); k == string(errs.Denied) {
		if dd, ok := d.(DeniedData); ok {
			return dd.TransactionID
		}
	}
	return ""
}

// rewriteLedgerID gives transaction id the id legacy, as a release before
// time-ordered ids named it: the directory is renamed, every ledger line
// is re-encoded with the new transactionId, and transaction.json is
// removed (start-up rebuilds it from the ledger).
func rewriteLedgerID(t *testing.T, f *kvFixture, id, legacy string) {
	t.Helper()
	led, err := loadLedger(filepath.Join(f.txDir(id), LedgerFile), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, ev := range led.events {
		ev.TransactionID = legacy
		line, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, line...)
	}
	if err := os.WriteFile(filepath.Join(f.txDir(id), LedgerFile), out, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.txDir(id), MetaFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.txDir(id), f.txDir(legacy)); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the file src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(dst, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrateDataDirWithoutIndex builds the data dir of the previous
// release: no active/ and no denied/, blobs kept by every transaction, a
// deny that left its transaction proposed, and ids of 16 hex digits. The
// first start indexes it: the non-terminal transactions are marked and
// loaded, the terminal ones are not; the blobs of terminal transactions
// are deleted; the legacy deny becomes state denied and still sticks for
// the same patch in a new transaction, also after a second start; legacy
// ids list after every new one.
func TestMigrateDataDirWithoutIndex(t *testing.T) {
	f := newKVFixture(t, approvals.Untrusted)
	ctx := context.Background()
	blobs := t.TempDir()
	keepBlobs := func(id string) {
		copyFile(t, filepath.Join(f.txDir(id), BlobFile), filepath.Join(blobs, id))
	}
	completed := f.propose("a", "1")
	keepBlobs(completed)
	f.decide(completed, protocol.DecisionApprove)
	f.apply(completed)
	closed := f.propose("b", "2")
	keepBlobs(closed)
	if _, err := f.e.CloseTx(ctx, closed); err != nil {
		t.Fatal(err)
	}
	denied := f.propose("c", "3")
	keepBlobs(denied)
	f.decide(denied, protocol.DecisionDeny)
	deniedStatus, err := f.e.Status(ctx, denied)
	if err != nil {
		t.Fatal(err)
	}
	waiting := f.propose("d", "4")
	f.apply(waiting)
	proposed := f.propose("e", "5")
	f.close()

	// What the previous release left.
	data := f.data()
	for _, d := range []string{ActiveDir, DeniedDir} {
		if err := os.RemoveAll(filepath.Join(data, d)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{completed, closed, denied} {
		copyFile(t, filepath.Join(blobs, id), filepath.Join(f.txDir(id), BlobFile))
	}
	// A deny used to leave its transaction proposed: drop tx/status denied
	// and tx/close, appended with the decision.
	led, err := loadLedger(filepath.Join(f.txDir(denied), LedgerFile), denied, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := len(led.events)
	if led.events[n-2].Status != protocol.StateDenied || led.events[n-1].Type != protocol.EventTxClose ||
		led.events[n-3].Type != protocol.EventApprovalDecision {
		t.Fatalf("a deny's events: %+v", led.events[n-3:])
	}
	raw, _ := os.ReadFile(led.path)
	lines := strings.SplitAfter(string(raw), "\n")
	os.WriteFile(led.path, []byte(strings.Join(lines[:n-2], "")), 0o600)
	legacyCompleted, legacyWaiting := "tx-0123456789abcdef", "tx-fedcba9876543210"
	rewriteLedgerID(t, f, completed, legacyCompleted)
	rewriteLedgerID(t, f, waiting, legacyWaiting)

	f.open("")
	live := []string{legacyWaiting, proposed}
	slices.Sort(live)
	check := func(step string) {
		t.Helper()
		if got := loadedIDs(f.e); !slices.Equal(got, live) {
			t.Fatalf("%s: in memory %v, want the non-terminal %v", step, got, live)
		}
		active, err := readNames(filepath.Join(data, ActiveDir), func(string) bool { return true })
		if err != nil || !slices.Equal(active, live) {
			t.Fatalf("%s: active/ holds %v (%v), want %v", step, active, err, live)
		}
		if _, err := os.Stat(filepath.Join(data, ActiveDir+".tmp")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: active.tmp left behind (%v)", step, err)
		}
		for id, want := range map[string]string{legacyCompleted: protocol.StateCompleted, closed: protocol.StateClosed,
			denied: protocol.StateDenied, legacyWaiting: protocol.StateProposed, proposed: protocol.StateProposed} {
			st, err := f.e.Status(ctx, id)
			if err != nil || st.State != want {
				t.Fatalf("%s: %s: %+v, %v; want %s", step, id, st, err, want)
			}
			_, err = os.Stat(filepath.Join(f.txDir(id), BlobFile))
			if gone := errors.Is(err, fs.ErrNotExist); gone != protocol.Terminal(want) {
				t.Fatalf("%s: %s is %s; its blobs: %v", step, id, want, err)
			}
		}
		if st, _ := f.e.Status(ctx, legacyWaiting); len(st.PendingApprovals) != 1 {
			t.Fatalf("%s: the legacy waiting transaction lost its approval request: %+v", step, st)
		}
		if _, err := os.Stat(f.e.denialPath(deniedStatus.Pointers.Proposal.PatchFingerprint)); err != nil {
			t.Fatalf("%s: no denied/ record for the legacy deny: %v", step, err)
		}
		// The same patch in a new transaction: the deny sticks, and makes
		// the new transaction denied.
		again := f.propose("c", "3")
		_, err = f.e.Apply(ctx, again)
		if deniedBy(err) != denied {
			t.Fatalf("%s: apply of a denied patch: %v", step, err)
		}
		if st, err := f.e.Status(ctx, again); err != nil || st.State != protocol.StateDenied {
			t.Fatalf("%s: the new transaction with a denied patch: %+v, %v", step, st, err)
		}
		// Newest first: new ids by time, then the legacy ones.
		got := ids(listAll(t, f.e, protocol.TxListParams{Limit: 2}))
		if n := len(got); n < 5 || !slices.Contains(got[n-2:], legacyCompleted) || !slices.Contains(got[n-2:], legacyWaiting) ||
			got[0] != again {
			t.Fatalf("%s: listed %v", step, got)
		}
	}
	check("migrated")
	f.open("")
	check("reopened")
}

// TestPrune removes the terminal transactions that entered their state
// before the cutoff, and nothing else: not a non-terminal one, not a
// young terminal one, not one whose active/ marker is still there (a
// crash before its retirement finished), and not the denied/ records, so
// a deny still sticks after its transaction is pruned. It refuses to run
// while an engine holds the data dir.
func TestPrune(t *testing.T) {
	f := newKVFixture(t, approvals.Untrusted)
	ctx := context.Background()
	completed := f.propose("a", "1")
	f.decide(completed, protocol.DecisionApprove)
	f.apply(completed)
	closed := f.propose("b", "2")
	if _, err := f.e.CloseTx(ctx, closed); err != nil {
		t.Fatal(err)
	}
	denied := f.propose("c", "3")
	f.decide(denied, protocol.DecisionDeny)
	waiting := f.propose("d", "4")
	f.apply(waiting)
	// A transaction whose retirement failed before its active/ marker was
	// removed (as a crash there leaves it): terminal, but marked.
	unretired := f.propose("u", "1")
	f.open(fpRetireBeforeUnmark + "=error")
	if _, err := f.e.CloseTx(ctx, unretired); err == nil {
		t.Fatal("tx/close with a failing retirement succeeded")
	}
	f.open("")
	time.Sleep(5 * time.Millisecond)
	cutoff := time.Now()
	time.Sleep(5 * time.Millisecond)
	young := f.propose("y", "1")
	if _, err := f.e.CloseTx(ctx, young); err != nil {
		t.Fatal(err)
	}
	fingerprint := func(id string) string {
		st, err := f.e.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return st.Pointers.Proposal.PatchFingerprint
	}
	deniedRecord := f.e.denialPath(fingerprint(denied))

	if res, err := Prune(ctx, f.data(), cutoff); !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("prune while an engine runs: %+v, %v; want ErrDataDirLocked", res, err)
	}
	if _, err := f.e.Status(ctx, completed); err != nil {
		t.Fatalf("a refused prune removed something: %v", err)
	}
	f.close()
	// The start above retired it; put its marker back.
	if err := touch(filepath.Join(f.data(), ActiveDir, unretired)); err != nil {
		t.Fatal(err)
	}
	res, err := Prune(ctx, f.data(), cutoff)
	if err != nil {
		t.Fatal(err)
	}
	removed := slices.Sorted(slices.Values(res.Removed))
	want := []string{completed, closed, denied}
	slices.Sort(want)
	if !slices.Equal(removed, want) || res.KeptLive != 2 || res.KeptYoung != 1 {
		t.Fatalf("prune: %+v; want removed %v, 2 kept live (waiting, unretired), 1 young", res, want)
	}
	for _, id := range want {
		if _, err := os.Stat(f.txDir(id)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s not removed: %v", id, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(f.data(), TxDir)); len(ents) != 3 {
		t.Fatalf("transactions/ after prune: %v", ents)
	}
	if _, err := os.Stat(deniedRecord); err != nil {
		t.Fatalf("the denied/ record went with its transaction: %v", err)
	}
	if again, err := Prune(ctx, f.data(), cutoff); err != nil || len(again.Removed) != 0 {
		t.Fatalf("a second prune: %+v, %v", again, err)
	}

	f.open("")
	for id, want := range map[string]string{waiting: protocol.StateProposed, unretired: protocol.StateClosed, young: protocol.StateClosed} {
		if st, err := f.e.Status(ctx, id); err != nil || st.State != want {
			t.Fatalf("%s after prune: %+v, %v; want %s", id, st, err, want)
		}
	}
	if st, _ := f.e.Status(ctx, waiting); len(st.PendingApprovals) != 1 {
		t.Fatalf("the waiting transaction lost its request: %+v", st)
	}
	for _, id := range want {
		if _, err := f.e.Status(ctx, id); kindOf(err) != string(errs.NotFound) {
			t.Fatalf("status of pruned %s: %v", id, err)
		}
	}
	if got := ids(listAll(t, f.e, protocol.TxListParams{})); len(got) != 3 {
		t.Fatalf("tx/list after prune: %v", got)
	}
	// The deny sticks though its transaction is gone.
	again := f.propose("c", "3")
	_, err = f.e.Apply(ctx, again)
	if deniedBy(err) != denied {
		t.Fatalf("apply of a pruned denied patch: %v", err)
	}
	// Now retired, the unretired transaction is pruned like the others.
	f.close()
	res, err = Prune(ctx, f.data(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	removed = slices.Sorted(slices.Values(res.Removed))
	want = []string{unretired, young, again}
	slices.Sort(want)
	if !slices.Equal(removed, want) || res.KeptLive != 1 {
		t.Fatalf("the second prune: %+v, want removed %v and the waiting one kept", res, want)
	}
}
