package document

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/jsondoc"
	"github.com/txkernel/txkernel/jsondoc/recipe"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/tx/record"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// dryRunResult is a patch run on a copy of a document (seed 000's
// dry-run on an isolated copy: docs/DESIGN.md §7, PROTOCOL.md §11).
type dryRunResult struct {
	before, after any
	content       []byte // after, compact JSON
	baseSHA256    string // the hex sha256 of the document content it ran on
	contentSHA256 string // content's
	ops           []jsondoc.Operation
	env           *jsondoc.Envelope // json_patch
	patchSet      *recipe.PatchSet  // recipe_patchset
	impacted      *recipe.Impacted  // recipe_patchset, counted here
	recipe        *recipe.Recipe    // recipe_patchset, the current recipe
	targets       []jsondoc.ResolvedTarget
	preview       []jsondoc.PathPreview
	lifted        []string // a recipe's hard avoids the change lifts (recipe.Lifted)
}

// dryRun decodes input (an envelope or a PatchSet, by kind), runs it on a
// copy of doc's content and validates the result against doc's type. The
// content is decoded once per kernel while it stays in d.decoded, and the
// result is kept there too: it is the next patch's base once applied. When
// this kernel, or the store's rules digest, says the base is valid, only
// what the patch changed is validated (jsondoc.ValidateChange).
func (d *Target) dryRun(kind string, doc *store.Document, input []byte) (*dryRunResult, error) {
	baseSHA := sha256Hex(doc.Content)
	base, ok := d.decoded.get(baseSHA)
	if !ok {
		v, err := jsondoc.Decode(doc.Content, d.lim)
		if err != nil {
			return nil, fmt.Errorf("document %s: stored content: %w", doc.ID, err)
		}
		base = decodedEntry{value: v, size: len(doc.Content)}
		d.decoded.put(baseSHA, base)
	}
	if base.validFor == "" && doc.RulesDigest != "" && doc.RulesDigest == jsondoc.RulesDigest(doc.Type) {
		// The store says the content was validated under the rules this
		// kernel checks: after a restart too, the patch's result needs
		// validating only where it changed.
		base.validFor = doc.Type
	}
	before := base.value
	res := &dryRunResult{before: before, baseSHA256: baseSHA}
	switch kind {
	case protocol.KindJSONPatch:
		env, err := jsondoc.DecodeEnvelope(input)
		if err != nil {
			return nil, err
		}
		// The type's own rule, on every json_patch whatever sent it
		// (patch/*, turn/start) and again at apply: a recipe's state
		// changes only through a PatchSet (seed 003).
		if err := jsondoc.CheckJSONPatch(doc.Type, env.Operations); err != nil {
			return nil, err
		}
		res.env, res.ops = env, env.Operations
	case protocol.KindRecipePatchSet:
		if doc.Type != jsondoc.TypeRecipe {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "docId", Reason: "not-a-recipe"},
				"document %s is a %s, not a recipe", doc.ID, doc.Type)
		}
		ps, err := recipe.DecodePatchSet(input)
		if err != nil {
			return nil, err
		}
		var r recipe.Recipe
		if err := json.Unmarshal(doc.Content, &r); err != nil {
			return nil, fmt.Errorf("recipe %s: stored content: %w", doc.ID, err)
		}
		if err := recipe.Validate(&r, ps); err != nil {
			return nil, err
		}
		ops, err := recipe.Compile(&r, ps)
		if err != nil {
			return nil, err
		}
		imp := recipe.CountImpacted(&r, ps)
		res.patchSet, res.ops, res.impacted, res.recipe = ps, ops, &imp, &r
	default:
		return nil, errs.InvalidField("proposal.kind", "the document target does not plan %q", kind)
	}
	// One pass gives the result, its bytes and the resolved targets.
	patched, err := jsondoc.PatchReusing(before, base.enc, res.ops, d.lim)
	if err != nil {
		return nil, err
	}
	res.after, res.content, res.targets = patched.After, patched.Content, patched.Targets
	if len(res.ops) == 0 || bytes.Equal(res.content, doc.Content) {
		// A revision that changes nothing is refused, as an empty
		// workspace proposal is (tx: "the proposal changes nothing").
		return nil, errs.New(errs.Validation, NoChangeData{DocID: doc.ID, Operations: len(res.ops), Reason: ReasonNoChange},
			"the patch changes nothing in document %s (%s): send a patch that changes the document, or none", doc.ID, plural(len(res.ops), "operation"))
	}
	validate := jsondoc.ValidateDoc
	if base.validFor == doc.Type {
		// This kernel validated the base: only what the patch changed
		// needs validating (same verdict, same violations).
		validate = func(t string, after any) error { return jsondoc.ValidateChange(t, before, after) }
	}
	if err := validate(doc.Type, res.after); err != nil {
		return nil, err
	}
	res.contentSHA256 = sha256Hex(res.content)
	if doc.Type == jsondoc.TypeRecipe {
		// Whatever the door (patch/*, turn/start, a PatchSet), lifting a
		// hard avoid is the user's to approve (Approvals).
		res.lifted = recipe.LiftedJSON(doc.Content, res.content)
	}
	if opsDecoded(res.ops) {
		// The entry holds the content and its index too (enc): count
		// its bytes twice.
		d.decoded.put(res.contentSHA256, decodedEntry{value: res.after, size: 2 * len(res.content), validFor: doc.Type, enc: patched.Encoded})
	}
	res.preview = jsondoc.Preview(before, res.after, res.targets, res.ops)
	return res, nil
}

