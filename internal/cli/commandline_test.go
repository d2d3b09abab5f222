// The tests of this file were e2e/mcp's and e2e/host's: they run the
// command line (cli.Command, what the binary runs) inside the test process
// with buffers for stdout and stderr, or harness.Serve for a kernel to
// speak to, since what they check is the command line's flags and wiring,
// not a process. e2e/host keeps the binary's own exit statuses and streams
// (TestCommandLine), the demos, make, and the recovery log after
// failpoints.

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/desk"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
	"github.com/txkernel/txkernel/internal/cli"
)

const testToken = "s3cret-token-for-the-http-test"

// run runs the command line with args in-process to completion, with an
// empty stdin, and returns its stdout, its stderr and its exit status. It
// fails t if the command still runs after 20 s (a start-up that blocks).
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &cli.Command{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Embedded: true}
	done := make(chan int, 1)
	go func() { done <- c.Run(ctx, args) }()
	select {
	case code := <-done:
		return out.String(), errb.String(), code
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("txkernel %s: still running after 20 s", strings.Join(args, " "))
	}
	return "", "", -1
}

// writeToken writes the test token to a file of mode tokenMode.
func writeToken(t *testing.T, tokenMode os.FileMode) string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), tokenMode); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestHTTPStartupRefusals: start-up refuses, fast and with a message that
// says why, a non-loopback bind without TLS (exit 2), a token file that is
// a FIFO (which would block the start-up), and one of two lines;
// --insecure-plaintext starts with a warning.
func TestHTTPStartupRefusals(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(t.TempDir(), "two")
	if err := os.WriteFile(two, []byte(testToken+"\nsecond-line-of-the-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := writeToken(t, 0o600)
	cases := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"plaintext on all interfaces", []string{"--http", "0.0.0.0:0", "--token-file", tok}, 2, "needs --tls-cert and --tls-key"},
		{"plaintext on a named address", []string{"--http", "192.0.2.1:0", "--token-file", tok}, 2, "needs --tls-cert and --tls-key"},
		{"a FIFO token file", []string{"--http", "127.0.0.1:0", "--token-file", fifo}, 1, "not a regular file"},
		{"a token file of two lines", []string{"--http", "127.0.0.1:0", "--token-file", two}, 1, "more than one line"},
		{"a TLS cert without key", []string{"--http", "127.0.0.1:0", "--token-file", tok, "--tls-cert", tok}, 1, "--tls-cert and --tls-key go together"},
	}
	for _, c := range cases {
		start := time.Now()
		// run fails the test if the start-up still runs after 20 s.
		stdout, stderr, code := run(t, append([]string{"mcp", "--workspace", d.WS, "--data-dir", d.Data}, c.args...)...)
		if out := stdout + stderr; code != c.wantCode || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d after %v: %s; want exit %d saying %q", c.name, code, time.Since(start), out, c.wantCode, c.want)
		}
	}
	d2 := mcpfix.NewDirs(t)
	k := harness.ServeConn(t, nil, "mcp", "--workspace", d2.WS, "--data-dir", d2.Data, "--http", "0.0.0.0:0", "--token-file", tok, "--log-level", "debug", "--insecure-plaintext")
	k.WaitStderr(t, regexp.MustCompile(`url=(https?://\S+/mcp)`), time.Minute)
	if !strings.Contains(k.StderrText(), "--insecure-plaintext") || !strings.Contains(k.StderrText(), "level=WARN") {
		t.Errorf("--insecure-plaintext logged no warning: %s", k.StderrText())
	}
}

// TestReviewerTokenNotTheAgents: a reviewer whose desk token is the MCP
// agent's bearer token is refused at start-up (was part of e2e/desk
// TestAgentTokenCannotOpenDesk).
func TestReviewerTokenNotTheAgents(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	tf := writeToken(t, 0o600)
	bad := desk.Reviewer{PrincipalID: "mallory", TokenSHA256: desk.TokenHash([]byte(testToken))}
	b, err := json.Marshal([]desk.Reviewer{bad})
	if err != nil {
		t.Fatal(err)
	}
	reviewers := filepath.Join(t.TempDir(), "reviewers.json")
	if err := os.WriteFile(reviewers, b, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "mcp", "--workspace", d.WS, "--data-dir", d.Data, "--http", "127.0.0.1:0", "--token-file", tf,
		"--review", "127.0.0.1:0", "--reviewers", reviewers)
	if out := stdout + stderr; code == 0 || !strings.Contains(out, "never an agent's") {
		t.Fatalf("a reviewer with the agent's token: exit %d\n%s", code, out)
	}
}

