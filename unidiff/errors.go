package unidiff

import (
	"fmt"
	"strconv"

	"github.com/txkernel/txkernel/errs"
)

// ParseError reports a diff that Parse refuses. It is an errs.Kinded of kind
// errs.Validation whose data is a ParseData.
type ParseError struct {
	// Line is the 1-based line in the diff the problem was found at, or 0
	// when it concerns the diff as a whole.
	Line int
	// Reason is a human-readable description. It may quote a clipped line
	// of the diff.
	Reason string
}

// ParseData is the machine-readable data of a ParseError (its ErrorData).
type ParseData struct {
	Line   int    `json:"line"`   // 1-based line in the diff; 0 for the diff as a whole
	Reason string `json:"reason"` // human-readable; may quote part of the diff
}

// Error formats as "unidiff: parse error at line N: reason".
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("unidiff: parse error at line %d: %s", e.Line, e.Reason)
	}
	return "unidiff: parse error: " + e.Reason
}

// ErrorKind implements errs.Kinded: a diff that cannot be parsed is a
// validation failure.
func (e *ParseError) ErrorKind() errs.Kind { return errs.Validation }

// ErrorData implements errs.Kinded; it returns a ParseData.
func (e *ParseError) ErrorData() any { return ParseData{Line: e.Line, Reason: e.Reason} }

// The values of ConflictError.Reason. They are stable machine words, safe to
// match on; ConflictError.Error adds the human-readable explanation.
const (
	// ReasonContextMismatch: the hunk's old side (context and removed
	// lines) matches nowhere it may apply: not at the written line, nor at
	// any offset above or below it, on lines no earlier hunk has changed.
	// This includes a file too short for the hunk.
	ReasonContextMismatch = "context-mismatch"
	// ReasonNotAtBeginning: the hunk's header starts at old line 0 or 1, so
	// (as in git apply) it must match at the very top of the file, and it
	// does not; its old side may match further down.
	ReasonNotAtBeginning = "not-at-beginning"
	// ReasonNotAtEnd: the hunk has no trailing context, so (as in git
	// apply) it must end at the end of the file, and it does not; its old
	// side may match elsewhere. Also: the hunk's old side ends with a line
	// marked "\ No newline at end of file", and where git apply would match
	// it that line goes on with whitespace or a newline and more lines (git
	// would join the hunk's last new line with the next line; unidiff
	// refuses).
	ReasonNotAtEnd = "not-at-end"
	// ReasonOutOfOrder: the nearest match of the hunk's old side lies
	// before the end of the previous hunk. git apply would apply it there,
	// out of diff order; unidiff refuses rather than reorder the hunks or
	// pick a different match than git.
	ReasonOutOfOrder = "out-of-order"
	// ReasonAddOntoContent: a file add (new file) onto a base that is not
	// empty. Hunk is 0.
	ReasonAddOntoContent = "add-onto-content"
	// ReasonDeleteLeavesContent: a file delete whose hunks do not remove
	// all of the base. Hunk is 0.
	ReasonDeleteLeavesContent = "delete-leaves-content"
	// ReasonInvalidPatch: the FilePatch was not produced by Parse, or
	// applying it hit an internal error. Hunk is 0.
	ReasonInvalidPatch = "invalid-patch"
)

var reasonText = map[string]string{
	ReasonContextMismatch:     "the hunk's context and removed lines match nowhere in the file",
	ReasonNotAtBeginning:      "a hunk starting at line 1 must match at the beginning of the file",
	ReasonNotAtEnd:            "a hunk without trailing context, or whose last old line has no newline, must match at the end of the file",
	ReasonOutOfOrder:          "the hunk matches only before the end of the previous hunk",
	ReasonAddOntoContent:      "file to be created already has content",
	ReasonDeleteLeavesContent: "base has content the delete does not remove",
	ReasonInvalidPatch:        "the file patch cannot be applied",
}

// ConflictError reports that a FilePatch does not apply to the base content
// it was given. It is an errs.Kinded of kind errs.Conflict whose data is a
// ConflictData.
//
// Expected and Actual carry file content verbatim (they may hold secrets);
// unidiff does not redact them, so whoever shows or sends them must.
type ConflictError struct {
	// Path is the file the patch was applied to (OldPath, or NewPath for an
	// add).
	Path string
	// Hunk is the 1-based hunk number (in diff order) that failed, or 0
	// when the failure is not tied to a hunk (ReasonAddOntoContent,
	// ReasonDeleteLeavesContent, ReasonInvalidPatch).
	Hunk int
	// Line is the 1-based line of the base where the hunk was expected, as
	// its header gives it: the old start line, or for a hunk with an empty
	// old side ("@@ -5,0 ...", insert after line 5) the line after it. It is
	// 1 for ReasonAddOntoContent; for ReasonDeleteLeavesContent the base
	// line of the first line left over (0 when a hunk added it); 0 for
	// ReasonInvalidPatch.
	Line int
	// Expected is the hunk's old side exactly: its context and removed lines
	// concatenated, each with its own line ending, so that a final line
	// without a newline ("\ No newline at end of file") shows as such. It
	// is "" when the failure is not tied to a hunk.
	Expected string
	// Actual is the base's content at Line: as many lines as Expected has,
	// or fewer where the base ends, concatenated with their line endings.
	// For ReasonAddOntoContent and ReasonDeleteLeavesContent it is the
	// first line of the content that should not be there.
	Actual string
	// Reason is one of the Reason* constants.
	Reason string

	// firstDiff is the 1-based base line of the first difference between
	// Expected and Actual, or 0 when they are equal (the hunk matches as
	// written, but not where it may apply) or not tied to a hunk.
	firstDiff int
	// baseNotUTF8: Actual is not UTF-8, so a diff sent as JSON text (which
	// is UTF-8) cannot match the file's bytes however it is written.
	baseNotUTF8 bool
	cause       error
}

