// Package unidiff parses, applies as git apply does, and writes git-style
// unified diffs ("git diff" format: a "diff --git" line, extended header
// lines, then GNU diffutils unified hunks).
//
// Parsing is delegated to github.com/bluekeyes/go-gitdiff; this package adds
// the checks the kernel needs on top of it: no silently skipped lines, no
// duplicate paths, no binary or copy patches. Applying (apply.go) places
// each hunk where git apply without options would: at the line its header
// gives or at the nearest offset where its context matches exactly, never
// with fuzz, and reports each hunk's offset (FilePatch.ApplyWithOffsets).
// Errors implement errs.Kinded (errors.go). Writing gives the edit script
// of github.com/sergi/go-diff in line mode with no timeout (its algorithm,
// run on line numbers: myers.go; go-diff itself is the tests' reference)
// so that the same inputs always give the same bytes, because the sha256
// of a diff is used as an approval fingerprint.
//
// All content is treated as raw bytes: CR, NUL and invalid UTF-8 survive a
// FileDiff → Parse → Apply round trip unchanged.
package unidiff

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"sync"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// Kinds of FilePatch, as found in FilePatch.Kind.
const (
	// KindAdd creates NewPath; OldPath is "".
	KindAdd = "add"
	// KindDelete removes OldPath; NewPath is "".
	KindDelete = "delete"
	// KindModify changes OldPath in place (OldPath == NewPath); a mode-only
	// change is also a modify.
	KindModify = "modify"
	// KindRename moves OldPath to NewPath, with or without content changes.
	KindRename = "rename"
)

// FilePatch is one file of a parsed git-style diff (one "diff --git" section).
type FilePatch struct {
	// OldPath and NewPath are repository-relative paths with the "a/" and
	// "b/" prefixes stripped and git's C-style quoting undone. The side that
	// is /dev/null (OldPath of an add, NewPath of a delete) is "".
	OldPath, NewPath string
	// Kind is one of KindAdd, KindDelete, KindModify, KindRename.
	Kind string
	// OldMode and NewMode are permission bits (e.g. 0o644, 0o755) taken from
	// the "old mode"/"new mode", "new file mode"/"deleted file mode" or
	// "index" header lines; 0 when the diff does not say. When only an index
	// line gives a mode, it applies to both sides, since git writes it there
	// only when the mode did not change.
	OldMode, NewMode uint32

	file *gitdiff.File
	line int // 1-based line of the "diff --git" header, for error messages
}

// Hunks reports how many "@@" hunks the patch has (0 for pure renames, mode
// changes and empty-file adds/deletes, and for a FilePatch not made by Parse).
func (p *FilePatch) Hunks() int {
	if p.file == nil {
		return 0
	}
	return len(p.file.TextFragments)
}

// gitdiffErrRE pulls the line number out of go-gitdiff's error text, which is
// the only place it exposes it.
var gitdiffErrRE = regexp.MustCompile(`^gitdiff: line (-?\d+): (.*)$`)

