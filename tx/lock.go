package tx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the data dir's lock file. It holds the owner's pid.
const LockFile = "kernel.lock"

// ErrDataDirLocked is returned (wrapped) by Open when another kernel owns the
// data dir.
var ErrDataDirLocked = errors.New("data dir is in use by another txkernel")

// dirLock is an exclusive flock(2) on <data-dir>/kernel.lock. The kernel holds
// it for its whole life; the OS drops it when the process dies, even by
// kill -9, so a crash never leaves a stale lock behind.
type dirLock struct{ f *os.File }

func lockDataDir(dataDir string) (*dirLock, error) {
	path := filepath.Join(dataDir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (owner pid %s)", ErrDataDirLocked, dataDir, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	return l.f.Close() // closing the descriptor drops the flock
}
