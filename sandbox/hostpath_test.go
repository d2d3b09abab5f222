package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestHostPath(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	w, err := Open(link, WorkspaceWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tc := range []struct {
		in, want, reason string
	}{
		{"a/b.md", "a/b.md", ""},
		{filepath.Join(w.Dir(), "a", "b.md"), "a/b.md", ""},
		{filepath.Join(link, "a", "b.md"), "a/b.md", ""},
		{w.Dir(), ".", ""},
		{"file://" + filepath.Join(w.Dir(), "notes", "log%20one.md"), "notes/log one.md", ""},
		{"file://localhost" + filepath.Join(w.Dir(), "x.md"), "x.md", ""},
		{"FILE://" + filepath.Join(w.Dir(), "x.md"), "x.md", ""},
		{"/etc/passwd", "", "outside-workspace"},
		{filepath.Join(w.Dir(), "..", "other"), "", "outside-workspace"},
		{"file:///etc/passwd", "", "outside-workspace"},
		{"file://example.com" + filepath.Join(w.Dir(), "x.md"), "", "bad-uri"},
		{"file:", "", "bad-uri"},
	} {
		got, err := w.HostPath(tc.in)
		var pe *PathError
		switch {
		case tc.reason == "" && (err != nil || got != tc.want):
			t.Errorf("HostPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.reason != "" && (!errors.As(err, &pe) || pe.Reason != tc.reason):
			t.Errorf("HostPath(%q) = %q, %v; want reason %s", tc.in, got, err, tc.reason)
		case tc.reason == "outside-workspace" && (pe.Root != w.Dir() || !errors.Is(err, ErrEscape)):
			t.Errorf("HostPath(%q): root %q, err %v", tc.in, pe.Root, err)
		}
	}
}
