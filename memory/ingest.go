package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

// DefaultGlob is memory/ingest's default glob (seed 002's ingest loop; PROTOCOL.md §13).
const DefaultGlob = "backlog/**/*.md"

// fpAfterIngestBatch is hit after each batch of an ingest is committed.
const fpAfterIngestBatch = "memory.after-ingest-batch"

// ingestBatch is how many files one SQL transaction of ingest writes, and
// how often progress is reported.
const ingestBatch = 64

// Ingest answers memory/ingest (seed 002's ingest loop; PROTOCOL.md §13): the markdown files Glob
// matches under Path (a workspace directory) become
// ameide:ingest.backlog_md elements, one per file, whose versions carry
// source_kind INGESTED_EVIDENCE and provenance {source_repo, commit_sha,
// path}. commit_sha is the work tree's HEAD, or null when Path is not in a
// git work tree. An unchanged file makes no version. Binary, non-UTF-8 and
// oversized files are skipped and reported. A changed file whose element's
// current version is curated never replaces it (seed 002's ingest loop: ingested
// sources are not canonical truth): the store records the evidence
// version without making it current and opens a proposal for a curator
// (result.review); it is not published. What ingest created is then
// published: a promote transaction by the ingesting principal builds a
// baseline holding it and moves the pointer. The session's $/progress
// (protocol.SessionOf) gets values under p.WorkDoneToken, which the result
// echoes.
func (s *Service) Ingest(ctx context.Context, p *protocol.IngestParams) (*protocol.IngestResult, error) {
	scope, pr, err := s.authorize(p.MemoryRequest, protocol.ActionIngest)
	if err != nil {
		return nil, err
	}
	// Ingest publishes what it writes, an apply: a read-only kernel
	// refuses it before any evidence is written (tx.Engine.CheckWritable).
	if err := s.cfg.Engine.CheckWritable(); err != nil {
		return nil, err
	}
	token, progress := protocol.SessionOf(ctx).BeginProgress(p.WorkDoneToken, protocol.MethodMemoryIngest)
	dir, err := s.cleanDir(p.Path)
	if err != nil {
		return nil, err
	}
	glob := p.Glob
	if glob == "" {
		glob = DefaultGlob
	}
	if err := checkGlob(glob); err != nil {
		return nil, err
	}
	fsys := s.cfg.Workspace.FS()
	if dir != "." {
		if fsys, err = fs.Sub(fsys, dir); err != nil {
			return nil, errs.Wrap(errs.Internal, err, nil, "ingest %s", dir)
		}
	}
	matches, err := doublestar.Glob(fsys, glob, doublestar.WithFilesOnly(), doublestar.WithNoFollow())
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, errs.InvalidData{Field: "glob", Reason: "bad-pattern"}, "glob %q", glob)
	}
	abs := filepath.Join(s.cfg.Workspace.Dir(), filepath.FromSlash(dir))
	repo := gitInfo(ctx, abs)
	out := &protocol.IngestResult{Scope: scope, SourceRepo: repo.sourceRepo, CommitSHA: repo.commit, Files: len(matches), Skipped: []protocol.IngestSkip{}, WorkDoneToken: token}
	var notes []string
	if len(matches) == 0 {
		// Nothing to ingest is an answer a host must be able to tell
		// from "nothing changed": say which glob matched nothing where.
		notes = append(notes, fmt.Sprintf("glob %s matched no file under %s", glob, dir))
	}
	if repo.commit == nil {
		notes = append(notes, dir+" is not in a git work tree: commit_sha is null")
		out.SourceRepo = dir
	}
	out.Note = strings.Join(notes, "; ")
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	progress(protocol.ProgressValue{Kind: "begin", Title: "memory/ingest " + path.Join(dir, glob), Percentage: pct(0)})
	var publish []string
	batch := make([]IngestFile, 0, ingestBatch)
	flush := func(done int) error {
		if len(batch) == 0 {
			return nil
		}
		var res []IngestOutcome
		err := waitClaimed(ctx, func() (err error) {
			res, err = db.Ingest(ctx, scope, batch)
			return err
		})
		if err != nil {
			return partialIngest(err, out.Created+out.NewVersions+out.ForReview)
		}
		for _, r := range res {
			switch r.Status {
			case IngestCreated:
				out.Created++
			case IngestNewVersion:
				out.NewVersions++
			case IngestSkipped:
				// The store could not hold this file (a PostgreSQL limit
				// kernel.db does not have): skipped, named and why, never
				// failing the ingest.
				s.log.Warn("memory/ingest: file skipped", "path", r.ElementID, "reason", r.Reason)
				out.Skipped = append(out.Skipped, protocol.IngestSkip{Path: r.ElementID, Reason: r.Reason})
				continue
			case IngestForReview:
				// Curated truth stays published: the evidence waits for
				// a curator's accept (of r.ProposalID) or reject.
				out.ForReview++
				out.Review = append(out.Review, protocol.IngestReview{ElementID: r.ElementID, VersionID: r.VersionID, ProposalID: r.ProposalID})
				continue
			default:
				out.Unchanged++
			}
			// Unchanged files are offered too: an ingest cut off before
			// it published is published by the next one, and the
			// promote leaves out what is published already.
			publish = append(publish, r.VersionID)
		}
		batch = batch[:0]
		if err := s.cfg.Failpoints.Hit(ctx, fpAfterIngestBatch); err != nil {
			return err
		}
		progress(protocol.ProgressValue{Kind: "report", Message: itoa(done) + "/" + itoa(len(matches)) + " files", Percentage: pct(done * 100 / max(1, len(matches)))})
		return nil
	}
	for i, m := range matches {
		if err := ctx.Err(); err != nil {
			return nil, errs.Wrap(errs.Cancelled, err, nil, "")
		}
		rel := path.Join(dir, m)
		f, skip := s.readIngest(rel, m, repo)
		if skip != nil {
			out.Skipped = append(out.Skipped, *skip)
			continue
		}
		f.Review = s.reviewProposal(scope, pr, f)
		batch = append(batch, *f)
		if len(batch) == ingestBatch {
			if err := flush(i + 1); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(len(matches)); err != nil {
		return nil, err
	}
	if len(publish) > 0 {
		res, err := s.publishIngest(ctx, scope, pr, publish)
		switch {
		case err == nil:
			out.BaselineID, out.TransactionID = res.BaselineID, res.TransactionID
		case errs.KindIs(err, errs.Validation):
			// Everything ingested is published already.
		default:
			return nil, err
		}
	}
	// Unchanged versions are offered too, so that vectors missed by an
	// earlier ingest (the embedder was down) are made now.
	n, err := s.embedVersions(ctx, scope, publish)
	out.Embedded = n
	if err != nil {
		s.log.Warn("memory/ingest: embedding failed; the evidence is searchable by keyword", "err", err)
		out.EmbedError = err.Error()
	}
	progress(protocol.ProgressValue{Kind: "end", Message: itoa(out.Created) + " created, " + itoa(out.NewVersions) + " new versions, " + itoa(out.Unchanged) + " unchanged"})
	return out, nil
}

func pct(n int) *int { return &n }

// partialIngest is the error of an ingest whose batch failed after
// written versions were committed by earlier batches: an outage
// (errs.Unavailable) says how many (UnavailableData.Written), and that
// they are kept and not yet published, so the answer never says nothing
// was written when something was. Sending the ingest again finishes it:
// what was written is unchanged the second time and is published then.
func partialIngest(err error, written int) error {
	kind, data := errs.KindOf(err)
	d, ok := data.(errs.UnavailableData)
	if kind != errs.Unavailable || !ok || written == 0 {
		return err
	}
	d.Written = written
	return errs.Wrap(errs.Unavailable, err, d,
		"%v; %d version(s) of this ingest were written before the outage and are kept, not yet published: send the ingest again to finish and publish it", err, written)
}

// cleanDir checks that p names a directory inside the workspace ("." is
// the workspace itself; an absolute path or file:// URI inside it is made
// relative, see sandbox.Workspace.HostPath) and returns its clean slash
// form.
func (s *Service) cleanDir(p string) (string, error) {
	if p == "" {
		return "", errs.InvalidField("path", "path is required: a workspace directory (\".\" for the workspace)")
	}
	p, err := s.cfg.Workspace.HostPath(p)
	if err != nil {
		return "", sandboxError("path", s.cfg.Workspace, err)
	}
	clean := "."
	if p != "." {
		c, err := sandbox.CleanPath(p)
		if err != nil {
			return "", sandboxError("path", s.cfg.Workspace, err)
		}
		clean = c
		ok, err := s.cfg.Workspace.Exists(clean)
		if err != nil {
			return "", sandboxError("path", s.cfg.Workspace, err)
		}
		if !ok {
			return "", errs.New(errs.NotFound, map[string]any{"field": "path", "path": clean}, "%s does not exist in the workspace", clean)
		}
	}
	fi, err := fs.Stat(s.cfg.Workspace.FS(), clean)
	if err != nil || !fi.IsDir() {
		return "", errs.New(errs.Invalid, errs.InvalidData{Field: "path", Path: clean, Reason: "not-a-directory"}, "%s is not a directory", clean)
	}
	return clean, nil
}

// checkGlob refuses a glob that could name something outside Path: an
// absolute one or one with a ".." element (errs.Sandbox), and a malformed
// one (errs.Invalid).
func checkGlob(g string) error {
	if strings.HasPrefix(g, "/") || strings.HasPrefix(g, `\`) || filepath.IsAbs(g) || slices.Contains(strings.Split(g, "/"), "..") {
		return errs.New(errs.Sandbox, map[string]any{"field": "glob", "glob": g, "reason": "escape"},
			"glob %q escapes the ingest path: use a relative pattern without \"..\"", g)
	}
	if !doublestar.ValidatePattern(g) {
		return errs.New(errs.Invalid, errs.InvalidData{Field: "glob", Reason: "bad-pattern"}, "glob %q is not a valid pattern", g)
	}
	return nil
}

// sandboxError gives a sandbox.PathError the kind errs.Sandbox and the
// data {field, path, reason, sandbox}; other errors pass through.
func sandboxError(field string, ws *sandbox.Workspace, err error) error {
	var pe *sandbox.PathError
	if !errors.As(err, &pe) {
		return err
	}
	data := map[string]any{"field": field, "path": pe.Path, "reason": pe.Reason, "sandbox": string(ws.Mode())}
	if pe.Root != "" {
		data["workspaceRoot"] = pe.Root
	}
	return errs.Wrap(errs.Sandbox, err, data, "sandbox violation: %v", pe)
}

// readIngest reads one matched file (rel in the workspace, m under the
// ingest path) as an ingest record, or says why it is skipped.
func (s *Service) readIngest(rel, m string, repo gitRepo) (*IngestFile, *protocol.IngestSkip) {
	data, _, exists, err := s.cfg.Workspace.ReadFile(rel)
	if err != nil || !exists {
		reason := "unreadable"
		var pe *sandbox.PathError
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		return nil, &protocol.IngestSkip{Path: m, Reason: reason}
	}
	if len(data) > MaxBodyBytes {
		return nil, &protocol.IngestSkip{Path: m, Reason: "too-large"}
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, &protocol.IngestSkip{Path: m, Reason: "binary", Offset: &i}
	}
	if !utf8.Valid(data) {
		off := invalidOffset(data)
		return nil, &protocol.IngestSkip{Path: m, Reason: "not-utf8", Offset: &off}
	}
	body := string(data)
	title := titleOf(body, m)
	provPath := m
	if repo.top != "" {
		abs := filepath.Join(s.cfg.Workspace.Dir(), filepath.FromSlash(rel))
		if r, err := filepath.Rel(repo.top, abs); err == nil {
			provPath = filepath.ToSlash(r)
		}
	}
	prov, _ := json.Marshal(map[string]any{"source_repo": repo.sourceRepo, "commit_sha": repo.commit, "path": provPath})
	return &IngestFile{ElementID: m, Version: NewVersion{
		VersionID: newID("ver_"), Title: title, Body: body, BodyHash: HashBody(body),
		SourceKind: protocol.SourceIngestedEvidence, Provenance: prov, Chunks: Chunks(title, body),
	}}, nil
}

// reviewProposal is the proposal the store opens when f's element holds
// curated truth (IngestForReview): f's body as a full replacement,
// proposed by the ingesting principal (so separation of duties applies:
// another curator decides), with provenance naming memory/ingest.
func (s *Service) reviewProposal(scope protocol.MemoryScope, pr protocol.MemoryPrincipal, f *IngestFile) NewProposal {
	return s.newProposal(scope, pr, f.ElementID, "", "re-ingested evidence for review: "+f.ElementID, f.Version.Body,
		protocol.ProposalProvenance{ActorType: "ingest", ActorID: pr.PrincipalID, ToolID: protocol.MethodMemoryIngest})
}

func invalidOffset(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// titleOf is a document's first ATX H1, or its file name.
func titleOf(body, name string) string {
	for line := range strings.Lines(body) {
		if t, ok := strings.CutPrefix(line, "# "); ok {
			if t = strings.TrimSpace(t); t != "" {
				return t
			}
		}
	}
	return path.Base(name)
}

// gitRepo is what ingest records of the work tree it reads.
type gitRepo struct {
	top        string  // the work tree's root, absolute; "" when not in one
	sourceRepo string  // remote.origin.url, or the work tree's directory name
	commit     *string // HEAD; nil when not in a work tree or without commits
}

// gitInfo asks git about the work tree holding dir.
func gitInfo(ctx context.Context, dir string) gitRepo {
	run := func(args ...string) (string, bool) {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	top, ok := run("rev-parse", "--show-toplevel")
	if !ok || top == "" {
		return gitRepo{}
	}
	head, ok := run("rev-parse", "--verify", "HEAD")
	if !ok {
		return gitRepo{}
	}
	src, ok := run("config", "--get", "remote.origin.url")
	if !ok || src == "" {
		src = filepath.Base(top)
	}
	return gitRepo{top: top, sourceRepo: src, commit: &head}
}

// publishAttempts bounds how often an ingest plans its publish again
// after another kernel moved the published pointer first.
const publishAttempts = 3

// publishIngest publishes what an ingest wrote: a promote by the
// ingesting principal. Kernels sharing a memory (--memory-store
// postgres://…) may move the published pointer between this promote's
// plan and its commit; the promote is then stale, and is planned again
// on the new pointer, up to publishAttempts times in all. An ingest's
// publish is the kernel's own step, not a curator's decision about one
// baseline, so it follows the pointer where an explicit memory/promote
// reports the stale pointer to its caller. What the other kernel
// published already is left out of the next plan (errs.Validation when
// nothing is left).
func (s *Service) publishIngest(ctx context.Context, scope protocol.MemoryScope, pr protocol.MemoryPrincipal, versions []string) (*protocol.PromoteResult, error) {
	var err error
	for range publishAttempts {
		var res *protocol.PromoteResult
		if res, err = s.promote(ctx, scope, pr, versions, "ingest"); !errs.KindIs(err, errs.Stale) {
			return res, err
		}
		s.log.Debug("memory/ingest: the published pointer moved under the publish; planning it again", "err", err)
	}
	return nil, err
}
