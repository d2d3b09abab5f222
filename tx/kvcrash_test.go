package tx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
)

// kvChildEnv names the directory of a TestKVChild run.
const kvChildEnv = "TXKERNEL_KV_CHILD"

// openKV opens an engine on dir/data whose only target is a kvTarget on
// dir/kv.
func openKV(t testing.TB, dir string, fps *failpoint.Set) (*Engine, *kvTarget) {
	t.Helper()
	kv := &kvTarget{dir: filepath.Join(dir, "kv"), fp: fps}
	if err := os.MkdirAll(kv.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), Options{Targets: []Target{kv}, DataDir: filepath.Join(dir, "data"), Policy: approvals.Never, Failpoints: fps})
	if err != nil {
		t.Fatal(err)
	}
	return e, kv
}

func kvSet(pairs ...string) *Input {
	var in kvInput
	for i := 0; i < len(pairs); i += 2 {
		v := pairs[i+1]
		in.Files = append(in.Files, protocol.FileInput{Path: pairs[i], Content: &v})
	}
	return &Input{Kind: kindKVSet, Body: &in}
}

// ack records, durably, what the child was told: after this line exists
// the promise is made and must survive the crash.
func ack(t testing.TB, dir, what string) {
	f, err := os.OpenFile(filepath.Join(dir, "acked"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, what)
	f.Sync()
	f.Close()
}

// TestKVChild is the kernel side of TestKVCrashRecovery: a real engine in
// its own process, with failpoints from the environment, proposing and
// applying one kv_set. It does nothing unless run by that test.
func TestKVChild(t *testing.T) {
	dir := os.Getenv(kvChildEnv)
	if dir == "" {
		t.Skip("run by TestKVCrashRecovery")
	}
	fps, err := failpoint.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	e, _ := openKV(t, dir, fps)
	ctx := context.Background()
	res, err := e.Propose(ctx, kvSet("a", "2", "b", "secret-ish value"))
	if err != nil {
		t.Fatal(err)
	}
	ack(t, dir, "propose "+res.TransactionID)
	ar, err := e.Apply(ctx, res.TransactionID)
	if err != nil || !ar.OK {
		t.Fatalf("apply: %+v %v", ar, err)
	}
	ack(t, dir, "apply "+res.TransactionID)
}

// kvFailpoints are every failpoint a kv_set session reaches, each at every
// hit: the engine's and the kv target's own.
func kvFailpoints() []string {
	fps := []string{
		fpProposeBeforeRename, fpAfterStaging, fpBeforeCommitRecord, fpAfterCommitRecord,
		fpAfterBlobsDeleted, fpKVBeforeReplace, fpKVAfterReplace, fpRetireBeforeUnmark,
	}
	for i := range fps {
		fps[i] += "=exit"
	}
	// propose, the commit record (with the policy's grant: RELIABILITY.md
	// §10, "By policy"), the closing events
	for n := 1; n <= 3; n++ {
		fps = append(fps, fmt.Sprintf("%s=exit@%d", fpLedgerMidAppend, n))
	}
	// transaction.json is replaced once, with the closing events.
	return append(fps, fpMetaMidReplace+"=exit@1")
}

// TestKVCrashRecovery runs the same failpoint recovery as the workspace's
// crash harness on the second target: the child is SIGKILLed at each
// failpoint, and after a restart everything acknowledged is there, the
// commit happened at most once, finishing the transaction yields the new
// values exactly once, and nothing is left behind: no staged values, no
// blobs of a terminal transaction, no marker of a terminal transaction.
func TestKVCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process per failpoint")
	}
	if !failpoint.Enabled {
		t.Fatal("failpoints are compiled out: run with -tags failpoints (the Makefile's TEST_TAGS)")
	}
	for _, fp := range kvFailpoints() {
		t.Run(fp, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestKVChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), kvChildEnv+"="+dir, failpoint.EnvVar+"="+fp)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed at %s: %v\n%s", fp, err, out)
			}
			checkKVRecovery(t, dir)
		})
	}
}

