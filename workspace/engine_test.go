package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/unidiff"
	"github.com/txkernel/txkernel/workspace"
)

// The tests here run the engine with its real workspace adapter, through
// exported APIs only: what a kernel does with files.

// fixture is a workspace and a data dir with an engine on them.
type fixture struct {
	t      *testing.T
	ws     string
	data   string
	w      *sandbox.Workspace
	e      *tx.Engine
	policy approvals.Policy
}

// newFixture writes files into a new workspace and opens an engine on it
// with policy never (the patchset approval is granted automatically).
func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	f := &fixture{t: t, ws: t.TempDir(), data: t.TempDir(), policy: approvals.Never}
	for name, content := range files {
		p := filepath.Join(f.ws, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := sandbox.Open(f.ws, sandbox.WorkspaceWrite)
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	t.Cleanup(func() { w.Close() })
	f.open("")
	return f
}

// options are the engine options of f with the failpoints fps.
func (f *fixture) options(fps *failpoint.Set) tx.Options {
	log := slog.New(slog.DiscardHandler)
	return tx.Options{Targets: []tx.Target{workspace.New(f.w, fps, log, workspace.WithPolicy(f.policy))}, DataDir: f.data, Failpoints: fps, Logger: log}
}

// open (re)opens the engine, as a restarted kernel would, with the
// failpoints fps (internal/failpoint syntax).
func (f *fixture) open(fps string) {
	f.t.Helper()
	if f.e != nil {
		f.e.Close()
		f.e = nil
	}
	set, err := failpoint.Parse(fps)
	if err != nil {
		f.t.Fatal(err)
	}
	e, err := tx.Open(context.Background(), f.options(set))
	if err != nil {
		f.t.Fatal(err)
	}
	f.e = e
	f.t.Cleanup(func() { e.Close() })
}

// propose proposes a files proposal and returns the transaction id.
func (f *fixture) propose(files ...protocol.FileInput) string {
	f.t.Helper()
	res, err := f.e.Propose(context.Background(), workspace.Proposal(protocol.KindFiles, workspace.Input{Files: files}))
	if err != nil {
		f.t.Fatal(err)
	}
	return res.TransactionID
}

// read returns a workspace file's content, or "<error>".
func (f *fixture) read(name string) string {
	b, err := os.ReadFile(filepath.Join(f.ws, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// txDir is a transaction's directory in the data dir.
func (f *fixture) txDir(id string) string { return filepath.Join(f.data, tx.TxDir, id) }

// content is a files-proposal entry that writes s to path.
func content(path, s string) protocol.FileInput { return protocol.FileInput{Path: path, Content: &s} }

// kindOf returns err's errs.Kind, "" for nil.
func kindOf(err error) errs.Kind {
	if err == nil {
		return ""
	}
	k, _ := errs.KindOf(err)
	return k
}

// TestMetaRebuiltFromLedger: a missing, empty or garbled transaction.json
// is rebuilt from the ledger at start, byte-identical, and the
// transaction then applies.
func TestMetaRebuiltFromLedger(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(path string)
	}{
		{"missing", func(p string) { os.Remove(p) }},
		{"empty", func(p string) { os.WriteFile(p, nil, 0o600) }},
		{"garbled", func(p string) { os.WriteFile(p, []byte("{\"schema_version\":"), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"a.txt": "a\n"})
			id := f.propose(content("a.txt", "b\n"))
			meta := filepath.Join(f.txDir(id), tx.MetaFile)
			before, _ := os.ReadFile(meta)
			tc.break_(meta)
			f.open("")
			after, _ := os.ReadFile(meta)
			if !bytes.Equal(before, after) {
				t.Fatalf("rebuilt transaction.json differs:\n%s\nwant\n%s", after, before)
			}
			if _, err := f.e.Apply(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if got := f.read("a.txt"); got != "b\n" {
				t.Fatalf("a.txt = %q", got)
			}
		})
	}
}

// TestRecovery fails the apply at each step (the error action stands in for
// a crash; the crash itself is covered by the kill -9 sessions) and reopens:
// before the commit record the apply is undone, after it rolled forward;
// no staged file is left, and a completed transaction has no blobs and no
// active/ marker.
func TestRecovery(t *testing.T) {
	for _, tc := range []struct {
		fp      string
		applied bool // rolled forward rather than undone
		// degraded: the failure comes after the workspace committed, so
		// the apply answers ok with ledgerDegraded instead of an error.
		degraded bool
	}{
		{"apply.after-staging=error", false, false},
		{"apply.before-commit-record=error", false, false},
		{"apply.after-commit-record=error", true, false},
		{"apply.after-blobs-deleted=error", true, true},
		{"apply.between-renames=error", true, false},
		{"apply.before-dir-fsync=error", true, false},
	} {
		t.Run(tc.fp, func(t *testing.T) {
			f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
			id := f.propose(content("a.txt", "A\n"), content("b.txt", "B\n"), protocol.FileInput{Path: "c.txt", Delete: true}, content("d/new.txt", "D\n"))
			f.open(tc.fp)
			res, err := f.e.Apply(context.Background(), id)
			switch {
			case tc.degraded && (err != nil || !res.OK || res.LedgerDegraded == nil):
				t.Fatalf("apply failing after the commit = %+v, %v; want ok with ledgerDegraded", res, err)
			case !tc.degraded && err == nil:
				t.Fatal("apply with a failing failpoint succeeded")
			}
			f.open("")
			st, err := f.e.Status(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
			wantState := protocol.StateProposed
			if tc.applied {
				want = map[string]string{"a.txt": "A\n", "b.txt": "B\n", "d/new.txt": "D\n"}
				wantState = protocol.StateCompleted
			}
			if st.State != wantState {
				t.Fatalf("state %s, want %s", st.State, wantState)
			}
			for name, c := range want {
				if got := f.read(name); got != c {
					t.Errorf("%s = %q, want %q", name, got, c)
				}
			}
			if tc.applied {
				if got := f.read("c.txt"); !strings.Contains(got, "no such file") {
					t.Errorf("c.txt = %q, want it deleted", got)
				}
			}
			entries, _ := filepath.Glob(filepath.Join(f.ws, "*", ".*.txk-*"))
			top, _ := filepath.Glob(filepath.Join(f.ws, ".*.txk-*"))
			if len(entries)+len(top) > 0 {
				t.Fatalf("staged files left: %v %v", entries, top)
			}
			_, blobErr := os.Stat(filepath.Join(f.txDir(id), tx.BlobFile))
			_, markErr := os.Stat(filepath.Join(f.data, tx.ActiveDir, id))
			if tc.applied && (!errors.Is(blobErr, fs.ErrNotExist) || !errors.Is(markErr, fs.ErrNotExist)) {
				t.Fatalf("completed, yet blobs (%v) or marker (%v) remain", blobErr, markErr)
			}
			if !tc.applied {
				if blobErr != nil || markErr != nil {
					t.Fatalf("proposed, yet blobs (%v) or marker (%v) are gone", blobErr, markErr)
				}
				if _, err := f.e.Apply(context.Background(), id); err != nil {
					t.Fatalf("apply after an undone attempt: %v", err)
				}
				if got := f.read("a.txt"); got != "A\n" {
					t.Fatalf("a.txt = %q after the second apply", got)
				}
			}
		})
	}
}

func TestConcurrentApplyOneTransaction(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n"})
	id := f.propose(content("a.txt", "b\n"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied, already := 0, 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.e.Apply(context.Background(), id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case res.AlreadyApplied:
				already++
			case res.OK:
				applied++
			}
		}()
	}
	wg.Wait()
	if applied != 1 || already != 63 {
		t.Fatalf("applied %d, already %d; want 1 and 63", applied, already)
	}
	ev, _ := f.e.Events(context.Background(), id, 0)
	commits := 0
	for _, e := range ev.Events {
		if e.Type == protocol.EventApplyCommit {
			commits++
		}
	}
	if commits != 1 {
		t.Fatalf("%d commit records, want 1", commits)
	}
}

// TestConcurrentApplySameFileAcrossTransactions: 64 transactions proposed
// against the same base of one file, applied at once. Exactly one may
// apply; every other one must see the stale base, not overwrite the
// winner (a lost update).
func TestConcurrentApplySameFileAcrossTransactions(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n"})
	const n = 64
	ids := make([]string, n)
	for i := range n {
		ids[i] = f.propose(content("a.txt", fmt.Sprintf("v%d\n", i)))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	winner, stale := -1, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.e.Apply(context.Background(), ids[i])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case kindOf(err) == errs.Stale:
				stale++
			case err != nil:
				t.Error(err)
			case res.OK:
				if winner >= 0 {
					t.Errorf("both %d and %d applied", winner, i)
				}
				winner = i
			}
		}()
	}
	wg.Wait()
	if winner < 0 || stale != n-1 {
		t.Fatalf("winner %d, %d stale; want one winner and %d stale", winner, stale, n-1)
	}
	if got, want := f.read("a.txt"), fmt.Sprintf("v%d\n", winner); got != want {
		t.Fatalf("a.txt = %q, want the winner's %q", got, want)
	}
}

// TestStaleBase: every stale file is reported at once, with how it is
// stale and both sha256s, and nothing is written.
func TestStaleBase(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	id := f.propose(content("a.txt", "A\n"), content("b.txt", "B\n"), content("new.txt", "N\n"))
	os.WriteFile(filepath.Join(f.ws, "b.txt"), []byte("edited\n"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "new.txt"), []byte("exists\n"), 0o644)
	_, err := f.e.Apply(context.Background(), id)
	var de *errs.Error
	if !errors.As(err, &de) || de.Kind != errs.Stale {
		t.Fatalf("err = %v", err)
	}
	d, ok := de.Data.(workspace.StaleData)
	if !ok {
		t.Fatalf("data = %#v", de.Data)
	}
	if strings.Join(d.StalePaths, ",") != "b.txt,new.txt" {
		t.Fatalf("stalePaths = %v", d.StalePaths)
	}
	if len(d.Stale) != 2 || d.Stale[0].Reason != "changed" || d.Stale[0].Expected == "" || d.Stale[0].Actual == "" ||
		d.Stale[0].Expected == d.Stale[0].Actual || d.Stale[1].Reason != "exists" || d.Stale[1].Actual == "" {
		t.Fatalf("stale = %+v", d.Stale)
	}
	if f.read("a.txt") != "a\n" {
		t.Fatal("a.txt was written despite a stale base")
	}
	if st, err := f.e.Status(context.Background(), id); err != nil || st.State != protocol.StateProposed {
		t.Fatalf("after a stale apply: %+v, %v", st, err)
	}
}

func TestSecondEngineRefused(t *testing.T) {
	f := newFixture(t, nil)
	_, err := tx.Open(context.Background(), f.options(nil))
	if !errors.Is(err, tx.ErrDataDirLocked) {
		t.Fatalf("err = %v, want ErrDataDirLocked", err)
	}
}

func TestTmpProposalDirRemovedAtOpen(t *testing.T) {
	f := newFixture(t, nil)
	tmp := filepath.Join(f.data, tx.TxDir, ".tmp-tx-0123456789abcdef")
	os.MkdirAll(tmp, 0o700)
	os.WriteFile(filepath.Join(tmp, tx.LedgerFile), []byte("half"), 0o600)
	f.open("")
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("unfinished proposal dir survived: %v", err)
	}
}

// TestDiffKeptNotContents: a unified_diff proposal keeps the diff in its
// blob file, not the files it writes, and its apply derives them again:
// after a restart, and after an apply undone at a failpoint, the
// workspace ends byte-exact (a modify deep in a large file, an add in a
// new directory, a delete, a rename).
func TestDiffKeptNotContents(t *testing.T) {
	big := strings.Repeat("unchanged line of a large file\n", 4000)
	files := map[string]string{"big.txt": big + "old tail\n", "gone.txt": "bye\n", "from.txt": "moved\n"}
	var diff strings.Builder
	diff.WriteString(string(unidiffFor("big.txt", big+"old tail\n", big+"new tail\n")))
	diff.WriteString("diff --git a/d/new.txt b/d/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/d/new.txt\n@@ -0,0 +1 @@\n+new\n")
	diff.WriteString("diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n")
	diff.WriteString("diff --git a/from.txt b/to.txt\nsimilarity index 100%\nrename from from.txt\nrename to to.txt\n")
	d := diff.String()
	for _, fp := range []string{"", "apply.after-staging=error", "apply.before-commit-record=error"} {
		t.Run("failpoint="+fp, func(t *testing.T) {
			f := newFixture(t, files)
			res, err := f.e.Propose(context.Background(), workspace.Proposal(protocol.KindUnifiedDiff, workspace.Input{Diff: &d}))
			if err != nil {
				t.Fatal(err)
			}
			id := res.TransactionID
			blobs, err := os.ReadFile(filepath.Join(f.txDir(id), tx.BlobFile))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(blobs, []byte(d)) || len(blobs) > len(d)+200 {
				t.Fatalf("the blob file (%d bytes) is not the diff (%d bytes)", len(blobs), len(d))
			}
			if fp != "" {
				f.open(fp)
				if _, err := f.e.Apply(context.Background(), id); err == nil {
					t.Fatal("apply with a failing failpoint succeeded")
				}
			}
			f.open("") // a restart: the contents come from the diff again
			if _, err := f.e.Apply(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"big.txt": big + "new tail\n", "d/new.txt": "new\n", "to.txt": "moved\n"}
			for name, c := range want {
				if got := f.read(name); got != c {
					t.Errorf("%s: %d bytes, want %d", name, len(got), len(c))
				}
			}
			for _, gone := range []string{"gone.txt", "from.txt"} {
				if got := f.read(gone); !strings.Contains(got, "no such file") {
					t.Errorf("%s = %q, want it deleted", gone, got)
				}
			}
		})
	}
}

// unidiffFor is the canonical diff that turns old into new at path.
func unidiffFor(path, old, new string) []byte {
	return unidiff.FileDiff(path, path, []byte(old), []byte(new), true, true, 0o644, 0o644)
}
