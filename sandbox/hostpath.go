package sandbox

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// HostPath turns a path as a host sends it into a workspace-relative,
// slash-separated one for CleanPath and the os.Root confinement, which
// still decide whether it may be used. Editors and agent hosts (LSP, MCP
// roots, ACP) send absolute paths and file:// URIs, so three forms are
// accepted:
//   - a workspace-relative path, returned as is;
//   - an absolute path inside the workspace, as the kernel sees the
//     workspace or as it was given on the command line (before its
//     symlinks were evaluated);
//   - a file:// URI (RFC 8089, host empty or "localhost") whose path is
//     inside the workspace.
//
// The workspace root itself becomes ".". An absolute path or URI outside
// the workspace is a *PathError with Reason "outside-workspace" wrapping
// ErrEscape, whose Root names the workspace; a URI of another scheme or
// host, or one that does not parse, has Reason "bad-uri" wrapping
// ErrInvalidPath.
func (w *Workspace) HostPath(p string) (string, error) {
	if strings.HasPrefix(strings.ToLower(p), "file:") {
		u, err := url.Parse(p)
		if err != nil || !strings.EqualFold(u.Scheme, "file") || (u.Host != "" && u.Host != "localhost") || u.Path == "" {
			return "", pathErr(p, "bad-uri", ErrInvalidPath)
		}
		return w.relative(p, u.Path)
	}
	if filepath.IsAbs(p) {
		return w.relative(p, p)
	}
	return p, nil
}

// relative makes abs (from the host's path p) relative to the workspace.
func (w *Workspace) relative(p, abs string) (string, error) {
	abs = filepath.Clean(abs)
	for _, root := range []string{w.dir, w.given} {
		if root == "" {
			continue
		}
		rel, err := filepath.Rel(root, abs)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel), nil
		}
	}
	return "", &PathError{Path: p, Reason: "outside-workspace", Root: w.dir,
		Err: fmt.Errorf("%w: paths must be inside the workspace %s", ErrEscape, w.dir)}
}
