package crash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	wstarget "github.com/txkernel/txkernel/workspace"
)

// The checks shared by the crash harness (kill -9) and the power-loss
// model: after a crash, whatever the kernel recovers must be all-or-nothing
// and must keep everything the host was told.

// treeDigest maps each regular file under dir to a digest of its bytes and
// executable bit. A missing dir is an empty tree.
func treeDigest(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == dir {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		if !d.Type().IsRegular() {
			out[rel] = "not a regular file: " + d.Type().String()
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%x x=%v", sha256.Sum256(b), info.Mode().Perm()&0o111 != 0)
		return nil
	})
	return out, err
}

// classifyWorkspace says whether ws is byte-identical to base/ ("base"), to
// expected/ ("expected") or neither, in which case it names the paths that
// differ from each. base and expected hold only the touched files, so only
// those paths (and any new path in ws) are compared.
func classifyWorkspace(ws, base, expected string, wsInitial map[string]string) (string, error) {
	got, err := treeDigest(ws)
	if err != nil {
		return "", err
	}
	b, err := treeDigest(base)
	if err != nil {
		return "", err
	}
	e, err := treeDigest(expected)
	if err != nil {
		return "", err
	}
	// The workspace is base/ plus untouched files; a file the commit does
	// not touch must keep its first digest.
	want := func(side map[string]string) map[string]string {
		m := maps.Clone(wsInitial)
		for p := range b {
			delete(m, p)
		}
		maps.Copy(m, side)
		return m
	}
	wb, we := want(b), want(e)
	if maps.Equal(got, wb) {
		return "base", nil
	}
	if maps.Equal(got, we) {
		return "expected", nil
	}
	return "mixed: differs from base at " + strings.Join(diffKeys(got, wb), ",") +
		"; from expected at " + strings.Join(diffKeys(got, we), ","), nil
}

func diffKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// leftovers lists staging files in the workspace and temp files or dirs
// in the data dir that recovery should have removed.
func leftovers(ws, dataDir string) []string {
	var out []string
	for _, root := range []string{ws, dataDir} {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			n := d.Name()
			if strings.Contains(n, ".txk-") || strings.HasPrefix(n, ".tmp-") || strings.HasSuffix(n, ".tmp") {
				out = append(out, path)
			}
			return nil
		})
	}
	return out
}

// recoveryReport is what one recovery of a crashed state found.
type recoveryReport struct {
	workspace string                      // classifyWorkspace's verdict right after recovery
	states    map[string]string           // transaction id -> state
	events    map[string][]protocol.Event // transaction id -> its ledger
	decisions map[string]bool             // approval request ids decided
	problems  []string                    // broken invariants
	finished  string                      // classifyWorkspace after finishing the work
}

// newRecoveryReport starts a report on a workspace whose verdict
// (classifyWorkspace) was taken right after recovery, and records the
// first two invariants: the workspace is base/ or expected/, and no staged
// or temp file is left in ws or dataDir.
func newRecoveryReport(verdict, ws, dataDir string) *recoveryReport {
	r := &recoveryReport{workspace: verdict, states: map[string]string{}, events: map[string][]protocol.Event{}, decisions: map[string]bool{}}
	if verdict != "base" && verdict != "expected" {
		r.problems = append(r.problems, "right after recovery the workspace is "+verdict)
	}
	for _, l := range leftovers(ws, dataDir) {
		r.problems = append(r.problems, "left behind after recovery: "+l)
	}
	return r
}

// checkStates records the invariants on the recovered states: none is
// still applying, and the workspace is expected/ exactly when a
// transaction is applied or completed.
func (r *recoveryReport) checkStates() {
	applied := false
	for id, st := range r.states {
		applied = applied || st == protocol.StateApplied || st == protocol.StateCompleted
		if st == protocol.StateApplying {
			r.problems = append(r.problems, "transaction "+id+" is still applying after recovery")
		}
	}
	if (r.workspace == "expected") != applied {
		r.problems = append(r.problems, fmt.Sprintf("workspace is %s but the ledgers say applied=%v", r.workspace, applied))
	}
}

