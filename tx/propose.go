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
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx/unidiff"
)

// plannedFile is what one target file becomes, with the bytes on both sides.
type plannedFile struct {
	path      string
	kind      string // protocol.ChangeAdd | ChangeModify | ChangeDelete
	old       []byte
	oldMode   uint32
	new       []byte
	newMode   uint32
	oldExists bool
}

func invalidParams(field, format string, args ...any) error {
	return protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": field}, format, args...)
}

func validationFailed(data map[string]any, format string, args ...any) error {
	return protocol.NewError(protocol.CodeValidationFailed, data, format, args...)
}

// Propose turns a proposal into a transaction (turn/start). It reads the
// workspace but never writes it. The new transaction's directory is built
// under a temporary name and renamed into place, so a crash leaves either a
// whole proposal or none; the result is returned only once it is durable.
func (e *Engine) Propose(ctx context.Context, in *protocol.ProposalInput) (*protocol.TurnStartResult, error) {
	if in == nil {
		return nil, invalidParams("proposal", "proposal is required")
	}
	files, err := e.plan(in)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.persistProposal(ctx, in, files)
}

// plan resolves every path strictly and computes each file's new bytes.
func (e *Engine) plan(in *protocol.ProposalInput) ([]plannedFile, error) {
	var files []plannedFile
	var err error
	switch in.Kind {
	case protocol.KindUnifiedDiff:
		files, err = e.planDiff(in)
	case protocol.KindFiles:
		files, err = e.planFiles(in)
	case protocol.KindRemoveTodoMulti:
		files, err = e.planRemoveTodo(in)
	case "":
		return nil, invalidParams("proposal.kind", "proposal.kind is required (unified_diff, files or remove_todo_multi)")
	default:
		return nil, invalidParams("proposal.kind", "unknown proposal.kind %q (want unified_diff, files or remove_todo_multi)", in.Kind)
	}
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	folded := map[string]string{}
	for _, f := range files {
		if seen[f.path] {
			return nil, validationFailed(map[string]any{"path": f.path, "reason": "duplicate"}, "the proposal changes %s twice", f.path)
		}
		seen[f.path] = true
		// Two names for one file on NTFS, APFS or HFS+: the second write
		// would land on the first, and its base was never checked.
		key := sandbox.FoldPath(f.path)
		if other, ok := folded[key]; ok {
			return nil, validationFailed(map[string]any{"path": f.path, "collidesWith": other, "reason": "case-collision"},
				"the proposal changes %s and %s, which name the same file on a case-insensitive file system", other, f.path)
		}
		folded[key] = f.path
		// Proposals work in a read-only sandbox; only protected paths are
		// refused here. The apply checks again, with the write rules.
		if err := e.ws.CheckWritable(f.path); err != nil && !errors.Is(err, sandbox.ErrReadOnly) {
			return nil, err
		}
	}
	if len(files) == 0 {
		return nil, validationFailed(map[string]any{"reason": "empty"}, "the proposal changes nothing")
	}
	slices.SortFunc(files, func(a, b plannedFile) int { return strings.Compare(a.path, b.path) })
	return files, nil
}

// readBase reads a target's current bytes through the sandbox.
func (e *Engine) readBase(rel string) (data []byte, mode uint32, exists bool, err error) {
	data, m, exists, err := e.ws.ReadFile(rel)
	if err != nil {
		return nil, 0, false, err
	}
	return data, uint32(m.Perm()), exists, nil
}

// cleanPath validates a path from the host or a diff (see
// sandbox.CleanPath). A path that names no file — empty, or "." after
// cleaning — is a missing required value: -32602 {field, path, reason:
// "empty"}. Every other refusal (NUL byte, too long, backslash, absolute,
// "..") is a sandbox violation like a protected or symlinked path: -32004
// {field, path, reason, sandbox}, so that every path a sandbox rule refuses
// has one code and field still names where the path came from.
func (e *Engine) cleanPath(field, p string) (string, error) {
	c, err := sandbox.CleanPath(p)
	var pe *sandbox.PathError
	if err == nil || !errors.As(err, &pe) {
		return c, err
	}
	if pe.Reason == "empty" {
		return "", protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": field, "path": p, "reason": pe.Reason},
			"%s: the path names no file", field)
	}
	return "", protocol.NewError(protocol.CodeSandboxViolation, map[string]any{"field": field, "path": p, "reason": pe.Reason, "sandbox": string(e.ws.Mode())},
		"sandbox violation: %s: %v", field, pe)
}

