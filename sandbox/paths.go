package sandbox

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

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