func checkKVRecovery(t *testing.T, dir string) {
	acked, _ := os.ReadFile(filepath.Join(dir, "acked"))
	e, kv := openKV(t, dir, nil)
	defer e.Close()
	ctx := context.Background()
	list, err := e.List(ctx, protocol.TxListParams{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.load()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(acked), "propose ") && len(list.Transactions) != 1 {
		t.Fatalf("an acknowledged proposal is gone: %+v", list.Transactions)
	}
	if strings.Contains(string(acked), "apply ") && st.Revision != 1 {
		t.Fatalf("an acknowledged apply is gone: revision %d", st.Revision)
	}
	if st.Revision > 1 {
		t.Fatalf("committed %d times", st.Revision)
	}
	if len(list.Transactions) == 0 {
		if st.Revision != 0 {
			t.Fatalf("a commit without its transaction")
		}
		return
	}
	row := list.Transactions[0]
	switch row.State {
	case protocol.StateProposed:
		if st.Revision != 0 {
			t.Fatalf("proposed, but committed")
		}
	case protocol.StateCompleted:
	default:
		t.Fatalf("state %s after recovery", row.State)
	}
	// Finishing the transaction yields the new values, exactly once.
	for range 2 {
		if res, err := e.Apply(ctx, row.TransactionID); err != nil || !res.OK {
			t.Fatalf("finishing: %+v %v", res, err)
		}
	}
	if st, _ = kv.load(); st.Revision != 1 || st.Data["a"] != "2" || st.Applied[row.TransactionID] != 1 {
		t.Fatalf("after finishing: %+v", st)
	}
	assertRetired(t, dir, row.TransactionID)
	if ents, _ := os.ReadDir(filepath.Join(kv.dir, "staged")); len(ents) != 0 {
		t.Fatalf("staged values left: %v", ents)
	}
}

// assertRetired checks a terminal transaction has no blobs and no marker.
func assertRetired(t *testing.T, dir, id string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "data", TxDir, id, BlobFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("blobs of terminal %s remain (%v)", id, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", ActiveDir, id)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("marker of terminal %s remains (%v)", id, err)
	}
}

// TestKVCommitIdempotent commits one transaction twice by hand: one effect.
func TestKVCommitIdempotent(t *testing.T) {
	dir := t.TempDir()
	e, kv := openKV(t, dir, nil)
	defer e.Close()
	ctx := context.Background()
	res, err := e.Propose(ctx, kvSet("k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := e.get(res.TransactionID)
	if err != nil {
		t.Fatal(err)
	}
	c := e.change(tr)
	rec, err := tr.planned.Prepare(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := tr.planned.Commit(ctx, c, rec); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := kv.load()
	if st.Revision != 1 || st.Data["k"] != "v" {
		t.Fatalf("two commits: %+v", st)
	}
	raw, _ := json.Marshal(st.Applied)
	if string(raw) != fmt.Sprintf(`{%q:1}`, res.TransactionID) {
		t.Fatalf("applied log %s", raw)
	}
}

// TestKVStaleBase: a second transaction planned against revision 0 is
// stale once the first commits, and the lock keys serialise them.
func TestKVStaleBase(t *testing.T) {
	dir := t.TempDir()
	e, kv := openKV(t, dir, nil)
	defer e.Close()
	ctx := context.Background()
	a, _ := e.Propose(ctx, kvSet("k", "a"))
	b, _ := e.Propose(ctx, kvSet("k", "b"))
	if _, err := e.Apply(ctx, a.TransactionID); err != nil {
		t.Fatal(err)
	}
	_, err := e.Apply(ctx, b.TransactionID)
	var d kvStaleData
	if k, data := kindData(err); k != "stale" || data == nil {
		t.Fatalf("second apply: %v", err)
	} else {
		d = data.(kvStaleData)
	}
	if d.ExpectedRevision != 0 || d.ActualRevision != 1 {
		t.Fatalf("stale data %+v", d)
	}
	if st, _ := kv.load(); st.Data["k"] != "a" {
		t.Fatalf("kv %+v", st)
	}
}
