package tx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// NewInput returns a new, zero input of kind (a pointer to a value of its
// Kind.Input type), for the kernel to decode turn/start's proposal
// straight into; false when Propose would refuse kind before reading its
// input (no target plans it, or it is Internal).
func (e *Engine) NewInput(kind string) (any, bool) {
	k, ok := e.kindInfo[kind]
	if !ok || k.Internal {
		return nil, false
	}
	return reflect.New(k.Input).Interface(), true
}

// Propose turns a proposal into a transaction (turn/start). The target its
// kind names plans it, reading but never writing what it changes. The new
// transaction's directory is built under a temporary name and renamed into
// place, so a crash leaves either a whole proposal or none; the result is
// returned only once it is durable. A kind its target marks Internal is
// refused (errs.Invalid on proposal.kind): only that target's service
// proposes it, through ProposeInternal.
func (e *Engine) Propose(ctx context.Context, in *Input) (*Proposed, error) {
	return e.propose(ctx, in, false)
}

// ProposeInternal is Propose for a target's own service, which checks its
// own grants first: it also plans the kinds marked Internal (the memory
// service's accepts and promotes).
func (e *Engine) ProposeInternal(ctx context.Context, in *Input) (*Proposed, error) {
	return e.propose(ctx, in, true)
}

func (e *Engine) propose(ctx context.Context, in *Input, internal bool) (*Proposed, error) {
	if in == nil {
		return nil, errs.InvalidField("proposal", "proposal is required")
	}
	tg, ok := e.byKind[in.Kind]
	// turn/start's caller is told only the kinds turn/start takes.
	kinds := e.kinds
	if !internal {
		kinds = e.Kinds()
	}
	want := "no kind"
	switch len(kinds) {
	case 0:
	case 1:
		want = kinds[0]
	default:
		want = strings.Join(kinds[:len(kinds)-1], ", ") + " or " + kinds[len(kinds)-1]
	}
	data := KindData{Field: "proposal.kind", Kind: in.Kind, Accepted: kinds}
	if !ok {
		if in.Kind == "" {
			data.Reason = "missing"
			return nil, errs.New(errs.Invalid, data, "proposal.kind is required (%s)", want)
		}
		data.Reason = "unknown-kind"
		return nil, errs.New(errs.Invalid, data, "unknown proposal.kind %q (want %s)", in.Kind, want)
	}
	if e.kindInfo[in.Kind].Internal && !internal {
		data.Reason = "internal-kind"
		return nil, errs.New(errs.Invalid, data,
			"%s is proposed only by the %s service's own methods, which keep rules turn/start would bypass (grants, one pending PatchSet per recipe); turn/start takes %s", in.Kind, tg.Name(), want)
	}
	if want := reflect.PointerTo(e.kindInfo[in.Kind].Input); reflect.TypeOf(in.Body) != want {
		// A caller's bug, never the host's: the kernel and the services
		// make the input from the kind (NewInput).
		return nil, errs.New(errs.Internal, nil, "proposal kind %s takes a %v, not a %T", in.Kind, want, in.Body)
	}
	plan, err := tg.Plan(ctx, in.Kind, in.Body)
	if err != nil {
		return nil, err
	}
	if len(plan.Changes) == 0 {
		return nil, errs.New(errs.Validation, ValidationData{Reason: "empty"}, "the proposal changes nothing")
	}
	if err := ctx.Err(); err != nil {
		return nil, errs.Wrap(errs.Cancelled, err, nil, "")
	}
	return e.persistProposal(ctx, tg, in, plan)
}