// TestHTTPTokenFileMode: a token file others may read is refused.
func TestHTTPTokenFileMode(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(testToken), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "mcp", "--workspace", d.WS, "--data-dir", d.Data, "--http", "127.0.0.1:0", "--token-file", tok)
	if out := stdout + stderr; code == 0 || !strings.Contains(out, "readable by group or others") {
		t.Fatalf("a world-readable token file: exit %d %s", code, out)
	}
}

// TestCommandLineFlags: help that lists the flags and real defaults, a
// bad log level that lists the levels, a workspace that is a file, and
// prune's ages. (The version's spellings, help's exit status and stream,
// and a bad flag's, on the binary: e2e/host TestCommandLine.)
func TestCommandLineFlags(t *testing.T) {
	t.Parallel()
	if out, _, _ := run(t, "serve", "--help"); !strings.Contains(out, "-workspace") {
		t.Errorf("serve --help does not list --workspace: %q", out)
	}
	if out, _, _ := run(t, "prune", "--help"); !strings.Contains(out, "(default 30d)") {
		t.Errorf("prune --help shows no real default for --older-than: %q", out)
	}
	// A bad log level lists the levels; a workspace that is a file says it
	// is not a directory.
	if _, errText, code := run(t, "serve", "--workspace", t.TempDir(), "--log-level", "verbose"); code != 2 || !strings.Contains(errText, "debug, info, warn, error") {
		t.Errorf("--log-level verbose: exit %d, stderr %q", code, errText)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errText, code := run(t, "serve", "--workspace", file, "--data-dir", t.TempDir()); code == 0 || !strings.Contains(errText, "not a directory") {
		t.Errorf("--workspace FILE: exit %d, stderr %q", code, errText)
	}

	// prune takes a whole number and an unambiguous unit, and defaults to
	// 30 days; "m" (minutes or months?) is refused with the choices.
	data := filepath.Join(t.TempDir(), "data")
	p := harness.Serve(t, "serve", "--workspace", t.TempDir(), "--data-dir", data, "--log-level", "error")
	p.Initialize()
	p.Stop()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--older-than", "30d"}, 0, "newer than 30d"},
		{[]string{"--older-than", "720h"}, 0, "newer than 30d"},
		{[]string{"--older-than", "90min"}, 0, "newer than 90min"},
		{[]string{"--older-than", "2w"}, 0, "newer than 2w"},
		{[]string{"--older-than", "1m"}, 2, "ambiguous"},
		{[]string{"--older-than", "90m"}, 2, "90min"},
		{[]string{"--older-than", "0s", "--dry-run"}, 0, "nothing was removed"},
		{nil, 0, "newer than 30d"},
		{[]string{"--older-than", "1.5d"}, 2, "whole number"},
		{[]string{"--older-than", "-3h"}, 2, "30d"},
	}
	for _, c := range cases {
		out, errText, code := run(t, append([]string{"prune", "--data-dir", data}, c.args...)...)
		if code != c.code || !strings.Contains(out+errText, c.want) {
			t.Errorf("prune %v: exit %d (want %d), output %q (want %q)", c.args, code, c.code, out+errText, c.want)
		}
	}
}

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
	k := harness.Serve(t, "serve", "--workspace", t.TempDir(), "--data-dir", data, "--log-level", "error")
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

