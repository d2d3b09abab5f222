package memory

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/search"
	"github.com/txkernel/txkernel/unidiff"
)

// ReadContext answers memory/read_context (seed 002's retrieval contract; PROTOCOL.md §13): the
// ElementVersions of the selected baseline that match Query (keyword
// search, BM25 over structure-aware chunks, at most k, each with its best
// chunk as content and an excerpt citation) or the one ElementID names
// (its whole body). The selector is resolved once per request and echoed.
// Trimming is inside the ranking query (Store.Search), so k items are
// k the principal may see. Every returned version is remembered for
// memory/verify_citations.
func (s *Service) ReadContext(ctx context.Context, p *protocol.ReadContextParams) (*protocol.ReadContextResult, error) {
	scope, pr, err := s.authorize(p.MemoryRequest, protocol.ActionRead)
	if err != nil {
		return nil, err
	}
	if (p.Query == "") == (p.ElementID == "") {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "query", Reason: "query-or-element_id"}, "give exactly one of query (a search) and element_id (a direct fetch)")
	}
	k := p.K
	switch {
	case k == 0:
		k = DefaultK
	case k < 0 || k > MaxK:
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "k", Reason: "out-of-range"}, "k must be 1..%d", MaxK)
	}
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	used, bid, err := s.selectBaseline(ctx, db, scope, p.Selector)
	if err != nil {
		return nil, err
	}
	out := &protocol.ReadContextResult{Scope: scope, BaselineSelectorUsed: used, Items: []protocol.ContextItem{}, Mode: protocol.SearchKeyword}
	var vids []int64
	if p.ElementID != "" {
		if err := checkID("element_id", p.ElementID); err != nil {
			return nil, err
		}
		// With nothing published (bid 0) no element is in the baseline:
		// the same not-found as for any other.
		v, err := db.Fetch(ctx, scope, bid, p.ElementID)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, item(v, v.Body, nil, protocol.WhyDirect, nil))
		vids = append(vids, v.VID)
	} else {
		if err := checkText("query", p.Query, MaxSummaryBytes); err != nil {
			return nil, err
		}
		terms := search.Terms(p.Query)
		if len(terms) == 0 {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "query", Reason: "no-terms"}, "query %q has no searchable words", p.Query)
		}
		if bid != 0 {
			depth := k
			if s.cfg.Embedder != nil {
				depth = max(k, search.DefaultTuning.Depth)
			}
			hits, err := db.Search(ctx, scope, bid, Query{Terms: terms, K: depth, TitleWeight: titleWeight})
			if err != nil {
				return nil, err
			}
			byKeyword := map[int64]bool{}
			for _, h := range hits {
				byKeyword[h.VID] = true
			}
			if s.cfg.Embedder != nil {
				fused, note, err := s.hybrid(ctx, db, scope, bid, p.Query, hits, k)
				if err != nil {
					return nil, err
				}
				if fused != nil {
					hits, out.Mode = fused, protocol.SearchHybrid
				} else {
					out.Note = note
				}
			}
			for _, h := range hits[:min(k, len(hits))] {
				// Seed 002's why_included: keyword_match for a keyword
				// hit (fused or not); semantic_match for one only the
				// vectors found.
				why := protocol.WhyKeyword
				if !byKeyword[h.VID] {
					why = protocol.WhySemantic
				}
				score := h.Score
				ex := &protocol.MemoryExcerpt{ChunkKey: h.ChunkKey, Start: h.Start, End: h.End}
				out.Items = append(out.Items, item(&h.Version, excerpt(h.Body, h.Start, h.End), ex, why, &score))
				vids = append(vids, h.VID)
			}
		}
	}
	if err := db.RecordReturned(ctx, scope, pr.PrincipalID, vids); err != nil {
		return nil, err
	}
	return out, nil
}