// storedPlan returns ptr as it is persisted, secrets redacted
// (record.Proposal.Redacted), and the target's Planned loaded from that
// stored pointer: the engine applies the plan a restart would read back,
// never one that exists only in memory. The target loads what it planned
// before anything is written: a plan it cannot read back would be a
// transaction no one can apply. When redaction changed the pointer, the
// plan must still change and lock the same things (Planned.Files,
// LockKeys and Summary, which names what changes): a path, document id or element id that holds a secret cannot
// be stored, so the proposal is refused (errs.Validation, reason
// "secret-in-name") instead of applying to a redacted name. Secret
// content belongs in the blobs, which keep the exact bytes.
func storedPlan(tg Target, ptr *record.Proposal) (*record.Proposal, Planned, error) {
	stored, changed, err := ptr.Redacted()
	if err != nil {
		return nil, nil, err
	}
	planned, err := tg.Load(stored)
	if err != nil {
		return nil, nil, fmt.Errorf("target %s cannot load the plan it made: %w", tg.Name(), err)
	}
	if !changed {
		return stored, planned, nil
	}
	raw, err := tg.Load(ptr)
	if err != nil {
		return nil, nil, fmt.Errorf("target %s cannot load the plan it made: %w", tg.Name(), err)
	}
	if !slices.Equal(raw.Files(), planned.Files()) || !slices.Equal(raw.LockKeys(), planned.LockKeys()) || raw.Summary() != planned.Summary() {
		return nil, nil, errs.New(errs.Validation, ValidationData{Reason: "secret-in-name"},
			"the proposal names a path or id that holds a secret; the ledger never stores one, so it cannot be applied under that name: rename it")
	}
	return stored, planned, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (e *Engine) persistProposal(ctx context.Context, tg Target, in *Input, plan *Plan) (*Proposed, error) {
	// What the host reviews is stored redacted and shown redacted, whatever
	// the target rendered (a memory body's diff, a document's values).
	// Nothing below reads it until the directory's files are listed, so it
	// is redacted on another goroutine meanwhile: on a large diff the scan
	// (record.RedactTextString: a SHA-256 of the text, then its lines) is the
	// longest step here, and the hashing and encoding below would
	// otherwise leave the second core idle. The buffered channel lets the
	// goroutine end even when an error returns first.
	type redactedDiff struct {
		data []byte
		text string
		// sum is sha256Hex(data) for the turn/start event's ProposalFiles,
		// or "" when data is the canonical rendering, whose sha256 is the
		// patch id.
		sum string
	}
	redactedC := make(chan redactedDiff, 1)
	go func() {
		data, text := record.RedactTextString(plan.Redacted)
		sum := ""
		if !bytes.Equal(data, plan.Canonical) {
			sum = sha256Hex(data)
		}
		redactedC <- redactedDiff{data, text, sum}
	}()
	patchID := sha256Hex(plan.Canonical)
	txID := e.ids.newTxID()
	turnID := newID("turn")
	itemID := newID("item")
	diffItemID := newID("item")

	ptr := plan.Pointer
	ptr.Target = tg.Name()
	ptr.Kind = in.Kind
	ptr.PatchID = patchID
	ptr.PatchFingerprint = approvals.Fingerprint(protocol.ApprovalPatchset, patchID)
	ptr.ContainsSecretIntroductions = len(plan.Findings) > 0
	ptr.ProposalTurnID = turnID
	ptr.ProposalItemID = itemID
	ptr.PatchPath = patchFile
	stored, planned, err := storedPlan(tg, &ptr)
	if err != nil {
		return nil, err
	}
	ptr = *stored

	tmp := filepath.Join(e.txRoot, ".tmp-"+txID)
	final := filepath.Join(e.txRoot, txID)
	t := &transaction{id: txID, dir: tmp, sem: make(chan struct{}, 1), target: tg, planned: planned}
	fileItem := &protocol.Item{ID: itemID, Type: protocol.ItemFileChange, Changes: plan.Changes, Tolerances: plan.Tolerances}
	// The turnDiff item's diff is proposal.patch's content (redacted): the
	// ledger names the file instead of holding a second copy (and the
	// engine a second copy in memory for as long as the transaction is
	// live).
	diffItem := &protocol.Item{ID: diffItemID, Type: protocol.ItemTurnDiff}
	// The turn's events: turn/start, the plan item when turn/start has a
	// plan (seed 001 lists plan items before fileChange), the fileChange
	// and turnDiff items, and the proposed status.
	turn := []record.Event{{Type: protocol.EventTurnStart, TurnID: turnID, ProposalKind: in.Kind, Proposal: &ptr}}
	if in.Plan != nil {
		turn = append(turn, record.Event{Type: protocol.EventTurnItem, TurnID: turnID,
			Item: &protocol.Item{ID: newID("item"), Type: protocol.ItemPlan, Text: in.Plan.Text, Steps: in.Plan.Steps}})
	}
	turn = append(turn,
		record.Event{Type: protocol.EventTurnItem, TurnID: turnID, Item: fileItem},
		record.Event{Type: protocol.EventTurnItem, TurnID: turnID, Item: diffItem, DiffFile: patchFile},
		record.Event{Type: protocol.EventTxStatus, Status: protocol.StateProposed},
	)
	// Everything the directory holds is encoded before any of it is
	// written, so that the round of fsyncs below starts at once rather than
	// one file at a time between encodings (RELIABILITY.md §10, rounds).
	// The turn/start event describes the files fsynced beside the ledger,
	// by which start-up tells a whole proposal from a cut one
	// (publishTmp): proposal.patch by its size and sha256 (the patch id's
	// own when nothing was redacted: no second hash of a large diff), the
	// blobs by their size, each record being named by its sha256.
	var blobs []byte
	files := map[string]record.ProposalFile{}
	if len(plan.Blobs) > 0 {
		blobs = encodeBlobs(plan.Blobs)
		files[BlobFile] = record.ProposalFile{Size: int64(len(blobs))}
	}
	red := <-redactedC
	redacted := red.data
	if red.sum == "" {
		red.sum = patchID
	}
	files[patchFile] = record.ProposalFile{Size: int64(len(redacted)), SHA256: red.sum}
	turn[0].ProposalFiles = files
	t.led = newLedger(filepath.Join(tmp, LedgerFile), txID, e.opts.Failpoints)
	pending, err := t.led.prepare(turn...)
	if err != nil {
		return nil, err
	}
	evs := pending.events
	t.meta = record.Transaction{SchemaVersion: record.SchemaVersion, TransactionID: txID, CreatedAt: evs[0].TS, UpdatedAt: evs[len(evs)-1].TS,
		State: protocol.StateProposed, WorkspaceRoot: ptr.WorkspaceRoot, Pointers: record.Pointers{Proposal: &ptr}}
	meta, err := t.meta.Encode()
	if err != nil {
		return nil, err
	}
	dirFiles := []dirFile{
		{name: LedgerFile, flag: os.O_APPEND, write: func(f *os.File) error { return t.led.write(f, pending) }},
		// No fsync: transaction.json is rebuilt from the ledger whenever it
		// is unreadable (see replaceMeta); its name is made durable with
		// the directory's.
		{name: MetaFile, data: meta},
		{name: patchFile, data: redacted, sync: true},
	}
	if len(plan.Blobs) > 0 {
		dirFiles = append(dirFiles, dirFile{name: BlobFile, data: blobs, sync: true})
	}
	// The active/ marker is independent of the directory's files: it is
	// created and its directory fsynced in the same round. It is durable
	// before the rename, so a transaction that exists is never missing
	// from the index. transactions/ is fsynced in the round too, for the
	// .tmp- directory's own name, which writeProposalDir creates first.
	err = writeProposalDir(tmp, dirFiles, func() error {
		if err := touch(filepath.Join(e.activeDir, txID)); err != nil {
			return err
		}
		return syncDir(e.activeDir)
	}, func() error { return syncDir(e.txRoot) })
	if err == nil {
		err = e.opts.Failpoints.Hit(ctx, fpProposeBeforeRename)
	}
	// The rename publishes the proposal, but is not made durable here:
	// the answer waits only for the round above, after which everything
	// the proposal holds is durable under its .tmp- name, with its
	// active/ marker. transactions/ is fsynced with the transaction's next
	// ledger append (ledger.syncDirWithNext), which precedes anything
	// that could let the marker go; a power cut before that leaves the
	// .tmp- name, and start-up renames a whole proposal into place again
	// (publishTmp). One round of fsyncs per turn/start, not two
	// (RELIABILITY.md §10).
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		// A refused turn/start must not come back at start-up: the
		// marker's removal is made durable, so that publishTmp finds the
		// .tmp- name without one if a crash keeps it.
		os.RemoveAll(tmp)
		if os.Remove(filepath.Join(e.activeDir, txID)) == nil {
			_ = syncDir(e.activeDir)
		}
		return nil, fmt.Errorf("persist proposal: %w", err)
	}
	t.dir = final
	// The ledger file moved with its directory.
	t.led.path = filepath.Join(final, LedgerFile)
	t.led.syncDirWithNext(e.txRoot)
	// Hold the new transaction's lock until its first events are out, so no
	// call that finds it (through tx/list) can emit an event before them.
	t.sem <- struct{}{}
	e.mu.Lock()
	e.txs[txID] = t
	e.mu.Unlock()
	e.emit(withDiff(evs, red.text))
	t.publish() // now tx/list shows it (see transaction.summary)
	t.release()

	// The changes as stored (the fileChange item read back), so that the
	// result shows what tx/events will.
	changes := plan.Changes
	for _, ev := range evs {
		if ev.Item != nil && ev.Item.ID == itemID {
			changes = ev.Item.Changes
		}
	}
	sum := protocol.ProposalSummary{
		Target:                      tg.Name(),
		Summary:                     planned.Summary(),
		PatchID:                     patchID,
		Fingerprint:                 ptr.PatchFingerprint,
		TargetFiles:                 planned.Files(),
		Changes:                     changes,
		ContainsSecretIntroductions: len(plan.Findings) > 0,
		SecretFindings:              plan.Findings,
		Hunks:                       plan.Hunks,
		Tolerances:                  plan.Tolerances,
	}
	if utf8.ValidString(red.text) {
		sum.Diff = red.text
	} else {
		sum.DiffBase64 = base64.StdEncoding.EncodeToString(redacted)
	}
	return &Proposed{
		TurnStartResult: &protocol.TurnStartResult{TransactionID: txID, TurnID: turnID, State: protocol.StateProposed, Proposal: sum},
		Pointer:         &ptr,
		Planned:         planned,
	}, nil
}

