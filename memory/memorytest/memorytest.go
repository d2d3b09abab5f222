// Package memorytest is the conformance suite of memory.Store: the tests every
// implementation must pass, run by each one's own tests (SQLite's in
// package store, PostgreSQL's in store/postgres), so the two stores keep
// one behaviour. The package is only imported by tests; it imports
// testing.
package memorytest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Run runs every conformance test as a subtest of t, each on a fresh,
// empty memory store from open.
func Run(t *testing.T, open func(t *testing.T) memory.Store) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, memory.Store)
	}{
		{"SearchTrimsInsideTheQuery", searchTrimsInsideTheQuery},
		{"PromotableNeverMovesBack", promotableNeverMovesBack},
		{"ByIDStaysInScope", byIDStaysInScope},
		{"ClaimsSerialiseCuration", claimsSerialiseCuration},
		{"AcceptsCheckAgainAtCommit", acceptsCheckAgainAtCommit},
		{"IngestOutcomes", ingestOutcomes},
		{"IngestNeverReplacesCuratedTruth", ingestNeverReplacesCuratedTruth},
		{"ScoresIgnoreOtherScopes", scoresIgnoreOtherScopes},
		{"PublishedVersions", publishedVersions},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

func memTestFile(id, text string) memory.IngestFile {
	return memory.IngestFile{ElementID: id, Version: memory.NewVersion{VersionID: "ver_" + id + "_" + memory.HashBody(text)[:8], Title: id, Body: text, BodyHash: memory.HashBody(text),
		SourceKind: protocol.SourceIngestedEvidence, Chunks: []memory.Chunk{{Key: "_preamble", Title: id, Text: text, Start: 0, End: len(text)}}}}
}

// searchTrimsInsideTheQuery: another repository holds many better
// matches, yet a search of r1 returns exactly k versions, all of r1 and of
// its published baseline; a version not in the baseline is never ranked.
func searchTrimsInsideTheQuery(t *testing.T, m memory.Store) {
	ctx := context.Background()
	r1 := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r1"}
	r2 := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r2"}
	var r1Files, r2Files []memory.IngestFile
	for i := range 5 {
		r1Files = append(r1Files, memTestFile(fmt.Sprintf("a%d.md", i), "a note about lanterns and other things"))
	}
	for i := range 30 {
		r2Files = append(r2Files, memTestFile(fmt.Sprintf("b%d.md", i), "lanterns lanterns lanterns"))
	}
	publish := func(sc protocol.MemoryScope, files []memory.IngestFile, tx string) int64 {
		out, err := m.Ingest(ctx, sc, files)
		if err != nil {
			t.Fatal(err)
		}
		var vs []string
		for _, o := range out {
			vs = append(vs, o.VersionID)
		}
		if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: tx, BaselineID: "bl_" + tx, Versions: vs, Reason: "ingest", DecisionID: "dec_" + tx}); err != nil {
			t.Fatal(err)
		}
		_, bid, err := m.Pointer(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		return bid
	}
	bid1 := publish(r1, r1Files, "tx1")
	publish(r2, r2Files, "tx2")
	// A new version of a0.md that is not published: never ranked.
	if _, err := m.Ingest(ctx, r1, []memory.IngestFile{memTestFile("a0.md", "lanterns lanterns lanterns lanterns")}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 3, 5, 10} {
		hits, err := m.Search(ctx, r1, bid1, memory.Query{Terms: []string{"lanterns"}, K: k, TitleWeight: 2})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(k, 5); len(hits) != want {
			t.Fatalf("k=%d: %d hits, want %d", k, len(hits), want)
		}
		for _, h := range hits {
			if h.RepositoryID != "r1" || h.Body != "a note about lanterns and other things" {
				t.Fatalf("k=%d: hit %s@%s of %s outside the scope or the baseline", k, h.ElementID, h.VersionID, h.RepositoryID)
			}
		}
	}
	// The same baseline read from another scope finds nothing.
	if hits, err := m.Search(ctx, r2, bid1, memory.Query{Terms: []string{"lanterns"}, K: 5, TitleWeight: 2}); err != nil || len(hits) != 0 {
		t.Fatalf("r1's baseline through r2's scope: %v %v", hits, err)
	}
}

