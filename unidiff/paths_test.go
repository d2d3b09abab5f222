package unidiff

import "testing"

// TestPathRoundtrip covers git's C-style quoting (core.quotePath) and the
// tab git appends to ---/+++ names containing spaces.
func TestPathRoundtrip(t *testing.T) {
	paths := []string{
		"plain.go", "dir/sub/f.txt", "with space.txt", "dir with/space and more",
		"tab\tname", "new\nline", "quote\"d", "back\\slash", "é/ü.txt", "日本語",
		"\x7f\x01ctl", "trail\\", "a b/c d", "-dash", "+plus", "@@at",
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			checkRoundtrip(t, p, p, []byte("1\n"), []byte("2\n"), true, true, 0, 0)
			checkRoundtrip(t, "", p, nil, []byte("2\n"), false, true, 0, 0)
			checkRoundtrip(t, "", p, nil, nil, false, true, 0, 0)
			checkRoundtrip(t, p, "", []byte("1\n"), nil, true, false, 0, 0)
			checkRoundtrip(t, p, "", nil, nil, true, false, 0, 0)
			checkRoundtrip(t, p, "x", []byte("1\n"), []byte("1\n"), true, true, 0, 0)
			checkRoundtrip(t, "x", p, []byte("1\n"), []byte("2\n"), true, true, 0, 0o755)
			checkRoundtrip(t, p, p, []byte("1\n"), []byte("1\n"), true, true, 0, 0o755)
		})
	}
}
