package crash

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/protocol"
)

var (
	crashIterations = flag.Int("crash.iterations", 12,
		"kill -9 iterations of TestCrashHarness at random moments (make crash runs 600)")
	crashSeed    = flag.Uint64("crash.seed", 1, "seed of TestCrashHarness's random kill moments")
	crashCommits = flag.Int("crash.commits", 1,
		"how many of the 5 largest fzf commits TestCrashHarness crashes at every failpoint (make crash: 5)")
)

// crashFailpoints are every failpoint of the apply protocol, the ledger
// append and retiring (tx/engine.go, workspace), each crashed with exit (SIGKILL of the kernel
// itself). A ledger append, a transaction.json replace and a rename happen
// several times per session, so those are crashed at each occurrence (@N).
func crashFailpoints(files int) []string {
	fps := []string{
		"propose.before-rename=exit",
		"apply.after-staging=exit",
		"apply.before-commit-record=exit",
		"apply.after-commit-record=exit",
		"apply.after-blobs-deleted=exit",
		"apply.before-dir-fsync=exit",
		"apply.before-rename=exit",
		"retire.before-unmark=exit",
	}
	for n := 1; n < files; n++ {
		fps = append(fps, fmt.Sprintf("apply.between-renames=exit@%d", n))
	}
	// A session appends to the ledger at turn/start, approval request,
	// approval decision, apply/start+commit and the closing events: crash
	// each one (and one more, which is never reached, to prove the count).
	for n := 1; n <= 6; n++ {
		fps = append(fps, fmt.Sprintf("ledger.mid-append=exit@%d", n))
	}
	for n := 1; n <= 2; n++ {
		fps = append(fps, fmt.Sprintf("meta.mid-replace=exit@%d", n))
	}
	return fps
}

// crashHost drives one kernel and keeps every byte it received, in order:
// what the host was told is what must survive.
type crashHost struct {
	p          *harness.Proc
	transcript bytes.Buffer
	methods    map[string]string // request id -> method
}

func (h *crashHost) request(method string, params any) string {
	h.p.NextID++
	id := strconv.Itoa(h.p.NextID)
	h.methods[id] = method
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": h.p.NextID, "method": method, "params": params})
	// A write may fail once the kernel is dead; the caller notices at await.
	_, _ = h.p.Stdin.Write(append(b, '\n'))
	return id
}

// await returns the response to id, or nil if the kernel died first.
func (h *crashHost) await(id string) map[string]any {
	for m := range h.p.Out {
		h.transcript.Write(m.Raw)
		h.transcript.WriteByte('\n')
		obj, _ := m.Value.(map[string]any)
		if got, ok := obj["id"]; ok && fmt.Sprint(got) == id {
			return obj
		}
	}
	return nil
}

// drain records everything the kernel wrote before it died.
func (h *crashHost) drain() {
	for m := range h.p.Out {
		h.transcript.Write(m.Raw)
		h.transcript.WriteByte('\n')
	}
}

// crashPhases are the steps of the session in which a random kill lands:
// the proposal, the first apply/execute (which records the approval
// request), the person's decision, and the apply itself.
var crashPhases = []string{"turn/start", "apply/execute:request-approval", "approval/respond", "apply/execute"}

// crashPlan is one iteration: a commit, and either a failpoint or a phase
// and a delay after that phase's request was sent.
type crashPlan struct {
	commit    harness.FzfCommit
	failpoint string
	phase     string
	delay     time.Duration
}