// ingestOutcomes: an ingest says, file by file in order, what it did: a
// new element is created, a changed body is a new version that becomes
// the head, an unchanged body writes nothing; an element named twice in
// one call is created once and then versioned; a file naming an element
// that is not a backlog document fails the whole ingest, which then
// writes nothing; and each new version's chunks are searchable.
func ingestOutcomes(t *testing.T, m memory.Store) {
	ctx := context.Background()
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	type want struct{ id, status, body string }
	check := func(what string, out []memory.IngestOutcome, err error, wants ...want) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(out) != len(wants) {
			t.Fatalf("%s: %d outcomes, want %d: %+v", what, len(out), len(wants), out)
		}
		last := map[string]int{} // each element's last outcome is its head
		for i, w := range wants {
			if out[i].ElementID != w.id || out[i].Status != w.status {
				t.Fatalf("%s: outcome %d is %+v, want %s %s", what, i, out[i], w.id, w.status)
			}
			last[w.id] = i
		}
		for id, i := range last {
			head, err := m.Head(ctx, sc, id)
			if err != nil {
				t.Fatalf("%s: head of %s: %v", what, id, err)
			}
			if head.Body != wants[i].body || head.VersionID != out[i].VersionID {
				t.Fatalf("%s: head of %s is %s %q, want %s %q", what, id, head.VersionID, head.Body, out[i].VersionID, wants[i].body)
			}
		}
	}
	out, err := m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("a.md", "alpha one"), memTestFile("b.md", "beta one"), memTestFile("a.md", "alpha two")})
	check("first ingest", out, err, want{"a.md", memory.IngestCreated, "alpha one"}, want{"b.md", memory.IngestCreated, "beta one"}, want{"a.md", memory.IngestNewVersion, "alpha two"})
	out, err = m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("a.md", "alpha two"), memTestFile("b.md", "beta two"), memTestFile("c.md", "gamma")})
	check("second ingest", out, err, want{"a.md", memory.IngestUnchanged, "alpha two"}, want{"b.md", memory.IngestNewVersion, "beta two"}, want{"c.md", memory.IngestCreated, "gamma"})
	if out[0].VersionID != memTestFile("a.md", "alpha two").Version.VersionID {
		t.Fatalf("an unchanged file names %s, not its newest ingested version", out[0].VersionID)
	}
	// A proposal element cannot be ingested over: the whole call fails,
	// and d.md, before it in the call, is not written either.
	a, err := m.Head(ctx, sc, "a.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Propose(ctx, memory.NewProposal{Scope: sc, ProposalID: "prop_1", TargetElementID: "a.md", TargetVersionID: a.VersionID, Summary: "s",
		Principal: protocol.MemoryPrincipal{PrincipalID: "p"}, Version: memory.NewVersion{VersionID: "ver_prop_1", Title: "a.md", Body: "alpha three",
			BodyHash: memory.HashBody("alpha three"), SourceKind: protocol.SourceProposal, Provenance: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("d.md", "delta"), memTestFile("prop_1", "over a proposal")}); !errs.KindIs(err, errs.Conflict) {
		t.Fatalf("an ingest over a proposal element: %v, want a conflict", err)
	}
	if _, err := m.Head(ctx, sc, "d.md"); !errs.KindIs(err, errs.NotFound) {
		t.Fatalf("a failed ingest wrote d.md: %v", err)
	}
	// Every version written is searchable through a baseline holding it.
	var vs []string
	for _, id := range []string{"a.md", "b.md", "c.md"} {
		h, err := m.Head(ctx, sc, id)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, h.VersionID)
	}
	if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: "tx", BaselineID: "bl", Versions: vs, Reason: "ingest", DecisionID: "dec"}); err != nil {
		t.Fatal(err)
	}
	_, bid, err := m.Pointer(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ word, id string }{{"alpha", "a.md"}, {"beta", "b.md"}, {"gamma", "c.md"}} {
		hits, err := m.Search(ctx, sc, bid, memory.Query{Terms: []string{c.word}, K: 5, TitleWeight: 2})
		if err != nil || len(hits) != 1 || hits[0].ElementID != c.id {
			t.Fatalf("search %q: %+v %v", c.word, hits, err)
		}
	}
	// A promote naming two versions of one element keeps the later named.
	one, two := memTestFile("a.md", "alpha one").Version.VersionID, memTestFile("a.md", "alpha two").Version.VersionID
	if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: "tx2", BaselineID: "bl2", Versions: []string{two, one}, Reason: "r", DecisionID: "dec2"}); err != nil {
		t.Fatal(err)
	}
	_, bid2, err := m.Pointer(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Fetch(ctx, sc, bid2, "a.md"); err != nil || v.VersionID != one {
		t.Fatalf("a baseline of %s then %s holds %+v, %v; want the later named", two, one, v, err)
	}
}

