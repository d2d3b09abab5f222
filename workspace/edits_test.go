package workspace_test

import (
	"context"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/workspace"
)

func strp(s string) *string { return &s }
func intp(n int) *int       { return &n }

// TestEditFormatsPlanLikeFiles: one change written as whole files, as
// text-editor edits, as an apply_patch envelope, as a traditional diff
// and as a git diff plans to the same canonical diff, so it has the same
// patch id (and a deny's fingerprint sticks to it whatever the format),
// and each applies to the same bytes.
func TestEditFormatsPlanLikeFiles(t *testing.T) {
	files := map[string]string{"a.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n"}
	want := map[string]string{"a.txt": "one\n2\nthree\n", "new.txt": "hi\n"}
	filesID := ""
	for _, tc := range []struct {
		kind string
		in   workspace.Input
	}{
		{protocol.KindFiles, workspace.Input{Files: []protocol.FileInput{content("a.txt", "one\n2\nthree\n"), content("new.txt", "hi\n"), {Path: "gone.txt", Delete: true}}}},
		{protocol.KindEdits, workspace.Input{EditFormats: workspace.EditFormats{Edits: []protocol.EditInput{
			{Command: "str_replace", Path: "a.txt", OldStr: strp("two"), NewStr: strp("2")},
			{Command: "create", Path: "new.txt", FileText: strp("hi\n")},
			{Command: "delete", Path: "gone.txt"},
		}}}},
		{protocol.KindApplyPatch, workspace.Input{EditFormats: workspace.EditFormats{
			Patch: strp("*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+2\n*** Add File: new.txt\n+hi\n*** Delete File: gone.txt\n*** End Patch\n"),
		}}},
		{protocol.KindUnifiedDiff, workspace.Input{
			Diff:        strp("--- a.txt\t2024-01-01 00:00:00.000000000 +0000\n+++ a.txt\t2024-01-02 00:00:00.000000000 +0000\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n--- /dev/null\n+++ new.txt\n@@ -0,0 +1 @@\n+hi\n--- gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"),
			EditFormats: workspace.EditFormats{Strip: intp(0)},
		}},
		{protocol.KindUnifiedDiff, workspace.Input{Diff: strp("diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\ndiff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\ndiff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n")}},
	} {
		f := newFixture(t, files)
		res, err := f.e.Propose(context.Background(), workspace.Proposal(tc.kind, tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		if res.Proposal.Summary != "modify 1 file, add 1, delete 1" {
			t.Errorf("%s: summary %q", tc.kind, res.Proposal.Summary)
		}
		if len(res.Proposal.Tolerances) != 0 {
			t.Errorf("%s: tolerances %v", tc.kind, res.Proposal.Tolerances)
		}
		// The files form comes first: its patch id is every form's.
		if filesID == "" {
			filesID = res.Proposal.PatchID
		} else if res.Proposal.PatchID != filesID {
			t.Errorf("%s: patch id %s, the files form's is %s", tc.kind, res.Proposal.PatchID, filesID)
		}
		if ap, err := f.e.Apply(context.Background(), res.TransactionID); err != nil || !ap.OK {
			t.Fatalf("%s: apply %v %v", tc.kind, ap, err)
		}
		for name, w := range want {
			if got := f.read(name); got != w {
				t.Errorf("%s: %s = %q, want %q", tc.kind, name, got, w)
			}
		}
		if got := f.read("gone.txt"); got[0] != '<' {
			t.Errorf("%s: gone.txt still holds %q", tc.kind, got)
		}
	}
}
