package workspace

import (
	"bytes"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/unidiff"
)

// canonicalDiff renders the planned files as one git-style diff, in path
// order, and redacts it. Findings in added lines are secret introductions.
// The files are diffed on every core: each one's diff depends on its own
// bytes only, and the line diff is most of turn/start's work on a
// proposal of hundreds of files. Each file's sha256s (oldSum, newSum) are
// taken in the same job, on the same core, while its bytes are at hand,
// and so is the check that its diff holds nothing to redact (allClean).
func (w *Target) canonicalDiff(files []plannedFile) (raw, redacted []byte, findings []protocol.SecretFinding) {
	diffs := make([][]byte, len(files))
	// clean[i]: no line of diffs[i], past its first byte, can hold a
	// secret (secrets.Scanner.CleanLines). The check runs in each file's
	// job, on the core that made the diff and while the largest file's
	// line diff still keeps another core busy, instead of a serial scan
	// of the joined diff after the last job.
	clean := make([]bool, len(files))
	// The largest files first: the line diff of one large file is the
	// longest job, and started last it would run alone on one core while
	// the others idle.
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return (len(files[b].old) + len(files[b].new)) - (len(files[a].old) + len(files[a].new))
	})
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, i := range order {
		f := &files[i]
		g.Go(func() error {
			diffs[i] = unidiff.FileDiff(f.path, f.path, f.old, f.new, f.oldExists, f.kind != protocol.ChangeDelete, f.oldMode, f.newMode)
			clean[i] = w.scanner.CleanLines(string(diffs[i]), 1)
			if f.oldExists {
				f.oldSum = sha256Hex(f.old)
			}
			if f.kind != protocol.ChangeDelete {
				f.newSum = sha256Hex(f.new)
			}
			return nil
		})
	}
	g.Wait() // the jobs return no error
	raw = bytes.Join(diffs, nil)
	if allClean(diffs, clean) {
		return raw, raw, nil
	}
	redacted, findings = w.redactDiff(raw)
	return raw, redacted, findings
}

// allClean reports whether redactDiff would return the joined diffs
// unchanged and no findings, from each one's clean check: every line
// redactDiff scans is a content line's body, the line past its first
// byte, and when each diff but the last ends in "\n" every line of the
// join is a line of one diff, which its check covered
// (secrets.Scanner.CleanLines holds for any selection of checked lines).
// A diff that does not end a line, or any check that failed, leaves the
// answer to redactDiff, whose scan also sees the secrets that span files
// (a private key block, copies of a found secret).
func allClean(diffs [][]byte, clean []bool) bool {
	for i, d := range diffs {
		if !clean[i] || i < len(diffs)-1 && len(d) > 0 && d[len(d)-1] != '\n' {
			return false
		}
	}
	return true
}

// redactDiff redacts secrets in every content line of a diff we rendered
// ourselves (context, removed and added lines alike, so that no secret
// already in a file leaks into the store either) and reports the findings
// on added lines with their line number in the new file. A line is
// content by where it stands, not by how it starts: each hunk header's
// line counts say how many lines follow it, so an added line whose text
// begins "++ " (a diff line "+++ …") is content, never a file header that
// would hide its secret from the findings. The diff is read in one pass;
// the content lines are substrings of one copy of it.
func (w *Target) redactDiff(raw []byte) ([]byte, []protocol.SecretFinding) {
	text := string(raw)
	// ref locates the body of a content line in text (after its ' ', '+'
	// or '-', before its '\n'); file indexes paths. Kept small: there is
	// one per line of the diff.
	type ref struct {
		start, end, newLine int
		file                int32
		added               bool
	}
	n := strings.Count(text, "\n") + 1 // at most this many content lines
	content := make([]string, 0, n)
	refs := make([]ref, 0, n)
	var paths []string
	path, newLine := "", 0
	oldLeft, newLeft := 0, 0 // lines of the current hunk still to come
	for pos := 0; pos < len(text); {
		next := len(text)
		if i := strings.IndexByte(text[pos:], '\n'); i >= 0 {
			next = pos + i + 1
		}
		l := text[pos:next]
		start := pos
		pos = next
		if oldLeft > 0 || newLeft > 0 {
			switch l[0] {
			case ' ', '+', '-':
				body := strings.TrimSuffix(l[1:], "\n")
				content = append(content, body)
				if len(paths) == 0 || paths[len(paths)-1] != path {
					paths = append(paths, path)
				}
				refs = append(refs, ref{start: start + 1, end: start + 1 + len(body), file: int32(len(paths) - 1), newLine: newLine, added: l[0] == '+'})
				if l[0] != '+' {
					oldLeft--
				}
				if l[0] != '-' {
					newLeft--
					newLine++
				}
				continue
			}
		}
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
			oldLeft, newLeft = hunkCounts(l)
		}
	}
	red, found := w.scanner.RedactLines(content)
	var findings []protocol.SecretFinding
	for _, f := range found {
		r := refs[f.Line-1]
		if r.added {
			findings = append(findings, protocol.SecretFinding{Path: paths[r.file], Rule: f.Rule, Line: r.newLine})
		}
	}
	// Nothing redacted: the diff itself (the callers only read it).
	var out []byte
	last := 0
	for j, r := range refs {
		if red[j] != content[j] {
			if out == nil {
				out = make([]byte, 0, len(raw))
			}
			out = append(append(out, text[last:r.start]...), red[j]...)
			last = r.end
		}
	}
	if out == nil {
		return raw, findings
	}
	return append(out, text[last:]...), findings
}

// hunkCounts reads b and d from "@@ -a,b +c,d @@" (a count left out is
// 1): the old and new lines the hunk holds.
func hunkCounts(h string) (old, new int) {
	count := func(s string) int {
		s, _, _ = strings.Cut(s, " ")
		_, n, ok := strings.Cut(s, ",")
		if !ok {
			return 1
		}
		c, _ := strconv.Atoi(n)
		return c
	}
	if i := strings.Index(h, " -"); i >= 0 {
		old = count(h[i+2:])
	}
	if i := strings.Index(h, " +"); i >= 0 {
		new = count(h[i+2:])
	}
	return old, new
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
