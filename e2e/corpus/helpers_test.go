package corpus

// Helpers of the tests that stay here; the corpus's other tests, which need
// no process, are in corpus/ (package corpus_test) with their own copy.

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/markdown"
)

// smallLog is a log of n sections in the grammar ParseLog documents.
func smallLog(n int) string {
	var b strings.Builder
	b.WriteString("# Open questions\n\nPreamble text.\n\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "## %s. Question %d about topic%d\n*Author: c_lawd | Date: 2026-02-%02d*\n\nBody of section %d discusses reservoir%d and lattice%d.\n\n", markdown.Roman(i), i, i, 1+i%28, i, i, i)
	}
	return b.String()
}

func sectionText(n int, word string) string {
	return fmt.Sprintf("## %s. Late question %d\n*Author: Grok | Date: 2026-03-01*\n\nA new section about %s.\n\n", markdown.Roman(n), n, word)
}

func appendText(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

func hitsOf(t testing.TB, res map[string]any) []map[string]any {
	t.Helper()
	raw, _ := res["hits"].([]any)
	out := make([]map[string]any, len(raw))
	for i, h := range raw {
		out[i] = h.(map[string]any)
	}
	return out
}

// waitSearchable polls a keyword search until word finds a section, and
// returns it; it fails after 15 s (a correctness bound, not a speed goal).
func waitSearchable(t *testing.T, p *harness.Proc, id, word string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": word, "mode": "keyword", "k": 1})
		if hs := hitsOf(t, res); len(hs) == 1 {
			return hs[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%q never became searchable\nstderr:\n%s", word, p.StderrText())
	return nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// waitCount waits until .section_count holds n.
func waitCount(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		got = strings.TrimSpace(string(b))
		if got == itoa(n) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf(".section_count is %q, want %d", got, n)
}
