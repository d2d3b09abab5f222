package corpus_test

// The tests of the corpus through the kernel's methods (seed 004,
// PROTOCOL.md §12), moved here from e2e/corpus by issue 35 part 5: each
// runs the kernel's command line in this process (harness.Serve), since
// it needs the kernel's answers, not a process.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/store"

	"github.com/txkernel/txkernel/internal/testenv"
)

// fixtureSection is one entry of mkfixture's -truth file.
type fixtureSection struct {
	Filed      string   `json:"filed"`
	Title      string   `json:"title"`
	Authors    []string `json:"authors"`
	Date       string   `json:"date"`
	ExecTags   []string `json:"exec_tags"`
	StatusTags []string `json:"status_tags"`
	Source     string   `json:"source"`
}

// makeFixture writes an OPEN_QUESTIONS-style log of n sections built from
// the RFC corpus by testdata/corpus/mkfixture.go into dir, and returns its
// path and the generator's ground truth.
func makeFixture(t testing.TB, dir string, n int) (string, []fixtureSection) {
	t.Helper()
	rfcs := harness.SharedDir(t, "corpora/rust-rfcs/text")
	gen := filepath.Join(harness.RepoRoot, "testdata", "corpus", "mkfixture.go")
	out := filepath.Join(dir, "OPEN_QUESTIONS.md")
	truthPath := filepath.Join(t.TempDir(), "truth.json")
	cmd := exec.Command("go", "run", gen, "-rfcs", rfcs, "-sections", fmt.Sprint(n), "-out", out, "-truth", truthPath)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkfixture: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	var truth []fixtureSection
	if err := json.Unmarshal(raw, &truth); err != nil {
		t.Fatalf("truth: %v", err)
	}
	if len(truth) != n {
		t.Fatalf("truth has %d sections, want %d", len(truth), n)
	}
	return out, truth
}

// fileStamp is what "the markdown is never written" compares: the bytes'
// hash, the size and the modification time.
type fileStamp struct {
	sum   [32]byte
	size  int64
	mtime time.Time
}

func stamp(t testing.TB, path string) fileStamp {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileStamp{sum: sha256.Sum256(b), size: fi.Size(), mtime: fi.ModTime()}
}

func section(h map[string]any) map[string]any { return h["section"].(map[string]any) }

func strs(v any) []string {
	raw, _ := v.([]any)
	out := []string{}
	for _, x := range raw {
		out = append(out, x.(string))
	}
	return out
}