// notUTF8Hint is ConflictData.Hint for a base that is not UTF-8.
const notUTF8Hint = "the file is not UTF-8, and a diff sent as JSON text is: send the diff's exact bytes as diffBase64"

// ConflictData is the machine-readable data of a ConflictError (its
// ErrorData). Expected and Actual hold file content unredacted; see
// ConflictError. encoding/json replaces invalid UTF-8 in them with U+FFFD.
type ConflictData struct {
	Path     string `json:"path"`
	Hunk     int    `json:"hunk"`     // 1-based; 0 when not tied to a hunk
	Line     int    `json:"line"`     // 1-based base line where the hunk was expected
	Expected string `json:"expected"` // the hunk's old side
	Actual   string `json:"actual"`   // the base at Line, as many lines as expected
	Reason   string `json:"reason"`   // one of the Reason* constants
	// BaseNotUTF8 is true when the base at Line is not UTF-8 (a Latin-1
	// file): Expected and Actual may then print alike (both with U+FFFD)
	// although their bytes differ. Hint says what to do.
	BaseNotUTF8 bool   `json:"baseNotUtf8,omitempty"`
	Hint        string `json:"hint,omitempty"`
}

// Error formats as "unidiff: conflict in \"path\" hunk H at base line L:
// reason (explanation)", leaving out the parts that are 0. It does not
// include Expected or Actual.
func (e *ConflictError) Error() string {
	s := "unidiff: conflict in " + strconv.Quote(e.Path)
	if e.Hunk > 0 {
		s += fmt.Sprintf(" hunk %d", e.Hunk)
	}
	if e.Line > 0 {
		s += fmt.Sprintf(" at base line %d", e.Line)
	}
	s += ": " + e.Reason
	text := reasonText[e.Reason]
	switch {
	case e.cause != nil && text != "":
		text += ": " + e.cause.Error()
	case e.cause != nil:
		text = e.cause.Error()
	}
	if e.firstDiff > 0 {
		text += fmt.Sprintf("; as written, the first differing line is %d", e.firstDiff)
	}
	if e.baseNotUTF8 {
		text += "; " + notUTF8Hint
	}
	if text != "" {
		s += " (" + text + ")"
	}
	return s
}

// Unwrap returns the underlying cause (a recovered panic or a misuse), or
// nil; hunk mismatches have none.
func (e *ConflictError) Unwrap() error { return e.cause }

// ErrorKind implements errs.Kinded: a patch that does not apply is a
// conflict.
func (e *ConflictError) ErrorKind() errs.Kind { return errs.Conflict }

// ErrorData implements errs.Kinded; it returns a ConflictData.
func (e *ConflictError) ErrorData() any {
	d := ConflictData{Path: e.Path, Hunk: e.Hunk, Line: e.Line, Expected: e.Expected, Actual: e.Actual, Reason: e.Reason, BaseNotUTF8: e.baseNotUTF8}
	if e.baseNotUTF8 {
		d.Hint = notUTF8Hint
	}
	return d
}

// Interface checks.
var (
	_ errs.Kinded = (*ParseError)(nil)
	_ errs.Kinded = (*ConflictError)(nil)
)

// allowedModes are the only file modes a diff may carry, as "old mode",
// "new mode", "new file mode", "deleted file mode" or an "index" line's
// mode: the two git records for a regular file (non-executable and
// executable).
var allowedModes = []string{"100644", "100755"}

// ModeError reports a mode line whose mode is not one of allowedModes
// (100664, 100600, 120000 for a symlink, 160000 for a submodule, or no
// octal number at all). It is an errs.Kinded of kind errs.Invalid whose data
// is a ModeData: the mode of a file is part of what a reviewer approves,
// and a mode git cannot record would be written without git ever showing
// it.
type ModeError struct {
	// Line is the 1-based line of the diff that carries the mode.
	Line int
	// Text is that line without its newline, clipped to 200 bytes.
	Text string
	// Mode is the mode as written on the line.
	Mode string
}

// ModeData is the machine-readable data of a ModeError (its ErrorData).
type ModeData struct {
	Line    int      `json:"line"`    // 1-based line in the diff
	Text    string   `json:"text"`    // the line, without its newline
	Mode    string   `json:"mode"`    // the mode refused
	Reason  string   `json:"reason"`  // always "mode"
	Allowed []string `json:"allowed"` // allowedModes
}

// Error formats as "unidiff: line N: file mode M is not allowed ...".
func (e *ModeError) Error() string {
	return fmt.Sprintf("unidiff: line %d: file mode %q is not allowed (a diff may carry only %s and %s): %q",
		e.Line, e.Mode, allowedModes[0], allowedModes[1], e.Text)
}

// ErrorKind implements errs.Kinded: a mode outside the allowed ones is
// invalid input.
func (e *ModeError) ErrorKind() errs.Kind { return errs.Invalid }

// ErrorData implements errs.Kinded; it returns a ModeData.
func (e *ModeError) ErrorData() any {
	return ModeData{Line: e.Line, Text: e.Text, Mode: e.Mode, Reason: "mode", Allowed: allowedModes}
}

var _ errs.Kinded = (*ModeError)(nil)
