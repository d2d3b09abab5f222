package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestDurableGitApply checks the durable-git yardstick of
// BenchmarkHostSessionBuckets on a patch that modifies a file, deletes the
// only file of a directory (git removes the directory) and adds a file two
// new directories deep: durableSyncs names each written file and each
// directory whose entries change, and durableGitApply leaves the tree git
// made, fsyncing the parent of the removed directory instead.
func TestDurableGitApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: git is not installed")
	}
	dir := t.TempDir()
	base := map[string]string{"a.txt": "one\n", "gone/only.txt": "bye\n", "keep/k.txt": "k\n"}
	for p, body := range base {
		if err := os.MkdirAll(filepath.Join(dir, "base", filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "base", p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	diff := []byte(`diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-one
+two
diff --git a/gone/only.txt b/gone/only.txt
deleted file mode 100644
--- a/gone/only.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/new/sub/f.txt b/new/sub/f.txt
new file mode 100644
--- /dev/null
+++ b/new/sub/f.txt
@@ -0,0 +1 @@
+fresh
`)
	if err := os.WriteFile(filepath.Join(dir, "patch.diff"), diff, 0o644); err != nil {
		t.Fatal(err)
	}
	c := synthetic(t, "durable", dir, diff)
	tree := filepath.Join(t.TempDir(), "tree")
	if err := os.CopyFS(tree, os.DirFS(filepath.Join(dir, "base"))); err != nil {
		t.Fatal(err)
	}
	got := durableSyncs(tree, c)
	want := []string{"a.txt", "new/sub/f.txt", ".", "gone", "new", "new/sub"}
	if !slices.Equal(got, want) {
		t.Errorf("durableSyncs = %q, want %q", got, want)
	}
	if d := durableGitApply(t, c, tree); d <= 0 {
		t.Errorf("durableGitApply took %v", d)
	}
	after := map[string]string{"a.txt": "two\n", "new/sub/f.txt": "fresh\n", "keep/k.txt": "k\n"}
	for p, body := range after {
		if b, err := os.ReadFile(filepath.Join(tree, p)); err != nil || string(b) != body {
			t.Errorf("%s = %q, %v; want %q", p, b, err, body)
		}
	}
	if _, err := os.Stat(filepath.Join(tree, "gone")); !os.IsNotExist(err) {
		t.Errorf("gone/ is still there (%v): git should have removed the directory it emptied", err)
	}
}

// TestPromiseFloor checks the promise floor of BenchmarkHostSessionBuckets
// (promiseFloorTx) on transactions that modify a file, delete the only
// file of a directory and add a file two new directories deep, or only
// delete: each phase makes exactly the fsyncs of RELIABILITY.md §10's table
// (minFsyncs, the minimum TestHostSessionFsyncs holds the kernel to) in
// exactly its rounds (minRounds), each round holds what §10 says it
// holds, every fsync of a round ends before any of the next round starts,
// and the workspace and data dir end as the kernel leaves them.
func TestPromiseFloor(t *testing.T) {
	base := map[string]string{"a.txt": "one\n", "gone/only.txt": "bye\n", "keep/k.txt": "k\n"}
	type round = []string
	cases := []struct {
		name             string
		written, deleted []string
		contents         []string
		approval         hostApproval
		rounds           [nPhases][]round
		after            map[string]string // "" : absent
	}{
		{
			name:    "write-delete-create",
			written: []string{"a.txt", "new/sub/f.txt"}, deleted: []string{"gone/only.txt"},
			contents: []string{"two\n", "fresh\n"},
			rounds: [nPhases][]round{
				phasePropose: {{"active/", "contents", "ledger", "proposal.patch", "transactions/", "txdir"}},
				phaseApply1:  {{"ledger", "transactions/"}},
				phaseRespond: {{"ledger"}},
				phaseApply2: {
					{"Ds:.", "Ds:new", "Ds:new/sub", "staged:a.txt", "staged:new/sub/f.txt"},
					{"ledger"},
					{"Dc:.", "Dc:gone", "Dc:new/sub"},
					{"ledger", "txdir"},
				},
			},
			after: map[string]string{"a.txt": "two\n", "new/sub/f.txt": "fresh\n", "keep/k.txt": "k\n", "gone/only.txt": "",
				".a.txt.txk-floor.tmp": "", "new/sub/.f.txt.txk-floor.tmp": ""},
		},
		{
			name:    "delete-only",
			deleted: []string{"gone/only.txt", "keep/k.txt"},
			rounds: [nPhases][]round{
				phasePropose: {{"active/", "contents", "ledger", "proposal.patch", "transactions/", "txdir"}},
				phaseApply1:  {{"ledger", "transactions/"}},
				phaseRespond: {{"ledger"}},
				phaseApply2:  {{"ledger"}, {"Dc:gone", "Dc:keep"}, {"ledger", "txdir"}},
			},
			after: map[string]string{"a.txt": "one\n", "gone/only.txt": "", "keep/k.txt": ""},
		},
		{
			name:    "write-delete-create-by-policy",
			written: []string{"a.txt", "new/sub/f.txt"}, deleted: []string{"gone/only.txt"},
			contents: []string{"two\n", "fresh\n"},
			approval: byPolicy,
			rounds: [nPhases][]round{
				phasePropose: {{"active/", "contents", "ledger", "proposal.patch", "transactions/", "txdir"}},
				phaseApply2: {
					{"Ds:.", "Ds:new", "Ds:new/sub", "staged:a.txt", "staged:new/sub/f.txt"},
					{"ledger", "transactions/"},
					{"Dc:.", "Dc:gone", "Dc:new/sub"},
					{"ledger", "txdir"},
				},
			},
			after: map[string]string{"a.txt": "two\n", "new/sub/f.txt": "fresh\n", "keep/k.txt": "k\n", "gone/only.txt": "",
				".a.txt.txk-floor.tmp": "", "new/sub/.f.txt.txk-floor.tmp": ""},
		},
		{
			name:     "delete-only-by-policy",
			deleted:  []string{"gone/only.txt", "keep/k.txt"},
			approval: byPolicy,
			rounds: [nPhases][]round{
				phasePropose: {{"active/", "contents", "ledger", "proposal.patch", "transactions/", "txdir"}},
				phaseApply2:  {{"ledger", "transactions/"}, {"Dc:gone", "Dc:keep"}, {"ledger", "txdir"}},
			},
			after: map[string]string{"a.txt": "one\n", "gone/only.txt": "", "keep/k.txt": ""},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, data := filepath.Join(t.TempDir(), "ws"), t.TempDir()
			for p, body := range base {
				if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range []string{"transactions", "active"} {
				if err := os.Mkdir(filepath.Join(data, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			c := hostCommit{written: tc.written, deleted: tc.deleted}
			wantFsyncs, wantRounds := minFsyncs(c, createdDirs(ws, c), tc.approval), minRounds(c, tc.approval)
			contents := make([][]byte, len(tc.contents))
			for i, s := range tc.contents {
				contents[i] = []byte(s)
			}
			diff := []byte("diff --git a/x b/x\n")
			tr := &floorTrace{}
			ph, err := promiseFloorTx(ws, data, "tx-1", c, diff, contents, tc.approval, tr)
			if err != nil {
				t.Fatal(err)
			}
			for phase := range nPhases {
				if empty := tc.approval == byPolicy && (phase == phaseApply1 || phase == phaseRespond); empty != (ph[phase] == 0) {
					t.Errorf("%s took %v", phaseNames[phase], ph[phase])
				}
				var got []round
				n := 0
				for _, s := range tr.syncs {
					if s.phase != phase {
						continue
					}
					n++
					for len(got) < s.round {
						got = append(got, nil)
					}
					got[s.round-1] = append(got[s.round-1], s.what)
				}
				for _, r := range got {
					slices.Sort(r)
				}
				if !slices.EqualFunc(got, tc.rounds[phase], slices.Equal) {
					t.Errorf("%s: rounds %q, want %q", phaseNames[phase], got, tc.rounds[phase])
				}
				if n != wantFsyncs[phase] || len(got) != wantRounds[phase] {
					t.Errorf("%s: %d fsyncs in %d rounds, RELIABILITY.md §10's minimum is %d in %d",
						phaseNames[phase], n, len(got), wantFsyncs[phase], wantRounds[phase])
				}
			}
			// Rounds in trace order: each must be over before the next starts.
			for i, a := range tr.syncs {
				for _, b := range tr.syncs[i+1:] {
					if a.phase == b.phase && a.round != b.round {
						first, second := a, b
						if b.round < a.round {
							first, second = b, a
						}
						if first.end > second.start {
							t.Errorf("%s: round %d's %s ended after round %d's %s started",
								phaseNames[a.phase], first.round, first.what, second.round, second.what)
						}
					}
				}
			}
			for p, want := range tc.after {
				b, err := os.ReadFile(filepath.Join(ws, p))
				switch {
				case want == "" && !os.IsNotExist(err):
					t.Errorf("%s is still there (%v)", p, err)
				case want != "" && (err != nil || string(b) != want):
					t.Errorf("%s = %q, %v; want %q", p, b, err, want)
				}
			}
			for p, want := range map[string]bool{"transactions/tx-1/ledger.jsonl": true, "transactions/tx-1/proposal.patch": true,
				"transactions/tx-1/blobs": false, "transactions/.tmp-tx-1": false, "active/tx-1": false} {
				if _, err := os.Stat(filepath.Join(data, p)); (err == nil) != want {
					t.Errorf("%s: exists = %v, want %v", p, err == nil, want)
				}
			}
			// One append in each of the first three phases (by policy, in
			// turn/start only) and two in the final apply (the commit
			// record, the closing events).
			appends := 5
			if tc.approval == byPolicy {
				appends = 3
			}
			if b, err := os.ReadFile(filepath.Join(data, "transactions/tx-1/ledger.jsonl")); err != nil || len(b) != appends*floorLedgerRecord {
				t.Errorf("ledger: %d bytes, %v; want %d", len(b), err, appends*floorLedgerRecord)
			}
		})
	}
}