// TestCorpusSeedGates runs seed 004's four gates and its invariants on a
// 1,200-section log built from the RFC corpus, through the kernel (harness.Serve):
// disposition (linear_tail(40)), origin integrity (a topical query keeps
// exec_tags), authority isolation (stripping [EXEC:GOV] changes a
// governance-filtered query and no stored vector), collisions logged once,
// .section_count, rejected headings reported, and the markdown never
// written. Rebuild speed, gate 3, is a benchmark (corpus.BenchmarkRebuild).
func TestCorpusSeedGates(t *testing.T) {
	testenv.Volume(t) // seed 004's gates on a 1,200-section log built from the RFC corpus
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	data := filepath.Join(work, "data")
	if err := os.MkdirAll(filepath.Join(ws, "governance"), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath, truth := makeFixture(t, filepath.Join(ws, "governance"), 1200)
	before := stamp(t, logPath)

	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error")
	init := p.MustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "test"}})
	if got, _ := harness.JSONPath(init, "capabilities.caller"); got != "external" {
		t.Fatalf("default caller = %v, want external", got)
	}
	open := p.MustResult("corpus/open", map[string]any{"path": "governance/OPEN_QUESTIONS.md"})
	id := open["corpusId"].(string)
	if got, _ := harness.JSONPath(open, "sync.added"); harness.Num(got) != 1200 {
		t.Fatalf("open added %v sections, want 1200: %v", got, open)
	}
	status := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if harness.Num(status["sections"]) != 1200 || harness.Num(status["staleVectors"]) != 0 {
		t.Fatalf("status: %v", status)
	}
	rejected := 0
	for _, w := range status["warnings"].([]any) {
		if w.(map[string]any)["kind"] == "rejected_heading" {
			rejected++
		}
	}
	if rejected == 0 {
		t.Fatalf("the fixture's rejected heading is not reported: %v", status["warnings"])
	}

	// Gate 1, disposition: the last 40 sections, in order, tags intact.
	tail := hitsOf(t, p.MustResult("corpus/tail", map[string]any{"corpusId": id}))
	if len(tail) != 40 {
		t.Fatalf("linear_tail returned %d sections, want 40", len(tail))
	}
	for i, h := range tail {
		s := section(h)
		want := truth[1200-40+i]
		if harness.Num(s["canonical_section_number"]) != 1200-40+i+1 {
			t.Fatalf("tail[%d] is section %v, want %d", i, s["canonical_section_number"], 1200-40+i+1)
		}
		if !slices.Equal(strs(s["status_tags"]), nonNilStrings(want.StatusTags)) || !slices.Equal(strs(s["exec_tags"]), nonNilStrings(want.ExecTags)) {
			t.Fatalf("tail[%d] tags %v %v, source has %v %v", i, s["exec_tags"], s["status_tags"], want.ExecTags, want.StatusTags)
		}
		if h["citation"] == nil || h["why_included"] != "linear_tail" {
			t.Fatalf("tail[%d] has no citation or why_included: %v", i, h)
		}
	}
	// corpus/query is the default route: linear_tail even with a query.
	q := p.MustResult("corpus/query", map[string]any{"corpusId": id, "query": "anything"})
	if q["route"] != "linear_tail" || len(hitsOf(t, q)) != 40 || q["note"] == "" {
		t.Fatalf("corpus/query: route %v, %d hits, note %v", q["route"], len(hitsOf(t, q)), q["note"])
	}
	// Semantic search is opt-in: no mode, no search.
	resp, _ := p.Call("corpus/search", map[string]any{"corpusId": id, "query": "x"})
	if code, d := harness.RPCError(resp); code != -32602 || d["field"] != "mode" {
		t.Fatalf("search without mode: %v", resp)
	}

	// Gate 2, origin integrity: a section found by its own topic, in every
	// mode, with the source's exec_tags.
	target := -1
	for i, s := range truth {
		if slices.Contains(s.ExecTags, "EXEC:GOV") && i > 100 {
			target = i
			break
		}
	}
	if target < 0 {
		t.Fatal("the fixture has no [EXEC:GOV] section")
	}
	topic := truth[target].Title
	for _, mode := range []string{"keyword", "semantic", "hybrid"} {
		res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": topic, "mode": mode, "k": 10})
		found := false
		for _, h := range hitsOf(t, res) {
			s := section(h)
			n := harness.Num(s["canonical_section_number"])
			if !slices.Equal(strs(s["exec_tags"]), nonNilStrings(truth[n-1].ExecTags)) {
				t.Fatalf("%s: section %d exec_tags %v, source has %v", mode, n, s["exec_tags"], truth[n-1].ExecTags)
			}
			if n == target+1 {
				found = true
			}
			c := h["citation"].(map[string]any)
			if c["corpus_id"] != id || harness.Num(c["canonical_section_number"]) != n || c["content_hash"] == "" {
				t.Fatalf("%s: bad citation %v", mode, c)
			}
		}
		if !found {
			t.Errorf("%s search for %q did not return section %d", mode, topic, target+1)
		}
	}

	// Collisions: logged once, kept across a rebuild.
	coll := p.MustResult("corpus/collisions", map[string]any{"corpusId": id})
	nColl := len(coll["collisions"].([]any))
	if nColl == 0 || len(coll["log"].([]any)) != nColl {
		t.Fatalf("collisions %d, log lines %d", nColl, len(coll["log"].([]any)))
	}
	// The governance files are where the seed's writers read them: a
	// governance/ folder beside the log, in the workspace.
	gdir := filepath.Join(ws, "governance", "governance")
	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if st["sectionCount"] != filepath.Join(gdir, ".section_count") || st["governanceDir"] != "governance/governance" {
		t.Fatalf("status: sectionCount %v, governanceDir %v; want them in %s", st["sectionCount"], st["governanceDir"], gdir)
	}
	count, err := readSectionCountFile(filepath.Join(gdir, ".section_count"))
	if err != nil || count != 1200 {
		t.Fatalf(".section_count = %d, %v; want 1200", count, err)
	}
	if lines := fileLines(t, filepath.Join(gdir, "collision.log")); len(lines) != nColl {
		t.Fatalf("collision.log in the workspace has %d lines, want %d", len(lines), nColl)
	}
	onboarding, err := os.ReadFile(filepath.Join(gdir, "ONBOARDING_PROMPT.md"))
	if err != nil || !strings.Contains(string(onboarding), "**1200**") || !strings.Contains(string(onboarding), "MCCI") ||
		!strings.Contains(string(onboarding), "Collision protocol") || !strings.Contains(string(onboarding), "exec_tag protocol") {
		t.Fatalf("ONBOARDING_PROMPT.md: %v\n%s", err, onboarding)
	}
	if _, err := os.Stat(filepath.Join(data, "corpus", id, ".section_count")); !os.IsNotExist(err) {
		t.Fatalf("a workspace-governed log also wrote .section_count in the data dir: %v", err)
	}

	// Gate 4, authority isolation.
	govFilter := map[string]any{"exec_tags": []string{"EXEC:GOV"}}
	gov := func() []int {
		res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": topic, "mode": "hybrid", "k": 50, "filters": govFilter})
		var ns []int
		for _, h := range hitsOf(t, res) {
			ns = append(ns, harness.Num(section(h)["canonical_section_number"]))
		}
		return ns
	}
	beforeGov := gov()
	if !slices.Contains(beforeGov, target+1) {
		t.Fatalf("governance query does not return section %d before the strip: %v", target+1, beforeGov)
	}
	vecsBefore := vectors(t, data, id)
	src, _ := os.ReadFile(logPath)
	stripped := stripGovTag(t, src, target)
	if err := os.WriteFile(logPath, stripped, 0o644); err != nil {
		t.Fatal(err)
	}
	syncRes := p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if harness.Num(syncRes["updated"]) != 1 || harness.Num(syncRes["embedded"]) != 0 {
		t.Fatalf("sync after the strip: %v (want 1 updated, 0 embedded)", syncRes)
	}
	afterGov := gov()
	if slices.Contains(afterGov, target+1) {
		t.Fatalf("section %d still returned by the governance query after its [EXEC:GOV] was stripped", target+1)
	}
	for _, n := range afterGov {
		if !slices.Contains(beforeGov, n) && len(beforeGov) < 50 {
			t.Fatalf("governance query gained section %d after a strip", n)
		}
	}
	vecsAfter := vectors(t, data, id)
	if len(vecsAfter) != len(vecsBefore) || len(vecsBefore) != 1200 {
		t.Fatalf("vectors: %d before, %d after", len(vecsBefore), len(vecsAfter))
	}
	for rowid, v := range vecsBefore {
		if !bytes.Equal(v, vecsAfter[rowid]) {
			t.Fatalf("vector of row %d changed after a tag strip", rowid)
		}
	}
	// Restore the source as the author had it; the test wrote it, not the kernel.
	if err := os.WriteFile(logPath, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(logPath, before.mtime, before.mtime); err != nil {
		t.Fatal(err)
	}
	before = stamp(t, logPath)

	// Rebuild: progress reported, everything re-made, collisions not
	// appended again, same vectors (the built-in is deterministic).
	resp, notes := p.Call("corpus/rebuild", map[string]any{"corpusId": id, "workDoneToken": "rb-1"})
	if resp["error"] != nil {
		t.Fatalf("rebuild: %v", resp["error"])
	}
	kinds := []string{}
	for _, n := range notes {
		if n.Method == "$/progress" {
			v, _ := harness.JSONPath(n.Value, "params.value.kind")
			tok, _ := harness.JSONPath(n.Value, "params.token")
			if tok != "rb-1" {
				t.Fatalf("progress token %v", tok)
			}
			kinds = append(kinds, v.(string))
		}
	}
	if len(kinds) < 3 || kinds[0] != "begin" || kinds[len(kinds)-1] != "end" {
		t.Fatalf("rebuild progress: %v", kinds)
	}
	coll = p.MustResult("corpus/collisions", map[string]any{"corpusId": id})
	if len(coll["log"].([]any)) != nColl {
		t.Fatalf("rebuild appended to collision.log: %d lines, want %d", len(coll["log"].([]any)), nColl)
	}
	// Gate 3's record (the rebuild, its section count and its duration),
	// after the first embedding model's: the built-in, trained at the first
	// sync and unchanged by the rebuild (it is deterministic).
	glog := fileLines(t, filepath.Join(gdir, "GOVERNANCE_LOG.md"))
	if len(glog) != 2 || !regexp.MustCompile(`^- \S+ embedding model change: embedding_model_version none -> txkernel-lsa\S+ \(embedding_version 1\)$`).MatchString(glog[0]) ||
		!regexp.MustCompile(`^- \S+ rebuild: 1200 sections in [0-9.]+ ms$`).MatchString(glog[1]) {
		t.Fatalf("GOVERNANCE_LOG.md after the first sync and one rebuild: %q", glog)
	}
	// Let the watcher see whatever it will, then check the source.
	time.Sleep(300 * time.Millisecond)
	p.Stop()
	if after := stamp(t, logPath); after != before {
		t.Fatalf("the markdown changed: before %+v, after %+v", before, after)
	}
}