// start runs a kernel in-process on a fresh workspace and data dir with extra
// flags, and returns it with initialize's capabilities.
func start(t *testing.T, extra ...string) (*harness.Proc, map[string]any) {
	t.Helper()
	args := append([]string{"serve", "--workspace", t.TempDir(), "--data-dir", filepath.Join(t.TempDir(), "data")}, extra...)
	p := harness.Serve(t, args...)
	res := p.MustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "test"}})
	caps, _ := res["capabilities"].(map[string]any)
	return p, caps
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestInitializeCapabilities: initialize says whether memory is served
// and where, which embedder semantic search uses, and the document types;
// the memory methods are listed only under a policy.
func TestInitializeCapabilities(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pol, []byte(`{"grants": [{"role": "curator", "actions": ["read"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	emb := harness.NewEmbedServer(t, 32)
	cases := []struct {
		name       string
		flags      []string
		enabled    bool
		policyMode string
		model      string
		version    string
		dims       float64
	}{
		{"no policy, built-in embedder", nil, false, "none", "txkernel-lsa", "txkernel-lsa-1", 256},
		{"asserted policy", []string{"--memory-policy", pol}, true, "asserted", "txkernel-lsa", "txkernel-lsa-1", 256},
		{"embedding server", []string{"--embed-url", "http://user:secret@" + strings.TrimPrefix(emb.URL, "http://"), "--embed-model", "mini", "--embed-model-version", "mini-2", "--embed-dims", "32"}, false, "none", "mini", "mini-2", 32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, caps := start(t, c.flags...)
			defer p.Stop()
			mem, _ := caps["memory"].(map[string]any)
			if mem["enabled"] != c.enabled || mem["store"] != "sqlite" || mem["policyMode"] != c.policyMode {
				t.Errorf("capabilities.memory = %v, want enabled %v, store sqlite, policyMode %s", mem, c.enabled, c.policyMode)
			}
			methods := strs(caps["methods"])
			if has := slices.Contains(methods, "memory/read_context"); has != c.enabled {
				t.Errorf("memory/read_context listed = %v with memory enabled = %v: %v", has, c.enabled, methods)
			}
			e, _ := caps["embedding"].(map[string]any)
			if e["model"] != c.model || e["embedding_model_version"] != c.version || e["dims"] != c.dims || harness.Str(e["method"]) == "" {
				t.Errorf("capabilities.embedding = %v, want model %s, version %s, dims %v and a method", e, c.model, c.version, c.dims)
			}
			if strings.Contains(harness.Str(e["method"]), "secret") {
				t.Errorf("capabilities.embedding.method shows the URL's password: %v", e["method"])
			}
			if got := strs(caps["documentTypes"]); !slices.Equal(got, []string{"json", "closing_checklist", "recipe"}) {
				t.Errorf("capabilities.documentTypes = %v", got)
			}
			// Without a policy a memory method is refused, naming the flag.
			if !c.enabled {
				resp, _ := p.Call("memory/read_context", map[string]any{})
				if code, _ := harness.RPCError(resp); code == 0 {
					t.Errorf("memory/read_context without a policy answered %v", resp)
				}
			}
		})
	}
}

// TestDebugLogsEveryRequest: at --log-level debug every request is one
// stderr line with its method, the client's id, its duration and its error
// code (0 for a result), and no params ever reach the log.
func TestDebugLogsEveryRequest(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(t.TempDir(), "data"), "--log-level", "debug")
	p.Initialize()
	const secret = "hunter2-PARAM-never-logged"
	p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "a.txt", "content": secret + "\n"}}}})
	p.Call("no/such", map[string]any{"token": secret})
	p.Call("tx/status", map[string]any{"transactionId": "tx-" + secret})
	p.Send(`{"jsonrpc":"2.0","id":"host-7","method":"tx/list","params":{}}`)
	p.Next(30 * time.Second)
	p.Stop()
	logs := p.StderrText()
	for _, want := range []struct{ method, id, code string }{
		{"initialize", "1", "0"},
		{"turn/start", "2", "0"},
		{"no/such", "3", "-32601"},
		{"tx/status", "4", "-32602|-32002"},
		{"tx/list", "host-7", "0"},
	} {
		re := regexp.MustCompile(`(?m)^time=\S+ level=DEBUG msg=request method=` + regexp.QuoteMeta(want.method) + ` id=` + want.id + ` duration=\S+ code=(` + want.code + `)$`)
		if !re.MatchString(logs) {
			t.Errorf("no debug line for %s id %s code %s in:\n%s", want.method, want.id, want.code, logs)
		}
	}
	if strings.Contains(logs, secret) || strings.Contains(logs, "hunter2") {
		t.Errorf("params reached the log:\n%s", logs)
	}
}
