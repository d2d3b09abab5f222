package main

import (
	"bytes"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// fzfCommit is one real commit of ../shared/corpora/patches/fzf.
type fzfCommit struct {
	name, dir string
	diff      []byte
}

func fzfCommits(t testing.TB) []fzfCommit {
	root := sharedDir(t, "corpora/patches/fzf")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []fzfCommit
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		diff, err := os.ReadFile(filepath.Join(dir, "patch.diff"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fzfCommit{name: e.Name(), dir: dir, diff: diff})
	}
	return out
}

func diffParams(diff []byte) map[string]any {
	prop := map[string]any{"kind": "unified_diff"}
	if utf8.Valid(diff) {
		prop["diff"] = string(diff)
	} else {
		prop["diffBase64"] = base64.StdEncoding.EncodeToString(diff)
	}
	return map[string]any{"proposal": prop}
}

// proposeApproveApply runs the full flow for one diff on a running kernel
// and returns the transaction id.
func proposeApproveApply(t testing.TB, p *proc, diff []byte) string {
	t.Helper()
	res := p.mustResult("turn/start", diffParams(diff))
	txID := res["transactionId"].(string)
	ap := p.mustResult("apply/execute", map[string]any{"transactionId": txID})
	if ap["ok"] != false {
		t.Fatalf("apply before approval: %v", ap)
	}
	pending := ap["pendingApprovals"].([]any)
	for _, pa := range pending {
		id := pa.(map[string]any)["approvalRequestId"]
		p.mustResult("approval/respond", map[string]any{"transactionId": txID, "approvalRequestId": id, "decision": "approve"})
	}
	ap = p.mustResult("apply/execute", map[string]any{"transactionId": txID})
	if ap["ok"] != true {
		t.Fatalf("apply after approval: %v", ap)
	}
	return txID
}

// assertTree checks that ws holds exactly expected/ for every touched file:
// same bytes, same executable bit, and files deleted by the commit absent.
func assertTree(t testing.TB, ws, base, expected string) {
	t.Helper()
	checkNoStaged(t, ws)
	err := filepath.WalkDir(expected, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(expected, path)
		want, _ := os.ReadFile(path)
		got, err := os.ReadFile(filepath.Join(ws, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from expected/ (%d bytes, want %d)", rel, len(got), len(want))
		}
		wi, _ := d.Info()
		gi, _ := os.Stat(filepath.Join(ws, rel))
		if wi.Mode().Perm()&0o111 != gi.Mode().Perm()&0o111 {
			t.Errorf("%s mode %v, want %v", rel, gi.Mode().Perm(), wi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(base); err != nil {
		return
	}
	err = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(base, path)
		if _, err := os.Stat(filepath.Join(expected, rel)); os.IsNotExist(err) {
			if _, err := os.Lstat(filepath.Join(ws, rel)); !os.IsNotExist(err) {
				t.Errorf("%s should have been deleted", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkNoStaged fails for any staged file (".txk-") left in ws.
func checkNoStaged(t testing.TB, ws string) {
	t.Helper()
	_ = filepath.WalkDir(ws, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".txk-") {
			t.Errorf("staged file left behind: %s", path)
		}
		return nil
	})
}

// TestFzfCommits drives all 100 real commits through turn/start →
// approval → apply/execute on copies of base/ and checks that each
// workspace ends byte-identical to expected/.
func TestFzfCommits(t *testing.T) {
	commits := fzfCommits(t)
	if len(commits) != 100 {
		t.Fatalf("found %d commits, want 100", len(commits))
	}
	for _, c := range commits {
		t.Run(c.name, func(t *testing.T) {
			ws, dd := t.TempDir(), t.TempDir()
			if _, err := os.Stat(filepath.Join(c.dir, "base")); err == nil {
				copyTree(t, filepath.Join(c.dir, "base"), ws) // commits that only add files have no base/
			}
			p := startKernel(t, nil, "serve", "--workspace", ws, "--data-dir", dd)
			p.initialize()
			proposeApproveApply(t, p, c.diff)
			p.stop()
			assertTree(t, ws, filepath.Join(c.dir, "base"), filepath.Join(c.dir, "expected"))
		})
	}
}
