package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/tx/record"
	"github.com/txkernel/txkernel/unidiff"
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
	// oldSum and newSum are the sha256 hex of old (when it exists) and
	// new (unless deleted), once canonicalDiff has run.
	oldSum, newSum string
}

// planners is the method table of proposal kinds.
var planners = map[string]func(w *Target, d *sandbox.Dirs, in *Input) ([]plannedFile, []protocol.HunkOffset, error){
	protocol.KindUnifiedDiff:     (*Target).planDiff,
	protocol.KindFiles:           (*Target).planFiles,
	protocol.KindRemoveTodoMulti: (*Target).planRemoveTodo,
}

// Plan implements tx.Target: body is an *Input (errs.Internal
// otherwise). It resolves every path strictly through the sandbox,
// computes each file's new bytes, and renders the canonical diff
// (redacted) whose sha256 is the patch id. *body is not modified.
func (w *Target) Plan(ctx context.Context, kind string, body any) (*tx.Plan, error) {
	plan, ok := planners[kind]
	if !ok {
		return nil, errs.InvalidField("proposal.kind", "the workspace does not plan %q", kind)
	}
	given, ok := body.(*Input)
	if !ok || given == nil {
		return nil, errs.New(errs.Internal, nil, "a workspace proposal takes a *workspace.Input, not a %T", body)
	}
	// The planners cache what they derive in their input (the normalized
	// diff, the tolerances): a copy keeps the caller's as it was, so the
	// same Input planned twice plans the same.
	in := new(Input)
	*in = *given
	in.tolerances, in.normalized = nil, nil
	// Every base is read through one set of open directories: each
	// directory on the way is checked once, not once per file.
	dirs := w.ws.OpenDirs()
	defer dirs.Close()
	// A unified diff keeps the diff rather than every new content: the
	// apply applies it again to the same bases (their hashes are checked
	// first) and checks each result's hash. For a sweeping edit the diff is
	// a fraction of the files it touches, and the proposal's durable write
	// shrinks with it. Its SHA-256 (the blob's name) is taken on another
	// goroutine from the start: the diff's parse has serial stretches that
	// leave a core idle, and the hash was a serial pass of its own. The
	// diff is normalized here, as planDiff would first (the same call, its
	// result cached in in), so its errors are planDiff's.
	var diff []byte
	var diffSum string
	summed := make(chan struct{})
	if kind == protocol.KindUnifiedDiff {
		var err error
		if diff, err = normalizedDiff(in); err != nil {
			return nil, w.classify(err)
		}
		go func() {
			diffSum = sha256Hex(diff)
			close(summed)
		}()
	} else {
		close(summed)
	}
	files, hunks, err := plan(w, dirs, in)
	if err != nil {
		return nil, w.classify(err)
	}
	if err := w.checkPlanned(files); err != nil {
		return nil, w.classify(err)
	}
	// A file the plan leaves as it is (a diff's "old mode 100644"/"new
	// mode 100644" on a 0644 file) is not part of the patchset, as an
	// unchanged file of a files proposal is not: its diff would be empty,
	// and every such change would share the patch id of the empty diff.
	files = slices.DeleteFunc(files, func(f plannedFile) bool {
		return f.kind == protocol.ChangeModify && f.oldMode == f.newMode && bytes.Equal(f.old, f.new)
	})
	slices.SortFunc(files, func(a, b plannedFile) int { return strings.Compare(a.path, b.path) })
	raw, redacted, findings := w.canonicalDiff(files)
	<-summed
	out := &tx.Plan{
		Pointer:    record.Proposal{WorkspaceRoot: w.ws.Dir(), Needle: in.Needle, BaseSHA256ByPath: map[string]string{}},
		Canonical:  raw,
		Redacted:   redacted,
		Findings:   findings,
		Blobs:      map[string][]byte{},
		Hunks:      hunks,
		Tolerances: in.tolerances,
		Changes:    make([]protocol.FileChange, 0, len(files)),
	}
	if kind == protocol.KindUnifiedDiff {
		out.Pointer.DiffSHA256 = diffSum
		out.Blobs[diffSum] = diff
	}
	for _, f := range files {
		out.Pointer.TargetFiles = append(out.Pointer.TargetFiles, f.path)
		out.Changes = append(out.Changes, protocol.FileChange{Path: f.path, Kind: f.kind})
		pc := record.PlannedChange{Path: f.path, Kind: f.kind}
		if f.oldExists {
			out.Pointer.BaseSHA256ByPath[f.path] = f.oldSum
		}
		if f.kind != protocol.ChangeDelete {
			pc.NewSHA256 = f.newSum
			pc.NewMode = f.newMode
			if diff == nil {
				out.Blobs[pc.NewSHA256] = f.new
			}
		}
		out.Pointer.Changes = append(out.Pointer.Changes, pc)
	}
	return out, nil
}

