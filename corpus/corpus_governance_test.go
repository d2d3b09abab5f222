package corpus_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestCorpusGovernance drives seed 004's governance artefacts through the
// kernel (harness.Serve): .section_count, collision.log, ONBOARDING_PROMPT.md (from the
// user's template, regenerated when the count changes) and
// GOVERNANCE_LOG.md (embedding model changes) in a governance/ folder beside
// the log; governanceDir: null keeping them in the data dir; sections with
// no attribution reported with their line and offset; vector queries of
// the corpus's dimensions; and the log itself never written.
func TestCorpusGovernance(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	data := filepath.Join(work, "data")
	gdir := filepath.Join(ws, "notes", "governance")
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		t.Fatal(err)
	}
	unattributed := "## IV. A question nobody signed\n\nIt has no author and no date.\n\n"
	logPath := filepath.Join(ws, "notes", "log.md")
	os.WriteFile(logPath, []byte(smallLog(3)+unattributed), 0o644)
	os.WriteFile(filepath.Join(ws, "other.md"), []byte(smallLog(2)), 0o644)
	os.WriteFile(filepath.Join(gdir, "ONBOARDING_PROMPT.template.md"), []byte("count={{section_count}} next={{next_section_numeral}} log={{log_path}}\n"), 0o644)
	srv := harness.NewEmbedServer(t, 16)
	start := func(version string) *harness.Proc {
		p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error",
			"--embed-url", srv.URL, "--embed-model", "test-embed", "--embed-model-version", version, "--embed-timeout", "2s")
		p.Initialize()
		return p
	}
	p := start("v1")
	open := p.MustResult("corpus/open", map[string]any{"path": "notes/log.md", "watch": false})
	id := open["corpusId"].(string)
	logStamp := stamp(t, logPath)

	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if st["governanceDir"] != "notes/governance" || st["sectionCount"] != filepath.Join(gdir, ".section_count") ||
		st["onboardingPrompt"] != filepath.Join(gdir, "ONBOARDING_PROMPT.md") {
		t.Fatalf("status does not point at the workspace's governance folder: %v", st)
	}
	if n, err := readSectionCountFile(filepath.Join(gdir, ".section_count")); err != nil || n != 4 {
		t.Fatalf(".section_count = %d, %v; want 4", n, err)
	}
	readFile := func(name string) string {
		b, err := os.ReadFile(filepath.Join(gdir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := readFile("ONBOARDING_PROMPT.md"); got != "count=4 next=V log=notes/log.md\n" {
		t.Fatalf("ONBOARDING_PROMPT.md from the user's template: %q", got)
	}
	if got := readFile("GOVERNANCE_LOG.md"); !regexp.MustCompile(`(?m)^- \S+ embedding model change: embedding_model_version none -> v1 \(embedding_version 1\)$`).MatchString(got) {
		t.Fatalf("GOVERNANCE_LOG.md after the first sync: %q", got)
	}
	// The unsigned section: indexed, and reported with where it is.
	var miss map[string]any
	for _, w := range st["warnings"].([]any) {
		if w := w.(map[string]any); w["kind"] == "missing_attribution" {
			miss = w
		}
	}
	src, _ := os.ReadFile(logPath)
	off := strings.Index(string(src), "## IV.")
	line := strings.Count(string(src[:off]), "\n") + 1
	if miss == nil || harness.Num(miss["line"]) != line || harness.Num(miss["offset"]) != off || harness.Num(miss["canonical_section_number"]) != 4 ||
		strings.Join(strs(miss["missing"]), ",") != "author,date" {
		t.Fatalf("missing attribution not reported at line %d offset %d: %v", line, off, st["warnings"])
	}
	if harness.Num(st["sections"]) != 4 {
		t.Fatalf("the unsigned section is not indexed: %v sections", st["sections"])
	}

	if now := stamp(t, logPath); now != logStamp {
		t.Fatalf("the kernel wrote the log while serving it: before %+v, after %+v", logStamp, now)
	}
	// An outside writer appends a section filed under the wrong number:
	// the collision is logged, the count and the prompt follow.
	f, _ := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("## IX. Filed under the wrong number\n*Author: Grok | Date: 2026-03-02*\n\nA collision.\n\n")
	f.Close()
	p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	logStamp = stamp(t, logPath)
	if lines := fileLines(t, filepath.Join(gdir, "collision.log")); len(lines) != 1 || !strings.HasPrefix(lines[0], "5\tIX\t9\t") {
		t.Fatalf("collision.log: %q", lines)
	}
	if n, _ := readSectionCountFile(filepath.Join(gdir, ".section_count")); n != 5 {
		t.Fatalf(".section_count after the append = %d, want 5", n)
	}
	if got := readFile("ONBOARDING_PROMPT.md"); got != "count=5 next=VI log=notes/log.md\n" {
		t.Fatalf("ONBOARDING_PROMPT.md not regenerated: %q", got)
	}

	// Vector queries: seed 004's query: list[float], of the corpus's dims.
	vec := make([]float64, 16)
	vec[3] = 1
	res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": vec, "mode": "semantic", "k": 3})
	if len(hitsOf(t, res)) == 0 {
		t.Fatalf("a vector query found nothing: %v", res)
	}
	for _, c := range []struct {
		query  any
		mode   string
		reason string
	}{
		{make([]float64, 15), "semantic", "dims"},
		{vec, "keyword", "vector-needs-semantic"},
		{vec, "hybrid", "vector-needs-semantic"},
		{map[string]any{"text": "x"}, "semantic", "type"},
		{[]any{"a", 1}, "semantic", "not-a-vector"},
		{make([]float64, 16), "semantic", "zero-vector"},
	} {
		resp, _ := p.Call("corpus/search", map[string]any{"corpusId": id, "query": c.query, "mode": c.mode})
		code, d := harness.RPCError(resp)
		if code != -32602 || d["field"] != "query" || d["reason"] != c.reason {
			t.Fatalf("query %v in mode %s: %v, want -32602 reason %s", c.query, c.mode, resp, c.reason)
		}
		if c.reason == "dims" && (harness.Num(d["expectedDims"]) != 16 || harness.Num(d["got"]) != 15) {
			t.Fatalf("the dims error does not name the expected dims: %v", d)
		}
	}

	// governanceDir: null keeps today's data-dir-only files.
	other := p.MustResult("corpus/open", map[string]any{"path": "other.md", "watch": false, "governanceDir": nil})
	ost := p.MustResult("corpus/status", map[string]any{"corpusId": other["corpusId"]})
	if ost["governanceDir"] != nil || !strings.HasPrefix(ost["sectionCount"].(string), data) {
		t.Fatalf("governanceDir null: %v", ost)
	}
	if _, err := os.Stat(filepath.Join(ws, "governance")); !os.IsNotExist(err) {
		t.Fatalf("governanceDir null wrote into the workspace: %v", err)
	}
	// A governanceDir outside the workspace is a sandbox violation.
	resp, _ := p.Call("corpus/open", map[string]any{"path": "other.md", "governanceDir": "../elsewhere"})
	if code, _ := harness.RPCError(resp); code == 0 {
		t.Fatalf("governanceDir outside the workspace accepted: %v", resp)
	}
	p.Stop()

	// A new embedding model version: the change is logged with both names.
	p = start("v2")
	p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	p.Stop()
	if got := readFile("GOVERNANCE_LOG.md"); !regexp.MustCompile(`(?m)^- \S+ embedding model change: embedding_model_version v1 -> v2 \(embedding_version 2\)$`).MatchString(got) {
		t.Fatalf("GOVERNANCE_LOG.md after a model change: %q", got)
	}
	if after := stamp(t, logPath); after != logStamp {
		t.Fatalf("the kernel wrote the log: before %+v, after %+v", logStamp, after)
	}
}
