package kernel

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
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
	eng, err := tx.Open(context.Background(), tx.Options{Workspace: w, DataDir: tb.TempDir(), Policy: approvals.Never, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close() })
	s := &Server{
		cfg: Config{Engine: eng, Workspace: w, Policy: approvals.Never, Framing: FramingNDJSON, MaxMessageBytes: DefaultMaxMessageBytes, Logger: log},
		log: log, scanner: sandbox.NewScanner(), inflight: map[jsonrpc2.ID]context.CancelFunc{}, exit: make(chan struct{}),
	}
	s.stream = NewStream(strings.NewReader(""), io.Discard, nil, StreamOptions{})
	return s
}

// FuzzMethodParams feeds arbitrary params to every method of the method
// table, against a real engine: no handler may panic, and every error must
// map to a non-zero wire code.
func FuzzMethodParams(f *testing.F) {
	names := make([]string, 0, len(methods))
	for name := range methods {
		names = append(names, name)
	}
	slices.Sort(names)
	for i := range names {
		f.Add(uint8(i), []byte(`{}`))
		f.Add(uint8(i), []byte(`{"transactionId":"tx-0000000000000000","afterSeq":-1}`))
	}
	f.Add(uint8(slices.Index(names, "turn/start")), []byte(`{"proposal":{"kind":"unified_diff","diff":"diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+x\n"}}`))
	f.Add(uint8(slices.Index(names, "turn/start")), []byte(`{"proposal":{"kind":"files","files":[{"path":"../x","content":"y"}]}}`))
	f.Add(uint8(slices.Index(names, "turn/start")), []byte(`{"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`))
	f.Add(uint8(slices.Index(names, "approval/respond")), []byte(`{"transactionId":"tx-1","approvalRequestId":"apr-1","decision":"deny"}`))
	s := newTestServer(f)
	f.Fuzz(func(t *testing.T, sel uint8, params []byte) {
		name := names[int(sel)%len(names)]
		if name == "exit" || name == "shutdown" {
			return // they end the session by design
		}
		raw := json.RawMessage(params)
		_, err := methods[name].handle(context.Background(), s, &raw)
		if err != nil {
			if code := s.toWire(err).Code; code == 0 {
				t.Fatalf("%s(%s): error with code 0: %v", name, params, err)
			}
		}
	})
}

// TestMalformedParamsEveryMethod is the table version: for every request
// method, params of the wrong shape get -32602 (never a panic, never code 0).
func TestMalformedParamsEveryMethod(t *testing.T) {
	s := newTestServer(t)
	bad := []string{`[]`, `"str"`, `42`, `{"transactionId":7}`, `{"proposal":"x"}`, `{"proposal":{"kind":5}}`, `{"afterSeq":"x","transactionId":"tx-1"}`, `{"decision":1}`}
	for _, name := range RequestMethods() {
		if name == "shutdown" {
			continue
		}
		for _, p := range bad {
			raw := json.RawMessage(p)
			_, err := methods[name].handle(context.Background(), s, &raw)
			if name == "initialize" || name == "tx/list" {
				if err == nil {
					continue // they ignore fields they do not know
				}
			}
			if err == nil {
				t.Errorf("%s(%s): no error", name, p)
				continue
			}
			if code := s.toWire(err).Code; code != -32602 && (code < -32099 || code > -32000) {
				t.Errorf("%s(%s): code %d (%v), want -32602 or an application code", name, p, code, err)
			}
		}
	}
}
