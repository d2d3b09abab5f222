package scalefixture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/tx/record"
	"github.com/txkernel/txkernel/workspace"
)

// historyVersion names the layout BuildHistory writes. A cached history
// (CachedHistory) of another version is never reused; bump it whenever
// BuildHistory or the engine's data dir format changes.
const historyVersion = 1

// History is a workspace and a data dir holding Total transactions, Live of
// them not terminal (proposed, each waiting for its patchset approval) and
// the rest terminal (half completed, half closed): the data dir of a
// kernel that has lived long, for the bounded-resources benchmarks
// (RELIABILITY.md, "Bounded resources").
//
// Building 100,000 transactions through the engine would take most of an
// hour of fsyncs, so BuildHistory makes a few real ones (templates) with
// the engine and copies them under new ids. A copy differs from its
// template only in its transaction id, wherever the id occurs
// (events.jsonl, transaction.json, the staged names in a commit record),
// and each ledger line is resealed with its blake3 checksum the way the
// engine writes it; its timestamps are the template's. Ids are
// time-ordered like the engine's (tx- + 12 hex digits of milliseconds +
// 8), one millisecond apart, older than any transaction made afterwards,
// and the live ones are spread evenly through history. A copy is a real
// transaction: the engine verifies and loads it, and it applies
// (TestHistoryIsReal in this package and e2e/bench's
// TestScaleHistoryServed prove it).
type History struct {
	WS, DataDir string
	Total, Live int
	// LiveIDs are the non-terminal transactions, oldest first.
	LiveIDs []string
	// Newest are the ids of the 100 newest transactions (the first page
	// of tx/list), newest first.
	Newest []string
}

// templates is the most templates of each group BuildHistory makes.
const templates = 64

