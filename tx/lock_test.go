package tx

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestLockInheritedDescriptor is a restart in one process while a child
// forked by it has not yet exec'd: the child shares the closed kernel's
// flocked descriptors (here, dups of them) until exec. The lock waits
// for them, and a lock this process's own engine still holds is refused
// at once.
func TestLockInheritedDescriptor(t *testing.T) {
	dir := t.TempDir()
	l1, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Dups share the open file description, so its flock outlives l1, as
	// a forked child's copies do until exec.
	dupDir, err := syscall.Dup(int(l1.dir.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	dupFile, err := syscall.Dup(int(l1.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := l1.release(); err != nil {
		t.Fatal(err)
	}
	const hold = 100 * time.Millisecond
	go func() {
		time.Sleep(hold / 2)
		syscall.Close(dupDir)
		time.Sleep(hold / 2)
		syscall.Close(dupFile)
	}()
	start := time.Now()
	l2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after the inherited descriptors closed: %v", err)
	}
	defer l2.release()
	if waited := time.Since(start); waited < hold {
		t.Fatalf("took the lock after %v, before the inherited descriptors closed (%v)", waited, hold)
	}

	start = time.Now()
	if _, err := lockDataDir(dir); !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second lock in one process: %v, want ErrDataDirLocked", err)
	}
	if waited := time.Since(start); waited >= selfLockWait {
		t.Fatalf("a lock this process's engine holds was refused after %v, not at once", waited)
	}
}
