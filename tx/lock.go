package tx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
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
type dirLock struct {
	dir, f *os.File
	key    dirKey
}

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
	var st syscall.Stat_t
	if err := syscall.Fstat(int(d.Fd()), &st); err != nil {
		d.Close()
		return nil, err
	}
	key := dirKey{uint64(st.Dev), uint64(st.Ino)} // Dev is int32 on darwin
	if err := flockSelf(d, path, key); err != nil {
		d.Close()
		return nil, locked(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		d.Close()
		return nil, err
	}
	if err := flockSelf(f, path, key); err != nil {
		f.Close()
		d.Close()
		return nil, locked(err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	heldHere.Store(key, true)
	return &dirLock{dir: d, f: f, key: key}, nil
}

// dirKey names a data dir by device and inode, whatever path reached it.
type dirKey struct{ dev, ino uint64 }

// heldHere holds the dirKey of every data dir a dirLock of this process
// holds.
var heldHere sync.Map

// selfLockWait bounds how long lockDataDir waits for a lock that this
// process's own pid holds but no dirLock of it does.
const selfLockWait = 2 * time.Second

// flockSelf takes the flock of d (the data dir or its kernel.lock). When it is taken and kernel.lock names this
// process, though no dirLock here holds it, the holder is a child of
// this process between fork and exec: it shares every descriptor, the
// flocked ones of a kernel just closed included, until exec closes them
// (O_CLOEXEC). A kernel embedded in a program that runs git (memory's
// ingest does) and reopened at once (a restart in-process, as the tests
// do) was refused then. That holder is gone within milliseconds, so the
// lock is retried for up to selfLockWait; a lock a dirLock of this
// process holds, or another process's, is refused at once.
func flockSelf(d *os.File, path string, key dirKey) error {
	deadline := time.Now().Add(selfLockWait)
	for {
		err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		if _, here := heldHere.Load(key); here {
			return err
		}
		owner, _ := os.ReadFile(path)
		if strings.TrimSpace(string(owner)) != strconv.Itoa(os.Getpid()) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	heldHere.Delete(l.key)
	err := l.f.Close() // closing a descriptor drops its flock
	if derr := l.dir.Close(); err == nil {
		err = derr
	}
	return err
}
