package tx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

type fixture struct {
	t    *testing.T
	ws   string
	data string
	w    *sandbox.Workspace
	e    *Engine
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	f := &fixture{t: t, ws: t.TempDir(), data: t.TempDir()}
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

// open (re)opens the engine, as a restarted kernel would.
func (f *fixture) open(fps string) {
	f.t.Helper()
	if f.e != nil {
		f.e.Close()
	}
	set, err := failpoint.Parse(fps)
	if err != nil {
		f.t.Fatal(err)
	}
	e, err := Open(context.Background(), Options{Workspace: f.w, DataDir: f.data, Policy: approvals.Never, Failpoints: set})
	if err != nil {
		f.t.Fatal(err)
	}
	f.e = e
	f.t.Cleanup(func() { e.Close() })
}

func (f *fixture) propose(files ...protocol.FileInput) string {
	f.t.Helper()
	res, err := f.e.Propose(context.Background(), &protocol.ProposalInput{Kind: protocol.KindFiles, Files: files})
	if err != nil {
		f.t.Fatal(err)
	}
	return res.TransactionID
}

func (f *fixture) read(name string) string {
	b, err := os.ReadFile(filepath.Join(f.ws, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func content(path, s string) protocol.FileInput { return protocol.FileInput{Path: path, Content: &s} }

func codeOf(err error) int64 {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return 0
}

func TestEventLineRoundTrip(t *testing.T) {
	ev := protocol.Event{Seq: 1, TS: now(), Type: protocol.EventTxStatus, TransactionID: "tx-1", Status: protocol.StateProposed}
	line, err := encodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(line, []byte("\"}\n")) || !bytes.Contains(line, []byte(`"checksum":"blake3:`)) {
		t.Fatalf("line = %s", line)
	}
	got, err := decodeEvent(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil || got.Status != ev.Status || got.Seq != 1 {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	for i := 0; i < len(line)-1; i++ {
		bad := bytes.Clone(line[:len(line)-1])
		bad[i] ^= 0x01
		if _, err := decodeEvent(bad); err == nil {
			t.Fatalf("flipping byte %d of %s went unnoticed", i, line)
		}
	}
}

// TestTornTailEveryOffset truncates the ledger at every byte offset inside
// its last record: the transaction still loads with the earlier events, and
// the torn bytes are set aside, not lost.
func TestTornTailEveryOffset(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n"})
	id := f.propose(content("a.txt", "b\n"))
	f.e.Close()
	f.e = nil
	path := filepath.Join(f.data, "transactions", id, LedgerFile)
	orig, _ := os.ReadFile(path)
	lastStart := bytes.LastIndexByte(orig[:len(orig)-1], '\n') + 1
	for cut := lastStart + 1; cut < len(orig); cut++ {
		if err := os.WriteFile(path, orig[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		led, err := loadLedger(path, id, nil)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if n := len(led.events); n != 3 {
			t.Fatalf("cut at %d: %d events, want 3", cut, n)
		}
		led.close()
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
}

func TestCorruptMiddleLineRefused(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n"})
	id := f.propose(content("a.txt", "b\n"))
	other := f.propose(content("a.txt", "c\n"))
	f.e.Close()
	f.e = nil
	path := filepath.Join(f.data, "transactions", id, LedgerFile)
	data, _ := os.ReadFile(path)
	second := bytes.IndexByte(data, '\n') + 10
	data[second] ^= 0x20
	os.WriteFile(path, data, 0o600)
	f.open("")
	_, err := f.e.Status(context.Background(), id)
	if codeOf(err) != protocol.CodeLedgerCorrupt || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want ledger corrupt naming %s line 2", err, path)
	}
	if _, err := f.e.Status(context.Background(), other); err != nil {
		t.Fatalf("a healthy transaction must still load: %v", err)
	}
	list, _ := f.e.List(context.Background())
	if len(list.Transactions) != 2 {
		t.Fatalf("list = %+v", list)
	}
}

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
			before, _ := os.ReadFile(filepath.Join(f.data, "transactions", id, MetaFile))
			tc.break_(filepath.Join(f.data, "transactions", id, MetaFile))
			f.open("")
			after, _ := os.ReadFile(filepath.Join(f.data, "transactions", id, MetaFile))
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
// a crash; the crash itself is covered by the kill -9 sessions) and reopens.
func TestRecovery(t *testing.T) {
	for _, tc := range []struct {
		fp      string
		applied bool // rolled forward rather than undone
	}{
		{"apply.after-staging=error", false},
		{"apply.before-commit-record=error", false},
		{"apply.after-commit-record=error", true},
		{"apply.between-renames=error", true},
		{"apply.before-dir-fsync=error", true},
	} {
		t.Run(tc.fp, func(t *testing.T) {
			f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
			id := f.propose(content("a.txt", "A\n"), content("b.txt", "B\n"), protocol.FileInput{Path: "c.txt", Delete: true}, content("d/new.txt", "D\n"))
			f.open(tc.fp)
			if _, err := f.e.Apply(context.Background(), id); err == nil {
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
			entries, _ := filepath.Glob(filepath.Join(f.ws, "*", ".*.txk-*"))
			top, _ := filepath.Glob(filepath.Join(f.ws, ".*.txk-*"))
			if len(entries)+len(top) > 0 {
				t.Fatalf("staged files left: %v %v", entries, top)
			}
			if !tc.applied {
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
			case codeOf(err) == protocol.CodeStaleBase:
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

func TestStaleBase(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	id := f.propose(content("a.txt", "A\n"), content("b.txt", "B\n"), content("new.txt", "N\n"))
	os.WriteFile(filepath.Join(f.ws, "b.txt"), []byte("edited\n"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "new.txt"), []byte("exists\n"), 0o644)
	_, err := f.e.Apply(context.Background(), id)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeStaleBase {
		t.Fatalf("err = %v", err)
	}
	paths := pe.Data.(map[string]any)["stalePaths"].([]string)
	if strings.Join(paths, ",") != "b.txt,new.txt" {
		t.Fatalf("stalePaths = %v", paths)
	}
	if f.read("a.txt") != "a\n" {
		t.Fatal("a.txt was written despite a stale base")
	}
}

func TestSecondEngineRefused(t *testing.T) {
	f := newFixture(t, nil)
	_, err := Open(context.Background(), Options{Workspace: f.w, DataDir: f.data})
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("err = %v, want ErrDataDirLocked", err)
	}
}

func TestTmpProposalDirRemovedAtOpen(t *testing.T) {
	f := newFixture(t, nil)
	tmp := filepath.Join(f.data, "transactions", ".tmp-tx-0123456789abcdef")
	os.MkdirAll(tmp, 0o700)
	os.WriteFile(filepath.Join(tmp, LedgerFile), []byte("half"), 0o600)
	f.open("")
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("unfinished proposal dir survived: %v", err)
	}
}
