package unidiff

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse and applies whatever parses to a
// few bases; nothing may panic, and errors must be the documented types.
func FuzzParse(f *testing.F) {
	f.Add([]byte("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"), []byte("a\nb\n"))
	f.Add([]byte("diff --git a/f b/f\nnew file mode 100644\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+x\r\n"), []byte(""))
	f.Add([]byte("diff --git a/a b/b\nrename from a\nrename to b\n"), []byte("x"))
	f.Fuzz(func(t *testing.T, diff, base []byte) {
		ps, err := Parse(diff)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %T is not *ParseError: %v", err, err)
			}
			return
		}
		if len(ps) == 0 {
			t.Fatal("Parse returned no patches and no error")
		}
		for _, p := range ps {
			for _, b := range [][]byte{nil, base} {
				out, err := p.Apply(b)
				if err != nil {
					var ce *ConflictError
					if !errors.As(err, &ce) {
						t.Fatalf("Apply error %T is not *ConflictError: %v", err, err)
					}
					continue
				}
				if p.Kind == KindDelete && out != nil {
					t.Fatal("delete returned content")
				}
			}
		}
	})
}

// FuzzRoundtrip checks Parse(FileDiff(old, new)).Apply(old) == new for
// arbitrary bytes, and that FileDiff is a pure function of its inputs.
func FuzzRoundtrip(f *testing.F) {
	f.Add([]byte("a\nb\n"), []byte("a\nc\n"), uint8(0))
	f.Add([]byte("a\r\nb"), []byte("a\r\nb\r\n"), uint8(1))
	f.Add([]byte("\xff\x00\n"), []byte(""), uint8(2))
	f.Fuzz(func(t *testing.T, old, new []byte, flags uint8) {
		oldEx, newEx := flags&1 == 0, flags&2 == 0
		oldMode, newMode := uint32(0o644), uint32(0o644)
		if flags&4 != 0 {
			newMode = 0o755
		}
		newPath := "p/f"
		if flags&8 != 0 {
			newPath = "p/g h"
		}
		checkRoundtrip(t, "p/f", newPath, old, new, oldEx, newEx, oldMode, newMode)
		a := FileDiff("p/f", newPath, old, new, oldEx, newEx, oldMode, newMode)
		b := FileDiff("p/f", newPath, old, new, oldEx, newEx, oldMode, newMode)
		if !bytes.Equal(a, b) {
			t.Fatal("FileDiff not deterministic")
		}
	})
}
