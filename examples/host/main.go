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
// approval/request; they carry a "method" and no "id"). client.call routes
// them by that.
//
// Usage:
//
//	go run ./examples/host -kernel bin/txkernel -commit DIR [-decision approve|deny] [-keep]
//	go run ./examples/host -kernel bin/txkernel -checklist testdata/demo-checklist
//	go run ./examples/host -kernel bin/txkernel -memory ../shared/corpora/rust-rfcs/text
//	go run ./examples/host -kernel bin/txkernel -corpus OPEN_QUESTIONS.md
//
// DIR holds base/ (the workspace before), patch.diff and expected/. With
// -checklist it walks document patching on a closing checklist instead
// (checklist.go, `make demo-docs`); with -memory, curated memory on a
// markdown backlog (memory.go, `make demo-memory`); with -corpus, a
// correspondence log opened as a corpus (corpus.go, `make demo-corpus`).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	kernel := flag.String("kernel", "bin/txkernel", "path to the txkernel binary")
	commit := flag.String("commit", "", "a commit directory with base/, patch.diff and expected/")
	decision := flag.String("decision", "approve", "the person's decision: approve, approve_for_session or deny")
	keep := flag.Bool("keep", false, "keep the workspace and data dir afterwards")
	checklist := flag.String("checklist", "", "instead of a commit: a directory with checklist.json and envelope.json (document patching)")
	backlog := flag.String("memory", "", "instead of a commit: a directory of markdown to ingest as a backlog (curated memory)")
	logFile := flag.String("corpus", "", "instead of a commit: a numbered markdown log to open as a corpus (search with citations)")
	flag.Parse()
	var err error
	switch {
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

// client is a JSON-RPC 2.0 client over a child's pipes.
// kernelProc is a started kernel and a client on its pipes.
type kernelProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	c     *client
}

// startKernel starts kernelBin with args, its stderr on ours, and returns
// a client speaking to it over its stdin and stdout.
func startKernel(kernelBin string, args ...string) (*kernelProc, error) {
	cmd := exec.Command(kernelBin, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &kernelProc{cmd: cmd, stdin: stdin, c: &client{in: stdin, out: sc}}, nil
}

// stop closes the kernel's input and waits for it to exit.
func (k *kernelProc) stop() {
	k.stdin.Close()
	k.cmd.Wait()
}

type client struct {
	in     io.Writer
	out    *bufio.Scanner
	nextID int
	last   []byte // the raw line of the last response
	// quiet stops the printing of calls and notifications (a batch of
	// setup calls): they are only counted, for one summary line.
	quiet                   bool
	quietCalls, quietEvents int
	quietTxs                map[string]bool
}

// hush starts counting instead of printing; summary ends it.
func (c *client) hush() {
	c.quiet, c.quietCalls, c.quietEvents, c.quietTxs = true, 0, 0, map[string]bool{}
}

// summary ends hush and says what was sent and received meanwhile.
func (c *client) summary() string {
	c.quiet = false
	if c.quietEvents == 0 {
		return fmt.Sprintf("%d calls", c.quietCalls)
	}
	return fmt.Sprintf("%d calls, %d ledger events in %d transactions", c.quietCalls, c.quietEvents, len(c.quietTxs))
}

// notify sends a notification: a message without an id, never answered.
func (c *client) notify(method string, params any) error {
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if !c.quiet {
		fmt.Printf("\n→ %s (notification)\n", method)
	}
	_, err := c.in.Write(append(msg, '\n'))
	return err
}

// showNotification prints a notification for people: a ledger event with
// its transaction and its place in that transaction's own ledger (seq
// starts at 1 in each, so it is not a session counter), $/progress with
// its percentage and message.
func (c *client) showNotification(method string, params json.RawMessage) {
	var ev struct {
		TransactionID string `json:"transactionId"`
		Seq           int    `json:"seq"`
		Status        string `json:"status"`
		Value         *struct {
			Kind, Title, Message string
			Percentage           *int
		} `json:"value"`
	}
	_ = json.Unmarshal(params, &ev)
	if c.quiet {
		if ev.TransactionID != "" {
			c.quietEvents++
			c.quietTxs[ev.TransactionID] = true
		}
		return
	}
	switch {
	case ev.TransactionID != "":
		what := method
		if ev.Status != "" {
			what += " → " + ev.Status
		}
		fmt.Printf("  ← %-26s event %2d of %s's ledger\n", what, ev.Seq, ev.TransactionID)
	case method == "$/progress" && ev.Value != nil:
		pct := ""
		if ev.Value.Percentage != nil {
			pct = fmt.Sprintf("%3d%% ", *ev.Value.Percentage)
		}
		title := ""
		if ev.Value.Title != "" {
			title = ev.Value.Title + ": "
		}
		fmt.Printf("  ← $/progress %s%s%s\n", pct, title, ev.Value.Message)
	default:
		fmt.Printf("  ← %s\n", method)
	}
}

func (c *client) call(method string, params any) (json.RawMessage, error) {
	c.nextID++
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params})
	if c.quiet {
		c.quietCalls++
	} else {
		fmt.Printf("\n→ %s\n", method)
	}
	if _, err := c.in.Write(append(req, '\n')); err != nil {
		return nil, err
	}
	for c.out.Scan() {
		var m struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int             `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
			return nil, err
		}
		if m.ID == nil {
			// No id: a notification (a ledger event, $/progress), not our
			// answer.
			c.showNotification(m.Method, m.Params)
			continue
		}
		if *m.ID != c.nextID {
			return nil, fmt.Errorf("response for id %d, want %d", *m.ID, c.nextID)
		}
		c.last = append(c.last[:0], c.out.Bytes()...)
		if m.Error != nil {
			return nil, fmt.Errorf("%s: error %d: %s %s", method, m.Error.Code, m.Error.Message, m.Error.Data)
		}
		return m.Result, nil
	}
	return nil, errors.New("the kernel closed its output")
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
	cmd, stdin, c := k.cmd, k.stdin, k.c

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
	c.call("shutdown", nil)
	stdin.Write([]byte(`{"jsonrpc":"2.0","method":"exit"}` + "\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
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
