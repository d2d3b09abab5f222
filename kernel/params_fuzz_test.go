package kernel

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/corpus"
	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/workspace"
)

// newTestServer wires a Server to a real engine on a real workspace.
func newTestServer(tb testing.TB) *Server {
	tb.Helper()
	ws := tb.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\nb\nTODO c\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	w, err := sandbox.Open(ws, sandbox.WorkspaceWrite)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := tb.TempDir()
	kdb := store.NewOpener(filepath.Join(dataDir, store.FileName))
	tb.Cleanup(func() { kdb.Close() })
	doct := document.New(document.Options{DB: kdb.Open})
	eng, err := tx.Open(context.Background(), tx.Options{Targets: []tx.Target{workspace.New(w, nil, log), doct, memory.NewTarget(store.MemoryOf(kdb.Open), nil)}, DataDir: dataDir,
		Policy: approvals.Never, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close() })
	cs := corpus.NewService(corpus.Config{DB: kdb.Open, Workspace: w, DataDir: dataDir, Logger: log})
	tb.Cleanup(func() { cs.Close() })
	pol, err := memory.ParsePolicy([]byte(`{"grants": [{"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
		"scope": {"tenant_id": "*", "organization_id": "*", "repository_id": "*"}}]}`))
	if err != nil {
		tb.Fatal(err)
	}
	ms := memory.New(memory.Config{Store: store.MemoryOf(kdb.Open), Engine: eng, Workspace: w, Policy: pol, Logger: log})
	s := &Server{
		services: newServices(Config{Engine: eng, Documents: document.NewService(eng, doct), Corpus: cs, Memory: ms, Workspace: w, Policy: approvals.Never, Framing: FramingNDJSON, MaxMessageBytes: DefaultMaxMessageBytes, Logger: log}),
		inflight: map[*request]context.CancelFunc{}, exit: make(chan struct{}),
	}
	s.stream = NewStream(strings.NewReader(""), io.Discard, Config{})
	return s
}

// callRow calls m's handler for the connection s, without the panic
// recovery of Server.invoke: a panic must fail the test.
func callRow(s *Server, m methodInfo, raw json.RawMessage) (any, error) {
	if m.session != nil {
		return m.session(context.Background(), s, raw)
	}
	return m.handle(context.Background(), &s.services, raw)
}

// FuzzMethodParams feeds arbitrary params to every method of the method
// table, against a real engine: no handler may panic, and every error must
// map to a non-zero wire code. The method is named by the input, not
// picked by its index in the table, so a committed seed keeps fuzzing the
// method it was written for as methods are added; a name the table does
// not have is skipped.
func FuzzMethodParams(f *testing.F) {
	for _, name := range slices.Sorted(maps.Keys(methods)) {
		f.Add(name, []byte(`{}`))
		f.Add(name, []byte(`{"transactionId":"tx-0000000000000000","afterSeq":-1}`))
	}
	f.Add("turn/start", []byte(`{"proposal":{"kind":"unified_diff","diff":"diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+x\n"}}`))
	f.Add("turn/start", []byte(`{"proposal":{"kind":"files","files":[{"path":"../x","content":"y"}]}}`))
	f.Add("turn/start", []byte(`{"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`))
	f.Add("turn/start", []byte(`{"plan":"remove the TODOs","proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`))
	f.Add("turn/start", []byte(`{"plan":["find",{"step":"edit","status":"in_progress"}],"proposal":{"kind":"files","files":[{"path":"a.txt","content":"z\n"}]}}`))
	f.Add("turn/start", []byte(`{"plan":[{"step":"x","status":"nope"}],"proposal":{"kind":"files","files":[{"path":"a.txt","content":"z\n"}]}}`))
	f.Add("approval/respond", []byte(`{"transactionId":"tx-1","approvalRequestId":"apr-1","decision":"deny"}`))
	f.Add("patch/apply", []byte(`{"validation_id":"tx-1","validationId":"tx-2","patch":{"patch_id":"p","expected_revision":0,"operations":[]}}`))
	f.Add("patch/apply", []byte(`{"validation_id":7,"patch":{}}`))
	s := newTestServer(f)
	f.Fuzz(func(t *testing.T, name string, params []byte) {
		m, ok := methods[name]
		if !ok || name == "exit" || name == "shutdown" {
			return // not a method; or one that ends the session by design
		}
		raw := json.RawMessage(params)
		_, err := callRow(s, m, raw)
		if err != nil {
			if code := s.toWire(err).Code; code == 0 {
				t.Fatalf("%s(%s): error with code 0: %v", name, params, err)
			}
		}
	})
}