func (e *Engine) planDiff(in *protocol.ProposalInput) ([]plannedFile, error) {
	var raw []byte
	switch {
	case in.Diff != nil && in.DiffBase64 != nil:
		return nil, invalidParams("proposal.diff", "give diff or diffBase64, not both")
	case in.Diff != nil:
		raw = []byte(*in.Diff)
	case in.DiffBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.DiffBase64)
		if err != nil {
			return nil, invalidParams("proposal.diffBase64", "diffBase64 is not base64: %v", err)
		}
		raw = b
	default:
		return nil, invalidParams("proposal.diff", "a unified_diff proposal needs diff or diffBase64")
	}
	patches, err := unidiff.Parse(raw)
	if err != nil {
		return nil, err
	}
	var out []plannedFile
	for _, p := range patches {
		oldPath, newPath := p.OldPath, p.NewPath
		if oldPath != "" {
			if oldPath, err = e.cleanPath("proposal.diff", oldPath); err != nil {
				return nil, err
			}
		}
		if newPath != "" {
			if newPath, err = e.cleanPath("proposal.diff", newPath); err != nil {
				return nil, err
			}
		}
		switch p.Kind {
		case protocol.ChangeAdd:
			_, _, exists, err := e.readBase(newPath)
			if err != nil {
				return nil, err
			}
			if exists {
				return nil, validationFailed(map[string]any{"path": newPath, "reason": "exists"}, "the diff adds %s, which already exists", newPath)
			}
			nb, err := p.Apply(nil)
			if err != nil {
				return nil, err
			}
			out = append(out, plannedFile{path: newPath, kind: protocol.ChangeAdd, new: nb, newMode: modeOr(p.NewMode, 0o644)})
		case protocol.ChangeDelete, protocol.ChangeModify, "rename":
			base, mode, exists, err := e.readBase(oldPath)
			if err != nil {
				return nil, err
			}
			if !exists {
				return nil, protocol.NewError(protocol.CodeNotFound, map[string]any{"path": oldPath}, "the diff changes %s, which does not exist", oldPath)
			}
			nb, err := p.Apply(base)
			if err != nil {
				return nil, err
			}
			switch p.Kind {
			case protocol.ChangeDelete:
				out = append(out, plannedFile{path: oldPath, kind: protocol.ChangeDelete, old: base, oldMode: mode, oldExists: true})
			case protocol.ChangeModify:
				out = append(out, plannedFile{path: oldPath, kind: protocol.ChangeModify, old: base, oldMode: mode, oldExists: true, new: nb, newMode: modeOr(p.NewMode, mode)})
			default: // a rename is a delete of the old path and an add of the new one
				_, _, exists, err := e.readBase(newPath)
				if err != nil {
					return nil, err
				}
				if exists {
					return nil, validationFailed(map[string]any{"path": newPath, "reason": "exists"}, "the diff renames onto %s, which already exists", newPath)
				}
				out = append(out,
					plannedFile{path: oldPath, kind: protocol.ChangeDelete, old: base, oldMode: mode, oldExists: true},
					plannedFile{path: newPath, kind: protocol.ChangeAdd, new: nb, newMode: modeOr(p.NewMode, mode)})
			}
		default:
			return nil, validationFailed(map[string]any{"path": newPath, "reason": "unsupported"}, "unsupported change kind %q", p.Kind)
		}
	}
	return out, nil
}

func modeOr(m, def uint32) uint32 {
	if m&0o777 == 0 {
		return def
	}
	return m & 0o777
}