// promotableNeverMovesBack: an explicit promote leaves out a
// version older than (or equal to) what the baseline holds.
func promotableNeverMovesBack(t *testing.T, m memory.Store) {
	ctx := context.Background()
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	v1, err := m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("a.md", "one")})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("a.md", "two")})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: "tx", BaselineID: "bl", Versions: []string{v2[0].VersionID}, Reason: "ingest", DecisionID: "dec"}); err != nil {
		t.Fatal(err)
	}
	// Idempotent: committing the same transaction again changes nothing.
	if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: "tx", BaselineID: "bl", Versions: []string{v1[0].VersionID}, Reason: "ingest", DecisionID: "dec"}); err != nil {
		t.Fatal(err)
	}
	_, bid, _ := m.Pointer(ctx, sc)
	got, err := m.Promotable(ctx, sc, bid, []string{v1[0].VersionID, v2[0].VersionID})
	if err != nil || len(got) != 0 {
		t.Fatalf("MemPromotable = %v, %v; want nothing", got, err)
	}
	v, err := m.Fetch(ctx, sc, bid, "a.md")
	if err != nil || v.Body != "two" {
		t.Fatalf("baseline holds %v, %v", v, err)
	}
}

// byIDStaysInScope: the methods that take ids (chunks, versions,
// a proposal) act on the caller's scope only: another repository's chunk
// is not found, its versions are neither embedded nor recorded as
// returned, and its proposal's accept transaction is not set.
func byIDStaysInScope(t *testing.T, m memory.Store) {
	ctx := context.Background()
	r1 := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r1"}
	r2 := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r2"}
	out, err := m.Ingest(ctx, r2, []memory.IngestFile{memTestFile("b.md", "a note in r2")})
	if err != nil {
		t.Fatal(err)
	}
	vid := out[0].VersionID
	if cs, err := m.ChunksToEmbed(ctx, r1, []string{vid}, 8); err != nil || len(cs) != 0 {
		t.Fatalf("r2's chunks to embed, asked by r1: %v %v", cs, err)
	}
	cs, err := m.ChunksToEmbed(ctx, r2, []string{vid}, 8)
	if err != nil || len(cs) != 1 {
		t.Fatalf("r2's own chunks to embed: %v %v", cs, err)
	}
	if _, err := m.HitsByChunk(ctx, r1, []int64{cs[0].ChunkID}); err == nil {
		t.Fatal("r1 read r2's chunk")
	}
	if hs, err := m.HitsByChunk(ctx, r2, []int64{cs[0].ChunkID}); err != nil || len(hs) != 1 || hs[0].VersionID != vid {
		t.Fatalf("r2's own chunk: %v %v", hs, err)
	}
	v, err := m.VersionByID(ctx, r2, vid)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RecordReturned(ctx, r1, "p", []int64{v.VID}); err != nil {
		t.Fatal(err)
	}
	cit := []protocol.MemoryCitation{{RepositoryID: "r2", ElementID: "b.md", VersionID: vid}}
	if got, err := m.Verify(ctx, r2, "p", cit); err != nil || got[0].Returned {
		t.Fatalf("a version of r2 recorded as returned through r1: %+v %v", got, err)
	}
	if err := m.RecordReturned(ctx, r2, "p", []int64{v.VID}); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Verify(ctx, r2, "p", cit); err != nil || !got[0].Returned {
		t.Fatalf("a version of r2 returned in r2: %+v %v", got, err)
	}
	pr := protocol.MemoryPrincipal{PrincipalID: "p"}
	if err := m.Propose(ctx, memory.NewProposal{Scope: r2, Principal: pr, ProposalID: "prop", TargetElementID: "b.md", TargetVersionID: vid,
		Summary: "s", Version: memory.NewVersion{VersionID: "prop@1", Title: "b", Body: "new", BodyHash: memory.HashBody("new"), SourceKind: protocol.SourceProposal}}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAcceptTx(ctx, r1, "prop", "tx-r1"); err != nil {
		t.Fatal(err)
	}
	if row, err := m.Proposal(ctx, r2, "prop"); err != nil || row.AcceptTxID != "" {
		t.Fatalf("r1 set r2's accept transaction: %+v %v", row, err)
	}
	if err := m.SetAcceptTx(ctx, r2, "prop", "tx-r2"); err != nil {
		t.Fatal(err)
	}
	if row, err := m.Proposal(ctx, r2, "prop"); err != nil || row.AcceptTxID != "tx-r2" {
		t.Fatalf("r2's own accept transaction: %+v %v", row, err)
	}
}

// claimsSerialiseCuration: a claim reserves an element (or the pointer)
// for one transaction: another transaction's claim on it is a conflict
// naming the holder, the holder may claim again, a claim whose base moved
// is stale with the current version, and Unclaim and the commit release
// it.
func claimsSerialiseCuration(t *testing.T, m memory.Store) {
	ctx := context.Background()
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	out, err := m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("a.md", "one")})
	if err != nil {
		t.Fatal(err)
	}
	v1 := out[0].VersionID
	c := memory.Claim{Scope: sc, TxID: "tx-1", ElementID: "a.md", TargetVersionID: v1}
	if _, err := m.Claim(ctx, c); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if _, err := m.Claim(ctx, c); err != nil {
		t.Fatalf("the holder claims again: %v", err)
	}
	other := c
	other.TxID = "tx-2"
	_, err = m.Claim(ctx, other)
	if !errs.KindIs(err, errs.Conflict) {
		t.Fatalf("another transaction's claim: %v, want a conflict", err)
	}
	_, data := errs.KindOf(err)
	if d, _ := data.(memory.ClaimedData); d.TransactionID != "tx-1" || d.Key != "element:a.md" {
		t.Fatalf("conflict data %#v, want the holder and the key", data)
	}
	if err := m.Unclaim(ctx, sc, "tx-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Claim(ctx, other); err != nil {
		t.Fatalf("a claim after the holder let go: %v", err)
	}
	if err := m.Unclaim(ctx, sc, "tx-2"); err != nil {
		t.Fatal(err)
	}
	// The element moves: a claim on the old version is stale, with the new.
	out, err = m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("a.md", "two")})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := m.Claim(ctx, c)
	if !errs.KindIs(err, errs.Stale) || cur != out[0].VersionID {
		t.Fatalf("a claim on a moved element: %q %v, want stale at %s", cur, err, out[0].VersionID)
	}
	// The pointer: claimed from nothing published, released by the
	// promote's commit.
	p := memory.Claim{Scope: sc, TxID: "tx-p"}
	if _, err := m.Claim(ctx, p); err != nil {
		t.Fatalf("pointer claim: %v", err)
	}
	if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: "tx-p", BaselineID: "bl", Versions: []string{out[0].VersionID}, Reason: "r", DecisionID: "dec-p"}); err != nil {
		t.Fatal(err)
	}
	cur, err = m.Claim(ctx, memory.Claim{Scope: sc, TxID: "tx-q"})
	if !errs.KindIs(err, errs.Stale) || cur != "bl" {
		t.Fatalf("a pointer claim after the promote: %q %v, want stale at bl (and no conflict: the commit released tx-p's claim)", cur, err)
	}
}