// TestFuzzMethodParamsCorpus checks that every committed seed of
// FuzzMethodParams names a method the table has: the fuzz target skips
// any other name, so a renamed method would otherwise leave its seeds
// testing nothing.
func TestFuzzMethodParamsCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzMethodParams", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no seeds: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		var name string
		if len(lines) > 2 && lines[0] == "go test fuzz v1" {
			if q, ok := strings.CutPrefix(lines[1], "string("); ok {
				name, _ = strconv.Unquote(strings.TrimSuffix(q, ")"))
			}
		}
		if _, ok := methods[name]; !ok || name == "exit" || name == "shutdown" {
			t.Errorf("%s: line 2 is %q, want string(\"<method>\") naming a method of the table other than exit and shutdown", file, lines[min(1, len(lines)-1)])
		}
	}
}

// TestMalformedParamsEveryMethod is the table version: for every request
// method, params of the wrong shape get -32602 (never a panic, never code 0).
// malformedCommon are bad params for every method that takes any: wrong
// JSON types, nulls, and transaction ids that are empty, of the wrong type,
// path-like, huge, or well-formed but unknown.
var malformedCommon = []string{
	`[]`, `"str"`, `42`, `true`, `{"transactionId":7}`, `{"transactionId":null}`, `{"transactionId":""}`,
	`{"transactionId":"tx-"}`, `{"transactionId":"../../etc/passwd"}`, `{"transactionId":"tx-0000000000000000"}`,
	`{"transactionId":["tx-0000000000000000"]}`, `{"transactionId":{"a":1}}`,
	`{"transactionId":"tx-` + strings.Repeat("a", 1<<20) + `"}`,
}

// malformedByMethod are bad params aimed at one method's own fields.
var malformedByMethod = map[string][]string{
	"memory/read_context": {
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]}}`,
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"query":"x","k":-1}`,
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"query":"x","selector":7}`,
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"*"},"principal":{"principal_id":"p","roles":["curator"]},"query":"x"}`,
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["root"]},"query":"x"}`,
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"query":"the of"}`,
	},
	"memory/ingest": {
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"path":"/etc"}`,
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"path":".","glob":"[unclosed"}`,
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"path":"a.txt"}`,
	},
	"memory/propose": {
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"element_id":"e","target_version_id":"v"}`,
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"element_id":"e","target_version_id":"v","body":"x","summary":"s","provenance":{"actor_type":"a","actor_id":"b"}}`,
	},
	"memory/verify_citations": {
		`{"scope":{"tenant_id":"t","organization_id":"o","repository_id":"r"},"principal":{"principal_id":"p","roles":["curator"]},"citations":[{}]}`,
	},
	"turn/start": {
		`{}`, `{"proposal":null}`, `{"proposal":"x"}`, `{"proposal":[]}`, `{"proposal":{}}`,
		`{"proposal":{"kind":5}}`, `{"proposal":{"kind":"nope"}}`,
		`{"proposal":{"kind":"unified_diff"}}`, `{"proposal":{"kind":"unified_diff","diff":7}}`,
		`{"proposal":{"kind":"unified_diff","diff":""}}`, `{"proposal":{"kind":"unified_diff","diff":"garbage\n"}}`,
		`{"proposal":{"kind":"unified_diff","diffBase64":"!!not base64"}}`,
		`{"proposal":{"kind":"unified_diff","diff":"x","diffBase64":"eA=="}}`,
		`{"proposal":{"kind":"unified_diff","diff":"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-nope\n+x\n"}}`,
		`{"proposal":{"kind":"files"}}`, `{"proposal":{"kind":"files","files":[]}}`, `{"proposal":{"kind":"files","files":{}}}`,
		`{"proposal":{"kind":"files","files":[null]}}`, `{"proposal":{"kind":"files","files":[{"path":"a.txt"}]}}`,
		`{"proposal":{"kind":"files","files":[{"path":7,"content":"x"}]}}`,
		`{"proposal":{"kind":"files","files":[{"path":"a.txt","content":"x","delete":true}]}}`,
		`{"proposal":{"kind":"files","files":[{"path":"a.txt","contentBase64":"%%%"}]}}`,
		`{"proposal":{"kind":"files","files":[{"path":"a.txt","content":"x","contentBase64":"eA=="}]}}`,
		`{"proposal":{"kind":"files","files":[{"path":"a.txt","content":"x"},{"path":"a.txt","content":"y"}]}}`,
		`{"proposal":{"kind":"files","files":[{"path":"missing.txt","delete":true}]}}`,
		`{"proposal":{"kind":"remove_todo_multi"}}`, `{"proposal":{"kind":"remove_todo_multi","needle":""}}`,
		`{"proposal":{"kind":"remove_todo_multi","needle":"TODO"}}`,
		`{"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":"a.txt"}}`,
		`{"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":[7]}}`,
		`{"proposal":{"kind":"remove_todo_multi","needle":"NOT THERE","targetFiles":["a.txt"]}}`,
		`{"plan":7,"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`,
		`{"plan":{},"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`,
		`{"plan":"","proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`,
		`{"plan":[],"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`,
		`{"plan":[{"step":"a","status":"later"}],"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`,
		`{"plan":[{"step":"a","why":"b"}],"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`,
		`{"plan":"ok","proposal":null}`,
	},
	"patchset/context_ack": {
		`{"docId":"d"}`, `{"patchSetId":"ps"}`, `{"docId":"d","patchSetId":7}`, `{"docId":"d","patchSetId":""}`,
		`{"docId":"","patchSetId":"ps"}`, `{"docId":"d#x","patchSetId":"ps"}`, `{"docId":"d","patchSetId":"ps"}`,
	},
	"patch/apply": {
		`{"validationId":"tx-0000000000000000","validation_id":"tx-0000000000000001","patch":{"patch_id":"p","expected_revision":0,"operations":[]}}`,
		`{"validation_id":7,"patch":{"patch_id":"p","expected_revision":0,"operations":[]}}`,
		`{"validation_id":"","patch":{"patch_id":"p","expected_revision":0,"operations":[]}}`,
		`{"validation_id":"tx-0000000000000000"}`,
	},
	"tx/events": {
		`{"transactionId":"tx-0000000000000000","afterSeq":"x"}`, `{"transactionId":"tx-0000000000000000","afterSeq":-1}`,
		`{"transactionId":"tx-0000000000000000","afterSeq":1e30}`, `{"transactionId":"tx-0000000000000000","afterSeq":1.5}`,
	},
	"approval/respond": {
		`{}`, `{"transactionId":"tx-0000000000000000"}`,
		`{"transactionId":"tx-0000000000000000","approvalRequestId":"apr-0000000000000000"}`,
		`{"transactionId":"tx-0000000000000000","approvalRequestId":"apr-0000000000000000","decision":"maybe"}`,
		`{"transactionId":"tx-0000000000000000","approvalRequestId":"apr-0000000000000000","decision":1}`,
		`{"transactionId":"tx-0000000000000000","approvalRequestId":7,"decision":"approve"}`,
	},
}