// recoverState opens the engine on (ws, dataDir), exactly as the kernel
// does at start-up, and checks the state it recovered. If finish is set it
// then completes the work (a new proposal when no transaction survived,
// approvals, apply) and records where the workspace ends.
func recoverState(ctx context.Context, ws, dataDir string, c harness.FzfCommit, wsInitial map[string]string, finish bool, fps *failpoint.Set) (*recoveryReport, error) {
	w, err := sandbox.Open(ws, sandbox.WorkspaceWrite)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := tx.Open(ctx, tx.Options{Targets: []tx.Target{wstarget.New(w, fps, log)}, DataDir: dataDir,
		Policy: approvals.Untrusted, Logger: log})
	if err != nil {
		return &recoveryReport{problems: []string{"recovery failed: " + err.Error()}}, nil
	}
	defer eng.Close()
	base, expected := filepath.Join(c.Dir, "base"), filepath.Join(c.Dir, "expected")
	verdict, err := classifyWorkspace(ws, base, expected, wsInitial)
	if err != nil {
		return nil, err
	}
	r := newRecoveryReport(verdict, ws, dataDir)
	list, err := eng.List(ctx, protocol.TxListParams{Limit: protocol.TxListMaxLimit})
	if err != nil {
		return nil, err
	}
	for _, row := range list.Transactions {
		st, err := eng.Status(ctx, row.TransactionID)
		if err != nil {
			r.problems = append(r.problems, fmt.Sprintf("transaction %s does not load: %v", row.TransactionID, err))
			continue
		}
		r.states[row.TransactionID] = st.State
		if protocol.Terminal(st.State) {
			// Retired by recovery: its blobs (the exact new bytes, secrets
			// included) and its active/ marker are gone.
			for _, p := range []string{filepath.Join(dataDir, tx.TxDir, row.TransactionID, tx.BlobFile), filepath.Join(dataDir, tx.ActiveDir, row.TransactionID)} {
				if _, err := os.Lstat(p); err == nil {
					r.problems = append(r.problems, fmt.Sprintf("terminal transaction %s still has %s", row.TransactionID, p))
				}
			}
		}
		for _, d := range st.Decisions {
			r.decisions[d.ApprovalRequestID] = true
		}
		evs, err := eng.Events(ctx, row.TransactionID, 0)
		if err != nil {
			r.problems = append(r.problems, fmt.Sprintf("events of %s: %v", row.TransactionID, err))
			continue
		}
		r.events[row.TransactionID] = evs.Events
	}
	r.checkStates()
	if !finish {
		return r, nil
	}
	if err := finishWork(ctx, eng, c, r); err != nil {
		r.problems = append(r.problems, "finishing: "+err.Error())
	}
	if r.finished, err = classifyWorkspace(ws, base, expected, wsInitial); err != nil {
		return nil, err
	}
	if r.finished != "expected" {
		r.problems = append(r.problems, "after finishing, the workspace is "+r.finished)
	}
	return r, nil
}

// finishWork drives what a host would do after the restart: approve and
// apply the surviving transaction, or propose again if none survived.
func finishWork(ctx context.Context, eng *tx.Engine, c harness.FzfCommit, r *recoveryReport) error {
	var id string
	for txID, st := range r.states {
		if st == protocol.StateApplied || st == protocol.StateCompleted {
			return nil
		}
		id = txID
	}
	if id == "" {
		diff := string(c.Diff)
		res, err := eng.Propose(ctx, wstarget.Proposal(protocol.KindUnifiedDiff, wstarget.Input{Diff: &diff}))
		if err != nil {
			return err
		}
		id = res.TransactionID
	}
	for range 3 {
		ap, err := eng.Apply(ctx, id)
		if err != nil {
			return err
		}
		if ap.OK {
			return nil
		}
		for _, pa := range ap.PendingApprovals {
			if _, err := eng.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: id, ApprovalRequestID: pa.ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("transaction %s did not apply", id)
}

// sentMessage is one message the kernel wrote to stdout.
type sentMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// checkAcknowledged checks that everything in out (what the host received
// before the crash) is backed by the recovered state: each event notified
// is in its ledger, byte for byte after re-encoding; a turn/start result's
// transaction exists; an approval/respond result's decision is recorded; a
// successful apply/execute left the workspace at expected/. methods maps
// request ids (as JSON) to their methods.
func checkAcknowledged(out []byte, methods map[string]string, r *recoveryReport) []string {
	var problems []string
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m sentMessage
		if err := json.Unmarshal(line, &m); err != nil {
			// A write cut short by the crash never reached the host whole.
			continue
		}
		if m.Method != "" && len(m.ID) == 0 {
			var ev protocol.Event
			if err := json.Unmarshal(m.Params, &ev); err != nil || ev.Seq == 0 {
				continue
			}
			evs := r.events[ev.TransactionID]
			if int(ev.Seq) > len(evs) {
				problems = append(problems, fmt.Sprintf("notified event %s seq %d of %s is not in the ledger (it has %d)", ev.Type, ev.Seq, ev.TransactionID, len(evs)))
				continue
			}
			a, _ := json.Marshal(ev)
			b, _ := json.Marshal(evs[ev.Seq-1])
			if !bytes.Equal(a, b) {
				problems = append(problems, fmt.Sprintf("notified event seq %d of %s differs from the ledger:\n  sent   %s\n  ledger %s", ev.Seq, ev.TransactionID, a, b))
			}
			continue
		}
		if len(m.Result) == 0 {
			continue
		}
		switch methods[string(m.ID)] {
		case "turn/start":
			var res protocol.TurnStartResult
			_ = json.Unmarshal(m.Result, &res)
			if _, ok := r.states[res.TransactionID]; !ok {
				problems = append(problems, "turn/start answered "+res.TransactionID+", which did not survive")
			}
		case "approval/respond":
			var res protocol.ApprovalRespondResult
			_ = json.Unmarshal(m.Result, &res)
			if !r.decisions[res.Decision.ApprovalRequestID] {
				problems = append(problems, "approval/respond answered for "+res.Decision.ApprovalRequestID+", whose decision did not survive")
			}
		case "apply/execute":
			var res protocol.ApplyResult
			_ = json.Unmarshal(m.Result, &res)
			if res.OK && r.workspace != "expected" {
				problems = append(problems, "apply/execute answered ok but the workspace is "+r.workspace)
			}
		}
	}
	return problems
}