// checkPlanned refuses a plan that changes one file twice, under two names
// of one file, or a protected path.
func (w *Target) checkPlanned(files []plannedFile) error {
	seen := map[string]bool{}
	folded := map[string]string{}
	for _, f := range files {
		if seen[f.path] {
			return errs.New(errs.Validation, PathData{Path: f.path, Reason: "duplicate"}, "the proposal changes %s twice", f.path)
		}
		seen[f.path] = true
		// Two names for one file on NTFS, APFS or HFS+: the second write
		// would land on the first, and its base was never checked.
		key := sandbox.FoldPath(f.path)
		if other, ok := folded[key]; ok {
			return errs.New(errs.Validation, PathData{Path: f.path, CollidesWith: other, Reason: "case-collision"},
				"the proposal changes %s and %s, which name the same file on a case-insensitive file system", other, f.path)
		}
		folded[key] = f.path
		// Proposals work in a read-only sandbox; only protected paths are
		// refused here. The apply checks again, with the write rules.
		if err := w.ws.CheckWritable(f.path); err != nil && !errors.Is(err, sandbox.ErrReadOnly) {
			return err
		}
	}
	return nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// readBase reads a target's current bytes through the sandbox, in d.
func readBase(d *sandbox.Dirs, rel string) (data []byte, mode uint32, exists bool, err error) {
	data, m, exists, err := d.ReadFile(rel)
	if err != nil {
		return nil, 0, false, err
	}
	return data, uint32(m.Perm()), exists, nil
}

// cleanPath validates a path from the host or a diff (see
// sandbox.CleanPath). A path that names no file (empty, or "." after
// cleaning) is a missing required value: errs.Invalid {field, path,
// reason: "empty"}. Every other refusal (NUL byte, too long, backslash,
// absolute, "..") is a sandbox violation like a protected or symlinked
// path: errs.Sandbox {field, path, reason, sandbox}, so that every path a
// sandbox rule refuses has one kind and field still names where the path
// came from.
func (w *Target) cleanPath(field, p string) (string, error) {
	c, err := sandbox.CleanPath(p)
	var pe *sandbox.PathError
	if err == nil || !errors.As(err, &pe) {
		return c, err
	}
	if pe.Reason == "empty" {
		return "", errs.New(errs.Invalid, emptyPathData{Field: field, Path: p, Reason: pe.Reason}, "%s: the path names no file", field)
	}
	return "", errs.Wrap(errs.Sandbox, err, SandboxData{Field: field, Path: p, Reason: pe.Reason, Sandbox: string(w.ws.Mode())},
		"sandbox violation: %s: %v", field, pe)
}

// cleanHostPath is cleanPath for a path a host names (files[i].path,
// targetFiles[i]): an absolute path or a file:// URI inside the
// workspace is made relative first (sandbox.Workspace.HostPath). Paths
// inside a diff stay strictly relative, as git apply wants them.
func (w *Target) cleanHostPath(field, p string) (string, error) {
	rel, err := w.ws.HostPath(p)
	var pe *sandbox.PathError
	if errors.As(err, &pe) {
		return "", errs.Wrap(errs.Sandbox, err, SandboxData{Field: field, Path: p, Reason: pe.Reason, Sandbox: string(w.ws.Mode()), WorkspaceRoot: pe.Root},
			"sandbox violation: %s: %v", field, pe)
	}
	return w.cleanPath(field, rel)
}

// emptyPathData is the data of the Invalid error for a path that names no
// file: the path is always there, even when it is "".
type emptyPathData struct {
	Field  string `json:"field"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func (w *Target) planDiff(d *sandbox.Dirs, in *Input) ([]plannedFile, []protocol.HunkOffset, error) {
	raw, err := normalizedDiff(in)
	if err != nil {
		return nil, nil, err
	}
	return w.applyDiff(d, raw)
}

// diffInput is a unified_diff proposal's diff, as bytes: diff, or
// diffBase64 decoded.
func diffInput(in *Input) ([]byte, error) {
	switch {
	case in.Diff != nil && in.DiffBase64 != nil:
		return nil, errs.InvalidField("proposal.diff", "give diff or diffBase64, not both")
	case in.Diff != nil:
		return []byte(*in.Diff), nil
	case in.DiffBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.DiffBase64)
		if err != nil {
			return nil, errs.InvalidField("proposal.diffBase64", "diffBase64 is not base64: %v", err)
		}
		return b, nil
	}
	return nil, errs.InvalidField("proposal.diff", "a unified_diff proposal needs diff or diffBase64")
}

// applyDiff parses raw and applies it to the files it names, read through
// d: the planned files, and the hunks that applied at an offset. It is
// deterministic: the same diff on the same bases gives the same files,
// which is what lets an apply derive the new contents from the diff again
// (planned.derivations).
func (w *Target) applyDiff(d *sandbox.Dirs, raw []byte) ([]plannedFile, []protocol.HunkOffset, error) {
	patches, err := unidiff.Parse(raw)
	if err != nil {
		var pe *unidiff.ParseError
		var me *unidiff.ModeError
		if errors.As(err, &me) {
			return nil, nil, errs.Wrap(errs.Invalid, err, ModeData{Field: "proposal.diff", ModeData: me.ErrorData().(unidiff.ModeData)},
				"proposal.diff: line %d: file mode %s is not allowed (only 100644 and 100755): %q", me.Line, me.Mode, me.Text)
		}
		if errors.As(err, &pe) {
			return nil, nil, errs.Wrap(errs.Validation, err, pe.ErrorData(), "the diff cannot be parsed: %v", err)
		}
		return nil, nil, err
	}
	// The files are read and patched on every core, each on its own;
	// their results are then taken in diff order, so the first error and
	// the order of files, offsets and conflicts are the diff's.
	results := make([]patchResult, len(patches))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range patches {
		g.Go(func() error {
			results[i] = w.applyPatch(d, p)
			return nil
		})
	}
	g.Wait() // the jobs return no error
	var out []plannedFile
	var hunks []protocol.HunkOffset
	var conflicts []*unidiff.ConflictError
	for _, r := range results {
		if r.err != nil {
			return nil, nil, r.err
		}
		// A conflict is collected so that one error reports every file
		// that does not apply.
		if r.conflict != nil {
			conflicts = append(conflicts, r.conflict)
		}
		out = append(out, r.files...)
		hunks = append(hunks, r.hunks...)
	}
	if len(conflicts) > 0 {
		return nil, nil, conflictsError(conflicts)
	}
	return out, hunks, nil
}

// ModeData is the data of the errs.Invalid error for a diff line whose
// file mode is not 100644 or 100755: the params field the diff came from,
// and the line (unidiff.ModeData: line, text, mode, reason "mode",
// allowed).
type ModeData struct {
	Field string `json:"field"`
	unidiff.ModeData
}

// patchResult is one file patch of a diff applied: the planned files (two
// for a rename), the hunks that applied at an offset, or the conflict or
// error that stopped it.
type patchResult struct {
	files    []plannedFile
	hunks    []protocol.HunkOffset
	conflict *unidiff.ConflictError
	err      error
}

// applyPatch reads p's base through d, checks what must and must not
// exist, and applies p.
func (w *Target) applyPatch(d *sandbox.Dirs, p *unidiff.FilePatch) (r patchResult) {
	oldPath, newPath := p.OldPath, p.NewPath
	if oldPath != "" {
		if oldPath, r.err = w.cleanPath("proposal.diff", oldPath); r.err != nil {
			return r
		}
	}
	if newPath != "" {
		if newPath, r.err = w.cleanPath("proposal.diff", newPath); r.err != nil {
			return r
		}
	}
	// apply applies p to base, recording its offsets and its conflict.
	apply := func(path string, base []byte) ([]byte, bool) {
		nb, applied, err := p.ApplyWithOffsets(base)
		var ce *unidiff.ConflictError
		if errors.As(err, &ce) {
			ce.Path = path // the cleaned path, as every other error names it
			r.conflict = ce
			return nil, false
		}
		if err != nil {
			r.err = err
			return nil, false
		}
		for _, h := range applied {
			if h.Offset != 0 {
				r.hunks = append(r.hunks, protocol.HunkOffset{Path: path, Hunk: h.Hunk, OldStart: h.OldStart, AppliedAt: h.AppliedAt, Offset: h.Offset})
			}
		}
		return nb, true
	}
	// absent fails r unless nothing is at path yet.
	absent := func(path, what string) bool {
		_, _, exists, err := readBase(d, path)
		switch {
		case err != nil:
			r.err = err
		case exists:
			r.err = errs.New(errs.Validation, PathData{Path: path, Reason: "exists"}, "the diff %s %s, which already exists", what, path)
		}
		return r.err == nil
	}
	switch p.Kind {
	case protocol.ChangeAdd:
		if !absent(newPath, "adds") {
			return r
		}
		if nb, ok := apply(newPath, nil); ok {
			r.files = []plannedFile{{path: newPath, kind: protocol.ChangeAdd, new: nb, newMode: modeOr(p.NewMode, 0o644)}}
		}
	case protocol.ChangeDelete, protocol.ChangeModify, unidiff.KindRename:
		base, mode, exists, err := readBase(d, oldPath)
		if err != nil {
			r.err = err
			return r
		}
		if !exists {
			r.err = errs.New(errs.NotFound, PathData{Path: oldPath}, "the diff changes %s, which does not exist", oldPath)
			return r
		}
		nb, ok := apply(oldPath, base)
		if !ok {
			return r
		}
		switch p.Kind {
		case protocol.ChangeDelete:
			r.files = []plannedFile{{path: oldPath, kind: protocol.ChangeDelete, old: base, oldMode: mode, oldExists: true}}
		case protocol.ChangeModify:
			r.files = []plannedFile{{path: oldPath, kind: protocol.ChangeModify, old: base, oldMode: mode, oldExists: true, new: nb, newMode: modeOr(p.NewMode, mode)}}
		default: // a rename is a delete of the old path and an add of the new one
			if !absent(newPath, "renames onto") {
				return r
			}
			r.files = []plannedFile{
				{path: oldPath, kind: protocol.ChangeDelete, old: base, oldMode: mode, oldExists: true},
				{path: newPath, kind: protocol.ChangeAdd, new: nb, newMode: modeOr(p.NewMode, mode)},
			}
		}
	default:
		r.err = errs.New(errs.Validation, PathData{Path: newPath, Reason: "unsupported"}, "unsupported change kind %q", p.Kind)
	}
	return r
}

// ConflictsData is the data of an errs.Conflict error from a unified diff:
// every file that does not apply (its first failing hunk, the old-file
// line the hunk names, the expected and the actual text, and why), and the
// first one's path, hunk and reason at the top level, the shape of earlier
// releases. Expected and Actual carry file content: the kernel redacts
// them like every error it sends.
type ConflictsData struct {
	Path      string                 `json:"path"`
	Hunk      int                    `json:"hunk"`
	Reason    string                 `json:"reason"`
	Conflicts []unidiff.ConflictData `json:"conflicts"`
}

func conflictsError(cs []*unidiff.ConflictError) error {
	d := ConflictsData{Path: cs[0].Path, Hunk: cs[0].Hunk, Reason: cs[0].Reason}
	var names []string
	for _, c := range cs {
		cd := c.ErrorData().(unidiff.ConflictData)
		cd.Expected, cd.Actual = clip(cd.Expected), clip(cd.Actual)
		d.Conflicts = append(d.Conflicts, cd)
		names = append(names, fmt.Sprintf("%s (hunk %d)", c.Path, c.Hunk))
	}
	if len(cs) == 1 {
		return errs.Wrap(errs.Conflict, cs[0], d, "the diff does not apply to %s (hunk %d): %s", cs[0].Path, cs[0].Hunk, cs[0].Reason)
	}
	return errs.Wrap(errs.Conflict, cs[0], d, "the diff does not apply to %d files: %s", len(cs), strings.Join(names, ", "))
}

// maxConflictText bounds the expected and actual text of one conflict on
// the wire: a hunk of a thousand lines must not make a megabyte error.
const maxConflictText = 4096

// clip cuts s to maxConflictText bytes, at a line end when there is one,
// and says so.
func clip(s string) string {
	if len(s) <= maxConflictText {
		return s
	}
	cut := s[:maxConflictText]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i+1]
	}
	return cut + fmt.Sprintf("[… %d more bytes]", len(s)-len(cut))
}

func modeOr(m, def uint32) uint32 {
	if m&0o777 == 0 {
		return def
	}
	return m & 0o777
}

func (w *Target) planFiles(d *sandbox.Dirs, in *Input) ([]plannedFile, []protocol.HunkOffset, error) {
	if len(in.Files) == 0 {
		return nil, nil, errs.InvalidField("proposal.files", "a files proposal needs at least one file")
	}
	var out []plannedFile
	for i, f := range in.Files {
		field := "proposal.files[" + strconv.Itoa(i) + "]"
		p, err := w.cleanHostPath(field+".path", f.Path)
		if err != nil {
			return nil, nil, err
		}
		n := 0
		for _, set := range []bool{f.Content != nil, f.ContentBase64 != nil, f.Delete} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, nil, errs.InvalidField(field, "%s needs exactly one of content, contentBase64 or delete", field)
		}
		base, mode, exists, err := readBase(d, p)
		if err != nil {
			return nil, nil, err
		}
		if f.Delete {
			if !exists {
				return nil, nil, errs.New(errs.NotFound, PathData{Path: p}, "cannot delete %s: it does not exist", p)
			}
			out = append(out, plannedFile{path: p, kind: protocol.ChangeDelete, old: base, oldMode: mode, oldExists: true})
			continue
		}
		var nb []byte
		if f.Content != nil {
			nb = []byte(*f.Content)
		} else if nb, err = base64.StdEncoding.DecodeString(*f.ContentBase64); err != nil {
			return nil, nil, errs.InvalidField(field+".contentBase64", "contentBase64 is not base64: %v", err)
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
	return out, nil, nil
}

// planRemoveTodo implements seed 001's remove_todo_multi: every line that
// contains the needle is removed from each target file. A target without
// the needle is left out of the patchset; a missing target is an error.
func (w *Target) planRemoveTodo(d *sandbox.Dirs, in *Input) ([]plannedFile, []protocol.HunkOffset, error) {
	if in.Needle == "" {
		return nil, nil, errs.InvalidField("proposal.needle", "remove_todo_multi needs a non-empty needle")
	}
	if len(in.TargetFiles) == 0 {
		return nil, nil, errs.InvalidField("proposal.targetFiles", "remove_todo_multi needs targetFiles")
	}
	var out []plannedFile
	for i, tf := range in.TargetFiles {
		p, err := w.cleanHostPath("proposal.targetFiles["+strconv.Itoa(i)+"]", tf)
		if err != nil {
			return nil, nil, err
		}
		base, mode, exists, err := readBase(d, p)
		if err != nil {
			return nil, nil, err
		}
		if !exists {
			return nil, nil, errs.New(errs.NotFound, PathData{Path: p}, "target file %s does not exist", p)
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
		return nil, nil, errs.New(errs.Validation, PathData{Reason: "needle-not-found", Needle: in.Needle}, "no target file contains the needle")
	}
	return out, nil, nil
}
