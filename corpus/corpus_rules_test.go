package corpus_test

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// treeStamp lists every file under dir with its bytes' stamp: what "no
// file was written" compares.
func treeStamp(t *testing.T, dir string) map[string]fileStamp {
	t.Helper()
	out := map[string]fileStamp{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = stamp(t, p)
		}
		return nil
	})
	return out
}

func keys(m map[string]fileStamp) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCorpusLogNeverWritten: seed 004's hard invariant ("the store does
// not modify the markdown, ever") at every door a host or an MCP model
// can reach. A governanceDir whose files would be the log (a log named
// ONBOARDING_PROMPT.md or GOVERNANCE_LOG.md opened with its own folder as
// governanceDir), lie inside it or inside an indexed folder, or belong to
// another log is refused with -32602 and data.reason, writing nothing; a
// log opened later at the path of another log's governance file is never
// written by that log's open, sync or rebuild; and a log named
// ONBOARDING_PROMPT.md in governance/ pushes a neighbour's default folder
// aside instead of being overwritten.
func TestCorpusLogNeverWritten(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	data := filepath.Join(work, "data")
	for _, d := range []string{"adv", "docs", "notes", "governance"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	logs := map[string]string{
		"adv/ONBOARDING_PROMPT.md":        smallLog(3),
		"adv/GOVERNANCE_LOG.md":           smallLog(4),
		"adv/collision.log":               smallLog(2),
		"notes/log.md":                    smallLog(3),
		"governance/ONBOARDING_PROMPT.md": smallLog(2),
		"OPEN_QUESTIONS.md":               smallLog(5),
	}
	for rel, text := range logs {
		os.WriteFile(filepath.Join(ws, rel), []byte(text), 0o644)
	}
	os.WriteFile(filepath.Join(ws, "docs", "a.md"), []byte("# A\n\ndoc text\n"), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error")
	p.Initialize()
	p.MustResult("corpus/open", map[string]any{"path": "docs", "watch": false})
	logID := p.MustResult("corpus/open", map[string]any{"path": "notes/log.md", "watch": false})["corpusId"]

	before := treeStamp(t, ws)
	refused := []struct {
		log, gov, reason, at string
	}{
		{"adv/ONBOARDING_PROMPT.md", "adv", "is-the-log", "adv/ONBOARDING_PROMPT.md"},
		{"adv/GOVERNANCE_LOG.md", "adv", "is-the-log", "adv/GOVERNANCE_LOG.md"},
		{"adv/collision.log", filepath.Join(ws, "adv"), "is-the-log", "adv/collision.log"}, // an absolute path
		{"adv/GOVERNANCE_LOG.md", "adv/GOVERNANCE_LOG.md", "is-the-log", "adv/GOVERNANCE_LOG.md"},
		{"adv/GOVERNANCE_LOG.md", "docs", "in-indexed-folder", "docs"},
		{"adv/GOVERNANCE_LOG.md", "docs/governance", "in-indexed-folder", "docs"},
		{"adv/GOVERNANCE_LOG.md", "notes/governance", "governance-in-use", "notes/governance"},
	}
	for _, c := range refused {
		resp, _ := p.Call("corpus/open", map[string]any{"path": c.log, "watch": false, "governanceDir": c.gov})
		code, d := harness.RPCError(resp)
		if code != -32602 || d["field"] != "governanceDir" || d["reason"] != c.reason || d["path"] != c.at {
			t.Fatalf("corpus/open %s with governanceDir %s: %v; want -32602 reason %s path %s", c.log, c.gov, resp, c.reason, c.at)
		}
		if c.reason == "governance-in-use" && d["corpusId"] != logID {
			t.Fatalf("governance-in-use does not name the owner %v: %v", logID, d)
		}
	}
	if after := treeStamp(t, ws); !mapsEqual(before, after) {
		t.Fatalf("a refused corpus/open wrote into the workspace:\nbefore %v\nafter  %v", keys(before), keys(after))
	}

	// governance/ONBOARDING_PROMPT.md is a log; OPEN_QUESTIONS.md's default
	// folder would overwrite it, so its files go to governance/OPEN_QUESTIONS/.
	p.MustResult("corpus/open", map[string]any{"path": "governance/ONBOARDING_PROMPT.md", "watch": false, "governanceDir": nil})
	oq := p.MustResult("corpus/open", map[string]any{"path": "OPEN_QUESTIONS.md", "watch": false})
	st := p.MustResult("corpus/status", map[string]any{"corpusId": oq["corpusId"]})
	if st["governanceDir"] != "governance/OPEN_QUESTIONS" {
		t.Fatalf("OPEN_QUESTIONS.md's governance beside a log named ONBOARDING_PROMPT.md: %v", st["governanceDir"])
	}

	// notes/log.md's first sync wrote notes/governance/GOVERNANCE_LOG.md;
	// a host makes it a log of its own. notes/log.md's rebuild must not
	// append its gate-3 line to it.
	victim := filepath.Join(ws, "notes", "governance", "GOVERNANCE_LOG.md")
	f, err := os.OpenFile(victim, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("the first sync wrote no GOVERNANCE_LOG.md: %v", err)
	}
	f.WriteString("\n" + sectionText(1, "hijack"))
	f.Close()
	p.MustResult("corpus/open", map[string]any{"path": "notes/governance/GOVERNANCE_LOG.md", "watch": false, "governanceDir": nil})
	before = treeStamp(t, ws)
	res := p.MustResult("corpus/rebuild", map[string]any{"corpusId": logID})
	var warned bool
	for _, w := range res["warnings"].([]any) {
		w := w.(map[string]any)
		warned = warned || (w["kind"] == "governance_unwritable" && w["path"] == "notes/governance/GOVERNANCE_LOG.md")
	}
	if !warned {
		t.Fatalf("the rebuild's GOVERNANCE_LOG.md line was not refused: %v", res["warnings"])
	}
	p.MustResult("corpus/sync", map[string]any{"corpusId": oq["corpusId"]})
	p.MustResult("corpus/rebuild", map[string]any{"corpusId": oq["corpusId"]})
	after := treeStamp(t, ws)
	for rel := range logs {
		if after[rel] != before[rel] {
			t.Fatalf("log %s was written", rel)
		}
	}
	if after["notes/governance/GOVERNANCE_LOG.md"] != before["notes/governance/GOVERNANCE_LOG.md"] {
		t.Fatalf("a log opened at a governance file's path was written by the governance writer")
	}
	p.Stop()
}

func mapsEqual(a, b map[string]fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCorpusTwoLogsOneFolder: two logs in one folder each keep their own
// .section_count and collision.log (governance/ for the first,
// governance/<name>/ for the second), and corpus/status says where.
func TestCorpusTwoLogsOneFolder(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(filepath.Join(ws, "notes"), 0o755)
	os.WriteFile(filepath.Join(ws, "notes", "a.md"), []byte(smallLog(2)), 0o644)
	os.WriteFile(filepath.Join(ws, "notes", "b.md"), []byte(smallLog(3)+sectionText(9, "collided")), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	want := []struct {
		log, dir   string
		count      int
		collisions int
	}{{"notes/a.md", "notes/governance", 2, 0}, {"notes/b.md", "notes/governance/b", 4, 1}}
	for _, w := range want {
		id := p.MustResult("corpus/open", map[string]any{"path": w.log, "watch": false})["corpusId"]
		st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
		if st["governanceDir"] != w.dir || st["sectionCount"] != filepath.Join(ws, filepath.FromSlash(w.dir), ".section_count") {
			t.Fatalf("%s: governanceDir %v sectionCount %v; want %s", w.log, st["governanceDir"], st["sectionCount"], w.dir)
		}
	}
	for _, w := range want {
		n, err := readSectionCountFile(filepath.Join(ws, filepath.FromSlash(w.dir), ".section_count"))
		if err != nil || n != w.count {
			t.Fatalf("%s/.section_count = %d, %v; want %d", w.dir, n, err, w.count)
		}
		b, _ := os.ReadFile(filepath.Join(ws, filepath.FromSlash(w.dir), "collision.log"))
		if got := strings.Count(string(b), "\n"); got != w.collisions {
			t.Fatalf("%s/collision.log has %d lines, want %d: %q", w.dir, got, w.collisions, b)
		}
	}
	p.Stop()
}

// TestCorpusExecTagVariants: "[exec:gov]", "[EXEC: GOV]", "[ EXEC:GOV ]"
// and "[Exec : Micro]" are exec tags (seed 004: authority metadata, never
// embedded): they come back normalised, an exec_tags filter finds them (in
// any spelling), and no body or keyword search holds them.
func TestCorpusExecTagVariants(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	spellings := []struct{ tag, want string }{
		{"[exec:gov]", "EXEC:GOV"},
		{"[EXEC: GOV]", "EXEC:GOV"},
		{"[ EXEC:GOV ]", "EXEC:GOV"},
		{"[Exec : Micro]", "EXEC:MICRO"},
		{"", ""},
	}
	var b strings.Builder
	for i, s := range spellings {
		b.WriteString(sectionText(i+1, "ballot"+string(rune('a'+i))))
		if s.tag != "" {
			b.WriteString("Decided " + s.tag + " in review.\n\n")
		}
	}
	os.WriteFile(filepath.Join(ws, "log.md"), []byte(b.String()), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"]
	for i, s := range spellings {
		sec := section(p.MustResult("corpus/section", map[string]any{"corpusId": id, "canonicalNumber": i + 1}))
		var want []string
		if s.want != "" {
			want = []string{s.want}
		}
		if got := strs(sec["exec_tags"]); !slices.Equal(got, want) {
			t.Fatalf("section %d tagged %q: exec_tags %v, want %v", i+1, s.tag, got, want)
		}
		if body := strings.ToLower(sec["body"].(string)); strings.Contains(body, "exec") || strings.Contains(body, "[") {
			t.Fatalf("section %d: the tag %q is in the indexed body %q", i+1, s.tag, sec["body"])
		}
	}
	for _, filter := range []string{"EXEC:GOV", "exec: gov", "[EXEC:GOV]"} {
		hits := hitsOf(t, p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "ballota ballotb ballotc ballotd ballote", "mode": "keyword",
			"filters": map[string]any{"exec_tags": []string{filter}}}))
		var got []int
		for _, h := range hits {
			got = append(got, harness.Num(section(h)["canonical_section_number"]))
		}
		sort.Ints(got)
		if !slices.Equal(got, []int{1, 2, 3}) {
			t.Fatalf("exec_tags filter %q found sections %v, want [1 2 3]", filter, got)
		}
	}
	for _, q := range []string{"exec", "gov", "micro"} {
		for _, mode := range []string{"keyword", "hybrid"} {
			if hits := hitsOf(t, p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": q, "mode": mode})); len(hits) != 0 {
				t.Fatalf("%s search for %q found a tag in the body: %v", mode, q, hits)
			}
		}
	}
	p.Stop()
}

// TestCorpusNoSections: a file with no section heading opened as a log is
// indexed empty with a no_sections warning in the answer, and neither its
// open nor a rebuild writes a governance file, in the workspace or the
// data dir.
func TestCorpusNoSections(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	data := filepath.Join(work, "data")
	os.MkdirAll(filepath.Join(ws, "notes"), 0o755)
	os.WriteFile(filepath.Join(ws, "notes", "README.md"), []byte("# Readme\n\nNo numbered section.\n\n## Notes\n\ntext\n"), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error")
	p.Initialize()
	before := treeStamp(t, ws)
	open := p.MustResult("corpus/open", map[string]any{"path": "notes/README.md", "watch": false})
	var warned bool
	for _, w := range open["sync"].(map[string]any)["warnings"].([]any) {
		warned = warned || w.(map[string]any)["kind"] == "no_sections"
	}
	if !warned {
		t.Fatalf("no no_sections warning in the answer: %v", open["sync"])
	}
	p.MustResult("corpus/rebuild", map[string]any{"corpusId": open["corpusId"]})
	if after := treeStamp(t, ws); !mapsEqual(before, after) {
		t.Fatalf("opening a file with no sections wrote into the workspace: %v", keys(after))
	}
	for _, name := range []string{".section_count", "collision.log"} {
		if _, err := os.Stat(filepath.Join(data, "corpus", open["corpusId"].(string), name)); err == nil {
			t.Fatalf("%s written in the data dir for a file with no sections", name)
		}
	}
	p.Stop()
}