// selectBaseline resolves a selector (published when nil) to the baseline
// it names and its row id (0 when nothing is published yet).
func (s *Service) selectBaseline(ctx context.Context, db Store, scope protocol.MemoryScope, raw json.RawMessage) (protocol.BaselineSelector, int64, error) {
	sel := &protocol.BaselineSelector{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, sel); err != nil {
			var um *protocol.UnknownMemberError
			if errors.As(err, &um) {
				field := "selector." + um.Member
				return protocol.BaselineSelector{}, 0, errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "unknown-member", Known: um.Known}, "selector: %v", err)
			}
			return protocol.BaselineSelector{}, 0, errs.New(errs.Invalid, errs.InvalidData{Field: "selector", Reason: "bad-selector"}, "%v", err)
		}
	}
	if sel.Kind == "" || sel.Kind == protocol.SelectorPublished {
		id, bid, err := db.Pointer(ctx, scope)
		return protocol.BaselineSelector{Kind: protocol.SelectorPublished, BaselineID: id}, bid, err
	}
	if err := checkID("selector.baseline_id", sel.BaselineID); err != nil {
		return protocol.BaselineSelector{}, 0, err
	}
	bid, err := db.Baseline(ctx, scope, sel.BaselineID)
	return protocol.BaselineSelector{Kind: protocol.SelectorBaselineID, BaselineID: sel.BaselineID}, bid, err
}

// excerpt is body[start:end], clamped.
func excerpt(body string, start, end int) string {
	if start < 0 || start > len(body) {
		start = 0
	}
	if end < start || end > len(body) {
		end = len(body)
	}
	return body[start:end]
}

func item(v *Version, content string, ex *protocol.MemoryExcerpt, why string, score *float64) protocol.ContextItem {
	return protocol.ContextItem{
		RepositoryID: v.RepositoryID, ElementID: v.ElementID, VersionID: v.VersionID, Title: v.Title, Content: content,
		Citations:   []protocol.MemoryCitation{{RepositoryID: v.RepositoryID, ElementID: v.ElementID, VersionID: v.VersionID, Excerpt: ex}},
		WhyIncluded: why, SourceKind: v.SourceKind, Type: v.ElementType, Provenance: v.Provenance, Score: score,
	}
}

// VerifyCitations answers memory/verify_citations: for each citation,
// whether memory/read_context ever returned its version to this principal
// (seed 002's smoke, docs/DESIGN.md §7: its negative assertion: no invented citations).
func (s *Service) VerifyCitations(ctx context.Context, p *protocol.VerifyCitationsParams) (*protocol.VerifyCitationsResult, error) {
	scope, pr, err := s.authorize(p.MemoryRequest, protocol.ActionRead)
	if err != nil {
		return nil, err
	}
	if len(p.Citations) == 0 {
		return nil, errs.InvalidField("citations", "citations is required: the citations to check")
	}
	if len(p.Citations) > MaxCitations {
		return nil, errs.New(errs.TooLarge, map[string]any{"field": "citations", "limit": MaxCitations, "size": len(p.Citations)}, "at most %d citations per call", MaxCitations)
	}
	for i, c := range p.Citations {
		for _, f := range []struct{ name, v string }{{"repository_id", c.RepositoryID}, {"element_id", c.ElementID}, {"version_id", c.VersionID}} {
			if err := checkID("citations["+strconv.Itoa(i)+"]."+f.name, f.v); err != nil {
				return nil, err
			}
		}
	}
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	res, err := db.Verify(ctx, scope, pr.PrincipalID, p.Citations)
	if err != nil {
		return nil, err
	}
	out := &protocol.VerifyCitationsResult{Results: res, AllReturned: true}
	for _, r := range res {
		out.AllReturned = out.AllReturned && r.Returned
	}
	return out, nil
}

// Proposals answers memory/proposals: the scope's proposals with status
// (all when empty), newest first, each saying whether it is stale.
func (s *Service) Proposals(ctx context.Context, p *protocol.ProposalsParams) (*protocol.ProposalsResult, error) {
	scope, _, err := s.authorize(p.MemoryRequest, protocol.ActionRead)
	if err != nil {
		return nil, err
	}
	switch p.Status {
	case "", protocol.ProposalOpen, protocol.ProposalAccepted, protocol.ProposalRejected, protocol.ProposalRebased:
	default:
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "status", Reason: "unknown"}, "status must be open, accepted, rejected or rebased")
	}
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := db.Proposals(ctx, scope, p.Status)
	if err != nil {
		return nil, err
	}
	out := &protocol.ProposalsResult{Proposals: make([]protocol.ProposalInfo, 0, len(rows))}
	for i := range rows {
		out.Proposals = append(out.Proposals, proposalInfo(&rows[i]))
	}
	return out, nil
}

func proposalInfo(r *ProposalRow) protocol.ProposalInfo {
	var prov protocol.ProposalProvenance
	_ = json.Unmarshal(r.Provenance, &prov)
	return protocol.ProposalInfo{
		ProposalID: r.ProposalID, Status: r.Status, ElementID: r.ElementID, TargetVersionID: r.TargetVersionID,
		CurrentVersionID: r.CurrentVersionID, Stale: r.Status == protocol.ProposalOpen && r.TargetVersionID != r.CurrentVersionID,
		Summary: r.Summary, Provenance: prov, ProposedBy: r.PrincipalID, AcceptedVersionID: r.AcceptedVersionID,
		RebasedTo: r.RebasedTo, DecisionID: r.DecisionID,
	}
}