// acceptsCheckAgainAtCommit (issue 33): an accept's claim is refused
// once its proposal was decided (errs.Closed), and an accept's commit
// re-checks the element's current version, so it never overwrites a
// version written after its claim (errs.Stale, nothing written).
func acceptsCheckAgainAtCommit(t *testing.T, m memory.Store) {
	ctx := context.Background()
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	out, err := m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("a.md", "one")})
	if err != nil {
		t.Fatal(err)
	}
	v1 := out[0].VersionID
	pr := protocol.MemoryPrincipal{PrincipalID: "agent"}
	propose := func(id string) {
		t.Helper()
		if err := m.Propose(ctx, memory.NewProposal{Scope: sc, Principal: pr, ProposalID: id, TargetElementID: "a.md", TargetVersionID: v1,
			Summary: "s", Version: memory.NewVersion{VersionID: "ver_" + id, Title: "a", Body: "b", BodyHash: memory.HashBody("b"), SourceKind: protocol.SourceProposal}}); err != nil {
			t.Fatal(err)
		}
	}
	propose("p-rejected")
	if err := m.Reject(ctx, sc, "p-rejected", "no", memory.Decision{DecisionID: "dec-r", Principal: protocol.MemoryPrincipal{PrincipalID: "curator"}}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Claim(ctx, memory.Claim{Scope: sc, TxID: "tx-r", ProposalID: "p-rejected", ElementID: "a.md", TargetVersionID: v1})
	if !errs.KindIs(err, errs.Closed) {
		t.Fatalf("a claim for an accept of a rejected proposal: %v, want closed", err)
	}
	propose("p-open")
	if _, err := m.Claim(ctx, memory.Claim{Scope: sc, TxID: "tx-a", ProposalID: "p-open", ElementID: "a.md", TargetVersionID: v1}); err != nil {
		t.Fatal(err)
	}
	if err := m.Unclaim(ctx, sc, "tx-a"); err != nil {
		t.Fatal(err)
	}
	moved, err := m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("a.md", "two")})
	if err != nil {
		t.Fatal(err)
	}
	err = m.CommitAccept(ctx, memory.Accept{Scope: sc, Principal: protocol.MemoryPrincipal{PrincipalID: "curator"}, ProposalID: "p-open", TxID: "tx-a",
		VersionID: "ver_tx-a", DecisionID: "dec_tx-a"})
	if !errs.KindIs(err, errs.Stale) {
		t.Fatalf("an accept's commit after the element moved: %v, want stale", err)
	}
	head, err := m.Head(ctx, sc, "a.md")
	if err != nil || head.VersionID != moved[0].VersionID {
		t.Fatalf("the head after a refused accept: %v %v, want the newer %s", head, err, moved[0].VersionID)
	}
}

