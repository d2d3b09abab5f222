package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Sentinel errors. Every error this package returns for a refused path is a
// *PathError whose Err wraps exactly one of these, so callers test with
// errors.Is and map each sentinel to one wire error code.
var (
	// ErrEscape: the path would leave the workspace root ("..", or a root
	// escape reported by os.Root). PathError.Reason is "escape".
	ErrEscape = errors.New("path escapes the workspace")
	// ErrInvalidPath: the path is malformed. PathError.Reason is one of
	// "empty", "nul-byte", "absolute", "backslash", "too-long" or
	// "not-sibling".
	ErrInvalidPath = errors.New("invalid workspace path")
	// ErrProtected: the sandbox mode forbids writing this path (".git" in
	// WorkspaceWrite). PathError.Reason is "protected".
	ErrProtected = errors.New("path is protected by the sandbox mode")
	// ErrSymlink: the path itself or one of its parent directories inside
	// the workspace is a symbolic link, or the file changed identity between
	// check and use. PathError.Reason is "symlink".
	ErrSymlink = errors.New("path traverses a symbolic link")
	// ErrReadOnly: the workspace was opened in ReadOnly mode (or an invalid
	// mode) and a write was attempted. PathError.Reason is "read-only".
	ErrReadOnly = errors.New("workspace is read-only")
	// ErrNotRegular: the path names a directory, device, socket or other
	// non-regular file where a regular file is required. PathError.Reason
	// is "not-regular".
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotDirectory: the workspace given to Open is not a directory.
	// PathError.Reason is "not-directory".
	ErrNotDirectory = errors.New("not a directory")
	// ErrHardlink: the regular file has more than one hard link, so its
	// content may also be reachable under a name outside the workspace,
	// which os.Root cannot see. PathError.Reason is "hardlink".
	ErrHardlink = errors.New("file has more than one hard link")
	// ErrSwapped: a staged file is not what the kernel wrote and verified:
	// its bytes or bits read back through the descriptor that wrote them
	// differ (StageFile), or its name no longer names the file a
	// descriptor verified, just before or just after a rename
	// (RenameVerified). PathError.Reason is "swapped".
	ErrSwapped = errors.New("staged file was changed or replaced")
)

// PathError records a path this package refused and why.
//
// Path is the workspace-relative path as given (or the offending prefix of
// it, for symlinked parents). Reason is a short stable machine word, safe to
// put on the wire: "escape", "absolute", "nul-byte", "backslash",
// "too-long", "empty", "not-sibling", "protected", "symlink", "read-only",
// "not-regular", "not-directory" (Open only), "hardlink" or "swapped". Err
// wraps one of the package's sentinel
// errors.
type PathError struct {
	Path   string
	Reason string
	Err    error
	// Root is the workspace root, set when the path was refused for being
	// outside it (Reason "outside-workspace"), so the error can say where
	// paths must be.
	Root string
}

// Error returns "sandbox: <reason> <path>: <err>", with Path quoted because
// it may contain control bytes.
func (e *PathError) Error() string {
	return fmt.Sprintf("sandbox: %s %q: %v", e.Reason, e.Path, e.Err)
}

// Unwrap returns the wrapped sentinel so errors.Is works.
func (e *PathError) Unwrap() error { return e.Err }

func pathErr(p, reason string, sentinel error) error {
	return &PathError{Path: p, Reason: reason, Err: sentinel}
}

// Workspace is a directory tree opened for confined access. Every read and
// write goes through an *os.Root, so no path, however crafted, and no
// symlink, however planted, reaches outside Dir. On top of that it refuses
// symlinks inside the tree altogether (see ReadFile) and enforces the
// sandbox Mode on writes.
//
// A Workspace is safe for concurrent use; callers serialise conflicting
// writes to the same path themselves.
type Workspace struct {
	root  *os.Root
	dir   string
	given string // the absolute path before symlinks were evaluated
	mode  Mode
}

