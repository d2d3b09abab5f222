package workspace

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets"
	"github.com/txkernel/txkernel/secrets/secretstest"
	"github.com/txkernel/txkernel/unidiff"
)

// redactDiffByPrefix is redactDiff as it was before it counted hunk
// lines: every line that starts like a header is one. It is the
// reference for diffs whose changed lines do not start like headers.
func redactDiffByPrefix(sc *secrets.Scanner, raw []byte) ([]byte, []protocol.SecretFinding) {
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
			content = append(content, strings.TrimSuffix(l[1:], "\n"))
			refs = append(refs, ref{idx: i, path: path, newLine: newLine, added: l[0] == '+'})
			if l[0] != '-' {
				newLine++
			}
		}
	}
	red, found := sc.RedactLines(content)
	var findings []protocol.SecretFinding
	for _, f := range found {
		if r := refs[f.Line-1]; r.added {
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

// TestRedactDiffAsBefore: on the canonical diffs of the fzf commits, with
// secrets planted on added, removed and context lines, redactDiff gives
// the bytes and findings of the line-prefix reading it replaced (none of
// their changed lines starts like a header).
func TestRedactDiffAsBefore(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "shared", "corpora", "patches", "fzf")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Skipf("skipping: %v (the shared test data lives beside the repository)", err)
	}
	planted := secretstest.Secrets(3)
	w := &Target{scanner: secrets.NewScanner()}
	diffs, found := 0, 0
	for _, e := range entries {
		base, exp := readFiles(t, filepath.Join(root, e.Name(), "base")), readFiles(t, filepath.Join(root, e.Name(), "expected"))
		var raw []byte
		for _, p := range slices.Sorted(func(yield func(string) bool) {
			for p := range exp {
				if !yield(p) {
					return
				}
			}
		}) {
			old, new := base[p], exp[p]
			// A secret on a context line (in both), one added, and one
			// removed, as assignments the generic rule knows too.
			old = append([]byte("key = "+planted[0].Secret+"\nold_token = "+planted[1].Secret+"\n"), old...)
			new = append([]byte("key = "+planted[0].Secret+"\n"), new...)
			new = append(new, []byte("\ntoken = \""+planted[1].Secret+"\"\n")...)
			raw = append(raw, unidiff.FileDiff(p, p, old, new, true, true, 0o644, 0o644)...)
		}
		got, gotF := w.redactDiff(raw)
		want, wantF := redactDiffByPrefix(w.scanner, raw)
		if !bytes.Equal(got, want) || !slices.Equal(gotF, wantF) {
			t.Fatalf("%s: redactDiff differs from the line-prefix reading:\nfindings %+v\nwant     %+v", e.Name(), gotF, wantF)
		}
		for _, s := range planted[:2] {
			if bytes.Contains(got, []byte(s.Needle)) {
				t.Fatalf("%s: a planted secret survives", e.Name())
			}
		}
		diffs++
		found += len(gotF)
	}
	if diffs < 50 || found < diffs {
		t.Fatalf("%d diffs with %d findings: the corpus is not being read", diffs, found)
	}
}

// readFiles reads every regular file under dir by its slash path; none
// when dir does not exist.
func readFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	return out
}
