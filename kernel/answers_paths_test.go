package kernel_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestPathsAsHostsSendThem: corpus/open, memory/ingest and turn/start take
// a workspace-relative path, an absolute path inside the workspace or a
// file:// URI inside it, all the same; a path outside is -32004
// outside-workspace naming the workspace root.
func TestPathsAsHostsSendThem(t *testing.T) {
	t.Parallel()
	p, ws := start(t)
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(ws, "notes", "log.md")
	forms := []string{"notes/log.md", abs, "file://" + abs, "file://localhost" + filepath.Join(root, "notes", "log.md")}
	var ids []any
	for _, f := range forms {
		ids = append(ids, p.MustResult("corpus/open", map[string]any{"path": f, "watch": false})["corpusId"])
	}
	for i, id := range ids {
		if id != ids[0] {
			t.Errorf("corpus/open %q gave %v, %q gave %v: one file, two corpora", forms[0], ids[0], forms[i], id)
		}
	}
	outside := filepath.Join(t.TempDir(), "log.md")
	write(t, outside, logDoc)
	for _, f := range []string{outside, "file://" + outside} {
		resp, _ := p.Call("corpus/open", map[string]any{"path": f, "watch": false})
		d := rpcErr(t, "corpus/open outside", resp, -32004)
		msg, _ := harness.JSONString(resp, "error.message")
		if d["reason"] != "outside-workspace" || d["workspaceRoot"] != root || !strings.Contains(msg, root) {
			t.Errorf("corpus/open %s: data %v message %q", f, d, msg)
		}
	}

	res := p.MustResult("memory/ingest", map[string]any{"scope": answersScope, "principal": answersCurator, "path": "file://" + ws})
	if res["files"].(float64) != 2 {
		t.Errorf("memory/ingest of the workspace as a file:// URI: %v files", res["files"])
	}
	resp, _ := p.Call("memory/ingest", map[string]any{"scope": answersScope, "principal": answersCurator, "path": filepath.Dir(ws)})
	if d := rpcErr(t, "memory/ingest outside", resp, -32004); d["reason"] != "outside-workspace" || d["workspaceRoot"] != root {
		t.Errorf("memory/ingest outside: data %v", d)
	}

	turn := p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{
		map[string]any{"path": filepath.Join(ws, "a.txt"), "content": "A\n"},
		map[string]any{"path": "file://" + filepath.Join(ws, "sub", "b.txt"), "content": "B\n"},
	}}})
	if got := harness.JSONText(turn["proposal"].(map[string]any)["targetFiles"]); got != `["a.txt","sub/b.txt"]` {
		t.Errorf("turn/start with absolute and file:// paths planned %s", got)
	}
	resp, _ = p.Call("turn/start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": outside, "content": "x"}}}})
	if d := rpcErr(t, "turn/start outside", resp, -32004); d["reason"] != "outside-workspace" || d["workspaceRoot"] != root || d["field"] != "proposal.files[0].path" {
		t.Errorf("turn/start outside: data %v", d)
	}
}