func (e *Engine) planFiles(in *protocol.ProposalInput) ([]plannedFile, error) {
	if len(in.Files) == 0 {
		return nil, invalidParams("proposal.files", "a files proposal needs at least one file")
	}
	var out []plannedFile
	for i, f := range in.Files {
		field := "proposal.files[" + strconv.Itoa(i) + "]"
		p, err := e.cleanPath(field+".path", f.Path)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, set := range []bool{f.Content != nil, f.ContentBase64 != nil, f.Delete} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, invalidParams(field, "%s needs exactly one of content, contentBase64 or delete", field)
		}
		base, mode, exists, err := e.readBase(p)
		if err != nil {
			return nil, err
		}
		if f.Delete {
			if !exists {
				return nil, protocol.NewError(protocol.CodeNotFound, map[string]any{"path": p}, "cannot delete %s: it does not exist", p)
			}
			out = append(out, plannedFile{path: p, kind: protocol.ChangeDelete, old: base, oldMode: mode, oldExists: true})
			continue
		}
		var nb []byte
		if f.Content != nil {
			nb = []byte(*f.Content)
		} else if nb, err = base64.StdEncoding.DecodeString(*f.ContentBase64); err != nil {
			return nil, invalidParams(field+".contentBase64", "contentBase64 is not base64: %v", err)
		}
		if exists && bytes.Equal(base, nb) {
			continue // unchanged: not part of the patchset
		}
		pf := plannedFile{path: p, kind: protocol.ChangeAdd, new: nb, newMode: 0o644}
		if exists {
			pf = plannedFile{path: p, kind: protocol.ChangeModify, old: base, oldMode: mode, oldExists: true, new: nb, newMode: mode}
		}
		out = append(out, pf)
	}
	return out, nil
}

// planRemoveTodo implements seed 001's remove_todo_multi: every line that
// contains the needle is removed from each target file. A target without
// the needle is left out of the patchset; a missing target is an error.
func (e *Engine) planRemoveTodo(in *protocol.ProposalInput) ([]plannedFile, error) {
	if in.Needle == "" {
		return nil, invalidParams("proposal.needle", "remove_todo_multi needs a non-empty needle")
	}
	if len(in.TargetFiles) == 0 {
		return nil, invalidParams("proposal.targetFiles", "remove_todo_multi needs targetFiles")
	}
	var out []plannedFile
	for i, tf := range in.TargetFiles {
		p, err := e.cleanPath("proposal.targetFiles["+strconv.Itoa(i)+"]", tf)
		if err != nil {
			return nil, err
		}
		base, mode, exists, err := e.readBase(p)
		if err != nil {
			return nil, err
		}
		if !exists {
			return nil, protocol.NewError(protocol.CodeNotFound, map[string]any{"path": p}, "target file %s does not exist", p)
		}
		var nb []byte
		for rest := base; len(rest) > 0; {
			line := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				line = rest[:i+1]
			}
			rest = rest[len(line):]
			if !bytes.Contains(line, []byte(in.Needle)) {
				nb = append(nb, line...)
			}
		}
		if bytes.Equal(nb, base) {
			continue
		}
		if nb == nil {
			nb = []byte{}
		}
		out = append(out, plannedFile{path: p, kind: protocol.ChangeModify, old: base, oldMode: mode, oldExists: true, new: nb, newMode: mode})
	}
	if len(out) == 0 {
		return nil, validationFailed(map[string]any{"reason": "needle-not-found", "needle": in.Needle}, "no target file contains the needle")
	}
	return out, nil
}

// canonicalDiff renders the planned files as one git-style diff, in path
// order, and redacts it. Findings in added lines are secret introductions.
func (e *Engine) canonicalDiff(files []plannedFile) (raw, redacted []byte, findings []protocol.SecretFinding) {
	var buf bytes.Buffer
	for _, f := range files {
		buf.Write(unidiff.FileDiff(f.path, f.path, f.old, f.new, f.oldExists, f.kind != protocol.ChangeDelete, f.oldMode, f.newMode))
	}
	raw = buf.Bytes()
	redacted, findings = e.redactDiff(raw)
	return raw, redacted, findings
}

