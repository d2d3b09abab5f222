package workspace_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/unidiff"
)

// TestFzfThreeFormats takes a sample of the real fzf commits
// (../shared/corpora/patches/fzf/*/{base,expected}) and expresses each
// change in the three edit formats a model emits: an apply_patch
// envelope and text-editor edits generated here from the base/expected
// pair, and the output of the real `diff -ruN base expected` as a
// traditional unified_diff. Each is proposed and applied through the kernel
// (harness.Serve) on a copy of base/, and the workspace must end byte-identical to
// expected/. A commit whose change apply_patch cannot express (a file
// without a final newline, CR bytes, or bytes that are not UTF-8: Codex's
// format always ends a file with a newline and splits lines on LF) skips
// only that format.
func TestFzfThreeFormats(t *testing.T) {
	harness.SkipIfShort(t, "real fzf commits in three edit formats, one kernel each")
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff command")
	}
	commits := harness.FzfCommits(t)
	for i, c := range commits {
		if i%7 != 0 {
			continue // a sample: 15 of the 100
		}
		base, expected := harness.ReadTree(t, filepath.Join(c.Dir, "base")), harness.ReadTree(t, filepath.Join(c.Dir, "expected"))
		t.Run(c.Name, func(t *testing.T) {
			t.Run("apply_patch", func(t *testing.T) {
				env, why := envelope(base, expected)
				if why != "" {
					t.Skipf("apply_patch cannot express this change: %s", why)
				}
				run(t, c.Dir, base, expected, map[string]any{"kind": "apply_patch", "patch": env})
			})
			t.Run("edits", func(t *testing.T) {
				edits, why := editsFor(base, expected)
				if why != "" {
					t.Skipf("edits cannot express this change: %s", why)
				}
				run(t, c.Dir, base, expected, map[string]any{"kind": "edits", "edits": edits})
			})
			t.Run("diff_ruN", func(t *testing.T) {
				d := diffRuN(t, base, expected)
				prop := map[string]any{"kind": "unified_diff"}
				if utf8.Valid(d) {
					prop["diff"] = string(d)
				} else {
					prop["diffBase64"] = base64.StdEncoding.EncodeToString(d)
				}
				run(t, c.Dir, base, expected, prop)
			})
		})
	}
}

// run proposes prop on a copy of base and applies it; the workspace must
// end byte-identical to expected (files of base absent from expected
// deleted).
func run(t *testing.T, dir string, base, expected map[string][]byte, prop map[string]any) {
	t.Helper()
	ws := t.TempDir()
	if len(base) > 0 {
		harness.CopyTree(t, filepath.Join(dir, "base"), ws)
	}
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", t.TempDir(), "--approval-policy", "never", "--log-level", "warn")
	p.Initialize()
	res := p.MustResult("turn/start", map[string]any{"proposal": prop})
	if tol, ok := res["proposal"].(map[string]any)["tolerances"]; ok {
		t.Errorf("an exact change needed tolerances: %v", tol)
	}
	ap := p.MustResult("apply/execute", map[string]any{"transactionId": res["transactionId"]})
	if ap["ok"] != true {
		t.Fatalf("apply/execute: %v", ap)
	}
	p.Stop()
	harness.CheckNoStaged(t, ws)
	if got := harness.ReadTree(t, ws); !equalTrees(got, expected) {
		for k, v := range expected {
			if !bytes.Equal(got[k], v) {
				t.Errorf("%s differs from expected/ (%d bytes, want %d)", k, len(got[k]), len(v))
			}
		}
		for k := range got {
			if _, ok := expected[k]; !ok {
				t.Errorf("%s should not exist", k)
			}
		}
	}
}

// hunk is one hunk of a FileDiff: its header's numbers and its lines
// (with their prefixes and line ends).
type hunk struct {
	oldStart, newStart int
	lines              []string
}

var hunkRE = regexp.MustCompile(`^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@`)

// hunks diffs old and new with the kernel's own diff writer (3 lines of
// context) and splits the result into hunks.
func hunks(old, new []byte) []hunk {
	d := unidiff.FileDiff("f", "f", old, new, true, true, 0o644, 0o644)
	var out []hunk
	for _, l := range unidiff.Lines(d) {
		if m := hunkRE.FindStringSubmatch(l); m != nil {
			o, _ := strconv.Atoi(m[1])
			n, _ := strconv.Atoi(m[2])
			out = append(out, hunk{oldStart: o, newStart: n})
			continue
		}
		if len(out) > 0 && len(l) > 0 && strings.ContainsRune(" +-\\", rune(l[0])) {
			out[len(out)-1].lines = append(out[len(out)-1].lines, l)
		}
	}
	return out
}

// sides are a hunk's old and new text, exactly ("\ No newline" markers
// remove the line end before them).
func (h hunk) sides() (old, new string) {
	var o, n strings.Builder
	var last *strings.Builder
	for _, l := range h.lines {
		switch l[0] {
		case ' ':
			o.WriteString(l[1:])
			n.WriteString(l[1:])
			last = nil
		case '-':
			o.WriteString(l[1:])
			last = &o
		case '+':
			n.WriteString(l[1:])
			last = &n
		case '\\':
			trim := func(b *strings.Builder) {
				s := strings.TrimSuffix(b.String(), "\n")
				b.Reset()
				b.WriteString(s)
			}
			if last != nil {
				trim(last)
			} else {
				trim(&o)
				trim(&n)
			}
		}
	}
	return o.String(), n.String()
}

