package tx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
)

// TestRenameLostAtTurnStart: turn/start answers before its rename into
// transactions/ is durable, so a power cut can leave an answered proposal
// under its .tmp- name. Start-up renames it into place again when it is
// whole, with any events appended after the answer, and removes it (and
// its marker) when it is not: a file it lists is missing, torn or
// changed, its turn is cut short, or it has no active/ marker.
func TestRenameLostAtTurnStart(t *testing.T) {
	cases := []struct {
		name string
		// after runs once the proposal exists, before the rename is undone.
		after func(f *kvFixture, id string)
		// cut damages the .tmp- directory.
		cut       func(t *testing.T, tmp, marker string)
		published bool
	}{
		{name: "whole", published: true},
		{name: "whole, with the approval request appended after the answer", published: true,
			after: func(f *kvFixture, id string) {
				if res := f.apply(id); res.OK || len(res.PendingApprovals) != 1 {
					f.t.Fatalf("apply: %+v", res)
				}
			}},
		{name: "no marker", cut: func(t *testing.T, _, marker string) { remove(t, marker) }},
		{name: "proposal.patch missing", cut: func(t *testing.T, tmp, _ string) { remove(t, filepath.Join(tmp, patchFile)) }},
		{name: "proposal.patch torn", cut: func(t *testing.T, tmp, _ string) { truncateHalf(t, filepath.Join(tmp, patchFile)) }},
		{name: "blobs torn", cut: func(t *testing.T, tmp, _ string) { truncateHalf(t, filepath.Join(tmp, BlobFile)) }},
		{name: "blobs changed", cut: func(t *testing.T, tmp, _ string) {
			p := filepath.Join(tmp, BlobFile)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-2] ^= 1
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "turn cut short", cut: func(t *testing.T, tmp, _ string) {
			// The ledger without its last line (the turn's tx/status).
			p := filepath.Join(tmp, LedgerFile)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			lines := 0
			for i := len(data) - 2; i >= 0; i-- {
				if data[i] == '\n' {
					lines = i + 1
					break
				}
			}
			if err := os.WriteFile(p, data[:lines], 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newKVFixture(t, approvals.Untrusted)
			id := f.propose("k", "v")
			if c.after != nil {
				c.after(f, id)
			}
			before, err := f.e.Events(context.Background(), id, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.close()
			tmp := filepath.Join(f.data(), TxDir, ".tmp-"+id)
			if err := os.Rename(f.txDir(id), tmp); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(f.data(), ActiveDir, id)
			if c.cut != nil {
				c.cut(t, tmp, marker)
			}
			f.open("")
			if exists(tmp) {
				t.Fatalf("%s is still there after start-up", tmp)
			}
			_, err = f.e.Status(context.Background(), id)
			if !c.published {
				if err == nil || exists(f.txDir(id)) || exists(marker) {
					t.Fatalf("a proposal that is not whole was published: status err %v, dir %v, marker %v", err, exists(f.txDir(id)), exists(marker))
				}
				return
			}
			if err != nil {
				t.Fatalf("the whole proposal was not published: %v", err)
			}
			after, err := f.e.Events(context.Background(), id, 0)
			if err != nil || len(after.Events) != len(before.Events) {
				t.Fatalf("events after start-up: %d (%v), want the %d answered before", len(after.Events), err, len(before.Events))
			}
			f.decide(id, protocol.DecisionApprove)
			if res := f.apply(id); !res.OK {
				t.Fatalf("apply after the approval: %+v", res)
			}
			if st, err := f.kv.load(); err != nil || st.Data["k"] != "v" {
				t.Fatalf("k = %q (%v) after the apply, want v", st.Data["k"], err)
			}
		})
	}
}

// TestRenameDurableWithNextAppend: the rename of a new proposal's
// directory waits for the transaction's next ledger append, which fsyncs
// transactions/ in its own round and then no more.
func TestRenameDurableWithNextAppend(t *testing.T) {
	f := newKVFixture(t, approvals.Untrusted)
	id := f.propose("k", "v")
	tr := f.e.txs[id]
	if tr.led.pendingDir != f.e.txRoot {
		t.Fatalf("after turn/start the ledger's pending directory is %q, want %q", tr.led.pendingDir, f.e.txRoot)
	}
	f.apply(id)
	if tr.led.pendingDir != "" {
		t.Fatalf("after the next append the ledger's pending directory is %q, want none", tr.led.pendingDir)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

func truncateHalf(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}