// fileLines returns a file's non-empty lines; a missing file has none.
func fileLines(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func nonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// stripGovTag removes the [EXEC:GOV] tag of the n-th section (0-based) of
// a log, as an author editing the file would.
func stripGovTag(t testing.TB, src []byte, n int) []byte {
	t.Helper()
	lines := strings.SplitAfter(string(src), "\n")
	seen := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "## ") && isSectionHeading(l) {
			seen++
		}
		if seen == n && strings.Contains(l, "[EXEC:GOV]") {
			lines[i] = strings.Replace(l, "[EXEC:GOV]", "", 1)
			return []byte(strings.Join(lines, ""))
		}
		if seen > n {
			break
		}
	}
	t.Fatalf("section %d has no [EXEC:GOV]", n)
	return nil
}

// isSectionHeading is a loose check for the fixture's headings: "## " then
// a Roman numeral and a dot.
func isSectionHeading(l string) bool {
	rest := strings.TrimPrefix(l, "## ")
	i := strings.IndexFunc(rest, func(r rune) bool { return !strings.ContainsRune("IVXLCDM", r) })
	return i > 0 && rest[i] == '.'
}

// vectors reads every stored vector of a corpus straight from kernel.db
// (WAL lets a reader in beside the kernel).
func vectors(t testing.TB, dataDir, corpusID string) map[int64][]byte {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(dataDir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Corpus().Get(context.Background(), corpusID)
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	v, err := db.Corpus().VectorBlobs(context.Background(), corpusID, 256)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func readSectionCountFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscan(string(b), &n)
	return n, err
}
