package crash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/internal/powerloss"
)

var (
	powerlossCommits = flag.String("powerloss.commits", "084-8bbf9335e13f",
		"comma-separated fzf commits whose session TestPowerLoss records (\"all-largest\" for the 5 largest)")
	powerlossKeep = flag.String("powerloss.keep", "",
		"a directory to which the first failing crash state is copied, before recovery, for a post-mortem")
	powerlossMax = flag.Int("powerloss.max", 16,
		"most crash states built per crash point; points with more choices are sampled (make crash raises it)")
	powerlossControls = flag.String("powerloss.controls", "untrusted",
		"comma-separated approval policies whose traces also run the negative controls (make crash: untrusted,never)")
)

// TestPowerLoss is the ALICE method on the real binary. It records, with
// strace, every file-system operation of a real session (turn/start,
// approval/respond, apply/execute, tx/close) on a real fzf commit, and of
// the same session under --approval-policy never (no approval/respond), then
// builds every on-disk state a power cut could leave (see
// powerloss.Trace.States for the persistence model), runs recovery on each
// and checks: recovery succeeds and every ledger loads; the workspace is
// base/ or expected/, never a mix, and agrees with the ledgers; no staged
// or temp file remains; everything the host had received before the cut is
// on disk; and finishing the work yields expected/.
func TestPowerLoss(t *testing.T) {
	harness.SkipIfShort(t, "the power-loss model, which recovers every crash state of a traced session")
	t.Parallel()
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (.ci/run installs it)")
	}
	names := strings.Split(*powerlossCommits, ",")
	if *powerlossCommits == "all-largest" {
		names = harness.LargestFzfCommits
	}
	all := map[string]harness.FzfCommit{}
	for _, c := range harness.FzfCommits(t) {
		all[c.Name] = c
	}
	for _, name := range names {
		c, ok := all[name]
		if !ok {
			t.Fatalf("no fzf commit %q", name)
		}
		// Under --approval-policy never the grant shares the commit
		// record's append and transactions/ its round (RELIABILITY.md
		// §10): a second trace, with its own crash points.
		for _, policy := range []string{"untrusted", "never"} {
			t.Run(name+"/"+policy, func(t *testing.T) {
				if *powerlossKeep == "" {
					t.Parallel() // -powerloss.keep keeps one state: run one commit at a time
				}
				powerLossCommit(t, c, policy)
			})
		}
	}
}

