package workspace

// This file plans the workspace's edit-format kinds (issue 36): Codex's
// apply_patch envelope, Anthropic's text-editor commands, and the
// traditional unified diffs git apply takes under unified_diff. Each
// resolves, against the bases read through the sandbox, to the new
// content of each file, and is then planned like a files proposal: one
// canonical diff, the same patch id, stale-base check, secrets gating and
// recovery.

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/txkernel/txkernel/editformat"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

// EditFormats holds the members of Input only the edit-format kinds read
// (PROTOCOL.md §4.1).
// Input embeds it so that workspace.go and plan.go keep their shape.
type EditFormats struct {
	// Patch is an apply_patch proposal's envelope ("*** Begin Patch" …).
	Patch *string `json:"patch,omitempty"`
	// Edits are an edits proposal's commands, applied in order.
	Edits []protocol.EditInput `json:"edits,omitempty"`
	// Strip is a unified_diff's -p for a traditional diff (nil: git's
	// default); Recount recounts its hunks (git apply --recount).
	Strip   *int `json:"strip,omitempty"`
	Recount bool `json:"recount,omitempty"`

	// tolerances collects what the planner accepted only by a tolerance;
	// Plan reports them in the proposal. normalized caches the
	// unified_diff as NormalizeDiff rewrote it.
	tolerances []protocol.Tolerance
	normalized []byte
}

func init() {
	planners[protocol.KindApplyPatch] = (*Target).planApplyPatch
	planners[protocol.KindEdits] = (*Target).planEdits
}

// normalizedDiff is a unified_diff proposal's diff as package unidiff
// parses it (editformat.NormalizeDiff): a traditional diff gets git
// headers, and the tolerances used are recorded in in. The planner and
// the stored diff both use it, so that an apply derives the same files.
func normalizedDiff(in *Input) ([]byte, error) {
	if in.normalized != nil {
		return in.normalized, nil
	}
	raw, err := diffInput(in)
	if err != nil {
		return nil, err
	}
	out, tols, err := editformat.NormalizeDiff("proposal.diff", raw, editformat.DiffOptions{Strip: in.Strip, Recount: in.Recount})
	if err != nil {
		return nil, err
	}
	in.normalized = out
	in.tolerances = append(in.tolerances, tols...)
	return out, nil
}

// editFile is one file an edit-format proposal touches: its base as read
// through the sandbox, and its content after the edits so far.
type editFile struct {
	base       []byte
	baseMode   uint32
	baseExists bool
	cur        []byte
	mode       uint32
	exists     bool
}

// editState is the workspace as an edit-format proposal changes it, one
// edit after the other; nothing is written.
type editState struct {
	d     *sandbox.Dirs
	files map[string]*editFile
	order []string
}

func newEditState(d *sandbox.Dirs) *editState {
	return &editState{d: d, files: map[string]*editFile{}}
}

// get returns path's state, reading its base through the sandbox on
// first use.
func (s *editState) get(path string) (*editFile, error) {
	if f, ok := s.files[path]; ok {
		return f, nil
	}
	base, mode, exists, err := readBase(s.d, path)
	if err != nil {
		return nil, err
	}
	f := &editFile{base: base, baseMode: mode, baseExists: exists, cur: base, mode: mode, exists: exists}
	if !exists {
		f.mode = 0o644
	}
	s.files[path] = f
	s.order = append(s.order, path)
	return f, nil
}

