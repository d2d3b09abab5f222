package tx_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/sandbox"
)

// pipelined is the outcome of requests written to the kernel all at once.
type pipelined struct {
	resp  map[string]map[string]any // response by (string) request id
	order []string                  // request ids in response order
	notes []harness.Msg             // every notification, in arrival order
	// notesBefore[id] is how many notifications had arrived when the
	// response to id did.
	notesBefore map[string]int
}

// pipeline writes to p one request per element of reqs (method, params), with
// ids prefix-0, prefix-1, ..., in a single write, so the kernel reads them
// back to back and runs them concurrently. It then reads until every one is
// answered. No request waits for another's response.
func pipeline(p *harness.Proc, prefix string, reqs [][2]any) pipelined {
	p.T.Helper()
	var buf []byte
	for i, r := range reqs {
		line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprintf("%s-%d", prefix, i), "method": r[0], "params": r[1]})
		if err != nil {
			p.T.Fatal(err)
		}
		buf = append(append(buf, line...), '\n')
	}
	if _, err := p.Stdin.Write(buf); err != nil {
		p.T.Fatalf("write to kernel: %v\nstderr:\n%s", err, p.StderrText())
	}
	out := pipelined{resp: map[string]map[string]any{}, notesBefore: map[string]int{}}
	for len(out.resp) < len(reqs) {
		m := p.Next(2 * time.Minute)
		if m.Method != "" {
			out.notes = append(out.notes, m)
			continue
		}
		obj, _ := m.Value.(map[string]any)
		id, _ := obj["id"].(string)
		if !strings.HasPrefix(id, prefix+"-") {
			p.T.Fatalf("unexpected message while waiting for the pipelined responses: %s", m.Raw)
		}
		if _, dup := out.resp[id]; dup {
			p.T.Fatalf("two responses for %s: %s", id, m.Raw)
		}
		out.resp[id] = obj
		out.order = append(out.order, id)
		out.notesBefore[id] = len(out.notes)
	}
	return out
}

// eventsByTx groups event notifications by transactionId.
func eventsByTx(t *testing.T, notes []harness.Msg) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, m := range notes {
		params, _ := harness.JSONPath(m.Value, "params")
		ev, _ := params.(map[string]any)
		id, _ := ev["transactionId"].(string)
		if id == "" {
			t.Fatalf("notification without transactionId: %s", m.Raw)
		}
		out[id] = append(out[id], ev)
	}
	return out
}

// checkSeqRun asserts that evs carry seq first, first+1, ... in that order
// and returns how many have the given type.
func checkSeqRun(t *testing.T, txID string, evs []map[string]any, first int, countType string) int {
	t.Helper()
	n := 0
	for i, ev := range evs {
		if seq, _ := ev["seq"].(float64); int(seq) != first+i {
			t.Errorf("%s: event %d (%v) has seq %v, want %d", txID, i, ev["type"], ev["seq"], first+i)
		}
		if ev["type"] == countType {
			n++
		}
	}
	return n
}

func proposeFile(t *testing.T, p *harness.Proc, path, content string) string {
	t.Helper()
	res := p.MustResult("turn/start", map[string]any{"proposal": map[string]any{
		"kind": "files", "files": []any{map[string]any{"path": path, "content": content}}}})
	id, _ := res["transactionId"].(string)
	if id == "" {
		t.Fatalf("turn/start result without transactionId: %v", res)
	}
	return id
}

