package tx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// start brings the data dir to a consistent state before the kernel
// answers: it builds the active/ index if this data dir predates it,
// publishes or removes proposals left under a .tmp- name, loads the non-terminal
// transactions, and recovers them. Its cost grows with the transactions in
// flight, not with history (one scan of transactions/ for leftover .tmp-
// names reads directory entries only, in batches).
func (e *Engine) start(ctx context.Context) error {
	if _, err := os.Stat(e.activeDir); errors.Is(err, fs.ErrNotExist) {
		if err := e.buildIndex(ctx); err != nil {
			return fmt.Errorf("build %s: %w", e.activeDir, err)
		}
	} else if err != nil {
		return err
	}
	if err := ensureDir(e.deniedDir, e.opts.DataDir); err != nil {
		return err
	}
	var stats recoveryStats
	swept, err := e.sweepTmp()
	if err != nil {
		return err
	}
	stats.aborted.Add(int64(swept))
	ids, err := readNames(e.activeDir, validTxID)
	if err != nil {
		return err
	}
	loaded := make([]*transaction, len(ids))
	var load errgroup.Group
	load.SetLimit(maxInFlight)
	for i := range ids {
		load.Go(func() error {
			if _, err := os.Stat(filepath.Join(e.txRoot, ids[i])); errors.Is(err, fs.ErrNotExist) {
				// The marker of a proposal that never reached its rename (the
				// .tmp- directory is swept above): nothing to load.
				_ = os.Remove(filepath.Join(e.activeDir, ids[i]))
				return nil
			}
			loaded[i] = e.loadTx(ids[i])
			return nil
		})
	}
	_ = load.Wait()
	var live []*transaction
	for _, t := range loaded {
		if t == nil {
			continue
		}
		e.txs[t.id] = t
		if t.loadErr != nil {
			e.log.Error("transaction refused", "transactionId", t.id, "err", t.loadErr)
			stats.refused.Add(1)
			continue
		}
		for _, ev := range t.led.events {
			if ev.Type == protocol.EventApprovalDecision && ev.Decision != nil {
				e.reg.Observe(t.id, *ev.Decision, false)
			}
		}
		live = append(live, t)
	}
	// Recovery is mostly fsyncs, which are faster issued together; the
	// lock keys keep apart two transactions that change the same thing.
	var rec errgroup.Group
	rec.SetLimit(maxInFlight)
	for i := range live {
		rec.Go(func() error {
			t := live[i]
			hadBlobs := exists(filepath.Join(t.dir, BlobFile))
			rolled, removed := false, int64(0)
			unlock, err := e.keys.lock(ctx, e.lockKeys(t))
			if err == nil {
				rolled, removed, err = e.recover(ctx, t)
				unlock()
			}
			if removed > 0 {
				// An apply that staged and died before its commit record.
				stats.aborted.Add(1)
				stats.stagedRemoved.Add(removed)
			}
			if err != nil {
				e.log.Error("recovery failed", "transactionId", t.id, "err", err)
				t.loadErr = err
				stats.refused.Add(1)
				return nil
			}
			if hadBlobs && !exists(filepath.Join(t.dir, BlobFile)) {
				stats.blobsSwept.Add(1)
			}
			switch {
			case rolled:
				stats.rolledForward.Add(1)
			case !protocol.Terminal(t.meta.State):
				stats.resumed.Add(1)
			}
			return nil
		})
	}
	err = rec.Wait()
	// One line an operator can read after a crash: what start-up found and
	// did (PROTOCOL.md §6.3).
	e.log.Info("recovery done", "resumed", stats.resumed.Load(), "rolledForward", stats.rolledForward.Load(),
		"aborted", stats.aborted.Load(), "stagedRemoved", stats.stagedRemoved.Load(), "blobsSwept", stats.blobsSwept.Load(), "refused", stats.refused.Load())
	return err
}

// recoveryStats counts what start-up recovery did, for its log line:
// resumed, the transactions loaded that still wait for the host (proposed,
// or applying after a failed roll-forward); rolledForward, the committed
// applies it finished; aborted, the proposals that never finished (never
// acknowledged) and the applies that died before their commit record, it
// discarded; stagedRemoved, what Abort removed of those applies (staged
// files); blobsSwept, the blob files of transactions
// that no longer need them it deleted; refused, the transactions it could
// not load or recover.
type recoveryStats struct {
	resumed, rolledForward, aborted, stagedRemoved, blobsSwept, refused atomic.Int64
}

