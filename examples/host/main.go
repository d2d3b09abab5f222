// Command host is a minimal agent host: it starts txkernel as a subprocess,
// speaks JSON-RPC 2.0 to it over stdin/stdout, and walks one real change
// through the whole flow, printing what a person would see: the proposal,
// the approval request, the decision and the apply. `make demo` runs it on
// a copy of a real fzf commit from ../shared/corpora/patches/fzf, or on the
// sample in testdata/demo when ../shared is absent.
//
// The one thing a host developer must learn from it: the first
// apply/execute does not apply. It answers ok:false with pendingApprovals,
// and the host must show each request to a person, send the decision with
// approval/respond, and call apply/execute again. The demo prints that
// response verbatim.
//
// Messages on stdout are of two sorts, interleaved: responses (they carry
// an "id") and notifications (ledger events such as tx/status and
// approval/request; they carry a "method" and no "id"). The Go client
// (package client) routes them by that: events reach showEvent in order.
//
// Usage:
//
//	go run ./examples/host -kernel bin/txkernel -commit DIR [-decision approve|deny] [-keep]
//	go run ./examples/host -kernel bin/txkernel -checklist testdata/demo-checklist
//	go run ./examples/host -kernel bin/txkernel -memory ../shared/corpora/rust-rfcs/text
//	go run ./examples/host -kernel bin/txkernel -corpus OPEN_QUESTIONS.md
//	go run ./examples/host -kernel bin/txkernel -team ../shared/corpora/rust-rfcs/text [-memory-store postgres://…]
//
// DIR holds base/ (the workspace before), patch.diff and expected/. With
// -checklist it walks document patching on a closing checklist instead
// (checklist.go, `make demo-docs`); with -memory, curated memory on a
// markdown backlog (memory.go, `make demo-memory`); with -corpus, a
// correspondence log opened as a corpus (corpus.go, `make demo-corpus`);
// with -team, two kernels sharing one memory in PostgreSQL (team.go,
// `make demo-team`).
package main

import (
	"context"
	"sync"

	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	txclient "github.com/txkernel/txkernel/client"
	"github.com/txkernel/txkernel/protocol"
)

func main() {
	kernel := flag.String("kernel", "bin/txkernel", "path to the txkernel binary")
	commit := flag.String("commit", "", "a commit directory with base/, patch.diff and expected/")
	decision := flag.String("decision", "approve", "the person's decision: approve, approve_for_session or deny")
	keep := flag.Bool("keep", false, "keep the workspace and data dir afterwards")
	checklist := flag.String("checklist", "", "instead of a commit: a directory with checklist.json and envelope.json (document patching)")
	backlog := flag.String("memory", "", "instead of a commit: a directory of markdown to ingest as a backlog (curated memory)")
	logFile := flag.String("corpus", "", "instead of a commit: a numbered markdown log to open as a corpus (search with citations)")
	team := flag.String("team", "", "instead of a commit: a directory of markdown that two kernels share as one curated memory in PostgreSQL")
	store := flag.String("memory-store", "", "with -team: the team's postgres:// URL (default: a throwaway server from the installed binaries)")
	flag.Parse()
	var err error
	switch {
	case *team != "":
		err = runTeam(*kernel, *team, *store, *keep)
	case *logFile != "":
		err = runCorpus(*kernel, *logFile, *keep)
	case *backlog != "":
		err = runMemory(*kernel, *backlog, *keep)
	case *checklist != "":
		err = runChecklist(*kernel, *checklist, *keep)
	default:
		err = run(*kernel, *commit, *decision, *keep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(1)
	}
}

// kernelProc is a started kernel and the demo's printing client on it.
type kernelProc struct {
	c *client
}

// startKernel starts kernelBin with args, its stderr on ours, as a host
// would with the Go client (package client): client.Start starts it and
// runs initialize and initialized; the demo's client prints what passes.
func startKernel(kernelBin string, args ...string) (*kernelProc, error) {
	cmd := exec.Command(kernelBin, args...)
	cmd.Stderr = os.Stderr
	c := &client{}
	tc, err := txclient.Start(context.Background(), cmd, txclient.Options{
		ClientInfo: protocol.Implementation{Name: "txkernel-demo-host"},
		OnEvent:    c.showEvent,
		OnProgress: c.showProgress,
	})
	if err != nil {
		return nil, err
	}
	c.tc = tc
	return &kernelProc{c: c}, nil
}

// stop ends the session (shutdown, exit) and waits for the kernel.
func (k *kernelProc) stop() error { return k.c.tc.Close() }

// client prints a demo's calls and the kernel's notifications for people,
// over the Go client. Notifications arrive on the client's read loop
// before the response that follows them, so they print in wire order.
type client struct {
	tc   *txclient.Client
	mu   sync.Mutex // guards the quiet counters, shared with the read loop
	last []byte     // the last response as the host received it: {"result":…} or {"error":…}
	// quiet stops the printing of calls and notifications (a batch of
	// setup calls): they are only counted, for one summary line.
	quiet                   bool
	quietCalls, quietEvents int
	quietTxs                map[string]bool
}

// hush starts counting instead of printing; summary ends it.
func (c *client) hush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quiet, c.quietCalls, c.quietEvents, c.quietTxs = true, 0, 0, map[string]bool{}
}

