package unidiff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// This file holds the two oracles the placement tests compare against: the
// real git apply, and refModel, a deliberately naive transcription of git's
// apply.c placement used where running git is too slow (fuzzing).

// gitBinary returns the path of git, or skips the test.
func gitBinary(t testing.TB) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed: the git apply comparison needs the real git")
	}
	return git
}

// gitApply runs the real "git apply" with no options in dir on patch (a
// file written into dir's parent so that it is not part of the tree) and
// reports whether git accepted it. dir is not a repository; git is kept from
// finding one above it.
func gitApply(t testing.TB, git, dir string, patch []byte) (ok bool, stderr string) {
	t.Helper()
	pf, err := os.CreateTemp(filepath.Dir(dir), "patch-*.diff")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(pf.Name())
	if _, err := pf.Write(patch); err != nil {
		t.Fatal(err)
	}
	if err := pf.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(git, "apply", pf.Name())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir, "LC_ALL=C",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	out, err := cmd.CombinedOutput()
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		t.Fatalf("git apply: %v", err)
	}
	return err == nil, string(out)
}

// gitApplyFile applies a one-file patch to base with the real git and
// returns the content of newPath afterwards (nil when git deleted it), and
// whether git accepted the patch.
func gitApplyFile(t testing.TB, git string, p *FilePatch, patch, base []byte) (out []byte, ok bool) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	if p.Kind != KindAdd {
		f := filepath.Join(dir, filepath.FromSlash(p.OldPath))
		must(t, os.MkdirAll(filepath.Dir(f), 0o755))
		must(t, os.WriteFile(f, base, 0o644))
		must(t, os.Chmod(f, os.FileMode(gitMode(p.OldMode)&0o777)))
	} else {
		must(t, os.MkdirAll(dir, 0o755))
	}
	if ok, _ := gitApply(t, git, dir, patch); !ok {
		return nil, false
	}
	if p.Kind == KindDelete {
		return nil, true
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p.NewPath)))
	must(t, err)
	return b, true
}

// refResult is what refModel computed for a file patch.
type refResult struct {
	out []byte
	// failed is the 1-based hunk that matched nowhere, or 0.
	failed int
	// outOfOrder is the 1-based first hunk that git placed before the end of
	// the previous hunk, or 0.
	outOfOrder int
	// appliedAt is each hunk's position in HunkResult.AppliedAt terms,
	// meaningful for hunks before the first outOfOrder one.
	appliedAt []int
}

// refModel applies frags to base the way git's apply.c does with no
// options, as literally as possible and without unidiff's shortcuts: one
// image spliced in place, LINE_PATCHED flags, find_pos walking the whole
// file even under match_beginning/match_end, and no diff-order rule (it
// records where that rule would refuse instead).
func refModel(frags []*gitdiff.TextFragment, base []byte) refResult {
	type line struct {
		s       string
		patched bool
	}
	var img []line
	for _, l := range Lines(base) {
		img = append(img, line{s: l})
	}
	var res refResult
	prevEnd, delta := 0, 0 // image end of the previous postimage; new-old lines so far
	for k, frag := range frags {
		var pre, post []string
		trailing := 0
		for _, l := range frag.Lines {
			if l.Op != gitdiff.OpAdd {
				pre = append(pre, l.Line)
			}
			if l.Op != gitdiff.OpDelete {
				post = append(post, l.Line)
			}
			if l.Op == gitdiff.OpContext {
				trailing++
			} else {
				trailing = 0
			}
		}
		matchBeginning := frag.OldPosition == 0 || frag.OldPosition == 1
		matchEnd := trailing == 0
		pos := 0
		if frag.NewPosition != 0 {
			pos = int(min(frag.NewPosition-1, int64(len(img))+1))
		}
		match := func(c int) bool {
			if len(pre)+c > len(img) {
				return false
			}
			if matchEnd && len(pre)+c != len(img) {
				return false
			}
			if matchBeginning && c != 0 {
				return false
			}
			for i := range pre {
				if img[c+i].patched || img[c+i].s != pre[i] {
					return false
				}
			}
			return true
		}
		// find_pos
		ln := pos
		if matchBeginning {
			ln = 0
		} else if matchEnd {
			ln = len(img) - len(pre)
		}
		if ln < 0 || ln > len(img) {
			ln = len(img)
		}
		found := -1
		back, fwd, cur := ln, ln, ln
		for i := 0; found < 0; i++ {
			if match(cur) {
				found = cur
				break
			}
		again:
			if back == 0 && fwd == len(img) {
				break
			}
			if i&1 == 1 {
				if back == 0 {
					i++
					goto again
				}
				back--
				cur = back
			} else {
				if fwd == len(img) {
					i++
					goto again
				}
				fwd++
				cur = fwd
			}
		}
		if found < 0 {
			res.failed = k + 1
			return res
		}
		if found < prevEnd && res.outOfOrder == 0 {
			res.outOfOrder = k + 1
		}
		at := found - delta
		if len(pre) > 0 {
			at++
		}
		res.appliedAt = append(res.appliedAt, at)
		// update_image
		var repl []line
		for _, s := range post {
			repl = append(repl, line{s: s, patched: true})
		}
		img = append(img[:found:found], append(repl, img[found+len(pre):]...)...)
		prevEnd = found + len(post)
		delta += len(post) - len(pre)
	}
	var b strings.Builder
	for _, l := range img {
		b.WriteString(l.s)
	}
	res.out = []byte(b.String())
	return res
}

// checkAgainstRef checks p.ApplyWithOffsets(base) against refModel: the same
// bytes and positions where git keeps diff order, a refusal everywhere else,
// naming the hunk and ReasonOutOfOrder where git would reorder.
func checkAgainstRef(t testing.TB, p *FilePatch, base []byte) {
	t.Helper()
	if p.Kind != KindModify && p.Kind != KindRename {
		return
	}
	ref := refModel(p.file.TextFragments, base)
	out, hunks, err := p.ApplyWithOffsets(base)
	firstOOO := ref.outOfOrder != 0 && (ref.failed == 0 || ref.outOfOrder < ref.failed)
	switch {
	case ref.failed == 0 && ref.outOfOrder == 0:
		if err != nil {
			t.Fatalf("git applies the patch but Apply fails: %v", err)
		}
		if string(out) != string(ref.out) {
			t.Fatalf("Apply = %q, git model = %q", out, ref.out)
		}
		for i, h := range hunks {
			if h.AppliedAt != ref.appliedAt[i] || h.Offset != h.AppliedAt-h.OldStart || h.Hunk != i+1 {
				t.Fatalf("hunk %d: %+v, git model applied at %d", i+1, h, ref.appliedAt[i])
			}
		}
	default:
		ce, ok := err.(*ConflictError)
		if !ok {
			t.Fatalf("git model: failed hunk %d, out-of-order hunk %d; Apply = %q, %v", ref.failed, ref.outOfOrder, out, err)
		}
		want, wantReason := ref.failed, ""
		if firstOOO {
			want, wantReason = ref.outOfOrder, ReasonOutOfOrder
		}
		if ce.Hunk != want || (wantReason != "" && ce.Reason != wantReason) || (wantReason == "" && ce.Reason == ReasonOutOfOrder) {
			t.Fatalf("git model: failed hunk %d, out-of-order hunk %d; Apply: %v", ref.failed, ref.outOfOrder, err)
		}
	}
}
