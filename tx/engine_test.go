package tx

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// The tests in package tx exercise the ledger and the engine's internals
// with the kv target of kvtarget_test.go; the tests that need workspace
// files run the engine with its real adapter in workspace
// (package workspace_test).

// kvFixture is an engine on a kv target under a temporary directory,
// reopened as a restarted kernel would be.
type kvFixture struct {
	t      *testing.T
	dir    string // holds data/ (the data dir) and kv/ (the kv target)
	policy approvals.Policy
	e      *Engine
	kv     *kvTarget
	// refuse and readOnly configure the next open: the kv target's
	// refusal of every commit (kvTarget.refuse) and Options.ReadOnly.
	refuse   error
	readOnly bool
}

// newKVFixture opens an engine on a fresh kv target with policy.
func newKVFixture(t *testing.T, policy approvals.Policy) *kvFixture {
	t.Helper()
	f := &kvFixture{t: t, dir: t.TempDir(), policy: policy}
	f.open("")
	return f
}

// data is the data dir.
func (f *kvFixture) data() string { return filepath.Join(f.dir, "data") }

// txDir is a transaction's directory.
func (f *kvFixture) txDir(id string) string { return filepath.Join(f.data(), TxDir, id) }

// open closes the engine if it is open and opens a new one on the same
// data dir and kv target, with the failpoints fps.
func (f *kvFixture) open(fps string) {
	f.t.Helper()
	f.close()
	set, err := failpoint.Parse(fps)
	if err != nil {
		f.t.Fatal(err)
	}
	f.kv = &kvTarget{dir: filepath.Join(f.dir, "kv"), fp: set, refuse: f.refuse}
	if err := os.MkdirAll(f.kv.dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	e, err := Open(context.Background(), Options{Targets: []Target{f.kv}, DataDir: f.data(), Policy: f.policy, Failpoints: set,
		Logger: slog.New(slog.DiscardHandler), ReadOnly: f.readOnly})
	if err != nil {
		f.t.Fatal(err)
	}
	f.e = e
	f.t.Cleanup(func() { e.Close() })
}

// close closes the engine, if open.
func (f *kvFixture) close() {
	if f.e != nil {
		f.e.Close()
		f.e = nil
	}
}

// propose proposes kvSet(pairs...) and returns the transaction id.
func (f *kvFixture) propose(pairs ...string) string {
	f.t.Helper()
	res, err := f.e.Propose(context.Background(), kvSet(pairs...))
	if err != nil {
		f.t.Fatal(err)
	}
	return res.TransactionID
}

// apply applies id, which must succeed (under policy never) or ask for
// approvals (under untrusted); it returns the result.
func (f *kvFixture) apply(id string) *protocol.ApplyResult {
	f.t.Helper()
	res, err := f.e.Apply(context.Background(), id)
	if err != nil {
		f.t.Fatalf("apply %s: %v", id, err)
	}
	return res
}

// decide asks for id's approval (policy untrusted) and answers it with
// decision. A deny makes id denied.
func (f *kvFixture) decide(id, decision string) {
	f.t.Helper()
	res := f.apply(id)
	if res.OK || len(res.PendingApprovals) != 1 {
		f.t.Fatalf("apply %s: %+v, want one pending approval", id, res)
	}
	if _, err := f.e.Respond(context.Background(), protocol.ApprovalRespondParams{TransactionID: id,
		ApprovalRequestID: res.PendingApprovals[0].ApprovalRequestID, Decision: decision}); err != nil {
		f.t.Fatalf("%s %s: %v", decision, id, err)
	}
}

func TestEventLineRoundTrip(t *testing.T) {
	ev := record.Event{Seq: 1, TS: now(), Type: protocol.EventTxStatus, TransactionID: "tx-1", Status: protocol.StateProposed}
	line, err := ev.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(line, []byte("\"}\n")) || !bytes.Contains(line, []byte(`"checksum":"blake3:`)) {
		t.Fatalf("line = %s", line)
	}
	got, err := record.DecodeEvent(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil || got.Status != ev.Status || got.Seq != 1 {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	for i := 0; i < len(line)-1; i++ {
		bad := bytes.Clone(line[:len(line)-1])
		bad[i] ^= 0x01
		if _, err := record.DecodeEvent(bad); err == nil {
			t.Fatalf("flipping byte %d of %s went unnoticed", i, line)
		}
	}
}

// TestTornTailEveryOffset truncates the ledger at every byte offset inside
// its last record: the transaction still loads with the earlier events, and
// the torn bytes are set aside, not lost.
func TestTornTailEveryOffset(t *testing.T) {
	f := newKVFixture(t, approvals.Never)
	id := f.propose("a", "b")
	f.close()
	path := filepath.Join(f.txDir(id), LedgerFile)
	orig, _ := os.ReadFile(path)
	lastStart := bytes.LastIndexByte(orig[:len(orig)-1], '\n') + 1
	whole := bytes.Count(orig[:lastStart], []byte("\n"))
	if whole < 3 {
		t.Fatalf("a proposal's ledger has %d lines before its last, want at least 3", whole)
	}
	for cut := lastStart + 1; cut < len(orig); cut++ {
		if err := os.WriteFile(path, orig[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		led, err := loadLedger(path, id, nil)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if n := len(led.events); n != whole {
			t.Fatalf("cut at %d: %d events, want %d", cut, n, whole)
		}
		now, _ := os.ReadFile(path)
		if !bytes.Equal(now, orig[:lastStart]) {
			t.Fatalf("cut at %d: ledger not truncated to the last whole line", cut)
		}
		aside, _ := filepath.Glob(path + ".torn-*")
		if len(aside) == 0 {
			t.Fatalf("cut at %d: torn bytes not set aside", cut)
		}
		b, _ := os.ReadFile(aside[len(aside)-1])
		if !bytes.Equal(b, orig[lastStart:cut]) {
			t.Fatalf("cut at %d: set-aside bytes %q, want %q", cut, b, orig[lastStart:cut])
		}
		for _, a := range aside {
			os.Remove(a)
		}
	}
	// The engine loads the torn transaction as the whole lines leave it.
	os.WriteFile(path, orig[:lastStart+1], 0o600)
	f.open("")
	st, err := f.e.Status(context.Background(), id)
	if err != nil || st.LastSeq != int64(whole) {
		t.Fatalf("status after a torn tail: %+v, %v", st, err)
	}
}

// TestCorruptMiddleLineRefused flips a bit in line 2 of a ledger: that
// transaction is refused with LedgerCorrupt naming the file and line, both
// when it is loaded at start (not terminal) and when it is read from disk
// on demand (terminal); every other transaction still works, and tx/list
// shows the refused one as unavailable.
func TestCorruptMiddleLineRefused(t *testing.T) {
	f := newKVFixture(t, approvals.Never)
	done := f.propose("z", "1")
	f.apply(done)
	id := f.propose("a", "b")
	other := f.propose("a", "c")
	f.close()
	flip := func(id string) string {
		path := filepath.Join(f.txDir(id), LedgerFile)
		data, _ := os.ReadFile(path)
		second := bytes.IndexByte(data, '\n') + 10
		data[second] ^= 0x20
		os.WriteFile(path, data, 0o600)
		return path
	}
	path, donePath := flip(id), flip(done)
	f.open("")
	ctx := context.Background()
	for id, path := range map[string]string{id: path, done: donePath} {
		_, err := f.e.Status(ctx, id)
		if kindOf(err) != "ledger_corrupt" || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want ledger corrupt naming %s line 2", err, path)
		}
		_, data := kindData(err)
		if d, ok := data.(CorruptData); !ok || d.Line != 2 || d.File != path || d.TransactionID != id {
			t.Fatalf("data = %#v", data)
		}
	}
	if _, err := f.e.Status(ctx, other); err != nil {
		t.Fatalf("a healthy transaction must still load: %v", err)
	}
	if _, err := f.e.Apply(ctx, id); kindOf(err) != "ledger_corrupt" {
		t.Fatalf("apply of a corrupt transaction: %v", err)
	}
	list, _ := f.e.List(ctx, protocol.TxListParams{})
	if len(list.Transactions) != 3 {
		t.Fatalf("list = %+v", list)
	}
	for _, row := range list.Transactions {
		if row.TransactionID == id && (row.State != "unavailable" || kindOf(row.LoadErr) != "ledger_corrupt") {
			t.Fatalf("corrupt transaction listed as %+v", row)
		}
	}
	if res, err := f.e.Apply(ctx, other); err != nil || !res.OK {
		t.Fatalf("apply of the healthy transaction: %+v, %v", res, err)
	}
}