// summary ends hush and says what was sent and received meanwhile.
func (c *client) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quiet = false
	if c.quietEvents == 0 {
		return fmt.Sprintf("%d calls", c.quietCalls)
	}
	return fmt.Sprintf("%d calls, %d ledger events in %d transactions", c.quietCalls, c.quietEvents, len(c.quietTxs))
}

// notify is a session notification the Go client sends itself
// (initialized with Start, exit with Close): the demo only shows it.
func (c *client) notify(method string, _ any) error {
	if !c.quiet {
		fmt.Printf("\n→ %s (notification, sent by the Go client)\n", method)
	}
	return nil
}

// showEvent prints a ledger event for people: its transaction and its
// place in that transaction's own ledger (seq starts at 1 in each, so it
// is not a session counter).
func (c *client) showEvent(ev protocol.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.quiet {
		c.quietEvents++
		c.quietTxs[ev.TransactionID] = true
		return
	}
	what := ev.Type
	if ev.Status != "" {
		what += " → " + ev.Status
	}
	fmt.Printf("  ← %-26s event %2d of %s's ledger\n", what, ev.Seq, ev.TransactionID)
}

// showProgress prints $/progress with its percentage and message.
func (c *client) showProgress(p protocol.ProgressParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.quiet {
		return
	}
	v := p.Value
	pct := ""
	if v.Percentage != nil {
		pct = fmt.Sprintf("%3d%% ", *v.Percentage)
	}
	title := ""
	if v.Title != "" {
		title = v.Title + ": "
	}
	fmt.Printf("  ← $/progress %s%s%s\n", pct, title, v.Message)
}

// call calls method and returns its raw result; c.last keeps the answer
// as the host received it. initialize answers what client.Start got, and
// shutdown ends the session through Close (the Go client does both).
func (c *client) call(method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	quiet := c.quiet
	if quiet {
		c.quietCalls++
	}
	c.mu.Unlock()
	if !quiet {
		fmt.Printf("\n→ %s\n", method)
	}
	var raw json.RawMessage
	var err error
	switch method {
	case protocol.MethodInitialize:
		raw, err = json.Marshal(c.tc.Init)
	case protocol.MethodShutdown:
		raw, err = json.RawMessage(`{}`), c.tc.Close()
	default:
		err = c.tc.Call(context.Background(), method, params, &raw)
	}
	var kerr *txclient.Error
	if errors.As(err, &kerr) {
		c.last, _ = json.Marshal(map[string]any{"error": map[string]any{"code": kerr.Code, "message": kerr.Message, "data": kerr.Data}})
		return nil, fmt.Errorf("%s: error %d: %s %s", method, kerr.Code, kerr.Message, kerr.Data)
	}
	if err != nil {
		return nil, err
	}
	c.last, _ = json.Marshal(map[string]any{"result": raw})
	return raw, nil
}

// wireError is a JSON-RPC error object as the host received it.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// lastError is the error of the last call, nil when it succeeded.
func (c *client) lastError() *wireError {
	var m struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(c.last, &m) != nil {
		return nil
	}
	return m.Error
}

