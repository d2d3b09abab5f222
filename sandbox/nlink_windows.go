//go:build windows

package sandbox

import (
	"io/fs"
	"os"
	"syscall"
)

// linkCount returns the number of hard links of the open file f: the
// NumberOfLinks of GetFileInformationByHandle, since os.File.Stat on
// Windows does not report it. Its error is returned as is.
func linkCount(f *os.File, _ fs.FileInfo) (uint64, error) {
	var d syscall.ByHandleFileInformation
	if err := syscall.GetFileInformationByHandle(syscall.Handle(f.Fd()), &d); err != nil {
		return 0, &fs.PathError{Op: "GetFileInformationByHandle", Path: f.Name(), Err: err}
	}
	return uint64(d.NumberOfLinks), nil
}