// ingestNeverReplacesCuratedTruth (seed 002's ingest loop: ingested sources
// are not canonical truth; docs/DESIGN.md §7): once an element's current
// version is curated, a re-ingest of a changed file records the evidence
// without making it current or publishable, opens the review proposal the file
// names (targeting the curated version, holding the evidence), and an
// unchanged re-ingest does nothing; no promote, explicit or not, puts evidence
// over a curated version; an element never curated still follows its file.
func ingestNeverReplacesCuratedTruth(t *testing.T, m memory.Store) {
	ctx := context.Background()
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	publishAll(t, m, sc, "tx1", memTestFile("a.md", "alpha one"), memTestFile("b.md", "beta one"))
	for _, c := range []struct {
		name      string
		published bool // the curated version is promoted before the re-ingest
	}{{"accepted-unpublished", false}, {"published", true}} {
		t.Run(c.name, func(t *testing.T) {
			id := "a.md"
			if c.published {
				id = "b.md"
			}
			curated := curate(t, m, sc, id, "curated "+c.name, "tx-cur-"+c.name)
			if c.published {
				if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: "tx-pub-" + c.name, BaselineID: "bl-pub-" + c.name, Versions: []string{curated}, Reason: "promote", DecisionID: "dec-pub-" + c.name}); err != nil {
					t.Fatal(err)
				}
			}
			_, bid, err := m.Pointer(ctx, sc)
			if err != nil {
				t.Fatal(err)
			}
			before, err := m.Fetch(ctx, sc, bid, id)
			if err != nil {
				t.Fatal(err)
			}
			f := memTestFile(id, "evidence "+c.name)
			f.Review = memory.NewProposal{Principal: protocol.MemoryPrincipal{PrincipalID: "ingester"}, ProposalID: "prop-review-" + c.name, Summary: "review",
				Version: memory.NewVersion{VersionID: "ver-review-" + c.name, Title: id, Body: f.Version.Body, BodyHash: f.Version.BodyHash, SourceKind: protocol.SourceProposal}}
			out, err := m.Ingest(ctx, sc, []memory.IngestFile{f})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0].Status != memory.IngestForReview || out[0].VersionID != f.Version.VersionID || out[0].ProposalID != "prop-review-"+c.name {
				t.Fatalf("re-ingest over curated truth: %+v, want for_review with the proposal", out)
			}
			if head, err := m.Head(ctx, sc, id); err != nil || head.VersionID != curated || head.SourceKind != protocol.SourceCurated {
				t.Fatalf("current version after the re-ingest: %+v %v, want the curated %s", head, err, curated)
			}
			if ev, err := m.VersionByID(ctx, sc, f.Version.VersionID); err != nil || ev.SourceKind != protocol.SourceIngestedEvidence || ev.Body != f.Version.Body {
				t.Fatalf("the evidence version is not recorded: %+v %v", ev, err)
			}
			row, err := m.Proposal(ctx, sc, "prop-review-"+c.name)
			if err != nil {
				t.Fatal(err)
			}
			if row.Status != protocol.ProposalOpen || row.ElementID != id || row.TargetVersionID != curated || row.CurrentVersionID != curated || row.Body != f.Version.Body || row.PrincipalID != "ingester" {
				t.Fatalf("review proposal %+v: want open, on %s@%s, holding the evidence, proposed by the ingester", row, id, curated)
			}
			for _, vs := range [][]string{{f.Version.VersionID}, nil} {
				got, err := m.Promotable(ctx, sc, bid, vs)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(got, f.Version.VersionID) {
					t.Fatalf("Promotable(%v) = %v: evidence over curated truth", vs, got)
				}
			}
			if after, err := m.Fetch(ctx, sc, bid, id); err != nil || after.VersionID != before.VersionID {
				t.Fatalf("published %s moved to %+v %v", before.VersionID, after, err)
			}
			again, err := m.Ingest(ctx, sc, []memory.IngestFile{f})
			if err != nil || len(again) != 1 || again[0].Status != memory.IngestUnchanged || again[0].ProposalID != "" {
				t.Fatalf("the same file again: %+v %v, want unchanged and no second proposal", again, err)
			}
		})
	}
	// c.md was never curated: its file still moves its current version.
	publishAll(t, m, sc, "tx-c", memTestFile("c.md", "gamma one"))
	out, err := m.Ingest(ctx, sc, []memory.IngestFile{memTestFile("c.md", "gamma two")})
	if err != nil || out[0].Status != memory.IngestNewVersion {
		t.Fatalf("evidence over evidence: %+v %v", out, err)
	}
	if head, _ := m.Head(ctx, sc, "c.md"); head == nil || head.Body != "gamma two" {
		t.Fatalf("c.md's head: %+v", head)
	}
}

