package corpus_test

// The corpus under real editing (issue 34): unclosed fences, tags in
// code, a section deleted and restored. The writer-lock test, which needs
// SIGTERM and exit statuses, stays in e2e/corpus.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/markdown"

	"github.com/txkernel/txkernel/internal/testenv"
)

// TestCorpusUnclosedFence: a section whose code fence never closes does
// not swallow the sections after it: they are counted in .section_count,
// listed by corpus/tail and their exec tags are found; a warning gives
// the fence's line. A heading inside a closed fence stays code and is
// counted as uncounted, with its line.
func TestCorpusUnclosedFence(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	var b strings.Builder
	b.WriteString(smallLog(3))
	b.WriteString("## IV. A section with an example\n*Author: Grok | Date: 2026-03-01*\n\n```md\n## IX. An example heading, not a section\n```\n\n")
	b.WriteString("## V. A section with a fence left open\n*Author: Grok | Date: 2026-03-02*\n\n```python\ndef f():\n    pass\n\n")
	fenceLine := strings.Count(b.String(), "\n") - 3
	for i := 6; i <= 9; i++ {
		fmt.Fprintf(&b, "## %s. After the fence %d\n*Author: c_lawd | Date: 2026-03-0%d*\n\nDecided here. [EXEC:GOV]\n\n", markdown.Roman(i), i, i-3)
	}
	os.WriteFile(filepath.Join(ws, "log.md"), []byte(b.String()), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"].(string)
	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if harness.Num(st["sections"]) != 9 {
		t.Fatalf("sections = %v, want 9", st["sections"])
	}
	if harness.Num(st["uncountedHeadings"]) != 1 {
		t.Fatalf("uncountedHeadings = %v, want 1 (## IX inside the closed fence)", st["uncountedHeadings"])
	}
	var unclosed, inCode map[string]any
	for _, w := range st["warnings"].([]any) {
		w := w.(map[string]any)
		switch w["kind"] {
		case "unclosed_fence":
			unclosed = w
		case "heading_in_code":
			inCode = w
		}
	}
	if unclosed == nil || harness.Num(unclosed["line"]) != fenceLine {
		t.Fatalf("no unclosed_fence warning at line %d: %v", fenceLine, st["warnings"])
	}
	if inCode == nil || !strings.Contains(harness.Str(inCode["text"]), "## IX.") {
		t.Fatalf("no heading_in_code warning: %v", st["warnings"])
	}
	waitCount(t, filepath.Join(ws, "governance", ".section_count"), 9)
	tail := p.MustResult("corpus/tail", map[string]any{"corpusId": id, "n": 3})
	hs := hitsOf(t, tail)
	if len(hs) != 3 || harness.Num(section(hs[2])["canonical_section_number"]) != 9 {
		t.Fatalf("linear_tail does not end at section 9: %v", harness.JSONText(tail))
	}
	res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "decided", "mode": "keyword", "k": 20,
		"filters": map[string]any{"exec_tags": []string{"EXEC:GOV"}}})
	if got := len(hitsOf(t, res)); got != 4 {
		t.Fatalf("%d sections tagged EXEC:GOV found, want the 4 after the fence", got)
	}
	p.Stop()
}

