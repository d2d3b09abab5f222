// Package sandbox confines every workspace read and write to one directory
// tree and decides which paths a sandbox mode lets the kernel write.
// Finding and redacting secrets is not its job but package secrets'.
//
// It imports the standard library only, so that the transaction engine can
// depend on it without pulling in anything that could itself touch the
// filesystem behind its back.
package sandbox

import "fmt"

// Mode is a sandbox policy as named on the command line
// (`--sandbox read-only|workspace-write|danger-full-access`) and on the wire.
// The zero value is not a valid mode; obtain one from ParseMode or use the
// constants.
type Mode string

// The three sandbox modes, from most to least restrictive.
const (
	// ReadOnly lets the kernel read the workspace but refuses every write,
	// so a transaction can be proposed but never applied.
	ReadOnly Mode = "read-only"
	// WorkspaceWrite allows writes anywhere in the workspace except
	// repository metadata: any path component that git treats as ".git"
	// (".GIT", ".git.", "git~1", ".g\u200cit" and the other NTFS and HFS+
	// synonyms; see Workspace.CheckWritable) is protected.
	WorkspaceWrite Mode = "workspace-write"
	// DangerFullAccess allows writes to every path inside the workspace,
	// .git included. Paths still cannot escape the workspace root.
	DangerFullAccess Mode = "danger-full-access"
)

// ParseMode returns the Mode spelled exactly s ("read-only",
// "workspace-write" or "danger-full-access"). Any other string, including a
// differently cased one, yields a non-nil error and the empty Mode: a typo in
// a security setting must fail loudly rather than fall back to a default.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ReadOnly, WorkspaceWrite, DangerFullAccess:
		return m, nil
	}
	return "", fmt.Errorf("sandbox: unknown mode %q (want %q, %q or %q)", s, ReadOnly, WorkspaceWrite, DangerFullAccess)
}

// AllowsWrite reports whether m permits any write at all. It is false for
// ReadOnly and for any invalid Mode, true for WorkspaceWrite and
// DangerFullAccess. Per-path protection is decided by Workspace.CheckWritable.
func (m Mode) AllowsWrite() bool {
	return m == WorkspaceWrite || m == DangerFullAccess
}

// String returns the wire spelling of m.
func (m Mode) String() string { return string(m) }