// scoresIgnoreOtherScopes: a caller's BM25 scores come from the rows it
// may see only: another tenant's ingest, another repository's of the same
// tenant, and an unpublished version in the caller's own repository leave
// every score bit-identical.
func scoresIgnoreOtherScopes(t *testing.T, m memory.Store) {
	ctx := context.Background()
	mine := protocol.MemoryScope{TenantID: "t1", OrganizationID: "o", RepositoryID: "r"}
	publishAll(t, m, mine, "tx-mine", memTestFile("a.md", "the harbour lantern burns through the night"),
		memTestFile("b.md", "lantern oil and wicks for the harbour"), memTestFile("c.md", "a note on tides"))
	_, bid, err := m.Pointer(ctx, mine)
	if err != nil {
		t.Fatal(err)
	}
	terms := []string{"harbour", "lantern", "tides"}
	scores := func() string {
		hits, err := m.Search(ctx, mine, bid, memory.Query{Terms: terms, K: 10, TitleWeight: 2})
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for _, h := range hits {
			fmt.Fprintf(&sb, "%s@%s:%s:%016x\n", h.ElementID, h.VersionID, h.ChunkKey, math.Float64bits(h.Score))
		}
		return sb.String()
	}
	want := scores()
	if strings.Count(want, "\n") != 3 {
		t.Fatalf("want 3 hits, got:\n%s", want)
	}
	for i, other := range []protocol.MemoryScope{
		{TenantID: "t2", OrganizationID: "o", RepositoryID: "r"},
		{TenantID: "t1", OrganizationID: "o", RepositoryID: "r2"},
	} {
		var files []memory.IngestFile
		for j := range 20 {
			f := memTestFile(fmt.Sprintf("x%d.md", j), strings.Repeat("lantern harbour ", j+1))
			f.Version.VersionID += fmt.Sprintf("_%d", i)
			files = append(files, f)
		}
		publishAll(t, m, other, fmt.Sprintf("tx-other-%d", i), files...)
		if got := scores(); got != want {
			t.Fatalf("%+v ingested, and the caller's scores changed:\n%s\nwant\n%s", other, got, want)
		}
	}
	if _, err := m.Ingest(ctx, mine, []memory.IngestFile{memTestFile("c.md", "tides tides lantern lantern harbour")}); err != nil {
		t.Fatal(err)
	}
	if got := scores(); got != want {
		t.Fatalf("an unpublished version changed the published baseline's scores:\n%s\nwant\n%s", got, want)
	}
}

// publishedVersions: Published names the versions some baseline of the
// scope holds (the current one or an earlier one), never one only
// accepted, never another scope's.
func publishedVersions(t *testing.T, m memory.Store) {
	ctx := context.Background()
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	other := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r2"}
	v1 := publishAll(t, m, sc, "tx1", memTestFile("a.md", "one"))[0].VersionID
	v2 := curate(t, m, sc, "a.md", "two", "tx2")
	if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: "tx3", BaselineID: "bl3", Versions: []string{v2}, Reason: "promote", DecisionID: "dec3"}); err != nil {
		t.Fatal(err)
	}
	v3 := curate(t, m, sc, "a.md", "three", "tx4")
	got, err := m.Published(ctx, sc, []string{v1, v2, v3, "ver_missing"})
	if err != nil {
		t.Fatal(err)
	}
	if !got[v1] || !got[v2] || got[v3] || got["ver_missing"] || len(got) != 2 {
		t.Fatalf("Published = %v; want %s (an earlier baseline) and %s (the current one) only", got, v1, v2)
	}
	if got, err := m.Published(ctx, other, []string{v1, v2}); err != nil || len(got) != 0 {
		t.Fatalf("another scope's Published = %v %v", got, err)
	}
}