// Parse splits a git-style multi-file unified diff (as printed by "git diff"
// or "git format-patch"; text before the first "diff --git" line is ignored)
// into one FilePatch per file, in diff order.
//
// It returns a *ParseError when the diff is empty (no files), does not end in
// a newline (git apply calls that corrupt), contains a line that belongs to
// no header or hunk (go-gitdiff would skip it silently), has hunks out of
// order or overlapping, uses a traditional "---/+++" header without a
// "diff --git" line, is a binary or copy patch, or when two files touch the
// same path. It returns a *ModeError (errs.Invalid) for a file header line
// whose mode is not 100644 or 100755 (allowedModes): 100664, 100600, a
// symlink's 120000, a submodule's 160000. Parse never panics; a panic
// inside go-gitdiff is returned as a *ParseError.
func Parse(diff []byte) (patches []*FilePatch, err error) {
	if len(bytes.TrimSpace(diff)) == 0 {
		return nil, &ParseError{Reason: "empty diff: no file changes"}
	}
	lines := Lines(diff)
	if diff[len(diff)-1] != '\n' {
		return nil, &ParseError{Line: len(lines), Reason: "diff does not end with a newline (truncated?)"}
	}

	// Modes first: go-gitdiff takes any octal number as a mode, and the
	// mode a diff names is written to the file.
	if me := checkModes(lines); me != nil {
		return nil, me
	}
	headers, perr := scanLayout(lines)
	var files []*gitdiff.File
	ok := false
	if perr == nil && len(diff) >= parallelParseBytes {
		files, ok = parseGitdiffParts(diff, lines, headers, runtime.GOMAXPROCS(0))
	}
	if !ok {
		// go-gitdiff's error first, as it always was, then the layout's.
		if files, err = parseGitdiff(diff); err != nil {
			return nil, err
		}
		if perr != nil {
			return nil, perr
		}
	}
	if len(files) == 0 {
		return nil, &ParseError{Reason: "empty diff: no \"diff --git\" file headers found"}
	}
	if len(headers) != len(files) {
		// Both walk the same grammar; a mismatch means they disagree on
		// where files start, and neither can be trusted.
		return nil, &ParseError{Reason: fmt.Sprintf("found %d \"diff --git\" headers but go-gitdiff parsed %d files", len(headers), len(files))}
	}

	seen := make(map[string]int) // path -> header line
	for i, f := range files {
		p, perr := newFilePatch(f, headers[i])
		if perr != nil {
			return nil, perr
		}
		for _, path := range []string{p.OldPath, p.NewPath} {
			if path == "" {
				continue
			}
			if prev, dup := seen[path]; dup && prev != p.line {
				return nil, &ParseError{Line: p.line, Reason: fmt.Sprintf("path %q is already touched by the file at line %d", path, prev)}
			}
			seen[path] = p.line
		}
		patches = append(patches, p)
	}
	return patches, nil
}

// parseGitdiff runs go-gitdiff and converts its errors and panics, because
// the input is untrusted and the kernel must never crash on it.
func parseGitdiff(diff []byte) (files []*gitdiff.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			files, err = nil, &ParseError{Reason: fmt.Sprintf("go-gitdiff panicked: %v", r)}
		}
	}()
	files, _, gerr := gitdiff.Parse(bytes.NewReader(diff))
	if gerr != nil {
		if m := gitdiffErrRE.FindStringSubmatch(gerr.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return nil, &ParseError{Line: max(n, 0), Reason: m[2]}
		}
		return nil, &ParseError{Reason: gerr.Error()}
	}
	return files, nil
}

// parallelParseBytes is the diff size from which Parse runs go-gitdiff on
// parts of the diff at once: below it, the goroutines cost more than
// they save.
const parallelParseBytes = 64 << 10

// parseGitdiffParts is parseGitdiff(diff) on n parts of diff at once, for
// a diff whose layout scanLayout accepted (headers): each part is a run of
// whole file sections, cut at "diff --git" header lines, of about the
// same size, the first with the preamble. ok is false, and files nil,
// unless every part parses and gives one file per header it holds; the
// caller then parses the whole diff (serially, for its error).
//
// Why the files are parseGitdiff's: go-gitdiff parses a file from its
// "diff --git" line through its hunks, each of which ends after the
// lines its header counts, and skips, as the next file's preamble,
// whatever comes before the next "diff --git" line. scanLayout accepted
// the diff, so no such line exists: every line from one header to the
// next belongs to the first one's section, and a file's parse reads
// nothing of the next section. Cut at those headers, each part parses to
// the files it would have given in the whole diff. FuzzParseParts and
// TestParsePartsCorpus compare both.
func parseGitdiffParts(diff []byte, lines []string, headers []int, n int) (files []*gitdiff.File, ok bool) {
	n = min(n, len(headers))
	if n < 2 {
		return nil, false
	}
	// Byte offset of every header line.
	at := make([]int, len(headers))
	off, next := 0, 0
	for i, l := range lines {
		if next < len(headers) && headers[next] == i+1 {
			at[next] = off
			next++
		}
		off += len(l)
	}
	if next != len(headers) {
		return nil, false
	}
	// Part j starts at the first header at or after j/n of the diff.
	type part struct {
		start, end int // byte range
		files      int // headers it holds
		got        []*gitdiff.File
		err        error
	}
	var parts []part
	h := 0
	for j := 0; j < n && h < len(headers); j++ {
		start := at[h]
		if j == 0 {
			start = 0
		}
		first := h
		h++
		for h < len(headers) && at[h] < len(diff)/n*(j+1) {
			h++
		}
		if j == n-1 {
			h = len(headers)
		}
		parts = append(parts, part{start: start, files: h - first})
	}
	for j := range parts {
		if j+1 < len(parts) {
			parts[j].end = parts[j+1].start
		} else {
			parts[j].end = len(diff)
		}
	}
	var wg sync.WaitGroup
	for j := range parts {
		wg.Go(func() {
			parts[j].got, parts[j].err = parseGitdiff(diff[parts[j].start:parts[j].end])
		})
	}
	wg.Wait()
	for _, p := range parts {
		if p.err != nil || len(p.got) != p.files {
			return nil, false
		}
		files = append(files, p.got...)
	}
	return files, true
}

