// Package workspace is the engine's first target (DESIGN.md §2, seed 001):
// the files of one workspace directory, changed through the sandbox. It
// plans unified_diff, files and remove_todo_multi proposals, checks each
// file's base sha256 at apply, stages new contents next to their targets,
// and commits by renaming them into place. tx owns everything else.
package workspace

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/secrets"
	"github.com/txkernel/txkernel/tx"
)

// Failpoints of the workspace commit (internal/failpoint).
const (
	fpBetweenRenames = "apply.between-renames"
	fpBeforeDirFsync = "apply.before-dir-fsync"
)

// Target is the workspace-files target. It implements tx.Target and is
// safe for concurrent use.
type Target struct {
	ws      *sandbox.Workspace
	scanner *secrets.Scanner
	fp      *failpoint.Set
	log     *slog.Logger
}

var _ tx.Target = (*Target)(nil)

// New returns the target for ws. fp may be nil; log nil means
// slog.Default().
func New(ws *sandbox.Workspace, fp *failpoint.Set, log *slog.Logger) *Target {
	if log == nil {
		log = slog.Default()
	}
	return &Target{ws: ws, scanner: secrets.NewScanner(), fp: fp, log: log}
}

// Name implements tx.Target: "workspace".
func (w *Target) Name() string { return protocol.TargetWorkspace }

// Kinds implements tx.Target: unified_diff, files and remove_todo_multi.
func (w *Target) Kinds() []string {
	return []string{protocol.KindUnifiedDiff, protocol.KindFiles, protocol.KindRemoveTodoMulti}
}

// Admit implements tx.Target: a read-only sandbox refuses every apply
// (errs.Sandbox, data.reason "read-only").
func (w *Target) Admit(*protocol.ProposalPointer) error {
	if w.ws.Mode() == sandbox.ReadOnly {
		return errs.New(errs.Sandbox, SandboxData{Reason: "read-only", Sandbox: string(sandbox.ReadOnly)},
			"the sandbox is read-only: apply is refused (restart with --sandbox workspace-write to apply)")
	}
	return nil
}

// Approvals implements tx.Target: the patchset approval, and a
// secrets_override when the proposal's added lines hold secrets (seed 001).
func (w *Target) Approvals(p *protocol.ProposalPointer) []approvals.Requirement {
	return approvals.Required(p.PatchID, p.ContainsSecretIntroductions)
}

// LockKeys implements tx.Target: each target path, case-folded
// (sandbox.FoldPath), so names that are one file on a case-insensitive
// file system share a lock.
func (w *Target) LockKeys(p *protocol.ProposalPointer) []string {
	keys := make([]string, len(p.TargetFiles))
	for i, f := range p.TargetFiles {
		keys[i] = sandbox.FoldPath(f)
	}
	return keys
}

// Summary implements tx.Target: "modify 2 files, add 1, delete 1".
func (w *Target) Summary(p *protocol.ProposalPointer) string {
	counts := map[string]int{}
	for _, c := range p.Changes {
		counts[c.Kind]++
	}
	var parts []string
	for _, k := range []string{protocol.ChangeModify, protocol.ChangeAdd, protocol.ChangeDelete} {
		n := counts[k]
		switch {
		case n == 0:
		case len(parts) == 0 && n == 1:
			parts = append(parts, k+" 1 file")
		case len(parts) == 0:
			parts = append(parts, fmt.Sprintf("%s %d files", k, n))
		default:
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return strings.Join(parts, ", ")
}

// SandboxData is the data of an errs.Sandbox error: the path refused, why
// (sandbox.PathError reasons, or "read-only"), the sandbox mode, and the
// params field the path came from when it came from the host.
type SandboxData struct {
	Field   string `json:"field,omitempty"`
	Path    string `json:"path,omitempty"`
	Reason  string `json:"reason"`
	Sandbox string `json:"sandbox"`
}

// PathData is the data of NotFound and Validation errors about one path.
type PathData struct {
	Path         string `json:"path,omitempty"`
	Reason       string `json:"reason,omitempty"` // exists | duplicate | case-collision | unsupported | needle-not-found
	CollidesWith string `json:"collidesWith,omitempty"`
	Needle       string `json:"needle,omitempty"`
}

// classify gives a sandbox.PathError its kind and data; other errors pass
// through unchanged.
func (w *Target) classify(err error) error {
	var pe *sandbox.PathError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	var done *errs.Error
	if errors.As(err, &done) {
		return err
	}
	return errs.Wrap(errs.Sandbox, err, SandboxData{Path: pe.Path, Reason: pe.Reason, Sandbox: string(w.ws.Mode())},
		"sandbox violation: %v", pe)
}