// redactDiff redacts secrets in every content line of a diff we rendered
// ourselves (context, removed and added lines alike, so that no secret
// already in a file leaks into the store either) and reports the findings
// on added lines with their line number in the new file.
func (e *Engine) redactDiff(raw []byte) ([]byte, []protocol.SecretFinding) {
	lines := strings.SplitAfter(string(raw), "\n")
	type ref struct {
		idx     int
		path    string
		newLine int
		added   bool
	}
	var content []string
	var refs []ref
	path, newLine := "", 0
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			path = ""
		case strings.HasPrefix(l, "+++ "):
			if p := strings.TrimRight(strings.TrimPrefix(l, "+++ "), "\n"); p != "/dev/null" {
				path = strings.TrimPrefix(p, "b/")
			}
		case strings.HasPrefix(l, "--- "):
			if path == "" {
				if p := strings.TrimRight(strings.TrimPrefix(l, "--- "), "\n"); p != "/dev/null" {
					path = strings.TrimPrefix(p, "a/")
				}
			}
		case strings.HasPrefix(l, "@@ "):
			newLine = hunkNewStart(l)
		case len(l) > 0 && (l[0] == ' ' || l[0] == '+' || l[0] == '-'):
			body := strings.TrimSuffix(l[1:], "\n")
			content = append(content, body)
			refs = append(refs, ref{idx: i, path: path, newLine: newLine, added: l[0] == '+'})
			if l[0] != '-' {
				newLine++
			}
		}
	}
	red, found := e.scanner.RedactLines(content)
	var findings []protocol.SecretFinding
	for _, f := range found {
		r := refs[f.Line-1]
		if r.added {
			findings = append(findings, protocol.SecretFinding{Path: r.path, Rule: f.Rule, Line: r.newLine})
		}
	}
	for j, r := range refs {
		l := lines[r.idx]
		nl := ""
		if strings.HasSuffix(l, "\n") {
			nl = "\n"
		}
		lines[r.idx] = l[:1] + red[j] + nl
	}
	return []byte(strings.Join(lines, "")), findings
}