const devNull = "/dev/null"

func newFilePatch(f *gitdiff.File, line int) (*FilePatch, *ParseError) {
	fail := func(format string, args ...any) (*FilePatch, *ParseError) {
		return nil, &ParseError{Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	if f.IsBinary || f.BinaryFragment != nil {
		return fail("binary patches are not supported")
	}
	if f.IsCopy {
		return fail("copy patches are not supported")
	}
	for _, m := range []os.FileMode{f.OldMode, f.NewMode} {
		// go-gitdiff keeps git's raw octal mode: 0o100644 is a regular
		// file; 0o120000 (symlink) and 0o160000 (gitlink) have no
		// meaning for byte content.
		if m != 0 && m&^0o777 != 0o100000 {
			return fail("unsupported file mode %06o (only regular files)", uint32(m))
		}
	}

	p := &FilePatch{file: f, line: line, OldPath: f.OldName, NewPath: f.NewName}
	isNew := f.IsNew || p.OldPath == devNull
	isDelete := f.IsDelete || p.NewPath == devNull
	switch {
	case isNew && isDelete:
		return fail("file is both created and deleted")
	case isNew:
		p.Kind, p.OldPath = KindAdd, ""
	case isDelete:
		p.Kind, p.NewPath = KindDelete, ""
	case f.IsRename:
		p.Kind = KindRename
	case p.OldPath != p.NewPath:
		return fail("old path %q and new path %q differ without rename headers", p.OldPath, p.NewPath)
	default:
		p.Kind = KindModify
	}
	if (p.Kind != KindAdd && p.OldPath == "") || (p.Kind != KindDelete && p.NewPath == "") {
		return fail("missing file name")
	}
	if p.Kind == KindRename && p.OldPath == p.NewPath {
		return fail("rename from and to the same path %q", p.OldPath)
	}

	p.OldMode, p.NewMode = uint32(f.OldMode)&0o777, uint32(f.NewMode)&0o777
	switch p.Kind {
	case KindAdd:
		p.OldMode = 0
	case KindDelete:
		p.NewMode = 0
	default:
		if p.NewMode == 0 {
			p.NewMode = p.OldMode
		}
	}

	// go-gitdiff sorts hunks by position before applying; requiring diff
	// order keeps ConflictError.Hunk meaningful and rejects overlaps that
	// git would reject too.
	var end int64
	for i, frag := range f.TextFragments {
		start, fend := oldSpan(frag)
		if start < end {
			return fail("hunk %d (%s) starts before the end of the previous hunk", i+1, trimNL(frag.Header()))
		}
		end = fend
	}
	return p, nil
}

// oldSpan returns the 0-based half-open range of base lines a hunk covers.
// An empty old range ("-5,0") sits after the line it names, as in git and
// GNU patch.
func oldSpan(frag *gitdiff.TextFragment) (start, end int64) {
	if frag.OldLines == 0 {
		return frag.OldPosition, frag.OldPosition
	}
	return frag.OldPosition - 1, frag.OldPosition - 1 + frag.OldLines
}

func trimNL(s string) string { return string(bytes.TrimRight([]byte(s), "\n")) }
