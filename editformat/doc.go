// Package editformat reads the edit formats coding models emit and turns
// each into whole new file contents, so that the workspace target can plan
// them like a files proposal (PROTOCOL.md §4.1, issue 36):
//
//   - Codex's apply_patch envelope ("*** Begin Patch" … "*** End Patch"):
//     ParseEnvelope, and Envelope's file sections applied to their bases by
//     UpdateFile, which seeks each hunk's lines as Codex's seek_sequence does
//     (exact, then ignoring trailing white space, then ignoring leading and
//     trailing white space, then with Unicode punctuation normalised);
//   - Anthropic's text-editor commands (str_replace, insert, create,
//     delete): StrReplace and Insert;
//   - traditional unified diffs, as git apply accepts them without a
//     "diff --git" line: NormalizeDiff rewrites any unified diff into the
//     git-style diff package unidiff parses, with the tolerances it used.
//
// The package reads no files: callers pass each base's bytes and decide
// what exists. Every refusal is an *errs.Error carrying an ErrorData; every
// tolerance a caller must show the reviewer is a protocol.Tolerance.
package editformat

import (
	"github.com/txkernel/txkernel/errs"
)

// ErrorData is the data of every refusal of this package: where (the
// proposal field, the file, the 1-based hunk or edit, the 1-based line of
// the patch text or of the file) and why (Reason, a stable word).
type ErrorData struct {
	Field string `json:"field"`
	Path  string `json:"path,omitempty"`
	// Hunk is the 1-based hunk ("@@" section) in Path's section of an
	// apply_patch envelope or a diff.
	Hunk int `json:"hunk,omitempty"`
	// Line is the 1-based line of the patch or diff text the problem is
	// at (PatchLine), or of the file for an edit (insert_line, matches).
	Line int `json:"line,omitempty"`
	// Reason is a stable machine word (the Reason* constants).
	Reason string `json:"reason"`
	// Count and Matches: str_replace found old_str Count times, starting
	// at these 1-based lines of the file.
	Count   int   `json:"count,omitempty"`
	Matches []int `json:"matches,omitempty"`
	// Expected is the text a hunk looked for (clipped), or the range a
	// value must be in.
	Expected string `json:"expected,omitempty"`
}

// Reasons of ErrorData.
const (
	ReasonEmptyPatch        = "empty-patch"         // no file sections
	ReasonMissingBegin      = "missing-begin"       // first line is not "*** Begin Patch"
	ReasonMissingEnd        = "missing-end"         // last line is not "*** End Patch"
	ReasonBadHeader         = "bad-header"          // not Add/Delete/Update File
	ReasonEmptyHunk         = "empty-hunk"          // an update with no hunks, or a hunk with no lines
	ReasonBadHunkLine       = "bad-hunk-line"       // a hunk line not starting with ' ', '+' or '-'
	ReasonMissingMarker     = "missing-marker"      // a second hunk without "@@"
	ReasonContextNotFound   = "context-not-found"   // an "@@ header" line is nowhere in the file
	ReasonLinesNotFound     = "lines-not-found"     // a hunk's old lines are nowhere in the file
	ReasonEmptyPath         = "empty-path"          // a header names no path
	ReasonNoMatch           = "no-match"            // str_replace: old_str is not in the file
	ReasonMultipleMatches   = "multiple-matches"    // str_replace: old_str is there several times
	ReasonLineOutOfRange    = "line-out-of-range"   // insert: insert_line past the end
	ReasonExists            = "exists"              // create: the path exists
	ReasonMissingFile       = "missing-file"        // the file does not exist
	ReasonUnknownCommand    = "unknown-command"     // edits: command is not one of the four
	ReasonMissingMember     = "missing-member"      // edits: a member the command needs
	ReasonUnexpectedMember  = "unexpected-member"   // edits: a member the command does not take
	ReasonCorrupt           = "corrupt"             // a diff hunk's lines do not match its counts
	ReasonNoFileName        = "no-file-name"        // a diff header whose name strip removes
	ReasonBinary            = "binary"              // "Binary files … differ"
	ReasonStrayLine         = "stray-line"          // a hunk-like line outside every hunk
	ReasonBadStrip          = "bad-strip"           // strip on a git-style diff, or negative
	ReasonMissingHeaderPair = "missing-header-pair" // "---" without "+++"
)

// fail is a Validation error with data d.
func fail(d ErrorData, format string, args ...any) *errs.Error {
	return errs.New(errs.Validation, d, format, args...)
}

// clipText bounds the text quoted in an error.
func clipText(s string) string {
	const max = 2048
	if len(s) <= max {
		return s
	}
	return s[:max] + "[…]"
}

// conflict is a Conflict error (the input does not match the file) with
// data d.
func conflict(d ErrorData, format string, args ...any) *errs.Error {
	return errs.New(errs.Conflict, d, format, args...)
}
