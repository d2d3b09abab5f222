package workspace_test

// The edit-format proposal kinds (PROTOCOL.md §4.1, issue 36) through the
// kernel's methods, moved here from e2e/edits by issue 35 part 5 (they need
// the kernel's answers, not a process). The apply_patch crash recovery,
// which needs a failpoint's exit, stays in e2e/edits.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// kernel serves a kernel in this process (harness.Serve; approval policy
// never) on a new workspace holding files.
func kernel(t *testing.T, files map[string]string) (*harness.Proc, string, string) {
	t.Helper()
	ws, dd := t.TempDir(), t.TempDir()
	for name, content := range files {
		p := filepath.Join(ws, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", dd, "--approval-policy", "never", "--log-level", "warn")
	p.Initialize()
	return p, ws, dd
}

// proposeApply proposes prop, applies it, and returns turn/start's
// result.proposal.
func proposeApply(t *testing.T, p *harness.Proc, prop map[string]any) map[string]any {
	t.Helper()
	res := p.MustResult("turn/start", map[string]any{"proposal": prop})
	if ap := p.MustResult("apply/execute", map[string]any{"transactionId": res["transactionId"]}); ap["ok"] != true {
		t.Fatalf("apply/execute: %v", ap)
	}
	return res["proposal"].(map[string]any)
}

// refused proposes prop, which must be refused with code and the data
// members in want; it returns the error's data.
func refused(t *testing.T, p *harness.Proc, prop map[string]any, code float64, want map[string]any) map[string]any {
	t.Helper()
	resp, _ := p.Call("turn/start", map[string]any{"proposal": prop})
	e, ok := resp["error"].(map[string]any)
	if !ok {
		t.Fatalf("accepted: %v", resp["result"])
	}
	data, _ := e["data"].(map[string]any)
	if e["code"] != code {
		t.Errorf("code %v, want %v (%v)", e["code"], code, e["message"])
	}
	for k, v := range want {
		if got := data[k]; !equalJSON(got, v) {
			t.Errorf("data.%s = %v, want %v (%v)", k, got, v, e["message"])
		}
	}
	return data
}

func equalJSON(a, b any) bool {
	switch x := b.(type) {
	case int:
		return a == float64(x)
	case []int:
		arr, ok := a.([]any)
		if !ok || len(arr) != len(x) {
			return false
		}
		for i := range x {
			if arr[i] != float64(x[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// TestEditsKind: text-editor commands apply in order, each seeing the
// ones before it (several on one file, a file created and then edited),
// and the proposal's diff is exactly what the apply writes. Any refusal
// refuses the whole proposal, with the edit, the path and why.
func TestEditsKind(t *testing.T) {
	t.Parallel()
	p, ws, _ := kernel(t, map[string]string{"a.txt": "one\ntwo\nthree\n", "d.txt": "bye\n", "dup.txt": "x\ny\nx\n"})
	prop := proposeApply(t, p, map[string]any{"kind": "edits", "edits": []any{
		map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "two\n", "new_str": "2\n"},
		map[string]any{"command": "insert", "path": "a.txt", "insert_line": 2, "new_str": "2.5"},
		map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "2\n2.5", "new_str": "two\n2.5"},
		map[string]any{"command": "create", "path": "sub/c.txt", "file_text": "C\n"},
		map[string]any{"command": "str_replace", "path": "sub/c.txt", "old_str": "C", "new_str": "CC"},
		map[string]any{"command": "delete", "path": "d.txt"},
		map[string]any{"command": "str_replace", "path": "dup.txt", "old_str": "x", "new_str": "z", "replace_all": true},
		map[string]any{"command": "create", "path": filepath.Join(ws, "abs.txt"), "file_text": "host paths work"},
	}})
	if prop["summary"] != "modify 2 files, add 2, delete 1" {
		t.Errorf("summary %v", prop["summary"])
	}
	diff, _ := prop["diff"].(string)
	for _, want := range []string{" two\n+2.5\n three\n", "+CC\n", "deleted file mode", "+z\n"} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff lacks %q:\n%s", want, diff)
		}
	}
	harness.WantTree(t, ws, map[string]string{"a.txt": "one\ntwo\n2.5\nthree\n", "sub/c.txt": "CC\n", "dup.txt": "z\ny\nz\n", "abs.txt": "host paths work"})

	edit := func(e ...map[string]any) map[string]any {
		l := make([]any, len(e))
		for i := range e {
			l[i] = e[i]
		}
		return map[string]any{"kind": "edits", "edits": l}
	}
	ok := map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "one", "new_str": "1"}
	for _, tc := range []struct {
		name string
		prop map[string]any
		code float64
		want map[string]any
	}{
		{"several matches", edit(ok, map[string]any{"command": "str_replace", "path": "dup.txt", "old_str": "z", "new_str": "q"}), -32005,
			map[string]any{"field": "proposal.edits[1]", "path": "dup.txt", "reason": "multiple-matches", "count": 2, "matches": []int{1, 3}}},
		{"no match", edit(ok, map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "one", "new_str": "x"}), -32005,
			map[string]any{"field": "proposal.edits[1]", "path": "a.txt", "reason": "no-match"}},
		{"create over a file", edit(map[string]any{"command": "create", "path": "a.txt", "file_text": "x"}), -32005,
			map[string]any{"path": "a.txt", "reason": "exists"}},
		{"missing file", edit(map[string]any{"command": "delete", "path": "nope.txt"}), -32002,
			map[string]any{"path": "nope.txt", "reason": "missing-file"}},
		{"deleted earlier in the proposal", edit(map[string]any{"command": "delete", "path": "a.txt"}, map[string]any{"command": "insert", "path": "a.txt", "insert_line": 0, "new_str": "x"}), -32002,
			map[string]any{"field": "proposal.edits[1]", "path": "a.txt"}},
		{"insert past the end", edit(map[string]any{"command": "insert", "path": "a.txt", "insert_line": 5, "new_str": "x"}), -32005,
			map[string]any{"field": "proposal.edits[0].insert_line", "reason": "line-out-of-range", "expected": "0..4", "line": 5}},
		{"missing member", edit(map[string]any{"command": "insert", "path": "a.txt", "new_str": "x"}), -32602,
			map[string]any{"field": "proposal.edits[0].insert_line", "reason": "missing-member"}},
		{"member of another command", edit(map[string]any{"command": "delete", "path": "a.txt", "file_text": "x"}), -32602,
			map[string]any{"field": "proposal.edits[0].file_text", "reason": "unexpected-member"}},
		{"unknown command", edit(map[string]any{"command": "view", "path": "a.txt"}), -32602,
			map[string]any{"field": "proposal.edits[0].command", "reason": "unknown-command"}},
		{"path outside", edit(map[string]any{"command": "create", "path": "../x", "file_text": "x"}), -32004,
			map[string]any{"field": "proposal.edits[0].path", "reason": "escape"}},
		{"no edits", map[string]any{"kind": "edits", "edits": []any{}}, -32602, map[string]any{"field": "proposal.edits"}},
		{"nothing changes", edit(map[string]any{"command": "create", "path": "n.txt", "file_text": "x"}, map[string]any{"command": "delete", "path": "n.txt"}), -32005,
			map[string]any{"reason": "empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused(t, p, tc.prop, tc.code, tc.want)
		})
	}
	p.Stop()
	harness.WantTree(t, ws, map[string]string{"a.txt": "one\ntwo\n2.5\nthree\n", "sub/c.txt": "CC\n", "dup.txt": "z\ny\nz\n", "abs.txt": "host paths work"})
}

// TestApplyPatchTolerances: a hunk found only by ignoring white space or
// normalising punctuation is applied and listed in proposal.tolerances
// (path, hunk, tolerance, the file line it matched), and the canonical
// diff shows exactly what is written; a hunk found nowhere refuses the
// whole patch with the file, the hunk and the reason.
func TestApplyPatchTolerances(t *testing.T) {
	t.Parallel()
	p, ws, _ := kernel(t, map[string]string{"a.py": "def f():\n    return 1   \n\ndef g():\n    return \u201cg\u201d\n", "b.txt": "b\n"})
	patch := "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-    return 1\n+    return 2\n@@ def g():\n-    return \"g\"\n+    return \"G\"\n*** Update File: b.txt\n*** Move to: c.txt\n@@\n-b\n+c\n*** End Patch\n"
	resp, notes := p.Call("turn/start", map[string]any{"proposal": map[string]any{"kind": "apply_patch", "patch": patch}})
	res, ok := resp["result"].(map[string]any)
	if !ok {
		t.Fatalf("turn/start: %v", resp["error"])
	}
	if ap := p.MustResult("apply/execute", map[string]any{"transactionId": res["transactionId"]}); ap["ok"] != true {
		t.Fatalf("apply/execute: %v", ap)
	}
	prop := res["proposal"].(map[string]any)
	tols, _ := prop["tolerances"].([]any)
	// The ledger's fileChange item carries them too.
	found := false
	for _, n := range notes {
		if item, ok := harness.JSONPath(n.Value, "params.item"); ok && item.(map[string]any)["type"] == "fileChange" {
			it, _ := item.(map[string]any)["tolerances"].([]any)
			found = len(it) == len(tols) && len(it) > 0
		}
	}
	if !found {
		t.Errorf("the fileChange item does not carry the %d tolerances", len(tols))
	}
	var got []string
	for _, tl := range tols {
		m := tl.(map[string]any)
		got = append(got, m["path"].(string)+":"+m["tolerance"].(string))
		if m["hunk"] == nil || m["line"] == nil || m["patchLine"] == nil {
			t.Errorf("tolerance without hunk, line or patchLine: %v", m)
		}
	}
	if strings.Join(got, ",") != "a.py:trailing-whitespace,a.py:unicode-punctuation" {
		t.Errorf("tolerances %v", tols)
	}
	if diff := prop["diff"].(string); !strings.Contains(diff, "-    return 1   \n+    return 2\n") || !strings.Contains(diff, "+    return \"G\"\n") {
		t.Errorf("diff:\n%s", diff)
	}
	harness.WantTree(t, ws, map[string]string{"a.py": "def f():\n    return 2\n\ndef g():\n    return \"G\"\n", "c.txt": "c\n"})

	refused(t, p, map[string]any{"kind": "apply_patch", "patch": "*** Begin Patch\n*** Add File: new.txt\n+n\n*** Update File: a.py\n@@\n-nowhere\n+x\n*** End Patch\n"}, -32005,
		map[string]any{"field": "proposal.patch", "path": "a.py", "hunk": 1, "reason": "lines-not-found", "line": 5})
	refused(t, p, map[string]any{"kind": "apply_patch", "patch": "*** Begin Patch\n*** Update File: /etc/passwd\n@@\n-x\n+y\n*** End Patch\n"}, -32004,
		map[string]any{"field": "proposal.patch", "reason": "absolute"})
	refused(t, p, map[string]any{"kind": "apply_patch"}, -32602, map[string]any{"field": "proposal.patch"})
	// The sandbox's rules hold as for every kind: a protected path, a
	// symlink, an escape.
	if err := os.Symlink("a.py", filepath.Join(ws, "link.py")); err != nil {
		t.Fatal(err)
	}
	for path, reason := range map[string]string{".git/config": "protected", "link.py": "symlink", "x/../../out": "escape"} {
		refused(t, p, map[string]any{"kind": "apply_patch", "patch": "*** Begin Patch\n*** Add File: " + path + "\n+x\n*** End Patch\n"}, -32004, map[string]any{"reason": reason})
		refused(t, p, map[string]any{"kind": "edits", "edits": []any{map[string]any{"command": "create", "path": path, "file_text": "x", "overwrite": true}}}, -32004, map[string]any{"reason": reason})
	}
	p.Stop()
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Error("a refused patch wrote new.txt")
	}
}

