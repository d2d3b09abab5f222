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

// lockFile is the data dir's lock file. It holds the owner's pid.
const lockFile = "kernel.lock"

// ErrDataDirLocked is returned (wrapped) by Open when another kernel owns the
// data dir.
var ErrDataDirLocked = errors.New("data dir is in use by another txkernel")

// dirLock is an exclusive flock(2) on the data dir itself and on
// <data-dir>/kernel.lock. The kernel holds both for its whole life; the OS
// drops them when the process dies, even by kill -9, so a crash never
// leaves a stale lock behind.
//
// The directory's lock is the one that cannot be deleted away: a lock on
// kernel.lock alone is a lock on one inode, and once someone deletes the
// file (a clean-up script, rm -rf of "stale" files) a second kernel creates
// a new kernel.lock, locks that, and two kernels share one data dir. The
// directory cannot be replaced under a running kernel without moving the
// kernel's files with it. kernel.lock is still locked, and holds the
// owner's pid for the refusal message, so that a kernel from before the
// directory lock is refused too, and refuses this one.
type dirLock struct{ dir, f *os.File }

func lockDataDir(dataDir string) (*dirLock, error) {
	d, err := os.Open(dataDir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dataDir, lockFile)
	locked := func(err error) error {
		owner, _ := os.ReadFile(path)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s (owner pid %s)", ErrDataDirLocked, dataDir, strings.TrimSpace(string(owner)))
		}
		return fmt.Errorf("lock %s: %w", dataDir, err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		return nil, locked(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		d.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		d.Close()
		return nil, locked(err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{dir: d, f: f}, nil
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing a descriptor drops its flock
	if derr := l.dir.Close(); err == nil {
		err = derr
	}
	return err
}
