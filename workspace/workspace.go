// Package workspace is the engine's first target (DESIGN.md §2, seed 001):
// the files of one workspace directory, changed through the sandbox. It
// plans unified_diff, files and remove_todo_multi proposals (its own input,
// Input), checks each file's base sha256 at apply, stages new contents next
// to their targets, and commits by renaming them into place. tx owns
// everything else.
package workspace

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/secrets"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/tx/record"
)

// Failpoints of the workspace commit (internal/failpoint).
const (
	fpBetweenRenames = "apply.between-renames"
	fpBeforeDirFsync = "apply.before-dir-fsync"
	// fpBeforeRename: a staged file read and verified through its open
	// descriptor, before the Lstat that compares its name with it and the
	// rename: the window a name swap must be caught in.
	fpBeforeRename = "apply.before-rename"
	// fpRestage: a staged file found missing, damaged or replaced after
	// the commit record, before it is staged again. Its error action
	// turns restaging off, as the power-loss model's negative control
	// needs (RELIABILITY.md §13).
	fpRestage = "apply.restage"
)

// Target is the workspace-files target. It implements tx.Target and is
// safe for concurrent use.
type Target struct {
	ws      *sandbox.Workspace
	scanner *secrets.Scanner
	fp      *failpoint.Set
	log     *slog.Logger
	policy  approvals.Policy
}

var _ tx.Target = (*Target)(nil)

// Option configures a Target.
type Option func(*Target)

// WithPolicy sets the approval policy of the workspace's kinds (the
// kernel's --approval-policy); without it they ask a person
// (approvals.Untrusted, seed 001).
func WithPolicy(p approvals.Policy) Option { return func(w *Target) { w.policy = p } }

// New returns the target for ws. fp may be nil; log nil means
// slog.Default().
func New(ws *sandbox.Workspace, fp *failpoint.Set, log *slog.Logger, opts ...Option) *Target {
	if log == nil {
		log = slog.Default()
	}
	w := &Target{ws: ws, scanner: secrets.NewScanner(), fp: fp, log: log, policy: approvals.Untrusted}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Name implements tx.Target: "workspace".
func (w *Target) Name() string { return protocol.TargetWorkspace }

// Kinds implements tx.Target: unified_diff, files, remove_todo_multi,
// apply_patch and edits, each with Input as its input type, under the
// target's approval policy (WithPolicy).
func (w *Target) Kinds() []tx.Kind {
	return []tx.Kind{
		{Name: protocol.KindUnifiedDiff, DefaultPolicy: w.policy, Input: inputType},
		{Name: protocol.KindFiles, DefaultPolicy: w.policy, Input: inputType},
		{Name: protocol.KindRemoveTodoMulti, DefaultPolicy: w.policy, Input: inputType},
		{Name: protocol.KindApplyPatch, DefaultPolicy: w.policy, Input: inputType},
		{Name: protocol.KindEdits, DefaultPolicy: w.policy, Input: inputType},
	}
}

// inputType is every workspace kind's input type (tx.Kind.Input).
var inputType = reflect.TypeFor[Input]()

// Input is the workspace's proposal input (tx.Input.Body, a *Input): the members of
// turn/start's proposal its kinds read (PROTOCOL.md, turn/start):
//   - unified_diff: Diff (UTF-8 text) or DiffBase64 (any bytes), a git-style
//     multi-file diff with add, delete, modify and rename;
//   - files: Files, each a whole new content or a delete;
//   - remove_todo_multi: Needle and TargetFiles; every line containing
//     Needle is removed from each target (seed 001, checkpoint 10).
type Input struct {
	Diff        *string              `json:"diff,omitempty"`
	DiffBase64  *string              `json:"diffBase64,omitempty"`
	Files       []protocol.FileInput `json:"files,omitempty"`
	Needle      string               `json:"needle,omitempty"`
	TargetFiles []string             `json:"targetFiles,omitempty"`
	// EditFormats: apply_patch's Patch, edits' Edits, and unified_diff's
	// Strip and Recount (edits.go).
	EditFormats
}

// Proposal is in as the engine's envelope for kind, for Go callers (the
// kernel decodes turn/start's proposal object straight into an Input).
func Proposal(kind string, in Input) *tx.Input {
	return &tx.Input{Kind: kind, Body: &in}
}

// planned is a workspace transaction as Load decoded it: its fields are
// pointers.proposal's own (target_files, base_sha256_by_path, changes).
type planned struct {
	w *Target
	p *record.Proposal
}

// Load implements tx.Target. The workspace's plan is pointers.proposal's
// file fields; Load checks that every change names a path and a kind, and
// every write the blob of its new content (errs.LedgerCorrupt otherwise).
func (w *Target) Load(p *record.Proposal) (tx.Planned, error) {
	if len(p.Changes) == 0 {
		return nil, errs.New(errs.LedgerCorrupt, nil, "workspace plan: no changes")
	}
	for i, c := range p.Changes {
		switch {
		case c.Path == "":
			return nil, errs.New(errs.LedgerCorrupt, nil, "workspace plan: change %d has no path", i)
		case c.Kind != protocol.ChangeAdd && c.Kind != protocol.ChangeModify && c.Kind != protocol.ChangeDelete:
			return nil, errs.New(errs.LedgerCorrupt, nil, "workspace plan: change %d (%s) has kind %q", i, c.Path, c.Kind)
		case c.Kind != protocol.ChangeDelete && c.NewSHA256 == "":
			return nil, errs.New(errs.LedgerCorrupt, nil, "workspace plan: change %d (%s) names no new content", i, c.Path)
		}
	}
	return &planned{w: w, p: p}, nil
}

// Admit implements tx.Planned: a read-only sandbox refuses every apply
// (errs.Sandbox, data.reason "read-only").
func (pl *planned) Admit() error {
	if pl.w.ws.Mode() == sandbox.ReadOnly {
		return errs.New(errs.Sandbox, SandboxData{Reason: "read-only", Sandbox: string(sandbox.ReadOnly)},
			"the sandbox is read-only: apply is refused (restart with --sandbox workspace-write to apply)")
	}
	return nil
}

// Approvals implements tx.Planned: the patchset approval, and a
// secrets_override when the proposal's added lines hold secrets (seed 001).
func (pl *planned) Approvals() []approvals.Requirement {
	return approvals.Required(pl.p.PatchID, pl.p.ContainsSecretIntroductions)
}

// LockKeys implements tx.Planned: each target path, case-folded
// (sandbox.FoldPath), so names that are one file on a case-insensitive
// file system share a lock.
func (pl *planned) LockKeys() []string {
	keys := make([]string, len(pl.p.TargetFiles))
	for i, f := range pl.p.TargetFiles {
		keys[i] = sandbox.FoldPath(f)
	}
	return keys
}

// Files implements tx.Planned: target_files, in path order.
func (pl *planned) Files() []string { return pl.p.TargetFiles }

// Summary implements tx.Planned: "modify 2 files, add 1, delete 1".
func (pl *planned) Summary() string {
	counts := map[string]int{}
	for _, c := range pl.p.Changes {
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
	// WorkspaceRoot is set for a path outside the workspace (reason
	// "outside-workspace"): where paths must be.
	WorkspaceRoot string `json:"workspaceRoot,omitempty"`
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
