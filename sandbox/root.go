package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
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
	// non-regular file where a regular file is required (or a non-directory
	// where a directory is required). PathError.Reason is "not-regular".
	ErrNotRegular = errors.New("not a regular file")
	// ErrHardlink: the regular file has more than one hard link, so its
	// content may also be reachable under a name outside the workspace,
	// which os.Root cannot see. PathError.Reason is "hardlink".
	ErrHardlink = errors.New("file has more than one hard link")
)

// PathError records a path this package refused and why.
//
// Path is the workspace-relative path as given (or the offending prefix of
// it, for symlinked parents). Reason is a short stable machine word, safe to
// put on the wire: "escape", "absolute", "nul-byte", "backslash",
// "too-long", "empty", "not-sibling", "protected", "symlink", "read-only",
// "not-regular" or "hardlink". Err wraps one of the package's sentinel
// errors.
type PathError struct {
	Path   string
	Reason string
	Err    error
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

// Limits taken from Linux PATH_MAX and NAME_MAX; a path beyond them cannot be
// created on common filesystems, so accepting it would only defer the error
// to the middle of an apply.
const (
	maxPathLen      = 4096
	maxComponentLen = 255
)

// CleanPath validates p, a workspace-relative path received from a host or
// parsed out of a diff, and returns its slash-separated path.Clean form
// (e.g. "a//b/./c" -> "a/b/c").
//
// It returns a *PathError wrapping ErrInvalidPath when p is empty or "."
// after cleaning (reason "empty": the workspace root is never a file
// target), contains a NUL byte ("nul-byte"), is absolute — leading "/" or
// "\", or a Windows drive prefix such as "C:" ("absolute") — contains a
// backslash ("backslash", since on Windows it is a separator and on Unix it
// makes names that differ per platform), or is longer than 4096 bytes or
// has a component longer than 255 bytes ("too-long"). Any ".." component is
// refused with ErrEscape ("escape"), even one that would stay inside after
// cleaning: diffs never need it, and refusing it outright leaves no room
// for a cleaning bug.
func CleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", pathErr(p, "empty", ErrInvalidPath)
	case strings.IndexByte(p, 0) >= 0:
		return "", pathErr(p, "nul-byte", ErrInvalidPath)
	case len(p) > maxPathLen:
		return "", pathErr(p, "too-long", ErrInvalidPath)
	case p[0] == '/' || p[0] == '\\' || hasDrivePrefix(p):
		return "", pathErr(p, "absolute", ErrInvalidPath)
	case strings.IndexByte(p, '\\') >= 0:
		return "", pathErr(p, "backslash", ErrInvalidPath)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", pathErr(p, "escape", ErrEscape)
		}
		if len(c) > maxComponentLen {
			return "", pathErr(p, "too-long", ErrInvalidPath)
		}
	}
	c := path.Clean(p)
	if c == "." {
		return "", pathErr(p, "empty", ErrInvalidPath)
	}
	// "./C:/x" only becomes a drive path once cleaned.
	if hasDrivePrefix(c) {
		return "", pathErr(p, "absolute", ErrInvalidPath)
	}
	return c, nil
}

// hasDrivePrefix reports a Windows drive prefix ("C:", "c:foo"). On Unix
// "c:foo" is a legal name, but the same diff applied on Windows would write
// relative to another drive's current directory, so it is refused everywhere.
func hasDrivePrefix(p string) bool {
	if len(p) < 2 || p[1] != ':' {
		return false
	}
	c := p[0] | 0x20
	return c >= 'a' && c <= 'z'
}

// isProtectedComponent reports whether one path component names ".git" on
// some file system, following git's is_ntfs_dotgit (path.c) and
// is_hfs_dotgit (utf8.c), which git uses to refuse such tree entries since
// CVE-2014-9390. After removing the code points HFS+ ignores (see
// hfsIgnorable), the component must equal ".git" or its NTFS 8.3 short name
// "git~1", compared ASCII-case-insensitively, followed only by dots and
// spaces (which Win32 strips) and optionally a ':' that starts an NTFS
// alternate data stream (".git::$INDEX_ALLOCATION" opens the directory).
// Git applies the NTFS and HFS+ rules separately; applying both at once
// refuses a little more, never less. On Linux these names are ordinary,
// but a workspace may be shared with, or copied to, Windows and macOS.
func isProtectedComponent(c string) bool {
	c = stripHFSIgnorable(c)
	if i := strings.IndexByte(c, ':'); i >= 0 {
		c = c[:i]
	}
	c = strings.TrimRight(c, ". ")
	return asciiEqualFold(c, ".git") || asciiEqualFold(c, "git~1")
}

// asciiEqualFold compares ASCII letters case-insensitively and every other
// byte exactly, as git does (so ".\u0147it" is not ".git").
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hfsIgnorable reports the code points that HFS+ drops when it compares
// names, so ".g\u200cit" opens ".git" on macOS: the zero-width joiners and
// direction marks U+200C..U+200F, the embeddings and overrides
// U+202A..U+202E, the deprecated format characters U+206A..U+206F, and the
// byte order mark U+FEFF. The list is git's (next_hfs_char in utf8.c).
func hfsIgnorable(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}