// opsDecoded reports whether every value ops insert is decoded JSON
// (isDecoded): only then is a result holding them what decoding its content
// gives.
func opsDecoded(ops []jsondoc.Operation) bool {
	for _, op := range ops {
		if !isDecoded(op.Value) {
			return false
		}
	}
	return true
}

// Plan implements tx.Target. body is the document's input (an *input;
// errs.Internal otherwise): a json_patch names DocID and Patch (seed
// 000's envelope, decoded by exact case); a recipe_patchset names DocID,
// RecipeVersion and PatchSet (seed 003). The envelope's expected_revision, or RecipeVersion, must be the
// document's current revision (errs.Stale): a dry run against an older
// one would validate something else. The patch is then run on a copy and
// the result validated against the type.
func (d *Target) Plan(ctx context.Context, kind string, body any) (*tx.Plan, error) {
	in, ok := body.(*input)
	if !ok || in == nil {
		return nil, errs.New(errs.Internal, nil, "a document proposal takes a *document.input, not a %T", body)
	}
	if in.DocID == "" {
		return nil, errs.InvalidField("docId", "docId is required")
	}
	var raw []byte
	var expected int64
	switch kind {
	case protocol.KindJSONPatch:
		if len(in.Patch) == 0 {
			return nil, errs.InvalidField("patch", "patch is required: the envelope {patch_id, expected_revision, mode?, operations}")
		}
		raw = in.Patch
	case protocol.KindRecipePatchSet:
		if len(in.PatchSet) == 0 {
			return nil, errs.InvalidField("patchSet", "patchSet is required")
		}
		if in.RecipeVersion == nil {
			return nil, errs.InvalidField("recipeVersion", "recipeVersion is required")
		}
		raw, expected = in.PatchSet, *in.RecipeVersion
	}
	db, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := db.Document(ctx, in.DocID)
	if err != nil {
		return nil, err
	}
	res, err := d.dryRun(kind, doc, raw)
	if err != nil {
		return nil, err
	}
	if res.env != nil {
		expected = res.env.ExpectedRevision
	}
	if expected != doc.Revision {
		return nil, staleErr(doc.ID, expected, doc.Revision)
	}
	canonInput, err := jsondoc.Canonicalize(raw)
	if err != nil {
		return nil, err
	}
	if res.env != nil {
		// A patch_id applied before is refused here, at propose, through
		// every door (patch/validate answers a same-payload replay
		// itself, before proposing): an apply of it could only fail.
		if err := checkNotApplied(ctx, db, doc.ID, res.env.PatchID, "sha256:"+sha256Hex(canonInput)); err != nil {
			return nil, err
		}
	}
	rec := planRecord{
		DocID: doc.ID, DocType: doc.Type, ExpectedRevision: expected,
		PatchHash:          "sha256:" + sha256Hex(canonInput),
		InputSHA256:        sha256Hex(raw),
		ContentSHA256:      res.contentSHA256,
		Targets:            wireTargets(res.targets),
		Preview:            wirePreview(res.preview),
		HardAvoidOverrides: res.lifted,
	}
	expires := d.now().Add(d.ttl)
	if res.env != nil {
		rec.PatchID, rec.Mode = res.env.PatchID, res.env.Mode
		rec.ExpiresAt = expires.UTC().Format(timeFormat)
	} else {
		rec.PatchSetID = res.patchSet.PatchSetID
		rec.PatchSetOps = len(res.patchSet.Patches)
		rec.Summary = summaryWithImpacted(res.patchSet, *res.impacted)
	}
	plan, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	d.validated.put(validatedKey(kind, doc.Type, res.baseSHA256, rec.InputSHA256), res.content, expires, d.now())
	text, findings := d.render(&rec, res)
	// The fingerprint covers the target, the document and the exact
	// input: the same envelope on the same document is the same patch
	// (a deny of it sticks), on another document it is not.
	canonical := fmt.Appendf(nil, "%s\x00%s\x00%s\x00", kind, doc.ID, rec.PatchHash)
	return &tx.Plan{
		Pointer:   record.Proposal{TargetPlan: plan},
		Changes:   changes(doc.ID, res.preview),
		Canonical: canonical,
		Redacted:  text,
		Findings:  findings,
		Blobs:     map[string][]byte{rec.InputSHA256: raw},
	}, nil
}

