// Package corpusfix holds the fixtures of the corpus tests (seed 004,
// PROTOCOL.md §12) that drive a kernel through its JSON-RPC methods: a
// small log in the grammar markdown.ParseLog documents, a late section, an
// append as an editor makes one, and waits for a word to become
// searchable or for .section_count to reach a number. corpus's tests run
// their kernels in-process (harness.Serve); e2e/corpus's (SIGTERM, exit
// statuses, the inotify descriptors of a process) start the binary. One
// copy, so the two cannot drift apart.
package corpusfix

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/markdown"
)

// SmallLog is a log of n sections: section i is about topic<i>,
// reservoir<i> and lattice<i>, words no other section has.
func SmallLog(n int) string {
	var b strings.Builder
	b.WriteString("# Open questions\n\nPreamble text.\n\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "## %s. Question %d about topic%d\n*Author: c_lawd | Date: 2026-02-%02d*\n\nBody of section %d discusses reservoir%d and lattice%d.\n\n", markdown.Roman(i), i, i, 1+i%28, i, i, i)
	}
	return b.String()
}

// SectionText is section n of a log, about word, to append to SmallLog's.
func SectionText(n int, word string) string {
	return fmt.Sprintf("## %s. Late question %d\n*Author: Grok | Date: 2026-03-01*\n\nA new section about %s.\n\n", markdown.Roman(n), n, word)
}

// AppendText appends text to the file at path, as an editor's append
// does (no rename), failing tb on an error.
func AppendText(tb testing.TB, path, text string) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		tb.Fatal(err)
	}
}

// Hits returns the hits of a corpus/search result.
func Hits(tb testing.TB, res map[string]any) []map[string]any {
	tb.Helper()
	raw, _ := res["hits"].([]any)
	out := make([]map[string]any, len(raw))
	for i, h := range raw {
		out[i] = h.(map[string]any)
	}
	return out
}

// WaitSearchable polls a keyword search of corpus id until word finds a
// section, and returns that hit; it fails tb after 15 s (a correctness
// bound, not a speed goal: BenchmarkSaveToSearchable measures the
// latency).
func WaitSearchable(tb testing.TB, p *harness.Proc, id, word string) map[string]any {
	tb.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": word, "mode": "keyword", "k": 1})
		if hs := Hits(tb, res); len(hs) == 1 {
			return hs[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("%q never became searchable\nstderr:\n%s", word, p.StderrText())
	return nil
}

// WaitCount waits until the governance file .section_count at path holds
// n, failing tb after 15 s.
func WaitCount(tb testing.TB, path string, n int) {
	tb.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		got = strings.TrimSpace(string(b))
		if got == strconv.Itoa(n) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf(".section_count is %q, want %d", got, n)
}