// planned is what the edits make of each file: a delete, an add or a
// modify; a file that ends as it began is left out.
func (s *editState) planned() []plannedFile {
	var out []plannedFile
	for _, p := range s.order {
		f := s.files[p]
		switch {
		case f.baseExists && !f.exists:
			out = append(out, plannedFile{path: p, kind: protocol.ChangeDelete, old: f.base, oldMode: f.baseMode, oldExists: true})
		case !f.baseExists && f.exists:
			out = append(out, plannedFile{path: p, kind: protocol.ChangeAdd, new: nonNil(f.cur), newMode: f.mode})
		case f.baseExists && f.exists && (!bytes.Equal(f.base, f.cur) || f.mode != f.baseMode):
			out = append(out, plannedFile{path: p, kind: protocol.ChangeModify, old: f.base, oldMode: f.baseMode, oldExists: true, new: nonNil(f.cur), newMode: f.mode})
		}
	}
	return out
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// missingFile is the NotFound error of an edit on a file that does not
// exist (at that point of the proposal).
func missingFile(field, path string, hunk int, what string) error {
	return errs.New(errs.NotFound, editformat.ErrorData{Field: field, Path: path, Hunk: hunk, Reason: editformat.ReasonMissingFile},
		"%s: cannot %s %s: it does not exist", field, what, path)
}

// planApplyPatch plans Codex's apply_patch envelope (editformat): its
// sections apply in order, each seeing the ones before it, with Codex's
// semantics: an add over an existing file and a move onto one overwrite
// it (both reported as tolerances); an update or a delete of a missing
// file, a directory, or any hunk not found refuses the whole proposal.
func (w *Target) planApplyPatch(d *sandbox.Dirs, in *Input) ([]plannedFile, []protocol.HunkOffset, error) {
	const field = "proposal.patch"
	if in.Patch == nil {
		return nil, nil, errs.InvalidField(field, "an apply_patch proposal needs patch, the \"*** Begin Patch\" envelope")
	}
	env, err := editformat.ParseEnvelope(field, *in.Patch)
	if err != nil {
		return nil, nil, err
	}
	in.tolerances = append(in.tolerances, env.Tolerances...)
	st := newEditState(d)
	for i := range env.Sections {
		sec := &env.Sections[i]
		path, err := w.cleanPath(field, sec.Path)
		if err != nil {
			return nil, nil, err
		}
		f, err := st.get(path)
		if err != nil {
			return nil, nil, err
		}
		switch sec.Op {
		case editformat.OpAdd:
			if f.exists {
				in.tolerances = append(in.tolerances, protocol.Tolerance{Path: path, Tolerance: "add-overwrites", PatchLine: sec.Line})
			}
			f.cur, f.exists = []byte(sec.Contents), true
		case editformat.OpDelete:
			if !f.exists {
				return nil, nil, missingFile(field, path, 0, "delete")
			}
			f.cur, f.exists = nil, false
		case editformat.OpUpdate:
			if !f.exists {
				return nil, nil, missingFile(field, path, 0, "update")
			}
			nb, matches, err := editformat.UpdateFile(field, path, sec, f.cur)
			if err != nil {
				return nil, nil, err
			}
			for _, m := range matches {
				in.tolerances = append(in.tolerances, protocol.Tolerance{Path: path, Hunk: m.Hunk, Tolerance: m.Tolerance, Line: m.Line, PatchLine: sec.Hunks[m.Hunk-1].Line})
			}
			if sec.MoveTo == "" {
				f.cur = nb
				break
			}
			to, err := w.cleanPath(field, sec.MoveTo)
			if err != nil {
				return nil, nil, err
			}
			if to == path {
				f.cur = nb
				break
			}
			dst, err := st.get(to)
			if err != nil {
				return nil, nil, err
			}
			if dst.exists {
				in.tolerances = append(in.tolerances, protocol.Tolerance{Path: to, Tolerance: "move-overwrites", PatchLine: sec.Line})
			}
			dst.cur, dst.exists, dst.mode = nb, true, f.mode
			f.cur, f.exists = nil, false
		}
	}
	return st.planned(), nil, nil
}

// planEdits plans an edits proposal: Anthropic's text-editor commands,
// applied in order, each seeing the ones before it (several on one file
// included). Any refusal refuses the whole proposal.
func (w *Target) planEdits(d *sandbox.Dirs, in *Input) ([]plannedFile, []protocol.HunkOffset, error) {
	if len(in.Edits) == 0 {
		return nil, nil, errs.InvalidField("proposal.edits", "an edits proposal needs at least one edit")
	}
	st := newEditState(d)
	for i, e := range in.Edits {
		field := "proposal.edits[" + strconv.Itoa(i) + "]"
		if err := checkEditMembers(field, &e); err != nil {
			return nil, nil, err
		}
		path, err := w.cleanHostPath(field+".path", e.Path)
		if err != nil {
			return nil, nil, err
		}
		f, err := st.get(path)
		if err != nil {
			return nil, nil, err
		}
		switch e.Command {
		case "str_replace":
			if !f.exists {
				return nil, nil, missingFile(field, path, 0, "str_replace in")
			}
			newStr := ""
			if e.NewStr != nil {
				newStr = *e.NewStr
			}
			if f.cur, err = editformat.StrReplace(field, path, f.cur, *e.OldStr, newStr, e.ReplaceAll); err != nil {
				return nil, nil, err
			}
		case "insert":
			if !f.exists {
				return nil, nil, missingFile(field, path, 0, "insert into")
			}
			if f.cur, err = editformat.Insert(field, path, f.cur, *e.InsertLine, *e.NewStr); err != nil {
				return nil, nil, err
			}
		case "create":
			if f.exists && !e.Overwrite {
				return nil, nil, errs.New(errs.Validation, editformat.ErrorData{Field: field, Path: path, Reason: editformat.ReasonExists},
					"%s: cannot create %s: it exists (set overwrite: true to replace it)", field, path)
			}
			f.cur, f.exists = []byte(*e.FileText), true
		case "delete":
			if !f.exists {
				return nil, nil, missingFile(field, path, 0, "delete")
			}
			f.cur, f.exists = nil, false
		}
	}
	return st.planned(), nil, nil
}

// editMembers are the members each command needs and may have (besides
// command and path).
var editMembers = map[string]struct{ need, may []string }{
	"str_replace": {need: []string{"old_str"}, may: []string{"new_str", "replace_all"}},
	"insert":      {need: []string{"insert_line", "new_str"}},
	"create":      {need: []string{"file_text"}, may: []string{"overwrite"}},
	"delete":      {},
}

// checkEditMembers refuses an unknown command, a missing member, and a
// member the command does not take (-32602, field proposal.edits[i] or
// proposal.edits[i].<member>).
func checkEditMembers(field string, e *protocol.EditInput) error {
	spec, ok := editMembers[e.Command]
	if !ok {
		return errs.New(errs.Invalid, editformat.ErrorData{Field: field + ".command", Path: e.Path, Reason: editformat.ReasonUnknownCommand},
			"%s: unknown command %q: use str_replace, insert, create or delete", field, e.Command)
	}
	has := map[string]bool{
		"old_str": e.OldStr != nil, "new_str": e.NewStr != nil, "replace_all": e.ReplaceAll,
		"insert_line": e.InsertLine != nil, "file_text": e.FileText != nil, "overwrite": e.Overwrite,
	}
	for _, m := range spec.need {
		if !has[m] {
			return errs.New(errs.Invalid, editformat.ErrorData{Field: field + "." + m, Path: e.Path, Reason: editformat.ReasonMissingMember},
				"%s: %s needs %s", field, e.Command, m)
		}
	}
	for _, m := range []string{"old_str", "new_str", "replace_all", "insert_line", "file_text", "overwrite"} {
		if has[m] && !slices.Contains(spec.need, m) && !slices.Contains(spec.may, m) {
			return errs.New(errs.Invalid, editformat.ErrorData{Field: field + "." + m, Path: e.Path, Reason: editformat.ReasonUnexpectedMember},
				"%s: %s does not take %s", field, e.Command, m)
		}
	}
	return nil
}
