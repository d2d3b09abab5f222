package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/workspace"
)

// TestStagedFileSwapped: a staged file replaced after the commit record
// (by other bytes, a symlink, a FIFO, or removed, or chmodded) is never
// what the roll-forward renames: it stages the approved content again from
// what the kernel kept (the blob of the content, or the diff applied to the
// base) and ends completed with the approved bytes and bits in every
// target, nothing half-applied, no staged file left, and the file a
// symlink pointed to untouched.
func TestStagedFileSwapped(t *testing.T) {
	swaps := map[string]func(t *testing.T, staged, evil string){
		"regular file": func(t *testing.T, staged, _ string) {
			must(t, os.Remove(staged))
			must(t, os.WriteFile(staged, []byte("NOT APPROVED\n"), 0o644))
		},
		"same size": func(t *testing.T, staged, _ string) {
			must(t, os.WriteFile(staged, []byte("Z\n"), 0o644)) // in place, same inode
		},
		"symlink": func(t *testing.T, staged, evil string) {
			must(t, os.Remove(staged))
			must(t, os.Symlink(evil, staged))
		},
		"fifo": func(t *testing.T, staged, _ string) {
			must(t, os.Remove(staged))
			must(t, syscall.Mkfifo(staged, 0o644))
		},
		"removed": func(t *testing.T, staged, _ string) { must(t, os.Remove(staged)) },
		"chmod":   func(t *testing.T, staged, _ string) { must(t, os.Chmod(staged, 0o666)) },
	}
	for _, kind := range []string{protocol.KindFiles, protocol.KindUnifiedDiff} {
		for _, fp := range []string{"apply.after-commit-record=error", "apply.between-renames=error"} {
			for name, swap := range swaps {
				t.Run(kind+"/"+fp+"/"+name, func(t *testing.T) {
					f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "evil.txt": "evil\n"})
					in := workspace.Input{Files: []protocol.FileInput{content("a.txt", "A\n"), content("b.txt", "B\n")}}
					if kind == protocol.KindUnifiedDiff {
						d := string(unidiffFor("a.txt", "a\n", "A\n")) + string(unidiffFor("b.txt", "b\n", "B\n"))
						in = workspace.Input{Diff: &d}
					}
					res, err := f.e.Propose(context.Background(), workspace.Proposal(kind, in))
					if err != nil {
						t.Fatal(err)
					}
					id := res.TransactionID
					f.open(fp)
					if _, err := f.e.Apply(context.Background(), id); err == nil {
						t.Fatal("apply with a failing failpoint succeeded")
					}
					// The last staged file is swapped: with the crash
					// between renames, a.txt is already in place.
					staged := filepath.Join(f.ws, sandbox.StagedName("b.txt", id))
					if _, err := os.Lstat(staged); err != nil {
						t.Fatalf("no staged file to swap: %v", err)
					}
					swap(t, staged, filepath.Join(f.ws, "evil.txt"))
					f.open("") // recovery rolls forward
					checkApproved(t, f, id)
				})
			}
		}
	}
}

// checkApproved: id completed with a.txt and b.txt at their approved
// content and mode, evil.txt untouched, and no staged file left.
func checkApproved(t *testing.T, f *fixture, id string) {
	t.Helper()
	st, err := f.e.Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != protocol.StateCompleted {
		t.Errorf("state %s, want completed", st.State)
	}
	for name, want := range map[string]string{"a.txt": "A\n", "b.txt": "B\n", "evil.txt": "evil\n"} {
		if got := f.read(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
		if p := f.perm(name); p != 0o644 {
			t.Errorf("%s has mode %o, want 644", name, p)
		}
	}
	for _, name := range []string{"a.txt", "b.txt"} {
		if _, err := os.Lstat(filepath.Join(f.ws, sandbox.StagedName(name, id))); !os.IsNotExist(err) {
			t.Errorf("staged file of %s left: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.txDir(id), tx.BlobFile)); !os.IsNotExist(err) {
		t.Errorf("blobs of a completed transaction left: %v", err)
	}
}

// TestStagedContentLost: a staged file damaged after the commit record
// whose content the kernel can no longer rebuild (a unified diff whose
// base was changed too) is refused with errs.LedgerCorrupt before any
// rename: the workspace is not half-applied, and the transaction stays
// applying; once the base is back, the next start-up finishes it.
func TestStagedContentLost(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "evil.txt": "evil\n"})
	d := string(unidiffFor("a.txt", "a\n", "A\n")) + string(unidiffFor("b.txt", "b\n", "B\n"))
	res, err := f.proposeDiff(d)
	if err != nil {
		t.Fatal(err)
	}
	id := res.TransactionID
	f.open("apply.after-commit-record=error")
	if _, err := f.e.Apply(context.Background(), id); err == nil {
		t.Fatal("apply with a failing failpoint succeeded")
	}
	// b.txt is the last op: its content is found lost before a.txt's
	// rename, not after it.
	must(t, os.Remove(filepath.Join(f.ws, sandbox.StagedName("b.txt", id))))
	must(t, os.WriteFile(filepath.Join(f.ws, "b.txt"), []byte("changed\n"), 0o644))
	f.open("")
	_, err = f.e.Apply(context.Background(), id)
	if k := kindOf(err); k != "ledger_corrupt" {
		t.Fatalf("apply = %v (kind %q), want ledger_corrupt", err, k)
	}
	if got := f.read("a.txt"); got != "a\n" {
		t.Errorf("a.txt = %q: half-applied", got)
	}
	must(t, os.WriteFile(filepath.Join(f.ws, "b.txt"), []byte("b\n"), 0o644))
	f.open("") // a transaction whose recovery failed is retried at start-up
	checkApproved(t, f, id)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
