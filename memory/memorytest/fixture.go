package memorytest

// This file builds data for the cases: published and curated versions,
// and the benchmark fixture of a memory store (repositories of elements
// with many versions, and a query that matches some of them).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// FixtureScope is repository r of the benchmark fixture: 4
// organisations of one tenant.
func FixtureScope(r int) protocol.MemoryScope {
	return protocol.MemoryScope{TenantID: "t1", OrganizationID: fmt.Sprintf("o%d", r%4), RepositoryID: fmt.Sprintf("r%03d", r)}
}

// fixtureWords is a deterministic vocabulary of 5,000 pseudo-words.
func fixtureWords() []string {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	words := make([]string, 5000)
	for i := range words {
		b := make([]byte, 4+rng.IntN(6))
		for j := range b {
			b[j] = letters[rng.IntN(len(letters))]
		}
		words[i] = string(b)
	}
	return words
}

// FixtureQuery is a keyword query of three words of middling frequency
// in the fixture's vocabulary, at most 10 hits, titles weighted 2.
func FixtureQuery() memory.Query {
	w := fixtureWords()
	return memory.Query{Terms: []string{w[40], w[120], w[300]}, K: 10, TitleWeight: 2}
}

// Fixture fills m, through its own methods (Ingest, CommitPromote), with
// repos repositories × elements elements × versions versions, three
// chunks each, bodies drawn from a Zipf vocabulary so that BM25 sees
// realistic term frequencies, and every repository's heads published. The
// same arguments give the same rows in any store.
func Fixture(ctx context.Context, m memory.Store, repos, elements, versions int) error {
	words := fixtureWords()
	rng := rand.New(rand.NewPCG(3, 4))
	z := rand.NewZipf(rng, 1.1, 2, uint64(len(words)-1))
	text := func(n int) string {
		var sb strings.Builder
		for i := range n {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(words[z.Uint64()])
		}
		return sb.String()
	}
	for r := range repos {
		sc := FixtureScope(r)
		var heads []string
		for v := range versions {
			files := make([]memory.IngestFile, elements)
			for e := range files {
				var chunks []memory.Chunk
				var body strings.Builder
				for c := range 3 {
					head, t := text(3), text(60)
					start := body.Len()
					fmt.Fprintf(&body, "## %s\n\n%s\n\n", head, t)
					chunks = append(chunks, memory.Chunk{Key: fmt.Sprintf("k%d", c), HeadingPath: head, Title: head, Text: t, Start: start, End: body.Len()})
				}
				id := fmt.Sprintf("ver_%03d_%03d_%d", r, e, v)
				files[e] = memory.IngestFile{ElementID: fmt.Sprintf("doc-%03d.md", e), Version: memory.NewVersion{VersionID: id, Title: fmt.Sprintf("doc %d", e),
					Body: body.String(), BodyHash: memory.HashBody(body.String()), SourceKind: protocol.SourceIngestedEvidence, Chunks: chunks}}
				if v == versions-1 {
					heads = append(heads, id)
				}
			}
			if _, err := m.Ingest(ctx, sc, files); err != nil {
				return err
			}
		}
		if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, Principal: protocol.MemoryPrincipal{PrincipalID: "bench"}, TxID: fmt.Sprintf("tx-%d", r),
			BaselineID: fmt.Sprintf("bl_%03d", r), Versions: heads, Reason: "ingest", DecisionID: fmt.Sprintf("dec_%03d", r)}); err != nil {
			return err
		}
	}
	return nil
}

// publishAll ingests files into sc and publishes every version the
// ingest names, as transaction tx.
func publishAll(t *testing.T, m memory.Store, sc protocol.MemoryScope, tx string, files ...memory.IngestFile) []memory.IngestOutcome {
	t.Helper()
	ctx := context.Background()
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
	return out
}

// curate proposes body on element id's current version and accepts it
// (transaction tx): the element's new CURATED version, not yet published.
func curate(t *testing.T, m memory.Store, sc protocol.MemoryScope, id, body, tx string) string {
	t.Helper()
	ctx := context.Background()
	head, err := m.Head(ctx, sc, id)
	if err != nil {
		t.Fatal(err)
	}
	pr := protocol.MemoryPrincipal{PrincipalID: "agent"}
	if err := m.Propose(ctx, memory.NewProposal{Scope: sc, Principal: pr, ProposalID: "prop_" + tx, TargetElementID: id, TargetVersionID: head.VersionID,
		Summary: "s", Version: memory.NewVersion{VersionID: "ver_prop_" + tx, Title: id, Body: body, BodyHash: memory.HashBody(body), SourceKind: protocol.SourceProposal}}); err != nil {
		t.Fatal(err)
	}
	if err := m.CommitAccept(ctx, memory.Accept{Scope: sc, Principal: protocol.MemoryPrincipal{PrincipalID: "curator"}, ProposalID: "prop_" + tx, TxID: tx,
		VersionID: "ver_" + tx, DecisionID: "dec_" + tx}); err != nil {
		t.Fatal(err)
	}
	return "ver_" + tx
}
