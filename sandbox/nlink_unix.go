//go:build unix

package sandbox

import (
	"io/fs"
	"os"
	"syscall"
)

// linkCount returns the number of hard links of the open file f, whose
// fstat result is fi: st_nlink from stat(2). It never fails on Unix; a
// FileInfo without a *syscall.Stat_t (which os never returns here) counts
// as one link.
func linkCount(_ *os.File, fi fs.FileInfo) (uint64, error) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink), nil
	}
	return 1, nil
}