// hunkNewStart reads c from "@@ -a,b +c,d @@".
func hunkNewStart(h string) int {
	i := strings.Index(h, " +")
	if i < 0 {
		return 0
	}
	s := h[i+2:]
	j := strings.IndexAny(s, ", ")
	if j >= 0 {
		s = s[:j]
	}
	n, _ := strconv.Atoi(s)
	return n
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (e *Engine) persistProposal(ctx context.Context, in *protocol.ProposalInput, files []plannedFile) (*protocol.TurnStartResult, error) {
	raw, redacted, findings := e.canonicalDiff(files)
	patchID := sha256Hex(raw)
	txID := newID("tx")
	turnID := newID("turn")
	itemID := newID("item")
	diffItemID := newID("item")

	ptr := &protocol.ProposalPointer{
		Kind:                        in.Kind,
		WorkspaceRoot:               e.ws.Dir(),
		Needle:                      in.Needle,
		BaseSHA256ByPath:            map[string]string{},
		PatchID:                     patchID,
		PatchFingerprint:            protocol.ApprovalPatchset + ":" + patchID,
		ContainsSecretIntroductions: len(findings) > 0,
		ProposalTurnID:              turnID,
		ProposalItemID:              itemID,
		PatchPath:                   PatchFile,
	}
	changes := make([]protocol.FileChange, 0, len(files))
	for _, f := range files {
		ptr.TargetFiles = append(ptr.TargetFiles, f.path)
		changes = append(changes, protocol.FileChange{Path: f.path, Kind: f.kind})
		pc := protocol.PlannedChange{Path: f.path, Kind: f.kind}
		if f.oldExists {
			ptr.BaseSHA256ByPath[f.path] = sha256Hex(f.old)
		}
		if f.kind != protocol.ChangeDelete {
			pc.NewSHA256 = sha256Hex(f.new)
			pc.NewMode = f.newMode
		}
		ptr.Changes = append(ptr.Changes, pc)
	}

	tmp := filepath.Join(e.txRoot, ".tmp-"+txID)
	final := filepath.Join(e.txRoot, txID)
	t := &transaction{id: txID, dir: tmp, sem: make(chan struct{}, 1)}
	fileItem := &protocol.Item{ID: itemID, Type: protocol.ItemFileChange, Changes: changes}
	diffItem := &protocol.Item{ID: diffItemID, Type: protocol.ItemTurnDiff, Diff: string(redacted)}
	var evs []protocol.Event
	// The ledger, transaction.json, proposal.patch and the blobs are
	// independent files: write and fsync them together (see parallel).
	err := e.writeProposalDir(tmp, files, redacted, func() error {
		led, err := createLedger(filepath.Join(tmp, LedgerFile), txID, e.opts.Failpoints)
		if err != nil {
			return err
		}
		t.led = led
		evs, err = led.append(
			protocol.Event{Type: protocol.EventTurnStart, TurnID: turnID, ProposalKind: in.Kind, Proposal: ptr},
			protocol.Event{Type: protocol.EventTurnItem, TurnID: turnID, Item: fileItem},
			protocol.Event{Type: protocol.EventTurnItem, TurnID: turnID, Item: diffItem},
			protocol.Event{Type: protocol.EventTxStatus, Status: protocol.StateProposed},
		)
		if err != nil {
			return err
		}
		t.meta = protocol.TransactionFile{SchemaVersion: 1, TransactionID: txID, CreatedAt: evs[0].TS, UpdatedAt: evs[len(evs)-1].TS,
			State: protocol.StateProposed, WorkspaceRoot: e.ws.Dir(), Pointers: protocol.Pointers{Proposal: ptr}}
		return writeFileSync(filepath.Join(tmp, MetaFile), metaJSON(t.meta), 0o600)
	})
	if err == nil {
		err = e.opts.Failpoints.Hit(ctx, fpProposeBeforeRename)
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err == nil {
		err = syncDir(e.txRoot)
	}
	if err != nil {
		if t.led != nil {
			t.led.close()
		}
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("persist proposal: %w", err)
	}
	t.dir = final
	// The ledger file moved with its directory; the open descriptor still
	// names it, but later error messages should show the final path.
	t.led.path = filepath.Join(final, LedgerFile)
	// Hold the new transaction's lock until its first events are out, so no
	// call that finds it (through tx/list) can emit an event before them.
	t.sem <- struct{}{}
	e.mu.Lock()
	e.txs[txID] = t
	e.mu.Unlock()
	e.emit(evs)
	t.publish() // now tx/list shows it (see transaction.summary)
	t.release()

	sum := protocol.ProposalSummary{
		PatchID:                     patchID,
		Fingerprint:                 ptr.PatchFingerprint,
		TargetFiles:                 ptr.TargetFiles,
		Changes:                     changes,
		ContainsSecretIntroductions: len(findings) > 0,
		SecretFindings:              findings,
	}
	if utf8.Valid(redacted) {
		sum.Diff = string(redacted)
	} else {
		sum.DiffBase64 = base64.StdEncoding.EncodeToString(redacted)
	}
	return &protocol.TurnStartResult{TransactionID: txID, TurnID: turnID, State: protocol.StateProposed, Proposal: sum}, nil
}

// writeProposalDir creates dir and writes proposal.patch, the blobs and
// whatever more() writes, all fsynced concurrently, then fsyncs the
// directories so that their entries are durable before dir is renamed.
func (e *Engine) writeProposalDir(dir string, files []plannedFile, redacted []byte, more func() error) error {
	blobs := filepath.Join(dir, BlobDir)
	if err := os.MkdirAll(blobs, 0o700); err != nil {
		return err
	}
	contents := map[string][]byte{}
	for _, f := range files {
		if f.kind != protocol.ChangeDelete {
			contents[sha256Hex(f.new)] = f.new
		}
	}
	jobs := []func() error{
		more,
		func() error { return writeFileSync(filepath.Join(dir, PatchFile), redacted, 0o600) },
	}
	for sum, data := range contents {
		jobs = append(jobs, func() error { return writeFileSync(filepath.Join(blobs, sum), data, 0o600) })
	}
	if err := parallel(len(jobs), func(i int) error { return jobs[i]() }); err != nil {
		return err
	}
	return parallel(2, func(i int) error { return syncDir([]string{blobs, dir}[i]) })
}

// readBlob reads and verifies a new content by its sha256.
func (t *transaction) readBlob(sum string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(t.dir, BlobDir, sum))
	if err != nil {
		return nil, err
	}
	if sha256Hex(b) != sum {
		return nil, protocol.NewError(protocol.CodeLedgerCorrupt, map[string]any{"transactionId": t.id, "file": filepath.Join(t.dir, BlobDir, sum), "reason": "blob checksum mismatch"},
			"blob %s of transaction %s is corrupt", sum, t.id)
	}
	return b, nil
}
