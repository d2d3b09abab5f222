//go:build !unix && !windows

package sandbox

import (
	"io/fs"
	"os"
)

// linkCount reports one link: on these platforms (plan9, js, wasip1) the
// standard library exposes no link count, so hard links go undetected.
func linkCount(_ *os.File, _ fs.FileInfo) (uint64, error) { return 1, nil }
