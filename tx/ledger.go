package tx

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/tx/record"
)

// LedgerFile is the name of a transaction's append-only ledger.
const LedgerFile = "events.jsonl"

// ledger is one transaction's events.jsonl and its events in memory. The
// file is open only during an append (DESIGN.md §2, "Bounded resources"):
// a kernel with 10,000 transactions waiting for approval holds no
// descriptor for any of them. It is not safe for concurrent use; the
// transaction's lock guards it.
type ledger struct {
	path   string
	txID   string
	events []record.Event
	broken error // set after a failed write or fsync: no silent retry
	fp     *failpoint.Set
	// pendingDir is a directory the next write fsyncs with the ledger
	// (syncDirWithNext); "" when none. Writes are serialised by the
	// transaction's lock.
	pendingDir string
}

// loadLedger reads and verifies path. A torn final line (no trailing
// newline: a crash mid-append) is moved to events.jsonl.torn-<unix-nanos>
// and truncated away. Any other bad line refuses the transaction with
// CodeLedgerCorrupt naming the file and line.
func loadLedger(path, txID string, fp *failpoint.Set) (*ledger, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		torn := data[i+1:]
		aside := path + ".torn-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := writeFileSync(aside, torn, 0o600); err != nil {
			return nil, fmt.Errorf("set aside torn tail of %s: %w", path, err)
		}
		if err := truncateSync(path, int64(i+1)); err != nil {
			return nil, err
		}
		data = data[:i+1]
	}
	l := &ledger{path: path, txID: txID, fp: fp}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		i := bytes.IndexByte(data, '\n')
		line := data[:i]
		data = data[i+1:]
		ev, err := record.DecodeEvent(line)
		if err == nil && ev.Seq != int64(len(l.events)+1) {
			err = fmt.Errorf("seq %d, want %d", ev.Seq, len(l.events)+1)
		}
		if err == nil && ev.TransactionID != txID {
			err = fmt.Errorf("transactionId %q, want %q", ev.TransactionID, txID)
		}
		if err != nil {
			return nil, corrupt(CorruptData{TransactionID: txID, File: path, Line: lineNo, Reason: err.Error()},
				"ledger %s is corrupt at line %d: %v", path, lineNo, err)
		}
		l.events = append(l.events, ev)
	}
	return l, nil
}

// newLedger returns the ledger of a new transaction at path, with no
// events. The caller creates the file (writeProposalDir, with O_EXCL) and
// writes the first events through write.
func newLedger(path, txID string, fp *failpoint.Set) *ledger {
	return &ledger{path: path, txID: txID, fp: fp}
}

// lastSeq is the seq of the newest event, 0 when empty.
func (l *ledger) lastSeq() int64 { return int64(len(l.events)) }

// append assigns seq and ts (unless evs[0].TS is set) to evs, writes them with one write and one fsync,
// and only then adds them to the in-memory view. The fsync is the point at
// which the events are durable; the caller notifies the host after it.
func (l *ledger) append(evs ...record.Event) ([]record.Event, error) {
	p, err := l.prepare(evs...)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", l.path, err)
	}
	defer f.Close()
	if err := l.write(f, p); err != nil {
		return nil, err
	}
	return p.events, nil
}

// pendingEvents are events numbered and encoded by prepare, not yet
// written: buf holds their lines.
type pendingEvents struct {
	buf    []byte
	events []record.Event
}

// prepare numbers and encodes evs as append does, without touching the
// file or the in-memory view, so that a caller can encode before a round
// of concurrent fsyncs and keep CPU out of it (writeProposalDir). Only one
// prepare may be outstanding: the next one numbers from the same seq.
func (l *ledger) prepare(evs ...record.Event) (pendingEvents, error) {
	if l.broken != nil {
		return pendingEvents{}, fmt.Errorf("ledger %s is unusable after an earlier failure: %w", l.path, l.broken)
	}
	ts := now()
	if len(evs) > 0 && evs[0].TS != "" {
		ts = evs[0].TS // the caller fixed the time, to write metadata alongside
	}
	var buf []byte
	out := make([]record.Event, len(evs))
	for i, ev := range evs {
		ev.Seq = l.lastSeq() + int64(i) + 1
		ev.TS = ts
		ev.TransactionID = l.txID
		// The event as stored, secrets redacted, is the one kept in
		// memory and sent to the host: the same after a restart.
		line, stored, err := ev.EncodeStored()
		if err != nil {
			return pendingEvents{}, err
		}
		buf = append(buf, line...)
		out[i] = stored
	}
	return pendingEvents{buf: buf, events: out}, nil
}

