package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/internal/powerloss"
)

var (
	powerlossCommits = flag.String("powerloss.commits", "084-8bbf9335e13f",
		"comma-separated fzf commits whose session TestPowerLoss records (\"all-largest\" for the 5 largest)")
	powerlossKeep = flag.String("powerloss.keep", "",
		"a directory to which the first failing crash state is copied, before recovery, for a post-mortem")
	powerlossMax = flag.Int("powerloss.max", 16,
		"most crash states built per crash point; points with more choices are sampled (make crash raises it)")
)

// largestFzfCommits are the largest fzf commits: the four that touch the
// most files (10 to 14) and the one with the largest diff (025, 63 KB).
var largestFzfCommits = []string{"028-c1aa5c5f3380", "032-e70a2a581758", "075-ff248d566d42", "083-7d3575b3624c", "025-ae3180f91994"}

// TestPowerLoss is the ALICE method on the real binary. It records, with
// strace, every file-system operation of a real session (turn/start,
// approval/respond, apply/execute, tx/close) on a real fzf commit, then
// builds every on-disk state a power cut could leave (see
// powerloss.Trace.States for the persistence model), runs recovery on each
// and checks: recovery succeeds and every ledger loads; the workspace is
// base/ or expected/, never a mix, and agrees with the ledgers; no staged
// or temp file remains; everything the host had received before the cut is
// on disk; and finishing the work yields expected/.
func TestPowerLoss(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (.ci/run installs it)")
	}
	names := strings.Split(*powerlossCommits, ",")
	if *powerlossCommits == "all-largest" {
		names = largestFzfCommits
	}
	all := map[string]fzfCommit{}
	for _, c := range fzfCommits(t) {
		all[c.name] = c
	}
	for _, name := range names {
		c, ok := all[name]
		if !ok {
			t.Fatalf("no fzf commit %q", name)
		}
		t.Run(name, func(t *testing.T) { powerLossCommit(t, c) })
	}
}

func powerLossCommit(t *testing.T, c fzfCommit) {
	ctx := context.Background()
	work := t.TempDir()
	root := filepath.Join(work, "root")
	ws, dataDir := filepath.Join(root, "ws"), filepath.Join(root, "state", "data")
	if err := os.MkdirAll(filepath.Join(root, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(c.dir, "base"), ws)
	wsInitial, err := treeDigest(ws)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := powerloss.Snapshot(root)
	if err != nil {
		t.Fatal(err)
	}

	// Record the session.
	logFile := filepath.Join(work, "strace.log")
	args := append(append([]string{}, powerloss.StraceArgs...), "-o", logFile, kernelBin,
		"serve", "--workspace", ws, "--data-dir", dataDir, "--approval-policy", "untrusted")
	p := startCmd(t, exec.Command("strace", args...), nil)
	methods := map[string]string{}
	call := func(method string, params any) map[string]any {
		methods[strconv.Itoa(p.nextID+1)] = method
		return p.mustResult(method, params)
	}
	call("initialize", map[string]any{"clientInfo": map[string]any{"name": "powerloss"}})
	p.send(`{"jsonrpc":"2.0","method":"initialized"}`)
	res := call("turn/start", diffParams(c.diff))
	txID := res["transactionId"].(string)
	ap := call("apply/execute", map[string]any{"transactionId": txID})
	for _, pa := range ap["pendingApprovals"].([]any) {
		call("approval/respond", map[string]any{"transactionId": txID,
			"approvalRequestId": pa.(map[string]any)["approvalRequestId"], "decision": "approve"})
	}
	if ap = call("apply/execute", map[string]any{"transactionId": txID}); ap["ok"] != true {
		t.Fatalf("apply: %v", ap)
	}
	call("tx/close", map[string]any{"transactionId": txID})
	call("shutdown", nil)
	p.send(`{"jsonrpc":"2.0","method":"exit"}`)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("kernel did not exit")
	}
	assertTree(t, ws, filepath.Join(c.dir, "base"), filepath.Join(c.dir, "expected"))

	f, err := os.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := powerloss.Parse(f, root, snap)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[powerloss.Kind]int{}
	for _, op := range tr.Ops {
		counts[op.Kind]++
	}
	t.Logf("recorded %d operations: %v", len(tr.Ops), counts)
	if counts[powerloss.OpFsync] == 0 || counts[powerloss.OpRename] == 0 || counts[powerloss.OpOutput] == 0 {
		t.Fatalf("the trace misses operations the session must perform: %v", counts)
	}

	// Check every crash state. Recovery results are cached by the state's
	// digest: the same disk may be reached at many crash points, with
	// different things acknowledged.
	type result struct {
		r   *recoveryReport
		err error
	}
	cache := map[string]result{}
	n, failures := 0, 0
	start := time.Now()
	stats, err := tr.States(powerloss.Options{MaxPerPoint: *powerlossMax, Seed: 1}, func(s *powerloss.State) error {
		key := s.Key()
		res, ok := cache[key]
		if !ok {
			n++
			dir := filepath.Join(work, "s", strconv.Itoa(n))
			if err := s.Materialize(dir); err != nil {
				return err
			}
			sws, sdata := filepath.Join(dir, "ws"), filepath.Join(dir, "state", "data")
			var pristine string
			if *powerlossKeep != "" && failures == 0 {
				pristine = filepath.Join(work, "pristine")
				os.RemoveAll(pristine)
				if err := s.Materialize(pristine); err != nil {
					return err
				}
			}
			r, err := recoverState(ctx, sws, sdata, c, wsInitial, true)
			if err == nil && len(r.problems) > 0 && pristine != "" {
				if err := os.CopyFS(*powerlossKeep, os.DirFS(pristine)); err != nil {
					return err
				}
				t.Logf("the first failing state is kept in %s", *powerlossKeep)
			}
			res = result{r, err}
			cache[key] = res
			os.RemoveAll(dir)
		}
		if res.err != nil {
			return res.err
		}
		var out bytes.Buffer
		for _, a := range s.Acked {
			out.Write(a)
		}
		problems := append(append([]string{}, res.r.problems...), checkAcknowledged(out.Bytes(), methods, res.r)...)
		if len(problems) > 0 {
			failures++
			if failures <= 10 {
				t.Errorf("crash point %d of %d (%s; %d ops pending, last op: %s):\n  %s",
					s.Point, len(tr.Ops), s.Choice, s.Pending, describeOp(tr, s.Point), strings.Join(problems, "\n  "))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if failures > 10 {
		t.Errorf("... and %d more failing states", failures-10)
	}
	js, _ := json.Marshal(stats)
	t.Logf("power-loss model: %d crash points, %d crash states checked, %d distinct disks recovered and finished, %d failing; %s; %v",
		stats.Points, stats.States, n, failures, js, time.Since(start).Round(time.Millisecond))
}

func describeOp(tr *powerloss.Trace, point int) string {
	if point == 0 {
		return "none"
	}
	op := tr.Ops[point-1]
	return fmt.Sprintf("%s %s (strace line %d)", op.Kind, op.Path, op.Line)
}