// Proposal answers memory/proposal: the proposal, its target element's
// pinned version, the proposed body, a unified diff from the one to the
// other, and its ledger events. To a principal that neither curates nor
// publishes in the scope, no body of a version that was never published
// is shown: the target's body (and the diff) when the target is in no
// baseline, the proposed body (and the diff) when the proposal was
// accepted as a version not yet published; result.withheld names them.
func (s *Service) Proposal(ctx context.Context, p *protocol.ProposalParams) (*protocol.ProposalResult, error) {
	scope, pr, db, err := s.onProposal(ctx, p.MemoryRequest, protocol.ActionRead, p.ProposalID)
	if err != nil {
		return nil, err
	}
	r, err := db.Proposal(ctx, scope, p.ProposalID)
	if err != nil {
		return nil, err
	}
	target, err := db.VersionByID(ctx, scope, r.TargetVersionID)
	if err != nil {
		return nil, err
	}
	hist, err := db.Ledger(ctx, scope, r.ProposalID)
	if err != nil {
		return nil, err
	}
	history := make([]any, len(hist))
	for i := range hist {
		history[i] = hist[i]
	}
	out := &protocol.ProposalResult{
		ProposalInfo: proposalInfo(r),
		Target:       versionInfo(target),
		ProposedBody: r.Body,
		Diff:         string(unidiff.FileDiff(r.ElementID, r.ElementID, []byte(target.Body), []byte(r.Body), true, true, 0o644, 0o644)),
		History:      history,
	}
	if s.reviews(pr, scope) {
		return out, nil
	}
	// Agents read published truth only: a target never published, or
	// the body of an accepted proposal whose version is not published
	// yet, is a curator's to see (seed 002's curate and publish loops; PROTOCOL.md §13).
	pub, err := db.Published(ctx, scope, []string{target.VersionID, r.AcceptedVersionID})
	if err != nil {
		return nil, err
	}
	if !pub[target.VersionID] {
		out.Target.Body, out.Diff = "", ""
		out.Withheld = append(out.Withheld, "target.body", "diff")
	}
	if r.Status == protocol.ProposalAccepted && !pub[r.AcceptedVersionID] {
		out.ProposedBody = ""
		out.Withheld = append(out.Withheld, "proposed_body")
		if out.Diff != "" {
			out.Diff = ""
			out.Withheld = append(out.Withheld, "diff")
		}
	}
	return out, nil
}

func versionInfo(v *Version) protocol.VersionInfo {
	return protocol.VersionInfo{RepositoryID: v.RepositoryID, ElementID: v.ElementID, VersionID: v.VersionID, Title: v.Title, Body: v.Body,
		SourceKind: v.SourceKind, CreatedAt: v.CreatedAt, Provenance: v.Provenance}
}

// Baselines answers memory/baselines: the scope's baselines, the published
// pointer and the pointer's history, newest first.
func (s *Service) Baselines(ctx context.Context, p *protocol.MemoryRequest) (*protocol.BaselinesResult, error) {
	scope, _, err := s.authorize(*p, protocol.ActionRead)
	if err != nil {
		return nil, err
	}
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	pub, _, err := db.Pointer(ctx, scope)
	if err != nil {
		return nil, err
	}
	bs, hs, err := db.Baselines(ctx, scope)
	if err != nil {
		return nil, err
	}
	out := &protocol.BaselinesResult{Published: pub, Baselines: []protocol.BaselineInfo{}, History: []protocol.PointerMove{}}
	for _, b := range bs {
		out.Baselines = append(out.Baselines, protocol.BaselineInfo{BaselineID: b.BaselineID, ParentBaselineID: b.ParentBaselineID, CreatedAt: b.CreatedAt,
			PrincipalID: b.PrincipalID, Reason: b.Reason, Items: b.Items, TransactionID: b.TxID})
	}
	for _, h := range hs {
		out.History = append(out.History, protocol.PointerMove{BaselineID: h.BaselineID, PreviousBaselineID: h.PreviousBaselineID, MovedAt: h.MovedAt,
			PrincipalID: h.PrincipalID, Reason: h.Reason})
	}
	return out, nil
}