// TestTraditionalDiffs: diffs git apply takes without "diff --git" lines,
// and the tolerances, through the kernel: each tolerance used is listed.
func TestTraditionalDiffs(t *testing.T) {
	t.Parallel()
	p, ws, _ := kernel(t, map[string]string{"src/x.go": "a\nb\n", "crlf.txt": "a\r\nb\r\n", "old.txt": "bye\n", "f.c": "x\n"})
	prop := proposeApply(t, p, map[string]any{"kind": "unified_diff", "diff": "" +
		"diff -ruN a/src/x.go b/src/x.go\n--- a/src/x.go\t2024-05-01 10:00:00.000000000 +0200\n+++ b/src/x.go\t2024-05-02 11:00:00.000000000 +0200\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n" +
		"diff -ruN a/new.txt b/new.txt\n--- a/new.txt\t1970-01-01 00:00:00.000000000 +0000\n+++ b/new.txt\t2024-05-02 11:00:00.000000000 +0200\n@@ -0,0 +1 @@\n+hi\n" +
		"diff -ruN a/old.txt b/old.txt\n--- a/old.txt\t2024-05-02 11:00:00.000000000 +0200\n+++ b/old.txt\t1970-01-01 00:00:00.000000000 +0000\n@@ -1 +0,0 @@\n-bye\n"})
	if prop["summary"] != "modify 1 file, add 1, delete 1" || prop["tolerances"] != nil {
		t.Errorf("proposal %v", prop)
	}
	prop = proposeApply(t, p, map[string]any{"kind": "unified_diff", "recount": true, "diff": "--- f.c.orig\n+++ f.c\n@@ -1,7 +1,7 @@\n-x\n+y"})
	if tols := prop["tolerances"].([]any); len(tols) != 2 || tols[0].(map[string]any)["tolerance"] != "final-newline" || tols[1].(map[string]any)["tolerance"] != "recount" || tols[1].(map[string]any)["path"] != "f.c" {
		t.Errorf("tolerances %v", tols)
	}
	prop = proposeApply(t, p, map[string]any{"kind": "unified_diff", "strip": 0, "diff": "--- crlf.txt\r\n+++ crlf.txt\r\n@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+c\r\n"})
	if tols := prop["tolerances"].([]any); len(tols) != 1 || tols[0].(map[string]any)["tolerance"] != "crlf" {
		t.Errorf("tolerances %v", tols)
	}
	refused(t, p, map[string]any{"kind": "unified_diff", "diff": "--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n-y\n+z\n"}, -32005,
		map[string]any{"field": "proposal.diff", "path": "f.c", "hunk": 1, "reason": "corrupt", "line": 5})
	refused(t, p, map[string]any{"kind": "unified_diff", "diff": "Binary files a/x and b/x differ\n"}, -32005,
		map[string]any{"reason": "binary", "line": 1})
	refused(t, p, map[string]any{"kind": "unified_diff", "strip": 0, "diff": "diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n-y\n+z\n"}, -32005,
		map[string]any{"field": "proposal.strip", "reason": "bad-strip"})
	p.Stop()
	harness.WantTree(t, ws, map[string]string{"src/x.go": "a\nc\n", "new.txt": "hi\n", "crlf.txt": "a\r\nc\r\n", "f.c": "y\n"})
}
