package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestCommandsNeverDestroyWhatTheyDidNotMake: the command line refuses to
// replace a user's own file (schema --out over a hand-written bundle.json),
// an output that is also an input (eval --run naming the qrels it reads),
// a serving kernel's data dir (eval --data-dir), and a workspace inside the
// data dir (serve), and each refusal leaves the files as they were.
func TestCommandsNeverDestroyWhatTheyDidNotMake(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	// schema --out: a user's bundle.json stays; --force replaces it; files
	// the command wrote itself are replaced without --force.
	out := filepath.Join(dir, "schemas")
	mine := []byte(`{"note": "my own bundle"}` + "\n")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "bundle.json"), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errText, code := run(t, "schema", "--out", out); code != 1 || !strings.Contains(errText, "refusing to replace") || !strings.Contains(errText, "--force") {
		t.Fatalf("schema over a user's bundle.json: exit %d, %q", code, errText)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "bundle.json")); string(got) != string(mine) {
		t.Fatalf("schema replaced the user's bundle.json: %q", got)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Fatalf("a refused schema run wrote %d entries", len(entries))
	}
	if _, errText, code := run(t, "schema", "--out", out, "--force"); code != 0 {
		t.Fatalf("schema --force: exit %d, %q", code, errText)
	}
	if _, errText, code := run(t, "schema", "--out", out); code != 0 {
		t.Fatalf("schema over its own files: exit %d, %q", code, errText)
	}

	// eval: the run file is the qrels being read, or a file that is not a
	// run; the inputs are left byte for byte.
	corpus := filepath.Join(dir, "corpus.jsonl")
	queries := filepath.Join(dir, "queries.jsonl")
	qrels := filepath.Join(dir, "qrels.tsv")
	files := map[string]string{
		corpus:  `{"_id":"d1","title":"t","text":"hello world"}` + "\n",
		queries: `{"_id":"q1","text":"hello"}` + "\n",
		qrels:   "query-id\tcorpus-id\tscore\nq1\td1\t1\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	evalArgs := func(runPath string, extra ...string) []string {
		return append([]string{"eval", "beir", "--corpus", corpus, "--queries", queries, "--qrels", qrels, "--run", runPath}, extra...)
	}
	if _, errText, code := run(t, evalArgs(qrels)...); code != 2 || !strings.Contains(errText, "is the input") {
		t.Fatalf("eval --run = qrels: exit %d, %q", code, errText)
	}
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errText, code := run(t, evalArgs(notes)...); code != 2 || !strings.Contains(errText, "not a TREC run") {
		t.Fatalf("eval --run over a non-run file: exit %d, %q", code, errText)
	}
	for p, body := range files {
		if got, _ := os.ReadFile(p); string(got) != body {
			t.Fatalf("eval changed its input %s: %q", p, got)
		}
	}
	if got, _ := os.ReadFile(notes); string(got) != "my notes\n" {
		t.Fatalf("eval replaced notes.txt: %q", got)
	}

	// eval --data-dir of a serving kernel is refused, and leaves no kernel.db
	// behind in a data dir that had none.
	data := filepath.Join(dir, "data")
	k := harness.Start(t, nil, "serve", "--workspace", t.TempDir(), "--data-dir", data, "--log-level", "error")
	k.Initialize()
	if _, errText, code := run(t, evalArgs(filepath.Join(dir, "run.txt"), "--data-dir", data)...); code != 1 || !strings.Contains(errText, "in use by another txkernel") {
		t.Fatalf("eval --data-dir of a serving kernel: exit %d, %q", code, errText)
	}
	k.Stop()

	// serve with the workspace inside the data dir.
	inner := filepath.Join(data, "transactions")
	if err := os.MkdirAll(inner, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, errText, code := run(t, "serve", "--workspace", inner, "--data-dir", data); code == 0 || !strings.Contains(errText, "lies inside the data dir") {
		t.Fatalf("serve with the workspace inside the data dir: exit %d, %q", code, errText)
	}
}