// TestCrashHarness kills the real kernel with SIGKILL at random moments
// during turn/start, the apply/execute that records the approval request,
// approval/respond and the apply/execute that applies, and at every
// failpoint, on the largest real fzf commits. After each crash it restarts
// the kernel and asserts that, by the time the first response arrives, the
// workspace is base/ or expected/ (never a mix) and no staged or temp file
// is left; that every ledger loads; that everything the host received
// before the crash is on disk; and that finishing the transaction yields
// expected/. Run it long with `make crash`.
func TestCrashHarness(t *testing.T) {
	harness.SkipIfShort(t, "the crash harness, a kill -9 loop over fzf commits")
	// Not parallel: the kills land at moments calibrated below, which
	// other tests of this process would move.
	all := map[string]harness.FzfCommit{}
	for _, c := range harness.FzfCommits(t) {
		all[c.Name] = c
	}
	var commits []harness.FzfCommit
	for _, name := range harness.LargestFzfCommits {
		commits = append(commits, all[name])
	}
	rng := rand.New(rand.NewPCG(*crashSeed, 0x5eed))

	// Calibrate: how long each phase takes here, so kills land inside.
	window := map[string]time.Duration{}
	for i := range 3 {
		d := runCrashIteration(t, crashPlan{commit: commits[i%len(commits)]}, nil)
		for k, v := range d {
			window[k] = max(window[k], v)
		}
	}
	t.Logf("phase windows (longest of 3 uninterrupted runs): %v", window)

	var plans []crashPlan
	for _, c := range commits[:min(max(*crashCommits, 1), len(commits))] {
		for _, fp := range crashFailpoints(len(diffFiles(c.Diff))) {
			plans = append(plans, crashPlan{commit: c, failpoint: fp})
		}
	}
	nfp := len(plans)
	for i := range *crashIterations {
		ph := crashPhases[i%len(crashPhases)]
		// Up to 1.3x the phase's length: most kills land inside it, some
		// just after the response, when the host has been told.
		d := time.Duration(rng.Int64N(int64(window[ph])*13/10 + 1))
		plans = append(plans, crashPlan{commit: commits[rng.IntN(len(commits))], phase: ph, delay: d})
	}
	outcomes := &tally{m: map[string]int{}}
	// The failpoints fire where they are, whatever the timing: they run
	// in parallel. The kills land at calibrated moments, which other work
	// on the machine would move: they run one at a time, after them.
	t.Run("failpoints", func(t *testing.T) {
		for i, pl := range plans[:nfp] {
			t.Run(fmt.Sprintf("%03d-%s-%s", i, pl.commit.Name[:3], pl.failpoint), func(t *testing.T) {
				t.Parallel()
				runCrashIteration(t, pl, outcomes)
			})
		}
	})
	t.Run("kills", func(t *testing.T) {
		failed := 0
		for i, pl := range plans[nfp:] {
			if !t.Run(fmt.Sprintf("%03d-%s-kill-%s-%v", nfp+i, pl.commit.Name[:3], pl.phase, pl.delay), func(t *testing.T) {
				runCrashIteration(t, pl, outcomes)
			}) {
				if failed++; failed == 10 {
					t.Fatalf("stopping after 10 failed iterations of %d", len(plans)-nfp)
				}
			}
		}
	})
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(outcomes.m)) {
		fmt.Fprintf(&sb, "\n  %-90s %4d", k, outcomes.m[k])
	}
	t.Logf("%d iterations: %d at failpoints, %d kill -9 at random moments; after restart:%s", len(plans), nfp, len(plans)-nfp, sb.String())
}

// diffFiles lists the "diff --git" lines of a unified diff.
func diffFiles(diff []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(diff, []byte("\n")) {
		if bytes.HasPrefix(l, []byte("diff --git ")) {
			out = append(out, l)
		}
	}
	return out
}

// tally counts the outcomes of crash iterations, which may run in
// parallel.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (t *tally) add(k string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[k]++
}

// runCrashIteration runs one plan. With outcomes nil it is a calibration
// run: no crash, and it returns how long each phase took.
func runCrashIteration(t *testing.T, pl crashPlan, outcomes *tally) map[string]time.Duration {
	work := t.TempDir()
	ws, dataDir := filepath.Join(work, "ws"), filepath.Join(work, "data")
	base, expected := filepath.Join(pl.commit.Dir, "base"), filepath.Join(pl.commit.Dir, "expected")
	if _, err := os.Stat(base); err == nil {
		harness.CopyTree(t, base, ws)
	} else if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	wsInitial, err := treeDigest(ws)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--workspace", ws, "--data-dir", dataDir, "--approval-policy", "untrusted", "--log-level", "error"}
	var env []string
	if pl.failpoint != "" {
		env = []string{"TXKERNEL_FAILPOINTS=" + pl.failpoint}
	}
	h := &crashHost{p: harness.Start(t, env, args...), methods: map[string]string{}}

	// The session, with the kill (if any) after the chosen phase's request.
	took := map[string]time.Duration{}
	killed := false
	step := func(phase, method string, params any) map[string]any {
		if killed {
			return nil
		}
		start := time.Now()
		id := h.request(method, params)
		if outcomes != nil && pl.phase == phase {
			time.Sleep(pl.delay)
			_ = h.p.Cmd.Process.Kill()
			killed = true
			h.drain()
			return nil
		}
		resp := h.await(id)
		took[phase] = time.Since(start)
		if resp == nil {
			killed = true // a failpoint fired
			h.drain()
		}
		return resp
	}
	step("initialize", "initialize", map[string]any{"clientInfo": map[string]any{"name": "crash"}})
	var txID string
	if resp := step("turn/start", "turn/start", harness.DiffParams(pl.commit.Diff)); resp != nil {
		txID, _ = harness.JSONString(resp, "result.transactionId")
	}
	if txID != "" {
		if resp := step("apply/execute:request-approval", "apply/execute", map[string]any{"transactionId": txID}); resp != nil {
			pend, _ := harness.JSONPath(resp, "result.pendingApprovals")
			list, _ := pend.([]any)
			for _, pa := range list {
				id, _ := harness.JSONString(pa, "approvalRequestId")
				step("approval/respond", "approval/respond", map[string]any{"transactionId": txID, "approvalRequestId": id, "decision": "approve"})
			}
			step("apply/execute", "apply/execute", map[string]any{"transactionId": txID})
		}
	}
	if !killed {
		h.p.Stdin.Close()
		h.drain()
	}
	<-h.p.Done
	if outcomes == nil {
		if killed {
			t.Fatalf("calibration run died: %s", h.p.StderrText())
		}
		harness.AssertTree(t, ws, base, expected)
		return took
	}

	// Restart. Recovery must be complete before the first response.
	r := &crashHost{p: harness.Start(t, nil, args...), methods: map[string]string{}}
	if resp := r.await(r.request("initialize", map[string]any{"clientInfo": map[string]any{"name": "crash-restart"}})); resp == nil || resp["result"] == nil {
		t.Fatalf("restart: initialize failed: %v\nstderr:\n%s", resp, r.p.StderrText())
	}
	verdict, err := classifyWorkspace(ws, base, expected, wsInitial)
	if err != nil {
		t.Fatal(err)
	}
	rep := newRecoveryReport(verdict, ws, dataDir)
	r.inspect(rep)
	rep.checkStates()
	rep.problems = append(rep.problems, checkAcknowledged(h.transcript.Bytes(), h.methods, rep)...)

	// Finish the work as a host would, then expect expected/.
	r.finish(pl.commit.Diff, rep)
	r.p.Stdin.Close()
	r.drain()
	<-r.p.Done
	finished, err := classifyWorkspace(ws, base, expected, wsInitial)
	if err != nil {
		t.Fatal(err)
	}
	if finished != "expected" {
		rep.problems = append(rep.problems, "after finishing, the workspace is "+finished)
	}
	if len(rep.problems) > 0 {
		t.Errorf("after the crash (%d bytes received before it):\n  %s\nstderr before the crash:\n%s\nstderr after:\n%s",
			h.transcript.Len(), strings.Join(rep.problems, "\n  "), h.p.StderrText(), r.p.StderrText())
	}
	state := "absent"
	for _, st := range rep.states {
		state = st // a session has at most one transaction
	}
	cause := "kill -9 in " + pl.phase
	if pl.failpoint != "" {
		cause, _, _ = strings.Cut(pl.failpoint, "=")
	}
	outcomes.add(fmt.Sprintf("%-40s → workspace %s, transaction %s", cause, verdict, state))
	return nil
}