func run(kernelBin, commit, decision string, keep bool) error {
	if commit == "" {
		return errors.New("-commit is required")
	}
	diff, err := os.ReadFile(filepath.Join(commit, "patch.diff"))
	if err != nil {
		return err
	}
	ws, err := os.MkdirTemp("", "txkernel-demo-ws-")
	if err != nil {
		return err
	}
	data, err := os.MkdirTemp("", "txkernel-demo-data-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(ws)
		defer os.RemoveAll(data)
	}
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(commit, "base"))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fmt.Printf("workspace: %s (a copy of %s/base)\ndata dir:  %s\n", ws, commit, data)

	k, err := startKernel(kernelBin, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "warn")
	if err != nil {
		return err
	}
	c := k.c

	res, err := c.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "txkernel-demo-host"}})
	if err != nil {
		return err
	}
	var init struct {
		ServerInfo   struct{ Name, Version string }
		Capabilities struct{ SandboxMode, ApprovalPolicy string }
	}
	json.Unmarshal(res, &init)
	fmt.Printf("  %s %s, sandbox %s, approval policy %s\n", init.ServerInfo.Name, init.ServerInfo.Version, init.Capabilities.SandboxMode, init.Capabilities.ApprovalPolicy)
	if err := c.notify("initialized", map[string]any{}); err != nil {
		return err
	}

	res, err = c.call("turn/start", map[string]any{"proposal": map[string]any{"kind": "unified_diff", "diff": string(diff)}})
	if err != nil {
		return err
	}
	var turn struct {
		TransactionID string
		Proposal      struct {
			PatchID, Fingerprint, Diff  string
			TargetFiles                 []string
			ContainsSecretIntroductions bool
		}
	}
	json.Unmarshal(res, &turn)
	p := turn.Proposal
	fmt.Printf("\nPROPOSAL %s\n  fingerprint: %s\n  files (%d): %s\n  secrets introduced: %v\n  diff (%d lines):\n",
		turn.TransactionID, p.Fingerprint, len(p.TargetFiles), strings.Join(p.TargetFiles, ", "), p.ContainsSecretIntroductions, strings.Count(p.Diff, "\n"))
	lines := strings.SplitAfter(p.Diff, "\n")
	for i, l := range lines {
		if i == 24 {
			fmt.Printf("    … %d more lines\n", len(lines)-24)
			break
		}
		fmt.Print("    ", l)
	}
	fmt.Println("  workspace untouched:", sameAsBase(ws, filepath.Join(commit, "base")))

	tx := map[string]any{"transactionId": turn.TransactionID}
	for round := 0; round < 3; round++ {
		res, err = c.call("apply/execute", tx)
		if err != nil {
			return err
		}
		var ap struct {
			OK               bool
			State            string
			AppliedFiles     []string
			PendingApprovals []struct{ ApprovalRequestID, Kind, Fingerprint, Reason string }
		}
		json.Unmarshal(res, &ap)
		if ap.OK {
			banner("After the decision, apply/execute answered ok:true: the change is applied", c.last)
			fmt.Printf("APPLIED: %d files, state %s\n", len(ap.AppliedFiles), ap.State)
			break
		}
		if round == 0 {
			banner("The FIRST apply/execute answered ok:false: nothing was written", c.last)
			fmt.Println("This is the step every host must handle. ok:false with pendingApprovals")
			fmt.Println("means the kernel refuses to apply until a person decides. The host now")
			fmt.Println("shows each pending approval to a person, sends the decision with")
			fmt.Println("approval/respond, and calls apply/execute again.")
		}
		for _, pa := range ap.PendingApprovals {
			fmt.Printf("\nAPPROVAL REQUEST %s\n  kind: %s\n  fingerprint: %s\n  reason: %s\n", pa.ApprovalRequestID, pa.Kind, pa.Fingerprint, pa.Reason)
			fmt.Printf("DECISION: %s (scripted; a real host asks a person)\n", decision)
			if _, err := c.call("approval/respond", map[string]any{"transactionId": turn.TransactionID, "approvalRequestId": pa.ApprovalRequestID, "decision": decision}); err != nil {
				return err
			}
		}
		if decision == "deny" {
			_, err := c.call("apply/execute", tx)
			fmt.Printf("\nAPPLY AFTER DENY: %v\n", err)
			break
		}
	}
	res, err = c.call("tx/status", tx)
	if err != nil {
		return err
	}
	var st struct{ State string }
	json.Unmarshal(res, &st)
	fmt.Printf("  state: %s\n", st.State)
	fmt.Printf("\n→ shutdown, exit (client.Close)\n")
	if err := k.stop(); err != nil {
		return fmt.Errorf("kernel exit: %w", err)
	}
	if decision != "deny" {
		ok, why := matches(ws, filepath.Join(commit, "expected"))
		fmt.Printf("\nworkspace byte-identical to expected/: %v %s\n", ok, why)
		if !ok {
			return errors.New("workspace does not match expected/")
		}
	}
	return nil
}

// banner prints a heading and the raw response line, indented, between rules.
func banner(title string, raw []byte) {
	rule := strings.Repeat("═", 76)
	fmt.Printf("\n%s\n%s\n%s\n", rule, title, rule)
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		buf.Reset()
		buf.Write(raw)
	}
	fmt.Println(buf.String())
	fmt.Println(rule)
}

func sameAsBase(ws, base string) bool {
	ok, _ := matches(ws, base)
	return ok
}

// matches reports whether every file under want is byte-identical in ws.
func matches(ws, want string) (bool, string) {
	bad := ""
	filepath.WalkDir(want, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || bad != "" {
			return nil
		}
		rel, _ := filepath.Rel(want, path)
		a, _ := os.ReadFile(path)
		b, err := os.ReadFile(filepath.Join(ws, rel))
		if err != nil || !bytes.Equal(a, b) {
			bad = rel
		}
		return nil
	})
	if bad != "" {
		return false, "(first difference: " + bad + ")"
	}
	return true, ""
}