// stagedLeftovers lists staged files (.NAME.txk-TXID.tmp) under dir.
func stagedLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".txk-") {
			left = append(left, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return left
}

const concurrentApplies = 64

// TestConcurrentDisjointApplies sends 64 apply/execute requests for 64
// transactions that change 64 different files (8 per directory, so renames
// and directory fsyncs meet in shared parents) over one connection, in one
// write, to one kernel, with a tx/list among them. Every apply must
// succeed, each transaction's events must arrive in seq order before its
// response, the workspace must hold all 64 changes and no staged file, and
// after a restart every ledger must load with exactly one commit record.
func TestConcurrentDisjointApplies(t *testing.T) {
	t.Parallel()
	ws, dd := t.TempDir(), t.TempDir()
	path := func(i int) string { return fmt.Sprintf("d%d/f%02d.txt", i%8, i) }
	for i := range concurrentApplies {
		p := filepath.Join(ws, path(i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("base %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", dd, "--approval-policy", "never", "--log-level", "warn")
	p.Initialize()
	ids := make([]string, concurrentApplies)
	for i := range ids {
		ids[i] = proposeFile(t, p, path(i), fmt.Sprintf("applied %d\n", i))
	}

	var reqs [][2]any
	for i, id := range ids {
		reqs = append(reqs, [2]any{"apply/execute", map[string]any{"transactionId": id}})
		if i == concurrentApplies/2 {
			reqs = append(reqs, [2]any{"tx/list", map[string]any{}})
		}
	}
	out := pipeline(p, "c", reqs)
	evs := eventsByTx(t, out.notes)
	listed := 0
	for i, r := range reqs {
		reqID := fmt.Sprintf("c-%d", i)
		resp := out.resp[reqID]
		if r[0] == "tx/list" {
			txs, ok := harness.JSONPath(resp, "result.transactions")
			list, _ := txs.([]any)
			if !ok || len(list) != concurrentApplies {
				t.Fatalf("tx/list during the applies answered %v", resp)
			}
			for _, s := range list {
				if st, _ := harness.JSONPath(s, "state"); st == "unavailable" {
					t.Errorf("tx/list during the applies shows an unavailable transaction: %v", s)
				}
			}
			listed++
			continue
		}
		txID := r[1].(map[string]any)["transactionId"].(string)
		res, ok := resp["result"].(map[string]any)
		if !ok {
			t.Errorf("apply/execute %s failed: %v", txID, resp["error"])
			continue
		}
		if res["ok"] != true || res["state"] != "completed" || res["alreadyApplied"] != nil || res["transactionId"] != txID {
			t.Errorf("apply/execute %s answered %v", txID, res)
		}
		// Its own events, all of which must precede the response.
		seen := 0
		for _, m := range out.notes[:out.notesBefore[reqID]] {
			if id, _ := harness.JSONPath(m.Value, "params.transactionId"); id == txID {
				seen++
			}
		}
		if seen != len(evs[txID]) {
			t.Errorf("%s: %d of its %d events arrived before its response", txID, seen, len(evs[txID]))
		}
		// Policy grant, apply/start, apply/commit, turn/item, apply/complete,
		// tx/status applied and completed, tx/close: seq 5..12.
		if commits := checkSeqRun(t, txID, evs[txID], 5, "apply/commit"); commits != 1 || len(evs[txID]) != 8 {
			t.Errorf("%s: %d events with %d commit records, want 8 and 1", txID, len(evs[txID]), commits)
		}
	}
	if listed != 1 {
		t.Fatalf("tx/list answered %d times", listed)
	}
	for i := range concurrentApplies {
		got, err := os.ReadFile(filepath.Join(ws, path(i)))
		if want := fmt.Sprintf("applied %d\n", i); err != nil || string(got) != want {
			t.Errorf("%s = %q (%v), want %q", path(i), got, err, want)
		}
	}
	if left := stagedLeftovers(t, ws); len(left) > 0 {
		t.Errorf("staged files left in the workspace: %v", left)
	}
	p.Stop()
	if p.Exit() != nil {
		t.Fatalf("kernel exit: %v\nstderr:\n%s", p.Exit(), p.StderrText())
	}

	// Every ledger loads in a new kernel, in full, with one commit record.
	p = harness.Serve(t, "serve", "--workspace", ws, "--data-dir", dd, "--approval-policy", "never", "--log-level", "warn")
	p.Initialize()
	list, _ := p.MustResult("tx/list", map[string]any{})["transactions"].([]any)
	if len(list) != concurrentApplies {
		t.Fatalf("tx/list after restart: %d transactions, want %d", len(list), concurrentApplies)
	}
	for _, s := range list {
		if st, _ := harness.JSONPath(s, "state"); st != "completed" {
			t.Errorf("after restart: %v", s)
		}
	}
	for _, id := range ids {
		res := p.MustResult("tx/events", map[string]any{"transactionId": id})
		raw, _ := res["events"].([]any)
		all := make([]map[string]any, len(raw))
		for i, e := range raw {
			all[i], _ = e.(map[string]any)
		}
		if commits := checkSeqRun(t, id, all, 1, "apply/commit"); commits != 1 || res["lastSeq"] != float64(12) {
			t.Errorf("%s after restart: lastSeq %v with %d commit records, want 12 and 1", id, res["lastSeq"], commits)
		}
		meta, err := os.ReadFile(filepath.Join(dd, "transactions", id, "transaction.json"))
		var tf struct {
			State string `json:"state"`
		}
		if err == nil {
			err = json.Unmarshal(meta, &tf)
		}
		if err != nil || tf.State != "completed" {
			t.Errorf("%s: transaction.json state %q (%v), want completed", id, tf.State, err)
		}
	}
	p.Stop()
}

// TestConcurrentAppliesOneTransaction sends 64 apply/execute requests for
// the same transaction over one connection, in one write. The
// per-transaction lock serialises them: exactly one applies, and each of
// the other 63 is answered, without an error, ok:true with
// alreadyApplied:true (PROTOCOL.md §4.6: apply/execute on a completed
// transaction), and the ledger holds exactly one commit record.
func TestConcurrentAppliesOneTransaction(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", t.TempDir(), "--approval-policy", "never", "--log-level", "warn")
	p.Initialize()
	id := proposeFile(t, p, "a.txt", "b\n")
	reqs := make([][2]any, concurrentApplies)
	for i := range reqs {
		reqs[i] = [2]any{"apply/execute", map[string]any{"transactionId": id}}
	}
	out := pipeline(p, "one", reqs)
	applied, already := 0, 0
	var winner string
	for _, reqID := range out.order {
		resp := out.resp[reqID]
		res, ok := resp["result"].(map[string]any)
		switch {
		case !ok:
			t.Errorf("%s: error %v", reqID, resp["error"])
		case res["ok"] != true || res["state"] != "completed" || !slices.Equal(toStrings(res["appliedFiles"]), []string{"a.txt"}):
			t.Errorf("%s: result %v", reqID, res)
		case res["alreadyApplied"] == true:
			already++
		default:
			applied++
			winner = reqID
		}
	}
	if applied != 1 || already != concurrentApplies-1 {
		t.Fatalf("applied %d, alreadyApplied %d; want 1 and %d", applied, already, concurrentApplies-1)
	}
	// Every event is the winner's, and came before its response.
	evs := eventsByTx(t, out.notes)[id]
	if n := out.notesBefore[winner]; n != len(out.notes) {
		t.Errorf("%d of %d events arrived after the applying response", len(out.notes)-n, len(out.notes))
	}
	if commits := checkSeqRun(t, id, evs, 5, "apply/commit"); commits != 1 || len(evs) != 8 {
		t.Errorf("%d events with %d commit records, want 8 and 1", len(evs), commits)
	}
	res := p.MustResult("tx/events", map[string]any{"transactionId": id})
	if res["lastSeq"] != float64(12) {
		t.Errorf("lastSeq %v, want 12", res["lastSeq"])
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "b\n" {
		t.Errorf("a.txt = %q", got)
	}
	p.Stop()
	if p.Exit() != nil {
		t.Fatalf("kernel exit: %v\nstderr:\n%s", p.Exit(), p.StderrText())
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestConcurrentTxListDuringApply parks an apply inside its transaction's lock (a
// failpoint that sleeps until the request is cancelled) and calls tx/list
// over the same connection. tx/list takes no transaction lock, so it is
// answered while the apply is still in progress, with the transaction as
// its last event left it; then the apply is cancelled.
func TestConcurrentTxListDuringApply(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.ServeEnv(t, []string{"TXKERNEL_FAILPOINTS=apply.before-commit-record=sleep(1h)"},
		"serve", "--workspace", ws, "--data-dir", t.TempDir(), "--approval-policy", "never", "--log-level", "warn")
	p.Initialize()
	id := proposeFile(t, p, "a.txt", "b\n")
	p.Send(`{"jsonrpc":"2.0","id":"parked","method":"apply/execute","params":{"transactionId":"` + id + `"}}`)
	// The staged file exists once the apply holds the transaction's lock
	// and has staged; it then sleeps in the failpoint until cancelled.
	// Its policy grant waits for the commit record's append, so no event
	// comes first.
	staged := filepath.Join(ws, sandbox.StagedName("a.txt", id))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(staged); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no staged file %s within a minute", staged)
		}
	}
	list, _ := p.MustResult("tx/list", map[string]any{})["transactions"].([]any)
	if len(list) != 1 {
		t.Fatalf("tx/list during the apply: %v", list)
	}
	if st, _ := harness.JSONPath(list[0], "state"); st != "proposed" {
		t.Errorf("tx/list during the apply shows %v, want proposed", list[0])
	}
	p.Send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"parked"}}`)
	// The apply stopped before its commit record, so it appends its
	// policy grant alone: the ledger says what was granted.
	if m := p.Next(time.Minute); m.Method != "approval/decision" {
		t.Fatalf("got %s, want the cancelled apply's approval/decision notification", m.Raw)
	}
	m := p.Next(time.Minute)
	if id, _ := harness.JSONPath(m.Value, "id"); id != "parked" {
		t.Fatalf("got %s, want the cancelled apply's response", m.Raw)
	}
	if code, _ := harness.JSONPath(m.Value, "error.code"); code != float64(-32800) {
		t.Errorf("cancelled apply answered %s", m.Raw)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "a\n" {
		t.Errorf("a.txt = %q after the cancelled apply", got)
	}
	p.Stop()
}