// powerLossCommit is TestPowerLoss on one commit, whose session the
// kernel serves under --approval-policy policy: untrusted (propose, ask,
// approve, apply) or never (propose, apply).
func powerLossCommit(t *testing.T, c harness.FzfCommit, policy string) {
	work := t.TempDir()
	root := filepath.Join(work, "root")
	ws, dataDir := filepath.Join(root, "ws"), filepath.Join(root, "state", "data")
	if err := os.MkdirAll(filepath.Join(root, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	harness.CopyTree(t, filepath.Join(c.Dir, "base"), ws)
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
	args := append(append([]string{}, powerloss.StraceArgs...), "-o", logFile, harness.Bin(t),
		"serve", "--workspace", ws, "--data-dir", dataDir, "--approval-policy", policy)
	p := harness.StartCmd(t, exec.Command("strace", args...), nil)
	methods := map[string]string{}
	call := func(method string, params any) map[string]any {
		methods[strconv.Itoa(p.NextID+1)] = method
		return p.MustResult(method, params)
	}
	call("initialize", map[string]any{"clientInfo": map[string]any{"name": "powerloss"}})
	p.Send(`{"jsonrpc":"2.0","method":"initialized"}`)
	res := call("turn/start", harness.DiffParams(c.Diff))
	txID := res["transactionId"].(string)
	ap := call("apply/execute", map[string]any{"transactionId": txID})
	if policy != "never" {
		pending, _ := ap["pendingApprovals"].([]any)
		if len(pending) == 0 {
			t.Fatalf("first apply under --approval-policy %s: %v", policy, ap)
		}
		for _, pa := range pending {
			call("approval/respond", map[string]any{"transactionId": txID,
				"approvalRequestId": pa.(map[string]any)["approvalRequestId"], "decision": "approve"})
		}
		ap = call("apply/execute", map[string]any{"transactionId": txID})
	}
	if ap["ok"] != true {
		t.Fatalf("apply: %v", ap)
	}
	call("tx/close", map[string]any{"transactionId": txID})
	call("shutdown", nil)
	p.Send(`{"jsonrpc":"2.0","method":"exit"}`)
	select {
	case <-p.Done:
	case <-time.After(60 * time.Second):
		t.Fatal("kernel did not exit")
	}
	harness.AssertTree(t, ws, filepath.Join(c.Dir, "base"), filepath.Join(c.Dir, "expected"))

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

	stats, n, problems := checkPowerLoss(t, tr, c, wsInitial, methods, *powerlossMax, nil, false)
	for _, p := range problems[:min(len(problems), 10)] {
		t.Error(p)
	}
	if len(problems) > 10 {
		t.Errorf("... and %d more failing states", len(problems)-10)
	}
	js, _ := json.Marshal(stats)
	t.Logf("power-loss model: %d crash points, %d crash states checked, %d distinct disks recovered and finished, %d failing; %s",
		stats.Points, stats.States, n, len(problems), js)
	if !slices.Contains(strings.Split(*powerlossControls, ","), policy) {
		// The controls show that the model sees a missing fsync; the two
		// traces have the same fsyncs but the grant's, so make test runs
		// them on one and make crash on both (-powerloss.controls).
		t.Logf("negative controls not run on the %s trace (-powerloss.controls %s)", policy, *powerlossControls)
		return
	}

	// Negative control: the same trace without the fsyncs of the staged
	// files' directories before the commit record (the bug this model
	// found) must fail, or the model could not see that bug. Recovery
	// now stages a lost staged file again from the kept blobs
	// (RELIABILITY.md §13), a second defence that hides the bug: the
	// control turns it off (apply.restage=error), and reports what the
	// states give with it on.
	noRestage, err := failpoint.Parse("apply.restage=error")
	if err != nil {
		t.Fatal(err)
	}
	if cut := withoutStagedDirFsyncs(tr); cut == nil {
		t.Error("negative control: no staged-directory fsync found before the commit record")
	} else if _, _, problems := checkPowerLoss(t, cut, c, wsInitial, methods, 4, noRestage, false); len(problems) == 0 {
		t.Error("negative control: without the staged-directory fsyncs no state failed; the model cannot see the bug it exists for")
	} else {
		t.Logf("negative control: without the staged-directory fsyncs and without restaging, %d states fail, e.g.\n%s", len(problems), problems[0])
		_, _, problems := checkPowerLoss(t, cut, c, wsInitial, methods, 4, nil, false)
		for _, p := range problems[:min(len(problems), 3)] {
			t.Error("without the staged-directory fsyncs but with restaging: " + p)
		}
		t.Logf("without the staged-directory fsyncs but with restaging, %d states fail", len(problems))
	}

	// The other fsyncs RELIABILITY.md §10 lists with the promise each
	// keeps, beyond the commit protocol's: without any one of them, some
	// state must fail, or the table lists an fsync no promise needs.
	for _, ctl := range fsyncControls(tr) {
		if ctl.cut == nil {
			t.Errorf("negative control %s: no such fsync in the trace", ctl.name)
			continue
		}
		_, _, problems := checkPowerLoss(t, ctl.cut, c, wsInitial, methods, 4, nil, true)
		if len(problems) == 0 {
			t.Errorf("negative control: without %s no state failed; RELIABILITY.md §10 says %s needs it", ctl.name, ctl.promise)
			continue
		}
		t.Logf("negative control: without %s (%s), a state fails:\n%s", ctl.name, ctl.promise, problems[0])
	}
}

// fsyncControl is tr without one of the fsyncs RELIABILITY.md §10 lists
// (cut; nil when the trace has none), and the promise the table says it
// keeps.
type fsyncControl struct {
	name, promise string
	cut           *powerloss.Trace
}

// fsyncControls are the negative controls of the fsyncs that §10's table
// lists beyond the commit protocol's: proposal.patch's, active/'s at
// turn/start, the transaction directory's in the closing round (after the
// commit record), and transactions/'s, which makes turn/start's rename
// durable with the transaction's next append.
func fsyncControls(tr *powerloss.Trace) []fsyncControl {
	commit := slices.IndexFunc(tr.Ops, func(op powerloss.Op) bool {
		return op.Kind == powerloss.OpWrite && bytes.Contains(op.Data, []byte(`"type":"apply/commit"`))
	})
	txDir := regexp.MustCompile(`^state/data/transactions/tx-[0-9a-f]+$`)
	// turn/start's rename of its .tmp- directory into place.
	published := slices.IndexFunc(tr.Ops, func(op powerloss.Op) bool {
		return op.Kind == powerloss.OpRename && strings.HasPrefix(op.Name, ".tmp-tx-")
	})
	ctls := []struct {
		name, promise string
		drop          func(i int, op powerloss.Op) bool
	}{
		{"the fsync of proposal.patch", "P1: the turnDiff item lives only there",
			func(_ int, op powerloss.Op) bool { return strings.HasSuffix(op.Path, "/proposal.patch") }},
		{"the fsync of active/ at turn/start", "P3: start-up finds an acknowledged proposal through its marker",
			func(_ int, op powerloss.Op) bool { return op.Path == "state/data/active" }},
		{"the transaction directory's fsync in the closing round", "P4: the contents' deletion is durable before the marker's removal",
			func(i int, op powerloss.Op) bool { return commit >= 0 && i > commit && txDir.MatchString(op.Path) }},
		{"the fsync of transactions/ with the transaction's next append", "P1: turn/start's rename is durable before the marker can go",
			func(i int, op powerloss.Op) bool {
				return published >= 0 && i > published && op.Path == "state/data/transactions"
			}},
	}
	out := make([]fsyncControl, len(ctls))
	for k, ctl := range ctls {
		out[k] = fsyncControl{name: ctl.name, promise: ctl.promise}
		cut := *tr
		cut.Ops = nil
		for i, op := range tr.Ops {
			if op.Kind == powerloss.OpFsync && ctl.drop(i, op) {
				continue
			}
			cut.Ops = append(cut.Ops, op)
		}
		if len(cut.Ops) < len(tr.Ops) {
			out[k].cut = &cut
		}
	}
	return out
}

// withoutStagedDirFsyncs returns a copy of tr without the fsyncs of
// workspace directories that precede the commit record, as if the kernel
// did not make staged names durable; nil if there are none.
func withoutStagedDirFsyncs(tr *powerloss.Trace) *powerloss.Trace {
	commit := slices.IndexFunc(tr.Ops, func(op powerloss.Op) bool {
		return op.Kind == powerloss.OpWrite && bytes.Contains(op.Data, []byte(`"type":"apply/commit"`))
	})
	if commit < 0 {
		return nil
	}
	cut := *tr
	cut.Ops = nil
	dropped := 0
	for i, op := range tr.Ops {
		if i < commit && op.Kind == powerloss.OpFsync && (op.Path == "ws" || strings.HasPrefix(op.Path, "ws/")) && !strings.Contains(op.Path, ".txk-") {
			dropped++
			continue
		}
		cut.Ops = append(cut.Ops, op)
	}
	if dropped == 0 {
		return nil
	}
	return &cut
}

// checkPowerLoss recovers every crash state of tr (at most maxPerPoint per
// crash point, see powerloss.Options) and returns the enumeration's
// figures, the number of distinct disks recovered, and one message per
// failing state. Recovery results are cached by the state's digest: the
// same disk may be reached at many crash points, with different things
// acknowledged.
func checkPowerLoss(t *testing.T, tr *powerloss.Trace, c harness.FzfCommit, wsInitial map[string]string, methods map[string]string, maxPerPoint int, fps *failpoint.Set, firstOnly bool) (powerloss.Stats, int, []string) {
	t.Helper()
	ctx := context.Background()
	type result struct {
		r   *recoveryReport
		err error
	}
	cache := map[string]result{}
	n := 0
	work := stateDir(t)
	var failing []string
	stats, err := tr.States(powerloss.Options{MaxPerPoint: maxPerPoint, Seed: 1}, func(s *powerloss.State) error {
		key := s.Key()
		res, ok := cache[key]
		if !ok {
			n++
			dir := filepath.Join(work, strconv.Itoa(n))
			if err := s.Materialize(dir); err != nil {
				return err
			}
			if *powerlossKeep != "" && len(failing) == 0 {
				if err := s.Materialize(filepath.Join(work, "pristine")); err != nil {
					return err
				}
			}
			r, err := recoverState(ctx, filepath.Join(dir, "ws"), filepath.Join(dir, "state", "data"), c, wsInitial, true, fps)
			if err == nil && len(r.problems) > 0 && *powerlossKeep != "" && len(failing) == 0 {
				if err := os.CopyFS(*powerlossKeep, os.DirFS(filepath.Join(work, "pristine"))); err != nil {
					return err
				}
				t.Logf("the first failing state is kept in %s", *powerlossKeep)
			}
			os.RemoveAll(filepath.Join(work, "pristine"))
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
		problems := append(slices.Clone(res.r.problems), checkAcknowledged(out.Bytes(), methods, res.r)...)
		if len(problems) > 0 {
			failing = append(failing, fmt.Sprintf("crash point %d of %d (%s; %d ops pending, last op: %s):\n  %s",
				s.Point, len(tr.Ops), s.Choice, s.Pending, describeOp(tr, s.Point), strings.Join(problems, "\n  ")))
			if firstOnly {
				return errFirstFailure
			}
		}
		return nil
	})
	if errors.Is(err, errFirstFailure) {
		err = nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return stats, n, failing
}

// errFirstFailure stops checkPowerLoss at its first failing state when it
// is asked for one only (a negative control).
var errFirstFailure = errors.New("first failing state found")

func describeOp(tr *powerloss.Trace, point int) string {
	if point == 0 {
		return "none"
	}
	op := tr.Ops[point-1]
	return fmt.Sprintf("%s %s (strace line %d)", op.Kind, op.Path, op.Line)
}

// stateDir is where checkPowerLoss materialises and recovers crash
// states: a temporary directory on tmpfs (/dev/shm) when there is one,
// else t.TempDir. A state's recovery is checked for what it leaves, not
// for how it persists it (that is the traced session's job, on the real
// disk under strace), and each of the thousands of recoveries fsyncs
// several times: on this VM's disk the make test run of TestPowerLoss
// took 45 s, 14 s of it in the kernel, against 19 s on tmpfs.
func stateDir(t *testing.T) string {
	t.Helper()
	const tmpfsMagic = 0x01021994 // TMPFS_MAGIC, statfs(2)
	var fs syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &fs) != nil || fs.Type != tmpfsMagic {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "txkernel-powerloss-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