// stripHFSIgnorable removes hfsIgnorable code points from s. Invalid UTF-8
// is kept byte for byte.
func stripHFSIgnorable(s string) string {
	if !strings.ContainsFunc(s, hfsIgnorable) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !hfsIgnorable(r) {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// FoldPath returns the key under which a case-insensitive file system
// (NTFS, and APFS and HFS+ as macOS formats them by default) compares
// clean, a path already validated by CleanPath: two paths with the same
// FoldPath can name one file there. Each component is folded by Unicode
// simple case folding (every rune becomes the smallest rune of its
// unicode.SimpleFold orbit, so "A.txt" and "a.txt" fold alike, as do the
// Kelvin sign U+212A and "k"), loses the HFS+ ignorable code points (see
// hfsIgnorable) and its trailing dots and spaces (which Win32 strips).
// Invalid UTF-8 is kept byte for byte. Unicode normalization (NFC against
// NFD, which APFS and HFS+ also ignore) is not applied: the standard
// library has no normalizer. The result is a comparison key, not a path to
// open.
func FoldPath(clean string) string {
	comps := strings.Split(clean, "/")
	for i, c := range comps {
		c = strings.TrimRight(stripHFSIgnorable(c), ". ")
		var b strings.Builder
		for j := 0; j < len(c); {
			r, n := utf8.DecodeRuneInString(c[j:])
			if r == utf8.RuneError && n <= 1 {
				b.WriteString(c[j : j+n])
			} else {
				b.WriteRune(foldRune(r))
			}
			j += n
		}
		comps[i] = b.String()
	}
	return strings.Join(comps, "/")
}

// foldRune returns the smallest rune that unicode.SimpleFold maps r to.
func foldRune(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
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
	root *os.Root
	dir  string
	mode Mode
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
		return nil, fmt.Errorf("sandbox: open workspace: %w", pathErr(resolved, "not-regular", ErrNotRegular))
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open workspace: %w", err)
	}
	return &Workspace{root: root, dir: resolved, mode: mode}, nil
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

// walk Lstats every component of clean, parents first, and refuses a
// symlink anywhere. Checking each component ourselves (rather than relying
// on os.Root, which follows links that stay inside) matters because a
// planted link to a file inside the workspace would make a read hash
// another file and a rename replace the link instead of the file.
//
// missing is true when some component does not exist, or a parent is not a
// directory (so the leaf cannot exist either). leaf is the leaf's Lstat
// result when it exists.
func (w *Workspace) walk(clean string) (leaf fs.FileInfo, missing bool, err error) {
	comps := strings.Split(clean, "/")
	for i := range comps {
		p := strings.Join(comps[:i+1], "/")
		fi, err := w.root.Lstat(p)
		if err != nil {
			if isNotExist(err) {
				return nil, true, nil
			}
			return nil, false, w.mapErr(p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, false, pathErr(p, "symlink", ErrSymlink)
		}
		if i < len(comps)-1 && !fi.IsDir() {
			return nil, true, nil
		}
		leaf = fi
	}
	return leaf, false, nil
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
	clean, err := CleanPath(rel)
	if err != nil {
		return nil, 0, false, err
	}
	leaf, missing, err := w.walk(clean)
	if err != nil || missing {
		return nil, 0, false, err
	}
	if !leaf.Mode().IsRegular() {
		return nil, 0, false, pathErr(rel, "not-regular", ErrNotRegular)
	}
	f, err := w.root.Open(clean)
	if err != nil {
		if isNotExist(err) {
			return nil, 0, false, nil
		}
		return nil, 0, false, w.mapErr(rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, false, err
	}
	// The Lstat above and the open are two steps; if the name was swapped
	// for a link (or anything else) in between, refuse rather than read it.
	if !os.SameFile(leaf, fi) {
		return nil, 0, false, pathErr(rel, "symlink", ErrSymlink)
	}
	// Checked on the open descriptor, so a link made after the walk counts.
	if n, err := linkCount(f, fi); err != nil {
		return nil, 0, false, err
	} else if n > 1 {
		return nil, 0, false, pathErr(rel, "hardlink", ErrHardlink)
	}
	data, err = io.ReadAll(f)
	if err != nil {
		return nil, 0, false, err
	}
	return data, fi.Mode(), true, nil
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

// StageFile writes data to staged, a temporary sibling of rel (normally
// StagedName(rel, txID)), so that a later Rename(staged, rel) replaces rel
// atomically. It is step 2 of the apply protocol: the data is durable when
// StageFile returns nil.
//
// It checks CheckWritable for both paths, that they share a parent
// directory (*PathError wrapping ErrInvalidPath, reason "not-sibling"),
// that no parent is a symlink (ErrSymlink) and that rel, if present, is a
// regular file that is not a symlink (ErrNotRegular / ErrSymlink). It then
// creates rel's missing parent directories with mode 0o755 (before umask),
// creates staged with O_CREATE|O_EXCL — removing a leftover from an earlier
// crashed attempt and retrying once — writes data, sets the permission bits
// to perm.Perm() with fchmod so the umask cannot alter them, fsyncs and
// closes it. On failure after creation the staged file is removed
// (best-effort) and the first error returned.
func (w *Workspace) StageFile(rel, staged string, data []byte, perm fs.FileMode) error {
	cs, cr, err := w.checkPair(staged, rel)
	if err != nil {
		return err
	}
	if _, err := w.checkTarget(rel, cr); err != nil {
		return err
	}
	if dir := path.Dir(cr); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return w.mapErr(dir, err)
		}
		// MkdirAll follows in-root links; re-check that it did not have to.
		if _, err := w.checkTarget(rel, cr); err != nil {
			return err
		}
	}
	if leaf, missing, err := w.walk(cs); err != nil {
		return err
	} else if !missing && leaf.IsDir() {
		return pathErr(staged, "not-regular", ErrNotRegular)
	}

	const flags = os.O_CREATE | os.O_EXCL | os.O_WRONLY
	f, err := w.root.OpenFile(cs, flags, perm.Perm())
	if errors.Is(err, fs.ErrExist) {
		// A crashed earlier attempt of the same transaction left it; the
		// name is ours by construction, so it is safe to discard.
		if rerr := w.root.Remove(cs); rerr != nil && !isNotExist(rerr) {
			return w.mapErr(staged, rerr)
		}
		f, err = w.root.OpenFile(cs, flags, perm.Perm())
	}
	if err != nil {
		return w.mapErr(staged, err)
	}
	if err := writeSync(f, data, perm.Perm()); err != nil {
		_ = w.root.Remove(cs)
		return fmt.Errorf("sandbox: stage %q: %w", staged, err)
	}
	return nil
}

// writeSync writes, chmods, fsyncs and closes f, always closing it.
func writeSync(f *os.File, data []byte, perm fs.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Rename moves staged over rel within the workspace (step 4 of the apply
// protocol). The same checks as StageFile apply to both paths; staged must
// be a regular file. When staged is absent the returned error satisfies
// errors.Is(err, fs.ErrNotExist), which recovery uses to tell an
// already-finished rename from a real failure. The parent directory is not
// fsynced; call SyncDir.
func (w *Workspace) Rename(staged, rel string) error {
	cs, cr, err := w.checkPair(staged, rel)
	if err != nil {
		return err
	}
	if _, err := w.checkTarget(rel, cr); err != nil {
		return err
	}
	exists, err := w.checkTarget(staged, cs)
	if err != nil {
		return err
	}
	if !exists {
		return &fs.PathError{Op: "rename", Path: staged, Err: fs.ErrNotExist}
	}
	return w.mapErr(rel, w.root.Rename(cs, cr))
}

// Remove deletes the regular file rel. A missing rel (or parent) is not an
// error, so roll-forward can repeat it. It checks CheckWritable and refuses
// symlinks at rel or a parent (ErrSymlink) and directories (ErrNotRegular):
// a transaction only ever deletes files it has read and hashed.
func (w *Workspace) Remove(rel string) error {
	if err := w.CheckWritable(rel); err != nil {
		return err
	}
	clean, _ := CleanPath(rel)
	exists, err := w.checkTarget(rel, clean)
	if err != nil || !exists {
		return err
	}
	if err := w.root.Remove(clean); err != nil && !isNotExist(err) {
		return w.mapErr(rel, err)
	}
	return nil
}

// SyncDir fsyncs the directory relDir ("." or "" for the workspace root) so
// that renames and removals in it survive a crash. It refuses symlinks in
// the path (ErrSymlink) and non-directories (ErrNotRegular); an fsync error
// is returned as is, and callers must treat it as fatal rather than retry.
func (w *Workspace) SyncDir(relDir string) error {
	clean := "."
	if relDir != "" && relDir != "." {
		var err error
		if clean, err = CleanPath(relDir); err != nil {
			return err
		}
		leaf, missing, err := w.walk(clean)
		if err != nil {
			return err
		}
		if missing {
			return &fs.PathError{Op: "syncdir", Path: relDir, Err: fs.ErrNotExist}
		}
		if !leaf.IsDir() {
			return pathErr(relDir, "not-regular", ErrNotRegular)
		}
	}
	d, err := w.root.Open(clean)
	if err != nil {
		return w.mapErr(relDir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// FileSHA256 returns the lowercase hex SHA-256 of rel's content, with the
// semantics and errors of ReadFile (exists=false and "" for an absent file).
func (w *Workspace) FileSHA256(rel string) (hexSum string, exists bool, err error) {
	data, _, exists, err := w.ReadFile(rel)
	if err != nil || !exists {
		return "", exists, err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), true, nil
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