// timeFormat is RFC 3339 in UTC with nanoseconds, as the ledger's
// timestamps.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// changes are the fileChange item's entries: one per path written, named
// as an RFC 6901 URI fragment of the document id (RFC 6901 §6).
//
// The document itself comes first, as modified: every applied patch moves
// its revision (a patch that leaves the content as it was is refused by
// dryRun).
func changes(docID string, preview []jsondoc.PathPreview) []protocol.FileChange {
	out := []protocol.FileChange{{Path: docID, Kind: protocol.ChangeModify}}
	seen := map[string]bool{}
	for _, p := range preview {
		if p.Op == "test" || seen[p.Path] {
			continue
		}
		seen[p.Path] = true
		kind := protocol.ChangeModify
		switch {
		case !p.Existed && p.Exists:
			kind = protocol.ChangeAdd
		case p.Existed && !p.Exists:
			kind = protocol.ChangeDelete
		}
		out = append(out, protocol.FileChange{Path: docID + "#" + p.Path, Kind: kind})
		if p.Op == "move" && !seen[p.From] {
			seen[p.From] = true
			out = append(out, protocol.FileChange{Path: docID + "#" + p.From, Kind: protocol.ChangeDelete})
		}
	}
	return out
}

// render is the reviewable text of a document change (proposal.patch and
// the turnDiff item): each operation with its path's value before and
// after, one JSON value per line, secrets redacted. Secrets in the new
// values are secret introductions.
func (d *Target) render(rec *planRecord, res *dryRunResult) ([]byte, []protocol.SecretFinding) {
	var lines []string
	var added []bool
	add := func(plus bool, format string, args ...any) {
		lines = append(lines, fmt.Sprintf(format, args...))
		added = append(added, plus)
	}
	name := rec.PatchID
	if rec.PatchSetID != "" {
		name = "PatchSet " + rec.PatchSetID
	}
	add(false, "document %s (%s) at revision %d: %s", rec.DocID, rec.DocType, rec.ExpectedRevision, name)
	for _, p := range res.preview {
		head := p.Op + " " + p.Path
		if p.From != "" {
			head += " from " + p.From
		}
		add(false, "%s", head)
		if p.Existed {
			add(false, "- %s", compact(p.Before))
		}
		if p.Exists && p.Op != "test" {
			add(true, "+ %s", compact(p.After))
		}
	}
	red, spans := d.scanner.RedactLines(lines)
	var findings []protocol.SecretFinding
	for _, f := range spans {
		if f.Line >= 1 && f.Line <= len(added) && added[f.Line-1] {
			findings = append(findings, protocol.SecretFinding{Path: rec.DocID, Rule: f.Rule, Line: f.Line})
		}
	}
	return []byte(strings.Join(red, "\n") + "\n"), findings
}

// compact is v as one line of JSON.
func compact(v any) string {
	b, err := jsondoc.Encode(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func wireTargets(ts []jsondoc.ResolvedTarget) []protocol.ResolvedTarget {
	out := make([]protocol.ResolvedTarget, len(ts))
	for i, t := range ts {
		out[i] = protocol.ResolvedTarget{OpIndex: t.OpIndex, Op: t.Op, Path: t.Path, Kind: t.Kind, Exists: t.Exists}
	}
	return out
}

func wirePreview(ps []jsondoc.PathPreview) []protocol.PathPreview {
	out := make([]protocol.PathPreview, len(ps))
	for i, p := range ps {
		w := protocol.PathPreview{OpIndex: p.OpIndex, Op: p.Op, Path: p.Path, From: p.From, Existed: p.Existed, Exists: p.Exists}
		if p.Existed {
			w.Before = json.RawMessage(compact(p.Before))
		}
		if p.Exists {
			w.After = json.RawMessage(compact(p.After))
		}
		out[i] = w
	}
	return out
}

// summaryWithImpacted is ps's summary with impacted replaced by the
// kernel's own count (seed 003: computed, never trusted from the caller).
func summaryWithImpacted(ps *recipe.PatchSet, imp recipe.Impacted) json.RawMessage {
	s := recipe.Summary{}
	if ps.Summary != nil {
		s = *ps.Summary
	}
	s.Impacted = &imp
	b, _ := json.Marshal(s)
	return b
}