// envelope is the change from base to expected as Codex's apply_patch
// envelope, or why it cannot be one.
func envelope(base, expected map[string][]byte) (string, string) {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n")
	for _, p := range harness.TreeNames(union(base, expected)) {
		old, hadOld := base[p]
		new, hasNew := expected[p]
		if hasNew && (len(new) > 0 && new[len(new)-1] != '\n' || bytes.ContainsRune(new, '\r') || !utf8.Valid(new)) {
			return "", p + " has no final newline, a CR or bytes that are not UTF-8"
		}
		if hadOld && (bytes.ContainsRune(old, '\r') || !utf8.Valid(old)) {
			return "", p + " has a CR or bytes that are not UTF-8"
		}
		switch {
		case !hasNew:
			fmt.Fprintf(&b, "*** Delete File: %s\n", p)
		case !hadOld || len(old) == 0:
			if hadOld {
				fmt.Fprintf(&b, "*** Delete File: %s\n", p) // an empty base: Codex's update needs lines to find
			}
			fmt.Fprintf(&b, "*** Add File: %s\n", p)
			for _, l := range strings.SplitAfter(string(new), "\n") {
				if l != "" {
					b.WriteString("+" + l)
				}
			}
		case bytes.Equal(old, new):
		default:
			fmt.Fprintf(&b, "*** Update File: %s\n", p)
			for _, h := range hunks(old, new) {
				b.WriteString("@@\n")
				for _, l := range h.lines {
					if l[0] != '\\' {
						b.WriteString(strings.TrimSuffix(l, "\n") + "\n")
					}
				}
			}
		}
	}
	b.WriteString("*** End Patch\n")
	return b.String(), ""
}

// editsFor is the change from base to expected as text-editor commands:
// delete, create, and for a modified file one command per hunk in file
// order (str_replace of the hunk's old text by its new text; insert for
// a hunk that only adds one block of lines), or why it cannot be.
func editsFor(base, expected map[string][]byte) ([]map[string]any, string) {
	var out []map[string]any
	for _, p := range harness.TreeNames(union(base, expected)) {
		old, hadOld := base[p]
		new, hasNew := expected[p]
		if hasNew && !utf8.Valid(new) || hadOld && !utf8.Valid(old) {
			return nil, p + " holds bytes that are not UTF-8 (JSON strings cannot carry them)"
		}
		switch {
		case !hasNew:
			out = append(out, map[string]any{"command": "delete", "path": p})
		case !hadOld:
			out = append(out, map[string]any{"command": "create", "path": p, "file_text": string(new)})
		case bytes.Equal(old, new):
		case len(old) == 0:
			out = append(out, map[string]any{"command": "create", "path": p, "file_text": string(new), "overwrite": true})
		default:
			cur := string(old)
			for _, h := range hunks(old, new) {
				o, n := h.sides()
				if line, text, ok := insertion(h); ok {
					out = append(out, map[string]any{"command": "insert", "path": p, "insert_line": line, "new_str": text})
					cur = strings.Replace(cur, o, n, 1) // the hunk's context is unique enough for the simulation
					continue
				}
				if strings.Count(cur, o) != 1 {
					return nil, fmt.Sprintf("%s: a hunk's old text occurs %d times", p, strings.Count(cur, o))
				}
				out = append(out, map[string]any{"command": "str_replace", "path": p, "old_str": o, "new_str": n})
				cur = strings.Replace(cur, o, n, 1)
			}
		}
	}
	return out, ""
}

// insertion reports a hunk that only adds one block of whole lines after
// its leading context: the line to insert after (in the file as the
// earlier hunks left it, whose lines are the new file's up to here) and
// the text.
func insertion(h hunk) (int, string, bool) {
	lead, i := 0, 0
	for ; i < len(h.lines) && h.lines[i][0] == ' '; i++ {
		lead++
	}
	var text strings.Builder
	for ; i < len(h.lines) && h.lines[i][0] == '+'; i++ {
		text.WriteString(h.lines[i][1:])
	}
	for ; i < len(h.lines); i++ {
		if h.lines[i][0] != ' ' {
			return 0, "", false
		}
	}
	if text.Len() == 0 || !strings.HasSuffix(text.String(), "\n") || lead == 0 {
		return 0, "", false
	}
	return h.newStart - 1 + lead, text.String(), true
}

// diffRuN is the real `diff -ruN a b` of base and expected (-a: every
// file as text).
func diffRuN(t *testing.T, base, expected map[string][]byte) []byte {
	t.Helper()
	tmp := t.TempDir()
	for side, tree := range map[string]map[string][]byte{"a": base, "b": expected} {
		os.MkdirAll(filepath.Join(tmp, side), 0o755)
		for p, b := range tree {
			f := filepath.Join(tmp, side, filepath.FromSlash(p))
			os.MkdirAll(filepath.Dir(f), 0o755)
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command("diff", "-ruNa", "a", "b")
	cmd.Dir = tmp
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1) {
		t.Fatalf("diff -ruN: %v", err)
	}
	return out
}

func union(a, b map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
