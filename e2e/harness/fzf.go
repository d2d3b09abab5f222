package harness

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

// FzfCommit is one real commit of ../shared/corpora/patches/fzf: Dir holds
// patch.diff, base/ (the touched files before it; absent for a commit that
// only adds files) and expected/ (the touched files after it).
type FzfCommit struct {
	Name string // the directory's name, e.g. "025-ae3180f91994"
	Dir  string
	Diff []byte // patch.diff
}

// LargestFzfCommits are the names of the largest fzf commits: the four
// that touch the most files (10 to 14) and the one with the largest diff
// (025, 63 KB). The crash harness and the power-loss model run on them.
var LargestFzfCommits = []string{"028-c1aa5c5f3380", "032-e70a2a581758", "075-ff248d566d42", "083-7d3575b3624c", "025-ae3180f91994"}

// FzfCommits returns every fzf commit in name order, or skips tb when the
// shared data is absent.
func FzfCommits(tb testing.TB) []FzfCommit {
	tb.Helper()
	root := SharedDir(tb, "corpora/patches/fzf")
	entries, err := os.ReadDir(root)
	if err != nil {
		tb.Fatal(err)
	}
	var out []FzfCommit
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		diff, err := os.ReadFile(filepath.Join(dir, "patch.diff"))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, FzfCommit{Name: e.Name(), Dir: dir, Diff: diff})
	}
	return out
}

// DiffParams returns turn/start's params proposing diff as a unified_diff
// (PROTOCOL.md §4.1): in "diff" when it is UTF-8, else in "diffBase64".
func DiffParams(diff []byte) map[string]any {
	prop := map[string]any{"kind": "unified_diff"}
	if utf8.Valid(diff) {
		prop["diff"] = string(diff)
	} else {
		prop["diffBase64"] = base64.StdEncoding.EncodeToString(diff)
	}
	return map[string]any{"proposal": prop}
}

// ProposeApproveApply runs the full flow for one diff on a running kernel
// under the default approval policy: turn/start, apply/execute (which
// must ask for approval), approval/respond approve for each pending
// request, apply/execute (which must apply). It returns the transaction id.
func ProposeApproveApply(tb testing.TB, p *Proc, diff []byte) string {
	tb.Helper()
	res := p.MustResult("turn/start", DiffParams(diff))
	txID := res["transactionId"].(string)
	ap := p.MustResult("apply/execute", map[string]any{"transactionId": txID})
	if ap["ok"] != false {
		tb.Fatalf("apply before approval: %v", ap)
	}
	pending := ap["pendingApprovals"].([]any)
	for _, pa := range pending {
		id := pa.(map[string]any)["approvalRequestId"]
		p.MustResult("approval/respond", map[string]any{"transactionId": txID, "approvalRequestId": id, "decision": "approve"})
	}
	ap = p.MustResult("apply/execute", map[string]any{"transactionId": txID})
	if ap["ok"] != true {
		tb.Fatalf("apply after approval: %v", ap)
	}
	return txID
}

// AssertTree checks that ws holds exactly expected/ for every touched file:
// same bytes, same executable bit, files deleted by the commit (in base/,
// not in expected/) absent, and no staged file left (CheckNoStaged).
func AssertTree(tb testing.TB, ws, base, expected string) {
	tb.Helper()
	CheckNoStaged(tb, ws)
	err := filepath.WalkDir(expected, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(expected, path)
		want, _ := os.ReadFile(path)
		got, err := os.ReadFile(filepath.Join(ws, rel))
		if err != nil {
			tb.Errorf("%s: %v", rel, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			tb.Errorf("%s differs from expected/ (%d bytes, want %d)", rel, len(got), len(want))
		}
		wi, _ := d.Info()
		gi, _ := os.Stat(filepath.Join(ws, rel))
		if wi.Mode().Perm()&0o111 != gi.Mode().Perm()&0o111 {
			tb.Errorf("%s mode %v, want %v", rel, gi.Mode().Perm(), wi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
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
				tb.Errorf("%s should have been deleted", rel)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// CheckNoStaged fails tb for any staged file (a name holding ".txk-",
// PROTOCOL.md §10.8) left under ws.
func CheckNoStaged(tb testing.TB, ws string) {
	tb.Helper()
	_ = filepath.WalkDir(ws, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".txk-") {
			tb.Errorf("staged file left behind: %s", path)
		}
		return nil
	})
}
