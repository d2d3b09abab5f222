package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/protocol"
)

// dataDirFDs returns the targets of this process's open descriptors that
// lie in dir. It skips t where /proc/self/fd does not exist.
func dataDirFDs(t *testing.T, dir string) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors through /proc/self/fd")
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var out []string
	for _, ent := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", ent.Name()))
		if err == nil && (target == dir || strings.HasPrefix(target, dir+string(filepath.Separator))) {
			out = append(out, target)
		}
	}
	return out
}

// TestDescriptorsBounded is issue 7's finding replayed with workspace
// files: 200 transactions (50 applied, 50 closed, 100 proposed) used to
// hold 209 descriptors, live and after a restart. Now the engine holds
// only kernel.lock in its data dir, live, after every transaction's
// status and events were read, and after a restart.
func TestDescriptorsBounded(t *testing.T) {
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("d%d/f%03d.txt", i%7, i)] = fmt.Sprintf("base %d\n", i)
	}
	f := newFixture(t, files)
	ctx := context.Background()
	var ids []string
	for i := range 200 {
		ids = append(ids, f.propose(content(fmt.Sprintf("d%d/f%03d.txt", i%7, i), fmt.Sprintf("new %d\n", i))))
	}
	for _, id := range ids[:50] {
		if res, err := f.e.Apply(ctx, id); err != nil || !res.OK {
			t.Fatalf("apply: %+v, %v", res, err)
		}
	}
	for _, id := range ids[50:100] {
		if _, err := f.e.CloseTx(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string) {
		t.Helper()
		fds := dataDirFDs(t, f.data)
		if len(fds) > 2 {
			t.Fatalf("%s: %d descriptors into the data dir, want at most 2: %v", step, len(fds), fds)
		}
		counts := map[string]int{}
		p := protocol.TxListParams{Limit: 64}
		for {
			page, err := f.e.List(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range page.Transactions {
				counts[row.State]++
			}
			if page.NextCursor == "" {
				break
			}
			p.Cursor = page.NextCursor
		}
		if counts[protocol.StateCompleted] != 50 || counts[protocol.StateClosed] != 50 || counts[protocol.StateProposed] != 100 {
			t.Fatalf("%s: tx/list counts %v", step, counts)
		}
	}
	check("live")
	for _, id := range ids {
		if _, err := f.e.Status(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := f.e.Events(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	check("after reading every transaction")
	f.open("")
	check("reopened")
}