// exists reports whether path exists (a dangling name counts).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// sweepTmp finishes or removes the .tmp- directories in transactions/,
// and returns how many it removed. A proposal is written under
// .tmp-<id>, with its active/ marker, in one round of fsyncs, then renamed
// into place and answered; the rename is made durable only with the
// transaction's next ledger append (persistProposal). So a .tmp- name
// with a marker may be an answered proposal whose rename a power cut
// undid: if it is whole (publishTmp), it is renamed into place again.
// Anything else under a .tmp- name was never answered (a crash inside
// turn/start's round) or is a pruned transaction half removed, and is
// removed. transactions/ is fsynced at the end in any case, so that no
// rename the previous process left in the page cache can be lost later,
// after the transaction's marker is gone. It reads transactions/ in
// batches so memory stays bounded however long the history.
func (e *Engine) sweepTmp() (int, error) {
	d, err := os.Open(e.txRoot)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	removed := 0
	for {
		ents, err := d.ReadDir(4096)
		for _, ent := range ents {
			name := ent.Name()
			if !strings.HasPrefix(name, ".tmp-") {
				continue
			}
			if id := strings.TrimPrefix(name, ".tmp-"); validTxID(id) && exists(filepath.Join(e.activeDir, id)) {
				published, err := e.publishTmp(id)
				if err != nil {
					return removed, err
				}
				if published {
					continue
				}
			}
			if err := os.RemoveAll(filepath.Join(e.txRoot, name)); err != nil {
				return removed, fmt.Errorf("remove unfinished proposal %s: %w", name, err)
			}
			removed++
		}
		if errors.Is(err, io.EOF) || len(ents) == 0 {
			break
		}
		if err != nil {
			return removed, err
		}
	}
	return removed, syncDir(e.txRoot)
}

// publishTmp renames transactions/.tmp-<id> to transactions/<id> if it
// holds a whole proposal: a ledger whose turn ends with its tx/status
// event, and each file its turn/start event lists (ProposalFiles, which
// may name only proposal.patch and blobs) as described there. A proposal answered before a power cut is always whole:
// the answer waited for the round that made all of it durable. One cut
// inside that round may be whole too, and is published: its turn/start
// took effect, and only the answer was lost, as when a crash falls
// between any durable step and its answer. It reports whether it renamed;
// a rename that fails is an error, for such a proposal must not be
// removed.
func (e *Engine) publishTmp(id string) (bool, error) {
	tmp := filepath.Join(e.txRoot, ".tmp-"+id)
	final := filepath.Join(e.txRoot, id)
	if exists(final) {
		return false, nil
	}
	led, err := loadLedger(filepath.Join(tmp, LedgerFile), id, e.opts.Failpoints)
	if err != nil || len(led.events) == 0 || led.events[0].Type != protocol.EventTurnStart || len(led.events[0].ProposalFiles) == 0 ||
		!slices.ContainsFunc(led.events, func(ev record.Event) bool { return ev.Type == protocol.EventTxStatus }) {
		return false, nil
	}
	for name, want := range led.events[0].ProposalFiles {
		if name != patchFile && name != BlobFile {
			return false, nil
		}
		data, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil || !wholeFile(name, data, want) {
			return false, nil
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return false, fmt.Errorf("publish proposal %s: %w", id, err)
	}
	e.log.Info("proposal published again after a crash undid its rename", "transactionId", id)
	return true, nil
}

// wholeFile reports whether data, the content of the file name of a
// proposal's directory, is what want says it was when written: its size,
// and its sha256 when want has one; a blobs file without one must hold
// records each named by its bytes' sha256 (nextBlob).
func wholeFile(name string, data []byte, want record.ProposalFile) bool {
	if int64(len(data)) != want.Size {
		return false
	}
	if want.SHA256 != "" {
		return sha256Hex(data) == want.SHA256
	}
	if name != BlobFile {
		return false
	}
	for len(data) > 0 {
		sum, blob, rest, err := nextBlob(data)
		if err != nil || sha256Hex(blob) != sum {
			return false
		}
		data = rest
	}
	return true
}

// buildIndex makes active/ for a data dir written before it existed: it
// reads every ledger once, marks the non-terminal transactions, records
// every denied fingerprint in denied/, and deletes the blobs of terminal
// transactions (they may hold secrets and nothing can need them). active/
// is built under a temporary name and renamed into place last, so a crash
// leaves either no index (and this runs again) or a whole one.
func (e *Engine) buildIndex(ctx context.Context) error {
	tmp := e.activeDir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	if err := ensureDir(e.deniedDir, e.opts.DataDir); err != nil {
		return err
	}
	ids, err := readNames(e.txRoot, validTxID)
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(maxInFlight)
	for i := range ids {
		g.Go(func() error {
			t := e.loadTx(ids[i])
			if t.loadErr != nil || !protocol.Terminal(t.meta.State) {
				// Not terminal, or unreadable: load it at every start, where
				// recovery or tx/list can deal with it.
				return touch(filepath.Join(tmp, t.id))
			}
			if err := e.recordDenials(t); err != nil {
				return err
			}
			return e.dropBlobs(t, true)
		})
	}
	err = g.Wait()
	if err == nil {
		err = syncDir(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, e.activeDir)
	}
	if err == nil {
		err = syncDir(e.opts.DataDir)
	}
	return err
}

// readNames lists the names in dir that keep accepts.
func readNames(dir string, keep func(string) bool) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ent := range ents {
		if keep(ent.Name()) {
			out = append(out, ent.Name())
		}
	}
	return out, nil
}

// touch creates an empty file (its entry is made durable by the caller's
// fsync of the directory).
func touch(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}
