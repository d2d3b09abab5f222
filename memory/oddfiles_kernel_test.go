package memory_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMemoryIngestOddFiles: one odd file never fails an ingest, on
// either store. A file name that is not UTF-8, a 2,400-character path and
// a 1 MiB body of distinct words (over PostgreSQL's 1 MiB tsvector) are
// each ingested or skipped with the file named and a reason; the
// ordinary files are ingested and readable either way.
func TestMemoryIngestOddFiles(t *testing.T) {
	harness.SkipIfShort(t, "a 1 MiB body of distinct words and a 2,400-character path ingested on both stores")
	t.Parallel()
	eachStore(t, func(t *testing.T, flags func(testing.TB) []string) {
		ws := t.TempDir()
		smallBacklog(t, ws)
		long := "backlog/" + strings.Repeat(strings.Repeat("d", 199)+"/", 12) + "long.md"
		var words strings.Builder
		for i := 0; words.Len() < 1<<20-16; i++ {
			w := []byte("xxxxxxx ")
			for j, n := 0, i; j < 7; j, n = j+1, n/26 {
				w[j] = byte('a' + n%26)
			}
			words.Write(w)
		}
		odd := map[string]string{
			"backlog/bad-\xff\xfe.md": "# Odd name\n\nA body.\n",
			long:                      "# Long path\n\nA body.\n",
			"backlog/huge.md":         words.String()[:1<<20-16],
		}
		for name, body := range odd {
			p := filepath.Join(ws, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), flags(t)...)
		defer p.Stop()
		ing := p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
		skipped := map[string]string{}
		for _, s := range ing["skipped"].([]any) {
			m := s.(map[string]any)
			skipped[harness.Str(m["path"])] = harness.Str(m["reason"])
		}
		// The three ordinary files and the three odd ones that were not
		// skipped are created; blob.md and latin1.md are skipped as
		// before.
		oddSkipped := 0
		for _, name := range []string{"bad-\ufffd\ufffd.md", strings.TrimPrefix(long, "backlog/"), "huge.md"} {
			for path, reason := range skipped {
				if strings.HasSuffix(path, name) {
					if reason == "" {
						t.Fatalf("%s skipped without a reason", path)
					}
					oddSkipped++
				}
			}
		}
		if got, want := harness.Num(ing["created"]), 6-oddSkipped; got != want {
			t.Fatalf("created %d, want %d (skipped %v)", got, want, skipped)
		}
		for _, elem := range []string{"backlog/001-auth.md", "backlog/002-cache.md", "backlog/sub/003-deploy.md"} {
			if got := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem))); len(got) != 1 {
				t.Fatalf("%s after an ingest with odd files: %v", elem, got)
			}
		}
		t.Logf("skipped: %v", skipped)
	})
}
