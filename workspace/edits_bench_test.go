package workspace_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/unidiff"
	"github.com/txkernel/txkernel/workspace"
)

// treeFiles reads every file under dir by its slash path.
func treeFiles(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// formatsOf expresses the change from base to expected as an
// apply_patch envelope and as text-editor edits: a delete or an add per
// removed or new file (new files end with a newline, as in fzf), and for
// a modified file one hunk of the kernel's own diff (3 lines of context)
// each, as an "@@" hunk and as a str_replace.
func formatsOf(base, expected map[string]string) (envelope string, edits []protocol.EditInput) {
	var env strings.Builder
	env.WriteString("*** Begin Patch\n")
	for p := range base {
		if _, ok := expected[p]; !ok {
			env.WriteString("*** Delete File: " + p + "\n")
			edits = append(edits, protocol.EditInput{Command: "delete", Path: p})
		}
	}
	for p, new := range expected {
		if _, ok := base[p]; ok {
			continue
		}
		env.WriteString("*** Add File: " + p + "\n")
		for _, l := range strings.SplitAfter(new, "\n") {
			if l != "" {
				env.WriteString("+" + l)
			}
		}
		text := new
		edits = append(edits, protocol.EditInput{Command: "create", Path: p, FileText: &text})
	}
	for p, old := range base {
		new, ok := expected[p]
		if !ok || new == old {
			continue
		}
		env.WriteString("*** Update File: " + p + "\n")
		var o, n strings.Builder
		flush := func() {
			if o.Len() > 0 {
				os, ns := o.String(), n.String()
				edits = append(edits, protocol.EditInput{Command: "str_replace", Path: p, OldStr: &os, NewStr: &ns})
			}
			o.Reset()
			n.Reset()
		}
		for _, l := range unidiff.Lines(unidiff.FileDiff(p, p, []byte(old), []byte(new), true, true, 0o644, 0o644)) {
			switch {
			case strings.HasPrefix(l, "@@"):
				flush()
				env.WriteString("@@\n")
			case strings.HasPrefix(l, "---"), strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "diff "):
			case l[0] == ' ':
				env.WriteString(l)
				o.WriteString(l[1:])
				n.WriteString(l[1:])
			case l[0] == '-':
				env.WriteString(l)
				o.WriteString(l[1:])
			case l[0] == '+':
				env.WriteString(l)
				n.WriteString(l[1:])
			}
		}
		flush()
	}
	env.WriteString("*** End Patch\n")
	return env.String(), edits
}

// BenchmarkProposeFormats measures turn/start's work in process on the
// largest fzf commit written in each edit format: the git diff, `diff
// -ruN` output (a traditional diff), an apply_patch envelope and
// str_replace edits, all of the same change.
func BenchmarkProposeFormats(b *testing.B) {
	dir := fzfDir(b, "025-ae3180f91994")
	gitDiff, err := os.ReadFile(filepath.Join(dir, "patch.diff"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("diff", "-ruN", "base", "expected")
	cmd.Dir = dir
	trad, _ := cmd.Output() // exit status 1: the trees differ
	if len(trad) == 0 {
		b.Skip("no diff command")
	}
	env, edits := formatsOf(treeFiles(b, filepath.Join(dir, "base")), treeFiles(b, filepath.Join(dir, "expected")))
	g, t := string(gitDiff), string(trad)
	inputs := []struct {
		name, kind string
		in         workspace.Input
	}{
		{"git_diff", protocol.KindUnifiedDiff, workspace.Input{Diff: &g}},
		{"diff_ruN", protocol.KindUnifiedDiff, workspace.Input{Diff: &t}},
		{"apply_patch", protocol.KindApplyPatch, workspace.Input{EditFormats: workspace.EditFormats{Patch: &env}}},
		{"edits", protocol.KindEdits, workspace.Input{EditFormats: workspace.EditFormats{Edits: edits}}},
	}
	// The same change in every format: the same patch id.
	ids := map[string]bool{}
	for _, tc := range inputs {
		ws := b.TempDir()
		if err := os.CopyFS(ws, os.DirFS(filepath.Join(dir, "base"))); err != nil {
			b.Fatal(err)
		}
		e, close := benchEngine(b, ws, b.TempDir(), approvals.Untrusted)
		res, err := e.Propose(context.Background(), workspace.Proposal(tc.kind, tc.in))
		close()
		if err != nil {
			b.Fatalf("%s: %v", tc.name, err)
		}
		ids[res.Proposal.PatchID] = true
	}
	if len(ids) != 1 {
		b.Fatalf("the formats propose %d different changes", len(ids))
	}
	for _, tc := range inputs {
		b.Run(tc.name, func(b *testing.B) {
			ws := b.TempDir()
			if err := os.CopyFS(ws, os.DirFS(filepath.Join(dir, "base"))); err != nil {
				b.Fatal(err)
			}
			e, close := benchEngine(b, ws, b.TempDir(), approvals.Untrusted)
			defer close()
			b.SetBytes(int64(len(gitDiff)))
			for b.Loop() {
				if _, err := e.Propose(context.Background(), workspace.Proposal(tc.kind, tc.in)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