// Open opens dir, which must be an existing directory, as a workspace under
// mode. dir is made absolute and its symlinks are evaluated first, so Dir
// reports the canonical location the kernel actually writes to. It fails for
// an invalid mode, a missing path, or a path that is not a directory; the
// underlying *fs.PathError is wrapped.
func Open(dir string, mode Mode) (*Workspace, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open workspace: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open workspace: %w", err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("sandbox: open workspace: %w", pathErr(resolved, "not-directory", ErrNotDirectory))
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open workspace: %w", err)
	}
	return &Workspace{root: root, dir: resolved, given: abs, mode: mode}, nil
}

// Dir returns the absolute, symlink-free path of the workspace root.
func (w *Workspace) Dir() string { return w.dir }

// FS returns the workspace as a read-only fs.FS confined by os.Root:
// names are slash-separated and relative, and neither ".." nor a symlink
// leads outside the workspace.
func (w *Workspace) FS() fs.FS { return w.root.FS() }

// Mode returns the sandbox mode the workspace was opened with.
func (w *Workspace) Mode() Mode { return w.mode }

// Close releases the root directory handle. Methods called afterwards fail.
func (w *Workspace) Close() error { return w.root.Close() }

// CheckWritable reports whether the sandbox mode allows writing rel, a
// workspace-relative path (validated with CleanPath first, whose errors it
// returns). It returns a *PathError wrapping ErrReadOnly in ReadOnly mode,
// ErrProtected in WorkspaceWrite mode when any component of rel is a name
// git treats as ".git" on NTFS or HFS+ (see isProtectedComponent: so
// ".GIT/config", "sub/.git/HEAD", ".git./x", "git~1/x", ".git::$DATA" and
// ".g\u200cit/x" too), and nil in DangerFullAccess. It does not touch the
// filesystem.
func (w *Workspace) CheckWritable(rel string) error {
	clean, err := CleanPath(rel)
	if err != nil {
		return err
	}
	switch w.mode {
	case DangerFullAccess:
		return nil
	case WorkspaceWrite:
		for _, c := range strings.Split(clean, "/") {
			if isProtectedComponent(c) {
				return pathErr(rel, "protected", ErrProtected)
			}
		}
		return nil
	default: // ReadOnly, and fail closed for anything unexpected.
		return pathErr(rel, "read-only", ErrReadOnly)
	}
}

// walk checks every component of clean, parents first, and refuses a
// symlink anywhere. Checking each component ourselves (rather than relying
// on os.Root, which follows links that stay inside) matters because a
// planted link to a file inside the workspace would make a read hash
// another file and a rename replace the link instead of the file. It
// descends once, each directory opened below its parent (Dirs.open), so
// its cost is linear in the depth of clean.
//
// missing is true when some component does not exist, or a parent is not a
// directory (so the leaf cannot exist either). leaf is the leaf's Lstat
// result when it exists.
func (w *Workspace) walk(clean string) (leaf fs.FileInfo, missing bool, err error) {
	s := w.OpenDirs()
	defer s.Close()
	return s.walk(clean)
}

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// mapErr turns os.Root's escape error, whose sentinel is unexported, into
// ErrEscape; other errors pass through unchanged.
func (w *Workspace) mapErr(rel string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return pathErr(rel, "escape", ErrEscape)
	}
	return err
}

// ReadFile returns the content and permission bits of the regular file rel.
//
// exists is false (with a nil error) when rel, or one of its parent
// directories, is absent. It returns a *PathError wrapping ErrSymlink when
// rel or any parent inside the workspace is a symlink — whether it points
// outside or inside — or when the file was replaced between the check and
// the open; ErrNotRegular for a directory, device, FIFO or socket;
// ErrHardlink when the file's link count (fstat st_nlink) is above 1,
// before any byte is read; ErrEscape if os.Root detects an escape; and
// CleanPath's errors for a malformed rel. mode is the file's fs.FileMode
// (permission and setuid/setgid/sticky bits).
//
// Hard links are refused because os.Root confines names, not inodes: a
// link planted in the workspace to a file outside it would let a proposal
// read (and hash, and show in a diff) outside content. Writes never go
// through such a link, since they replace the name by rename, so only reads
// check; the apply re-reads every base (FileSHA256) and so re-checks. A
// file with two links that are both inside the workspace is refused too:
// the other name cannot be found without scanning the file system.
func (w *Workspace) ReadFile(rel string) (data []byte, mode fs.FileMode, exists bool, err error) {
	d := w.OpenDirs()
	defer d.Close()
	return d.ReadFile(rel)
}