// BuildHistory builds a History under root (which must not exist or be
// empty). It fails tb on error.
func BuildHistory(tb testing.TB, root string, total, live int) *History {
	tb.Helper()
	if live > total || total < 1 || live < 0 {
		tb.Fatalf("BuildHistory(%d, %d): want 0 <= live <= total, total >= 1", total, live)
	}
	h := &History{WS: filepath.Join(root, "ws"), DataDir: filepath.Join(root, "data"), Total: total, Live: live}
	nLive, nDone := min(live, templates), min(total-live, templates)
	liveTmpl, doneTmpl := h.buildTemplates(tb, filepath.Join(root, "templates"), nLive, nDone)

	for _, d := range []string{filepath.Join(h.DataDir, tx.TxDir), filepath.Join(h.DataDir, tx.ActiveDir), filepath.Join(h.DataDir, tx.DeniedDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	// Ids one millisecond apart, ending a second before now: every
	// transaction a kernel makes on this data dir is newer.
	base := uint64(time.Now().UnixMilli()) - uint64(total) - 1000
	id := func(i int) string { return fmt.Sprintf("tx-%012x%08x", base+uint64(i), uint32(i)) }
	isLive := func(i int) bool { return (i+1)*live/total > i*live/total }
	for i := range total {
		if isLive(i) {
			h.LiveIDs = append(h.LiveIDs, id(i))
		}
	}
	for i := total - 1; i >= 0 && len(h.Newest) < protocol.TxListDefaultLimit; i-- {
		h.Newest = append(h.Newest, id(i))
	}
	var g errgroup.Group
	g.SetLimit(8)
	nl, nd := 0, 0
	for i := range total {
		var t *template
		if isLive(i) {
			t = liveTmpl[nl%len(liveTmpl)]
			nl++
		} else {
			t = doneTmpl[nd%len(doneTmpl)]
			nd++
		}
		g.Go(func() error { return t.copyAs(h.DataDir, id(i)) })
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "templates")); err != nil {
		tb.Fatal(err)
	}
	// Write the copies back now, so that measurements taken next do not
	// compete with the page cache's writeback of a gigabyte or two.
	syscall.Sync()
	return h
}

// CachedHistory returns the History of total and live under cacheRoot,
// building it on first use. A history whose build did not finish, or of
// another historyVersion, is rebuilt. Nothing that reads a History changes
// it (a kernel started on it has nothing to recover), so benchmarks may
// share one.
func CachedHistory(tb testing.TB, cacheRoot string, total, live int) *History {
	tb.Helper()
	dir := filepath.Join(cacheRoot, fmt.Sprintf("history-v%d-%d-%d", historyVersion, total, live))
	manifest := filepath.Join(dir, "manifest.json")
	if raw, err := os.ReadFile(manifest); err == nil {
		var h History
		if json.Unmarshal(raw, &h) == nil && h.Total == total && h.Live == live {
			return &h
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	h := BuildHistory(tb, dir, total, live)
	tb.Logf("built a history of %d transactions (%d live) in %v", total, live, time.Since(start).Round(time.Millisecond))
	raw, _ := json.Marshal(h)
	if err := os.WriteFile(manifest, raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	return h
}

// template is one real transaction's files, ready to be copied under
// another id.
type template struct {
	id     string
	live   bool
	ledger [][]byte          // events.jsonl, one line each, without newline
	files  map[string][]byte // relative path → content, besides the ledger
}

// buildTemplates makes nLive transactions waiting for approval and nDone
// terminal ones (alternately completed and closed) with the real engine,
// each on its own file of h.WS, and reads their files.
func (h *History) buildTemplates(tb testing.TB, dataDir string, nLive, nDone int) (live, done []*template) {
	tb.Helper()
	path := func(i int) string { return fmt.Sprintf("h/f%03d.txt", i) }
	for i := range nLive + nDone {
		p := filepath.Join(h.WS, path(i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "base %d\n", i), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	w, err := sandbox.Open(h.WS, sandbox.WorkspaceWrite)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	e := open(tb, w, dataDir, "")
	ctx := context.Background()
	ids := make([]string, nLive+nDone)
	err = each(len(ids), func(i int) error {
		c := fmt.Sprintf("new %d\n", i)
		res, err := e.Propose(ctx, workspace.Proposal(protocol.KindFiles, workspace.Input{Files: []protocol.FileInput{{Path: path(i), Content: &c}}}))
		if err != nil {
			return err
		}
		ids[i] = res.TransactionID
		if i >= nLive && (i-nLive)%2 == 1 {
			_, err := e.CloseTx(ctx, res.TransactionID)
			return err
		}
		ar, err := e.Apply(ctx, res.TransactionID)
		if err != nil {
			return err
		}
		if ar.OK || len(ar.PendingApprovals) != 1 {
			return fmt.Errorf("apply under policy untrusted: %+v, want one pending approval", ar)
		}
		if i < nLive {
			return nil
		}
		if _, err := e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: res.TransactionID,
			ApprovalRequestID: ar.PendingApprovals[0].ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
			return err
		}
		ar, err = e.Apply(ctx, res.TransactionID)
		if err == nil && !ar.OK {
			err = fmt.Errorf("apply after approval: %+v", ar)
		}
		return err
	})
	e.Close()
	if err != nil {
		tb.Fatal(err)
	}
	for i, id := range ids {
		t, err := readTemplate(filepath.Join(dataDir, tx.TxDir, id), id, i < nLive)
		if err != nil {
			tb.Fatal(err)
		}
		if i < nLive {
			live = append(live, t)
		} else {
			done = append(done, t)
		}
	}
	return live, done
}

// readTemplate reads the files of transaction id in dir.
func readTemplate(dir, id string, live bool) (*template, error) {
	t := &template{id: id, live: live, files: map[string][]byte{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == tx.LedgerFile {
			for line := range bytes.Lines(b) {
				t.ledger = append(t.ledger, bytes.TrimSuffix(line, []byte("\n")))
			}
			return nil
		}
		t.files[rel] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.ledger) == 0 {
		return nil, fmt.Errorf("template %s has no ledger", id)
	}
	return t, nil
}

// reseal returns line with every oldID replaced by newID and its checksum
// recomputed (tx/record, the engine's own codec).
func reseal(line []byte, oldID, newID string) ([]byte, error) {
	return record.Reseal(line, oldID, newID)
}

// copyAs writes t under dataDir as transaction id, and its active/ marker
// when t is live. Nothing is fsynced: this is a fixture.
func (t *template) copyAs(dataDir, id string) error {
	dir := filepath.Join(dataDir, tx.TxDir, id)
	var ledger []byte
	for _, line := range t.ledger {
		l, err := reseal(line, t.id, id)
		if err != nil {
			return err
		}
		ledger = append(ledger, l...)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, tx.LedgerFile), ledger, 0o600); err != nil {
		return err
	}
	for rel, b := range t.files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if rel == tx.MetaFile {
			b = bytes.ReplaceAll(b, []byte(t.id), []byte(id))
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
	}
	if t.live {
		return os.WriteFile(filepath.Join(dataDir, tx.ActiveDir, id), nil, 0o600)
	}
	return nil
}