// TestCorpusTagsInCode: [EXEC:GOV] inside an indented code block, a
// fenced block, an inline code span or an HTML comment is text, not a
// governance tag; the same tag in prose is one.
func TestCorpusTagsInCode(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	bodies := []string{
		"Quoting the syntax:\n\n    [EXEC:GOV] marks a governance decision\n",
		"Draft note. <!-- [EXEC:GOV] pending review -->\n",
		"Draft.\n\n<!--\n[EXEC:GOV]\n-->\n",
		"Example:\n\n```\n[EXEC:GOV]\n```\n",
		"Use `[EXEC:GOV]` to tag.\n",
		"Decided: the vote passed. [EXEC:GOV]\n",
	}
	var b strings.Builder
	for i, body := range bodies {
		fmt.Fprintf(&b, "## %s. Section %d\n*Author: c_lawd | Date: 2026-03-0%d*\n\n%s\n", markdown.Roman(i+1), i+1, i+1, body)
	}
	os.WriteFile(filepath.Join(ws, "log.md"), []byte(b.String()), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"].(string)
	for i := range bodies {
		sec := section(p.MustResult("corpus/section", map[string]any{"corpusId": id, "canonicalNumber": i + 1}))
		tags := sec["exec_tags"].([]any)
		wantTag := i == len(bodies)-1
		if (len(tags) == 1) != wantTag {
			t.Errorf("section %d: exec_tags %v (a tag: %v)", i+1, tags, wantTag)
		}
		if !wantTag && !strings.Contains(harness.Str(sec["body"]), "[EXEC:GOV]") {
			t.Errorf("section %d: the code's text lost its brackets: %q", i+1, sec["body"])
		}
	}
	p.Stop()
}

// TestCorpusDeleteRestore: on a 5,000-section log, deleting section 10
// and restoring it writes nothing to collision.log and renumbers nothing
// (section 11 stays 11, and section 10 comes back as 10); a genuine
// collision, a number filed twice, is logged once however often the log
// is synced after.
func TestCorpusDeleteRestore(t *testing.T) {
	testenv.Volume(t) // a 5,000-section log
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	logPath := filepath.Join(ws, "log.md")
	full := smallLog(5000)
	os.WriteFile(logPath, []byte(full), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"].(string)
	collisionLog := filepath.Join(ws, "governance", "collision.log")
	lines := func() int {
		b, _ := os.ReadFile(collisionLog)
		return strings.Count(string(b), "\n")
	}
	filedAt := func(n int) string {
		resp, _ := p.Call("corpus/section", map[string]any{"corpusId": id, "canonicalNumber": n})
		res, ok := resp["result"].(map[string]any)
		if !ok {
			return ""
		}
		return harness.Str(section(res)["section_number_filed"])
	}

	at := strings.Index(full, "## X. ")
	end := strings.Index(full, "## XI. ")
	cut := full[:at] + full[end:]
	os.WriteFile(logPath, []byte(cut), 0o644)
	start := time.Now()
	res := p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	t.Logf("delete of section 10: %v, removed %v, updated %v", time.Since(start), res["removed"], res["updated"])
	if harness.Num(res["removed"]) != 1 || harness.Num(res["updated"]) != 0 || len(res["newCollisions"].([]any)) != 0 {
		t.Fatalf("deleting one section: %v", harness.JSONText(res))
	}
	if filedAt(11) != "XI" || filedAt(10) != "" {
		t.Fatalf("after the delete, section 11 is %q and section 10 is %q", filedAt(11), filedAt(10))
	}

	os.WriteFile(logPath, []byte(full), 0o644)
	res = p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if harness.Num(res["added"]) != 1 || harness.Num(res["updated"]) != 0 || len(res["newCollisions"].([]any)) != 0 {
		t.Fatalf("restoring one section: %v", harness.JSONText(res))
	}
	if filedAt(10) != "X" || filedAt(5000) != markdown.Roman(5000) {
		t.Fatalf("after the restore, section 10 is %q", filedAt(10))
	}
	if n := lines(); n != 0 {
		t.Fatalf("a transient deletion wrote %d lines to collision.log", n)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "governance", ".section_count")); strings.TrimSpace(string(b)) != "5000" {
		t.Fatalf(".section_count = %q", b)
	}

	// A genuine collision: number X filed again at the end.
	appendText(t, logPath, "## X. Filed twice\n*Author: Grok | Date: 2026-03-01*\n\nA second tenth section.\n\n")
	res = p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if nc := res["newCollisions"].([]any); len(nc) != 1 || harness.Num(nc[0].(map[string]any)["canonical_section_number"]) != 5001 {
		t.Fatalf("the duplicate: %v", res["newCollisions"])
	}
	appendText(t, logPath, sectionText(5002, "afterduplicate"))
	p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if n := lines(); n != 1 {
		t.Fatalf("collision.log has %d lines, want the one collision once", n)
	}
	p.Stop()
}