// Exists reports whether rel exists (as any kind of file, directories
// included), by Lstat. A missing parent means false with a nil error. The
// symlink and path rules of ReadFile apply: a symlink at rel or a parent is
// a *PathError wrapping ErrSymlink, not true.
func (w *Workspace) Exists(rel string) (bool, error) {
	clean, err := CleanPath(rel)
	if err != nil {
		return false, err
	}
	_, missing, err := w.walk(clean)
	if err != nil {
		return false, err
	}
	return !missing, nil
}

// checkTarget validates a file a write will replace or create: parents must
// be symlink-free, and the leaf, when present, must be a regular file.
func (w *Workspace) checkTarget(rel, clean string) (exists bool, err error) {
	leaf, missing, err := w.walk(clean)
	if err != nil || missing {
		return false, err
	}
	if !leaf.Mode().IsRegular() {
		return false, pathErr(rel, "not-regular", ErrNotRegular)
	}
	return true, nil
}

// checkPair validates a staged/target pair for StageFile and Rename: both
// writable, and siblings, because rename(2) is only atomic within one
// directory of one filesystem and recovery looks for the staged file next to
// its target.
func (w *Workspace) checkPair(staged, rel string) (cs, cr string, err error) {
	if err := w.CheckWritable(rel); err != nil {
		return "", "", err
	}
	if err := w.CheckWritable(staged); err != nil {
		return "", "", err
	}
	cr, _ = CleanPath(rel)
	cs, _ = CleanPath(staged)
	if cs == cr || path.Dir(cs) != path.Dir(cr) {
		return "", "", pathErr(staged, "not-sibling", ErrInvalidPath)
	}
	return cs, cr, nil
}

// FileSHA256 returns the lowercase hex SHA-256 of rel's content, with the
// semantics and errors of ReadFile (exists=false and "" for an absent file).
func (w *Workspace) FileSHA256(rel string) (hexSum string, exists bool, err error) {
	d := w.OpenDirs()
	defer d.Close()
	return d.FileSHA256(rel)
}

// StagedName returns the temporary sibling path that transaction txID uses
// to stage the new content of rel: "dir/.base.txk-<txID>.tmp" (no "dir/"
// for a top-level file). rel should already be clean (see CleanPath) and
// txID should consist of ASCII letters, digits and dashes; any other byte in
// txID is replaced by '_'.
//
// The name is a pure function of (rel, txID): crash recovery relies on that
// to find and delete the temp files of a prepared-but-uncommitted
// transaction, and to finish the renames of a committed one, without having
// recorded the names anywhere. A base name too long for the result to fit
// in 255 bytes is shortened to a prefix plus a hash of the full base name,
// which stays deterministic and keeps two long names in one directory from
// colliding.
func StagedName(rel, txID string) string {
	id := []byte(txID)
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			id[i] = '_'
		}
	}
	dir, base := path.Split(rel)
	suffix := ".txk-" + string(id) + ".tmp"
	if 1+len(base)+len(suffix) > maxComponentLen {
		sum := sha256.Sum256([]byte(base))
		h := "~" + hex.EncodeToString(sum[:8])
		keep := maxComponentLen - 1 - len(suffix) - len(h)
		keep = max(keep, 0)
		base = base[:min(keep, len(base))] + h
	}
	return dir + "." + base + suffix
}