// withDiff returns evs with diff put back into the turnDiff item that
// names its file (Event.DiffFile), for the host; evs is not modified.
func withDiff(evs []record.Event, diff string) []record.Event {
	out := slices.Clone(evs)
	for i, ev := range out {
		if ev.DiffFile != "" && ev.Item != nil {
			item := *ev.Item
			item.Diff = diff
			out[i].Item = &item
		}
	}
	return out
}

// loadDiffs is withDiff for events read back from t's ledger: the diff
// is read from the file each turnDiff item names. A missing file is a
// damaged transaction (errs.LedgerCorrupt naming it).
func loadDiffs(t *transaction, evs []record.Event) ([]record.Event, error) {
	for _, ev := range evs {
		if ev.DiffFile == "" || ev.Item == nil {
			continue
		}
		if ev.DiffFile != patchFile {
			return nil, corrupt(CorruptData{TransactionID: t.id, File: t.led.path, Reason: "diffFile " + ev.DiffFile},
				"transaction %s: a turnDiff item names %q, not %s", t.id, ev.DiffFile, patchFile)
		}
		path := filepath.Join(t.dir, patchFile)
		diff, err := os.ReadFile(path)
		if err != nil {
			return nil, corrupt(CorruptData{TransactionID: t.id, File: path, Reason: "unreadable"},
				"transaction %s: the turnDiff item's diff: %v", t.id, err)
		}
		return withDiff(evs, string(diff)), nil
	}
	return evs, nil
}

