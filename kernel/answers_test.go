package kernel_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// answersPolicy lets the curator do everything in scope t/o/r.
const answersPolicy = `{"roles": {"curator": ["cur"]}, "grants": [{"role": "curator",
  "actions": ["read", "propose", "curate", "publish", "ingest"],
  "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r"}}]}`

var (
	answersScope   = map[string]any{"tenant_id": "t", "organization_id": "o", "repository_id": "r"}
	answersCurator = map[string]any{"principal_id": "cur", "roles": []string{"curator"}, "purpose": "test"}
)

// logDoc is a small decision log: three sections about transactions.
const logDoc = `# Decisions

## I. Apply is all-or-nothing (alice, 2026-01-02)

Every apply stages its files, fsyncs them and renames them after the commit record.

## II. Crash recovery rolls forward (bob, 2026-01-03)

After a crash the kernel reads the ledger and finishes an apply past its commit point.

## III. Approvals survive a restart (alice, 2026-01-04)

A pending approval is in the ledger, so a restarted kernel asks for it again.
`

// start starts a kernel on a workspace holding notes/log.md and a
// backlog, with a memory policy, and returns it with its workspace.
func start(t *testing.T) (*harness.Proc, string) {
	t.Helper()
	ws := t.TempDir()
	write(t, filepath.Join(ws, "notes", "log.md"), logDoc)
	write(t, filepath.Join(ws, "backlog", "crash.md"), "# Crash recovery\n\n## After a crash\n\nThe kernel resumes every transaction from its ledger and rolls a committed apply forward.\n")
	write(t, filepath.Join(ws, "backlog", "approvals.md"), "# Approvals\n\nA deny sticks: the same fingerprint fails fast.\n")
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	write(t, pol, answersPolicy)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(dir, "data"), "--memory-policy", pol, "--log-level", "error")
	p.Initialize()
	return p, ws
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rpcErr fails unless resp is an error with code, and returns its data.
func rpcErr(t *testing.T, what string, resp map[string]any, code int) map[string]any {
	t.Helper()
	c, data := harness.RPCError(resp)
	if c != code {
		t.Fatalf("%s: got %v, want error %d", what, resp, code)
	}
	return data
}

func hits(res map[string]any) []any {
	h, _ := res["hits"].([]any)
	return h
}

// TestSearchMatchesNothing: a word no section has returns no semantic or
// hybrid hit and says why; semantic hits clear the floor and minScore;
// minScore out of range is refused.
func TestSearchMatchesNothing(t *testing.T) {
	t.Parallel()
	p, _ := start(t)
	id := p.MustResult("corpus/open", map[string]any{"path": "notes/log.md", "watch": false})["corpusId"]
	search := func(q, mode string, extra ...any) map[string]any {
		params := map[string]any{"corpusId": id, "query": q, "mode": mode, "k": 10}
		for i := 0; i+1 < len(extra); i += 2 {
			params[extra[i].(string)] = extra[i+1]
		}
		return p.MustResult("corpus/search", params)
	}
	for _, mode := range []string{"semantic", "hybrid"} {
		res := search("giraffe", mode)
		if n := len(hits(res)); n != 0 {
			t.Errorf("%s search for giraffe: %d hits, want none: %v", mode, n, res["hits"])
		}
		if note, _ := res["note"].(string); !strings.Contains(note, "no term the embedder knows") {
			t.Errorf("%s search for giraffe: note %q", mode, note)
		}
	}
	res := search("crash ledger commit", "semantic")
	all := hits(res)
	if len(all) == 0 {
		t.Fatal("a semantic search for words the log has found nothing")
	}
	for _, h := range all {
		if s := h.(map[string]any)["score"].(float64); s <= 0 {
			t.Errorf("a semantic hit scoring %v", s)
		}
	}
	top := all[0].(map[string]any)["score"].(float64)
	floored := hits(search("crash ledger commit", "semantic", "minScore", top-1e-6))
	if len(floored) == 0 {
		t.Errorf("minScore just under the top score kept no hit")
	}
	for _, h := range floored {
		if s := h.(map[string]any)["score"].(float64); s <= top-1e-6 {
			t.Errorf("minScore %v kept a hit scoring %v", top-1e-6, s)
		}
	}
	if n := len(hits(search("crash ledger commit", "semantic", "minScore", top))); n != 0 {
		t.Errorf("minScore equal to the top score kept %d hits", n)
	}
	for _, bad := range []any{1.5, -0.1, "high"} {
		resp, _ := p.Call("corpus/search", map[string]any{"corpusId": id, "query": "crash", "mode": "semantic", "minScore": bad})
		if d := rpcErr(t, "minScore", resp, -32602); d["field"] != "minScore" {
			t.Errorf("minScore %v: data %v", bad, d)
		}
	}
}

