//go:build unix

package sandbox

import (
	"syscall"
	"testing"
)

// The staged file's permissions must be exactly what the diff says, not
// what the kernel's umask happens to allow.
func TestStageFileIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	w, _ := newWS(t, WorkspaceWrite)
	if err := w.StageFile("x/run.sh", StagedName("x/run.sh", "t"), []byte("#!"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Rename(StagedName("x/run.sh", "t"), "x/run.sh"); err != nil {
		t.Fatal(err)
	}
	_, mode, _, err := w.ReadFile("x/run.sh")
	if err != nil || mode.Perm() != 0o755 {
		t.Errorf("mode = %v, %v; want 0755", mode, err)
	}
}
