package protocol

// Proposal kinds of the workspace that carry a model's own edit format
// (PROTOCOL.md §4.1, issue 36). Each is planned into whole new contents
// and proposed exactly like KindFiles.
const (
	// KindApplyPatch is Codex's "*** Begin Patch" envelope in Patch.
	KindApplyPatch = "apply_patch"
	// KindEdits is a list of Anthropic text-editor commands in Edits.
	KindEdits = "edits"
)

// EditInput is one command of an edits proposal, with the member names of
// Anthropic's text-editor tool: str_replace {path, old_str, new_str,
// replace_all?}, insert {path, insert_line, new_str}, create {path,
// file_text, overwrite?}, delete {path}.
type EditInput struct {
	Command    string  `json:"command"`
	Path       string  `json:"path"`
	OldStr     *string `json:"old_str,omitempty"`
	NewStr     *string `json:"new_str,omitempty"`
	ReplaceAll bool    `json:"replace_all,omitempty"`
	InsertLine *int    `json:"insert_line,omitempty"`
	FileText   *string `json:"file_text,omitempty"`
	Overwrite  bool    `json:"overwrite,omitempty"`
}

// Tolerance reports one place where a proposal was accepted only by a
// tolerance a reviewer should know about: a hunk whose lines matched only
// after ignoring white space or normalising punctuation, a diff whose
// hunk counts were recounted, a final newline supplied, and so on.
type Tolerance struct {
	// Path is the file concerned; empty for the whole input (a supplied
	// final newline of the diff text).
	Path string `json:"path,omitempty"`
	// Hunk is the 1-based hunk in Path's section; 0 when not a hunk's.
	Hunk int `json:"hunk,omitempty"`
	// Tolerance names it: trailing-whitespace, surrounding-whitespace,
	// unicode-punctuation, final-blank-line, add-overwrites,
	// move-overwrites, padded-marker, heredoc (apply_patch); recount,
	// final-newline, crlf (unified_diff).
	Tolerance string `json:"tolerance"`
	// Line is the 1-based line of the current file where the hunk
	// matched (apply_patch hunks); 0 otherwise.
	Line int `json:"line,omitempty"`
	// PatchLine is the 1-based line of the patch or diff text concerned;
	// 0 when none.
	PatchLine int `json:"patchLine,omitempty"`
}