// dirFile is one file of a new transaction's directory: it is created
// with flag added to O_WRONLY|O_CREATE|O_EXCL, then either write runs on
// it or data is written to it, and fsynced when sync is set.
type dirFile struct {
	name  string
	flag  int
	data  []byte
	sync  bool
	write func(*os.File) error
}

// writeProposalDir creates dir and every file in it, and then runs in one
// concurrent round (see maxInFlight) each file's write (and fsync), the
// fsync of dir, and the jobs in more. Every name exists before dir's fsync
// is issued, so that one fsync, run alongside the files' own, makes all
// of them durable before dir is renamed: one round of fsyncs, not two.
// Each file is opened once, by its creation.
func writeProposalDir(dir string, files []dirFile, more ...func() error) (err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	open := make([]*os.File, 0, len(files))
	defer func() {
		for _, f := range open {
			if cerr := f.Close(); err == nil && cerr != nil && !errors.Is(cerr, os.ErrClosed) {
				err = cerr
			}
		}
	}()
	for _, df := range files {
		f, err := os.OpenFile(filepath.Join(dir, df.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|df.flag, 0o600)
		if err != nil {
			return err
		}
		open = append(open, f)
	}
	var g errgroup.Group
	g.SetLimit(maxInFlight)
	for i, df := range files {
		f := open[i]
		g.Go(func() error {
			if df.write != nil {
				return df.write(f)
			}
			if _, err := f.Write(df.data); err != nil {
				return err
			}
			if df.sync {
				return f.Sync()
			}
			return nil
		})
	}
	g.Go(func() error { return syncDir(dir) })
	for _, job := range more {
		g.Go(job)
	}
	return g.Wait()
}