// inspect fills rep from a restarted kernel over its pipes: each
// transaction's state, decisions and ledger (tx/list, tx/status,
// tx/events), and a problem for any transaction that does not load.
func (h *crashHost) inspect(rep *recoveryReport) {
	list := h.await(h.request("tx/list", map[string]any{}))
	rows, _ := harness.JSONPath(list, "result.transactions")
	rowList, _ := rows.([]any)
	for _, row := range rowList {
		id, _ := harness.JSONString(row, "transactionId")
		if e, ok := harness.JSONPath(row, "error"); ok && e != nil {
			rep.problems = append(rep.problems, fmt.Sprintf("transaction %s does not load: %v", id, e))
			continue
		}
		st := h.await(h.request("tx/status", map[string]any{"transactionId": id}))
		state, _ := harness.JSONString(st, "result.state")
		rep.states[id] = state
		decs, _ := harness.JSONPath(st, "result.decisions")
		dl, _ := decs.([]any)
		for _, d := range dl {
			aid, _ := harness.JSONString(d, "approvalRequestId")
			rep.decisions[aid] = true
		}
		evResp := h.await(h.request("tx/events", map[string]any{"transactionId": id}))
		var evs struct {
			Result protocol.TxEventsResult `json:"result"`
		}
		raw, _ := json.Marshal(evResp)
		if err := json.Unmarshal(raw, &evs); err != nil {
			rep.problems = append(rep.problems, "tx/events: "+err.Error())
		}
		rep.events[id] = evs.Result.Events
	}
}

// finish does what a host would after the restart: approve and apply the
// transaction that is not applied yet, or propose diff again if no
// transaction survived.
func (h *crashHost) finish(diff []byte, rep *recoveryReport) {
	var open string
	for id, st := range rep.states {
		if st != protocol.StateApplied && st != protocol.StateCompleted {
			open = id
		}
	}
	if len(rep.states) == 0 {
		if resp := h.await(h.request("turn/start", harness.DiffParams(diff))); resp != nil {
			open, _ = harness.JSONString(resp, "result.transactionId")
		}
	}
	if open != "" {
		for range 3 {
			ap := h.await(h.request("apply/execute", map[string]any{"transactionId": open}))
			if ok, _ := harness.JSONPath(ap, "result.ok"); ok == true {
				break
			}
			pend, _ := harness.JSONPath(ap, "result.pendingApprovals")
			pending, _ := pend.([]any)
			if len(pending) == 0 {
				rep.problems = append(rep.problems, fmt.Sprintf("finishing: apply/execute answered %v", ap))
				break
			}
			for _, pa := range pending {
				id, _ := harness.JSONString(pa, "approvalRequestId")
				h.await(h.request("approval/respond", map[string]any{"transactionId": open, "approvalRequestId": id, "decision": "approve"}))
			}
		}
	}
}