// TestUnknownMembersRefused: a misspelt filter or selector member is
// -32602 naming it and listing the known ones, never a different answer.
func TestUnknownMembersRefused(t *testing.T) {
	t.Parallel()
	p, _ := start(t)
	id := p.MustResult("corpus/open", map[string]any{"path": "notes/log.md", "watch": false})["corpusId"]
	for _, tc := range []struct {
		filters map[string]any
		field   string
		known   string
	}{
		{map[string]any{"author": []string{"alice"}}, "filters.author", "authors"},
		{map[string]any{"exec_tag": []string{"EXEC:GOV"}}, "filters.exec_tag", "exec_tags"},
		{map[string]any{"date_range": map[string]any{"until": "2026-01-03"}}, "filters.date_range.until", "to"},
	} {
		resp, _ := p.Call("corpus/search", map[string]any{"corpusId": id, "query": "crash", "mode": "keyword", "filters": tc.filters})
		d := rpcErr(t, tc.field, resp, -32602)
		known, _ := d["known"].([]any)
		if d["field"] != tc.field || d["reason"] != "unknown-member" || !slices.Contains(known, any(tc.known)) {
			t.Errorf("%s: data %v", tc.field, d)
		}
	}
	// The right spelling filters.
	res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "kernel", "mode": "keyword", "filters": map[string]any{"authors": []string{"bob"}}})
	for _, h := range hits(res) {
		if a := harness.JSONText(h.(map[string]any)["section"].(map[string]any)["authors"]); a != `["bob"]` {
			t.Errorf("authors filter returned a section by %s", a)
		}
	}
	p.MustResult("memory/ingest", map[string]any{"scope": answersScope, "principal": answersCurator, "path": "."})
	resp, _ := p.Call("memory/read_context", map[string]any{"scope": answersScope, "principal": answersCurator, "query": "crash", "selector": map[string]any{"baseline": "b-1"}})
	if d := rpcErr(t, "selector", resp, -32602); d["field"] != "selector.baseline" || d["reason"] != "unknown-member" {
		t.Errorf("selector: data %v", d)
	}
}

// TestNoHeadingOnlyItems: the backlog's "# Crash recovery" has no body of
// its own; read_context's items and citations for a crash question are
// never headings only.
func TestNoHeadingOnlyItems(t *testing.T) {
	t.Parallel()
	p, _ := start(t)
	p.MustResult("memory/ingest", map[string]any{"scope": answersScope, "principal": answersCurator, "path": "."})
	res := p.MustResult("memory/read_context", map[string]any{"scope": answersScope, "principal": answersCurator, "query": "what happens after a crash"})
	items, _ := res["items"].([]any)
	if len(items) == 0 {
		t.Fatalf("no item for a crash question: %v", res)
	}
	for _, it := range items {
		item := it.(map[string]any)
		content, _ := item["content"].(string)
		if onlyHeadings(content) {
			t.Errorf("an item whose content is headings only: %q", content)
		}
		for _, c := range item["citations"].([]any) {
			start, _ := harness.JSONPath(c, "excerpt.start")
			end, _ := harness.JSONPath(c, "excerpt.end")
			if harness.Num(end)-harness.Num(start) <= len("# Crash recovery\n\n") && strings.Contains(content, "resumes") {
				t.Errorf("the crash item's citation spans %v..%v bytes: the heading alone", start, end)
			}
		}
	}
	if content, _ := items[0].(map[string]any)["content"].(string); !strings.Contains(content, "resumes every transaction") {
		t.Errorf("the top item for a crash question is %q", content)
	}

	// The same files as a folder corpus: no hit is a heading without body.
	id := p.MustResult("corpus/open", map[string]any{"path": "backlog", "watch": false})["corpusId"]
	for _, mode := range []string{"keyword", "hybrid"} {
		res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "crash recovery", "mode": mode, "k": 10})
		if len(hits(res)) == 0 {
			t.Fatalf("%s search of the backlog folder found nothing", mode)
		}
		for _, h := range hits(res) {
			if body, _ := harness.JSONString(h, "section.body"); strings.TrimSpace(body) == "" {
				t.Errorf("%s: a hit that is a heading alone: %s", mode, harness.JSONText(h))
			}
		}
	}
}

func onlyHeadings(s string) bool {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// TestIngestMatchingNothing: an ingest whose glob matches no file says so.
func TestIngestMatchingNothing(t *testing.T) {
	t.Parallel()
	p, ws := start(t)
	write(t, filepath.Join(ws, "design", "notes.md"), "# Notes\n\ntext\n")
	res := p.MustResult("memory/ingest", map[string]any{"scope": answersScope, "principal": answersCurator, "path": "design"})
	if note, _ := res["note"].(string); res["files"].(float64) != 0 || !strings.Contains(note, "glob backlog/**/*.md matched no file under design") {
		t.Fatalf("ingest of design: files %v note %q", res["files"], res["note"])
	}
	res = p.MustResult("memory/ingest", map[string]any{"scope": answersScope, "principal": answersCurator, "path": "design", "glob": "*.md"})
	if note, _ := res["note"].(string); res["files"].(float64) != 1 || strings.Contains(note, "matched no file") {
		t.Fatalf("ingest of design/*.md: files %v note %q", res["files"], note)
	}
}
