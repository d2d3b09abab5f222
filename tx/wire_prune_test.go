package tx_test

import (
	"context"

	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/internal/cli"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestPruneAndListPaging drives the real binary: a data dir holding a
// completed, a closed, a denied and a proposed transaction is paged with
// tx/list; `txkernel prune` refuses while the kernel holds the data dir;
// once it is stopped, prune removes exactly the terminal transactions
// older than the cutoff; after a restart the proposed one is still there
// and the denied patch is still denied.
func TestPruneAndListPaging(t *testing.T) {
	t.Parallel()
	ws, data := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", "d.txt": "d\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"serve", "--workspace", ws, "--data-dir", data, "--log-level", "error"}
	k := harness.Serve(t, args...)
	k.Initialize()
	propose := func(path, content string) string {
		res := k.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "files",
			"files": []any{map[string]any{"path": path, "content": content}}}})
		return res["transactionId"].(string)
	}
	approveAndApply := func(id, decision string) {
		res := k.MustResult("apply/execute", map[string]any{"transactionId": id})
		apr := res["pendingApprovals"].([]any)[0].(map[string]any)["approvalRequestId"]
		k.MustResult("approval/respond", map[string]any{"transactionId": id, "approvalRequestId": apr, "decision": decision})
		if decision == "approve" {
			k.MustResult("apply/execute", map[string]any{"transactionId": id})
		}
	}
	completed := propose("a.txt", "A\n")
	approveAndApply(completed, "approve")
	closed := propose("b.txt", "B\n")
	k.MustResult("tx/close", map[string]any{"transactionId": closed})
	denied := propose("c.txt", "C\n")
	approveAndApply(denied, "deny")
	waiting := propose("d.txt", "D\n")

	// Paging: newest first, each id once, nextCursor until the last page.
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		params := map[string]any{"limit": 3}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res := k.MustResult("tx/list", params)
		for _, row := range res["transactions"].([]any) {
			seen = append(seen, row.(map[string]any)["transactionId"].(string))
		}
		next, ok := res["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
		if page > 3 {
			t.Fatal("tx/list does not end")
		}
	}
	if want := []string{waiting, denied, closed, completed}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("pages gave %v, want %v", seen, want)
	}
	if resp, _ := k.Call("tx/list", map[string]any{"cursor": "not-a-cursor"}); errCode(resp) != -32602 {
		t.Fatalf("bad cursor: %v", resp)
	}
	if resp, _ := k.Call("tx/list", map[string]any{"state": "sideways"}); errCode(resp) != -32602 {
		t.Fatalf("bad state: %v", resp)
	}
	active := k.MustResult("tx/list", map[string]any{"state": "active"})["transactions"].([]any)
	if len(active) != 1 || active[0].(map[string]any)["transactionId"] != waiting {
		t.Fatalf("active: %v", active)
	}

	// prune refuses while the kernel holds the data dir.
	out, code := runPrune(t, data, "0s")
	if code != 1 || !strings.Contains(out, "in use by another txkernel") || !strings.Contains(out, "pid") {
		t.Fatalf("prune under a live kernel: exit %d: %s", code, out)
	}
	k.Stop()

	// --dry-run lists exactly what the real run removes below, and removes
	// nothing; "1m" (a minute or a month?) is refused with the choices.
	out, code = runPrune(t, data, "0s", "--dry-run")
	if code != 0 || !strings.Contains(out, "nothing was removed") {
		t.Fatalf("prune --dry-run: exit %d: %s", code, out)
	}
	for _, id := range []string{completed, closed, denied} {
		if !strings.Contains(out, "would remove "+id) {
			t.Fatalf("prune --dry-run does not list %s: %s", id, out)
		}
		if _, err := os.Stat(filepath.Join(data, "transactions", id)); err != nil {
			t.Fatalf("prune --dry-run removed %s: %v", id, err)
		}
	}
	if out, code = runPrune(t, data, "1m"); code != 2 || !strings.Contains(out, "ambiguous") {
		t.Fatalf("prune --older-than 1m: exit %d: %s", code, out)
	}

	out, code = runPrune(t, data, "0s")
	if code != 0 {
		t.Fatalf("prune: exit %d: %s", code, out)
	}
	for _, id := range []string{completed, closed, denied} {
		if !strings.Contains(out, "removed "+id) {
			t.Fatalf("prune did not remove %s: %s", id, out)
		}
		if _, err := os.Stat(filepath.Join(data, "transactions", id)); !os.IsNotExist(err) {
			t.Fatalf("%s still on disk: %v", id, err)
		}
	}
	if strings.Contains(out, waiting) {
		t.Fatalf("prune touched the proposed transaction: %s", out)
	}
	// A long cutoff removes nothing more.
	if out, code = runPrune(t, data, "1h"); code != 0 || strings.Contains(out, "removed") {
		t.Fatalf("prune --older-than 1h: exit %d: %s", code, out)
	}

	k = harness.Serve(t, args...)
	defer k.Kill()
	k.Initialize()
	rows := k.MustResult("tx/list", map[string]any{})["transactions"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["transactionId"] != waiting || rows[0].(map[string]any)["state"] != "proposed" {
		t.Fatalf("after prune: %v", rows)
	}
	// The deny outlives its pruned transaction.
	again := propose("c.txt", "C\n")
	if resp, _ := k.Call("apply/execute", map[string]any{"transactionId": again}); errCode(resp) != -32003 {
		t.Fatalf("a denied patch after pruning: %v", resp)
	}
}

func errCode(resp map[string]any) float64 {
	e, _ := resp["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// runPrune runs `txkernel prune` (its command line, in-process) and returns its combined output and exit
// status.
func runPrune(t *testing.T, data, olderThan string, extra ...string) (string, int) {
	t.Helper()
	var buf bytes.Buffer
	c := &cli.Command{Stdout: &buf, Stderr: &buf, Embedded: true}
	code := c.Run(context.Background(), append([]string{"prune", "--data-dir", data, "--older-than", olderThan}, extra...))
	return buf.String(), code
}
