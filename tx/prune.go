package tx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/txkernel/txkernel/protocol"
)

// PruneResult is what Prune did: the transactions removed and how many
// were kept because they are not terminal or not old enough.
type PruneResult struct {
	Removed   []string
	KeptLive  int // not terminal: never touched
	KeptYoung int // terminal, entered their state at or after the cutoff
}

// Prune removes the terminal transactions (completed, closed, denied) that
// entered their state before cutoff (`txkernel prune`). Ledgers and
// transaction.json are the audit trail, so nothing else ever removes
// them. It takes the data dir's lock, so it refuses to run while a kernel
// holds it (ErrDataDirLocked). The state is read from each ledger, the
// source of truth, and a transaction with an active/ marker is never
// touched. A transaction directory is first renamed to a .tmp- name, which
// start-up sweeps, so a crash mid-removal never leaves half a transaction.
// Denied fingerprints stay in denied/: a deny still sticks after its
// transaction is pruned.
func Prune(ctx context.Context, dataDir string, cutoff time.Time) (*PruneResult, error) {
	return prune(ctx, dataDir, cutoff, false)
}

// PruneDryRun is Prune without the removal (`txkernel prune --dry-run`):
// it takes the same lock and reads the same ledgers, and its Removed lists
// the transactions Prune would remove now. Nothing on disk changes.
func PruneDryRun(ctx context.Context, dataDir string, cutoff time.Time) (*PruneResult, error) {
	return prune(ctx, dataDir, cutoff, true)
}

// LockDataDir takes the data dir's lock as a kernel does, for a command
// that writes into a data dir without an Engine (`txkernel eval
// --data-dir`), so it refuses a data dir a kernel is serving
// (ErrDataDirLocked, wrapped) instead of writing beside it. The data dir
// must exist. release drops the lock.
func LockDataDir(dataDir string) (release func() error, err error) {
	l, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}

// prune is Prune and PruneDryRun: one walk, so the dry run can never list
// other transactions than the removal would remove.
func prune(ctx context.Context, dataDir string, cutoff time.Time, dryRun bool) (*PruneResult, error) {
	lock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	e := &Engine{txRoot: filepath.Join(dataDir, TxDir), activeDir: filepath.Join(dataDir, ActiveDir)}
	ids, err := e.listIDs(ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return &PruneResult{}, nil
	}
	if err != nil {
		return nil, err
	}
	res := &PruneResult{}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if _, err := os.Stat(filepath.Join(e.activeDir, id)); err == nil {
			res.KeptLive++
			continue
		}
		dir := filepath.Join(e.txRoot, id)
		led, err := loadLedger(filepath.Join(dir, LedgerFile), id, nil)
		if err != nil {
			res.KeptLive++ // unreadable: not ours to judge
			continue
		}
		state, since := deriveState(led.events)
		if !protocol.Terminal(state) {
			res.KeptLive++
			continue
		}
		at, err := time.Parse(timeFormat, since)
		if err != nil || !at.Before(cutoff) {
			res.KeptYoung++
			continue
		}
		if dryRun {
			res.Removed = append(res.Removed, id)
			continue
		}
		gone := filepath.Join(e.txRoot, ".tmp-pruned-"+id)
		if err := os.Rename(dir, gone); err != nil {
			return res, fmt.Errorf("prune %s: %w", id, err)
		}
		if err := os.RemoveAll(gone); err != nil {
			return res, fmt.Errorf("prune %s: %w", id, err)
		}
		res.Removed = append(res.Removed, id)
	}
	if len(res.Removed) > 0 && !dryRun {
		if err := syncDir(e.txRoot); err != nil {
			return res, err
		}
	}
	return res, nil
}
