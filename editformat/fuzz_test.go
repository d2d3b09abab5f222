package editformat

import (
	"bytes"
	"errors"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/unidiff"
)

// kinded fails t unless err is an *errs.Error with ErrorData.
func kinded(t *testing.T, err error) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *errs.Error: %v", err, err)
	}
	if _, ok := e.Data.(ErrorData); !ok {
		t.Fatalf("error data %T is not ErrorData", e.Data)
	}
}

// FuzzParseEnvelope feeds arbitrary text to ParseEnvelope and applies
// every update it parses to base: nothing panics, every refusal is an
// *errs.Error with ErrorData, and an applied update ends with a newline.
// The seeds (testdata/fuzz) include Codex's own scenario patches.
func FuzzParseEnvelope(f *testing.F) {
	f.Add("*** Begin Patch\n*** Update File: f\n@@ a\n b\n-c\n+d\n*** End of File\n*** End Patch\n", []byte("a\nb\nc\n"))
	f.Add("*** Begin Patch\n*** Add File: x\n+1\n*** Delete File: y\n*** End Patch\n", []byte(""))
	f.Fuzz(func(t *testing.T, text string, base []byte) {
		env, err := ParseEnvelope("proposal.patch", text)
		if err != nil {
			kinded(t, err)
			return
		}
		if len(env.Sections) == 0 {
			t.Fatal("no sections and no error")
		}
		for i := range env.Sections {
			s := &env.Sections[i]
			if s.Op != OpUpdate {
				continue
			}
			out, _, err := UpdateFile("proposal.patch", s.Path, s, base)
			if err != nil {
				kinded(t, err)
				continue
			}
			if len(out) > 0 && out[len(out)-1] != '\n' {
				t.Fatalf("result %q does not end with a newline", out)
			}
		}
	})
}

// FuzzNormalizeDiff feeds arbitrary bytes to NormalizeDiff: nothing
// panics, refusals are *errs.Error with ErrorData, and what it accepts
// normalizes to itself again (a fixed point) and never panics unidiff.
// The seeds (testdata/fuzz) include real GNU diff -u and -ruN output.
func FuzzNormalizeDiff(f *testing.F) {
	f.Add([]byte("--- a/f\t2024-01-01 00:00:00.000000000 +0000\n+++ b/f\t2024-01-02 00:00:00.000000000 +0000\n@@ -1 +1 @@\n-a\n+b\n"), false)
	f.Add([]byte("--- a/f\r\n+++ b/f\r\n@@ -1 +1,2 @@\r\n a\r\n+b\r\n"), true)
	f.Fuzz(func(t *testing.T, diff []byte, recount bool) {
		out, _, err := NormalizeDiff("proposal.diff", diff, DiffOptions{Recount: recount})
		if err != nil {
			kinded(t, err)
			return
		}
		if _, err := unidiff.Parse(out); err != nil {
			return // unidiff's own rules (duplicate paths, …) still apply
		}
		again, tols, err := NormalizeDiff("proposal.diff", out, DiffOptions{})
		if err != nil || !bytes.Equal(again, out) || len(tols) != 0 {
			t.Fatalf("not a fixed point: %q → %q %v %v", out, again, tols, err)
		}
	})
}
