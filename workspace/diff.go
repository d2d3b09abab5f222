package workspace

import (
	"bytes"
	"runtime"
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
// taken in the same job, on the same core, while its bytes are at hand.
func (w *Target) canonicalDiff(files []plannedFile) (raw, redacted []byte, findings []protocol.SecretFinding) {
	diffs := make([][]byte, len(files))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range files {
		f := &files[i]
		g.Go(func() error {
			diffs[i] = unidiff.FileDiff(f.path, f.path, f.old, f.new, f.oldExists, f.kind != protocol.ChangeDelete, f.oldMode, f.newMode)
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
	redacted, findings = w.redactDiff(raw)
	return raw, redacted, findings
}

// redactDiff redacts secrets in every content line of a diff we rendered
// ourselves (context, removed and added lines alike, so that no secret
// already in a file leaks into the store either) and reports the findings
// on added lines with their line number in the new file.
func (w *Target) redactDiff(raw []byte) ([]byte, []protocol.SecretFinding) {
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
	red, found := w.scanner.RedactLines(content)
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