// write appends p's lines to f, the ledger's file opened for appending,
// with one write and one fsync, and then adds p's events to the
// in-memory view. A failed write or fsync breaks the ledger.
func (l *ledger) write(f *os.File, p pendingEvents) error {
	buf := p.buf
	if err := l.fp.Hit(context.Background(), fpLedgerNoSpace); err != nil {
		// A full disk, for tests: the write fails with ENOSPC and nothing
		// reaches the file.
		l.broken = &fs.PathError{Op: "write", Path: l.path, Err: syscall.ENOSPC}
		return fmt.Errorf("append to %s: %w", l.path, l.broken)
	}
	if l.fp.Arm(fpLedgerMidAppend) {
		// A crash mid-append: half of the bytes reach the file, then the
		// process dies. Recovery must set the torn tail aside.
		half := len(buf) / 2
		if _, err := f.Write(buf[:half]); err != nil {
			return err
		}
		if err := l.fp.Fire(context.Background(), fpLedgerMidAppend); err != nil {
			return err
		}
		buf = buf[half:]
	}
	if _, err := f.Write(buf); err != nil {
		l.broken = err
		return fmt.Errorf("append to %s: %w", l.path, err)
	}
	// A directory waiting for its fsync (syncDirWithNext) is fsynced in
	// the same round as the ledger: the events are durable only with it.
	var dirErr chan error
	if dir := l.pendingDir; dir != "" {
		dirErr = make(chan error, 1)
		go func() { dirErr <- syncDir(dir) }()
	}
	err := f.Sync()
	if dirErr != nil {
		if derr := <-dirErr; err == nil {
			err = derr
		}
	}
	if err != nil {
		// After a failed fsync the page cache may have dropped the data; the
		// only honest thing is to stop using this ledger (ALICE, fsyncgate).
		l.broken = err
		return fmt.Errorf("fsync %s: %w", l.path, err)
	}
	l.pendingDir = ""
	l.events = append(l.events, p.events...)
	return nil
}

// syncDirWithNext has the ledger's next write fsync dir in the same round
// as the ledger file, before its events count as durable: the rename of a
// new transaction's directory into dir, which turn/start answers without
// (persistProposal). Every later state of a transaction (an approval, a
// decision, the commit record, tx/close) is an append, so the rename is
// durable before anything can retire the transaction and remove its
// active/ marker.
func (l *ledger) syncDirWithNext(dir string) { l.pendingDir = dir }

// now returns the ledger's timestamp format: RFC 3339, UTC, fixed-width
// nanoseconds, so timestamps sort as strings.
func now() string { return time.Now().UTC().Format(timeFormat) }

const timeFormat = "2006-01-02T15:04:05.000000000Z"

// writeFileSync creates path with data and fsyncs it.
func writeFileSync(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

// syncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// replaceMeta replaces a transaction.json at path with data (see
// replaceFile) without fsyncing its bytes: transaction.json is derived
// from the ledger, and whoever finds it unreadable or disagreeing with the
// ledger (start-up, tx/list, tx/status) rebuilds it from the ledger. Its
// directory's fsync stays: it also makes durable what the caller removed
// from that directory before (the blobs, after a commit).
func replaceMeta(fp *failpoint.Set, path string, data []byte) error {
	return replaceFile(fp, path, data, false)
}

// replaceFile replaces path with data: temp file in the same directory,
// fsync of it when durable is set, rename, fsync of the directory
// (google/renameio's order). A reader sees the old file or the new one,
// never a mix.
func replaceFile(fp *failpoint.Set, path string, data []byte, durable bool) error {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp")
	write := os.WriteFile
	if durable {
		write = writeFileSync
	}
	if err := write(tmp, data, 0o600); err != nil {
		return err
	}
	if err := fp.Hit(context.Background(), fpMetaMidReplace); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}
