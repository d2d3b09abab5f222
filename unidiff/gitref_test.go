package unidiff

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	out []byte // git's result, when failed is 0
	// failed is the 1-based hunk that matched nowhere, or 0.
	failed int
	// problem is the first hunk unidiff must refuse although git applies
	// it (1-based, or 0), and why: ReasonOutOfOrder when git placed it
	// before the end of the previous hunk, ReasonNotAtEnd when git matched
	// its no-newline last old line against a longer line (and joined lines).
	problem       int
	problemReason string
	// appliedAt is each hunk's position in HunkResult.AppliedAt terms,
	// meaningful for hunks before the first problem.
	appliedAt []int
}

// gitHash is apply.c's hash_line: non-whitespace bytes only, 24 bits.
func gitHash(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			h = h*3 + uint32(c)
		}
	}
	return h & 0xffffff
}

// refModel applies frags to base the way git's apply.c does with no
// options, as literally as possible and without unidiff's shortcuts: one
// image spliced in place, LINE_PATCHED flags, the line hash then a byte
// comparison of the hunk's old side, find_pos walking the whole file even
// under match_beginning/match_end, and no extra rules (it records where
// unidiff's rules refuse instead).
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
	problem := func(k int, reason string) {
		if res.problem == 0 {
			res.problem, res.problemReason = k, reason
		}
	}
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
		preBytes := strings.Join(pre, "")
		matchBeginning := frag.OldPosition == 0 || frag.OldPosition == 1
		matchEnd := trailing == 0
		pos := 0
		if frag.NewPosition != 0 {
			pos = int(min(frag.NewPosition-1, int64(len(img))+1))
		}
		// match_fragment
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
				if img[c+i].patched || gitHash(img[c+i].s) != gitHash(pre[i]) {
					return false
				}
			}
			var rest strings.Builder
			for _, l := range img[c:] {
				rest.WriteString(l.s)
			}
			if matchEnd && rest.Len() != len(preBytes) || rest.Len() < len(preBytes) {
				return false
			}
			return strings.HasPrefix(rest.String(), preBytes)
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
		for i := 0; ; i++ {
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
		if found < prevEnd {
			problem(k+1, ReasonOutOfOrder)
		}
		if len(pre) > 0 && img[found+len(pre)-1].s != pre[len(pre)-1] {
			problem(k+1, ReasonNotAtEnd)
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
// bytes and positions where git applies the patch and unidiff's rules do not
// refuse it, a *ConflictError naming the same hunk everywhere else (with the
// rule's reason where git applies it).
func checkAgainstRef(t testing.TB, p *FilePatch, base []byte) {
	t.Helper()
	if p.Kind != KindModify && p.Kind != KindRename {
		return
	}
	ref := refModel(p.file.TextFragments, base)
	out, hunks, err := p.ApplyWithOffsets(base)
	if ref.failed == 0 && ref.problem == 0 {
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
		return
	}
	ce, ok := err.(*ConflictError)
	if !ok {
		t.Fatalf("git model: failed hunk %d, problem hunk %d (%s); Apply = %q, %v", ref.failed, ref.problem, ref.problemReason, out, err)
	}
	wantHunk, wantReason := ref.failed, ""
	if ref.problem != 0 && (ref.failed == 0 || ref.problem < ref.failed) {
		wantHunk, wantReason = ref.problem, ref.problemReason
	}
	if ce.Hunk != wantHunk || (wantReason != "" && ce.Reason != wantReason) || (wantReason == "" && ce.Reason == ReasonOutOfOrder) {
		t.Fatalf("git model: failed hunk %d, problem hunk %d (%s); Apply: %v", ref.failed, ref.problem, ref.problemReason, err)
	}
}

// TestRefModelMatchesGit checks the oracle of FuzzApplyOffsets and FuzzParse
// against the real git apply: on every FuzzApplyOffsets seed in
// testdata/fuzz and on random shifted files (built from randomLines, full of
// repeated lines, so that matches are ambiguous), refModel must accept
// exactly what git accepts and give git's bytes; ApplyWithOffsets is checked
// against refModel on the same inputs.
func TestRefModelMatchesGit(t *testing.T) {
	git := gitBinary(t)
	type input struct {
		name          string
		old, new, ins []byte
		where         uint32
	}
	var inputs []input
	seeds, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzApplyOffsets", "*"))
	for _, f := range seeds {
		vals := readFuzzSeed(t, f)
		if len(vals) != 4 {
			t.Fatalf("%s: %d values, want 4", f, len(vals))
		}
		where, err := strconv.ParseUint(string(vals[3]), 10, 32)
		must(t, err)
		inputs = append(inputs, input{filepath.Base(f), vals[0], vals[1], vals[2], uint32(where)})
	}
	if len(seeds) == 0 {
		t.Error("no FuzzApplyOffsets seeds in testdata/fuzz")
	}
	r := rand.New(rand.NewPCG(7, 8))
	noNUL := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte{0}, []byte("0")) }
	for i := range 150 {
		old := noNUL(randomFile(r, 5+r.IntN(40)))
		inputs = append(inputs, input{fmt.Sprintf("random%d", i), old, noNUL(mutate(r, old)), noNUL(randomFile(r, 1+r.IntN(3))), r.Uint32()})
	}
	var applied, refused, ruled int
	for _, in := range inputs {
		diff := FileDiff("f", "f", in.old, in.new, true, true, 0o644, 0o644)
		if diff == nil {
			continue
		}
		ps, err := Parse(diff)
		if err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		base := shiftForFuzz(in.old, in.ins, in.where)
		ref := refModel(ps[0].file.TextFragments, base)
		got, ok := gitApplyFile(t, git, ps[0], diff, base)
		switch {
		case ok != (ref.failed == 0):
			t.Errorf("%s: git applies=%v, model failed at hunk %d\nbase %q\ndiff %s", in.name, ok, ref.failed, base, diff)
		case ok && !bytes.Equal(got, ref.out):
			t.Errorf("%s: git %q, model %q", in.name, got, ref.out)
		case !ok:
			refused++
		case ref.problem != 0:
			ruled++
		default:
			applied++
		}
		checkAgainstRef(t, ps[0], base)
	}
	t.Logf("%d inputs: git and the model agree on all; %d applied (ApplyWithOffsets identical), %d applied by git but refused by unidiff's rules (out of order, joined lines), %d refused by both",
		len(inputs), applied, ruled, refused)
}

// readFuzzSeed reads a "go test fuzz v1" file: one Go literal per line,
// []byte("...") or a number like uint32(5), returned as raw bytes or digits.
func readFuzzSeed(t *testing.T, path string) [][]byte {
	b, err := os.ReadFile(path)
	must(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: not a fuzz seed", path)
	}
	var vals [][]byte
	for _, l := range lines[1:] {
		open, close := strings.IndexByte(l, '('), strings.LastIndexByte(l, ')')
		if open < 0 || close < open {
			t.Fatalf("%s: bad line %q", path, l)
		}
		arg := l[open+1 : close]
		if strings.HasPrefix(l, "[]byte(") {
			s, err := strconv.Unquote(arg)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			arg = s
		}
		vals = append(vals, []byte(arg))
	}
	return vals
}