// TestMalformedParamsEveryMethod sends malformed params to every method of
// the method table, against a real engine. Each must be answered, within a
// deadline, by -32602 naming the bad field in data.field, or by an
// application error (-32000..-32099): never a panic, never a hang, never
// code 0. initialize and tx/list take no required params, so they may
// succeed by ignoring what they do not know.
func TestMalformedParamsEveryMethod(t *testing.T) {
	s := newTestServer(t)
	total := 0
	defer func() { t.Logf("%d malformed calls", total) }()
	for _, name := range RequestMethods() {
		if name == "shutdown" {
			continue
		}
		cases := append(slices.Clone(malformedCommon), malformedByMethod[name]...)
		total += len(cases)
		for _, p := range cases {
			raw := json.RawMessage(p)
			label := p
			if len(label) > 80 {
				label = label[:80] + "…"
			}
			type outcome struct {
				err   error
				panic any
			}
			done := make(chan outcome, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						done <- outcome{panic: r}
					}
				}()
				_, err := callRow(s, methods[name], raw)
				done <- outcome{err: err}
			}()
			var o outcome
			select {
			case o = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s(%s): no answer within 10s", name, label)
			}
			if o.panic != nil {
				t.Errorf("%s(%s): panic: %v", name, label, o.panic)
				continue
			}
			if o.err == nil {
				if name != "initialize" && name != "tx/list" && name != "doc/types" { // their params are all optional
					t.Errorf("%s(%s): no error", name, label)
				}
				continue
			}
			we := s.toWire(o.err)
			switch {
			case we.Code == -32602:
				var data map[string]any
				if we.Data == nil || json.Unmarshal(we.Data.(json.RawMessage), &data) != nil || data["field"] == nil {
					t.Errorf("%s(%s): -32602 without data.field: %s", name, label, we.Message)
				}
			case we.Code >= -32099 && we.Code <= -32000:
			default:
				t.Errorf("%s(%s): code %d (%v), want -32602 or an application code", name, label, we.Code, o.err)
			}
		}
	}
}
