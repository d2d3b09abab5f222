package store

import (
	"context"
	"testing"
)

// TestCorpusReadSnapshot: inside Corpus.Read, a ranking and the rows it
// names come from one state: a sync that commits between them (another
// connection) changes neither, and a read after Read sees the commit. A
// read never waits for a writer: the commit happens while the snapshot is
// open.
func TestCorpusReadSnapshot(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	c := db.Corpus()
	if _, err := c.OpenCorpus(ctx, "c1", "log.md", "log"); err != nil {
		t.Fatal(err)
	}
	row := Chunk{DocPath: "log.md", ChunkKey: "1", Canonical: 1, Filed: "I", Title: "One", HeadingPath: []string{"One"}, Body: "alpha quartz",
		Authors: []string{}, ExecTags: []string{}, StatusTags: []string{}, ContentHash: "h1", BodyHash: "b1", End: 10}
	ids, err := c.ApplySync(ctx, "c1", SyncUpdate{Upsert: []Chunk{row}, SourceHash: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// commit is the sync that lands between the ranking and the fetch.
		body, hash string
	}{
		{"body rewritten", "beta quartz", "h2"},
		{"body rewritten back", "alpha quartz", "h3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := c.ChunksByID(ctx, ids)
			word := "alpha"
			if before[ids[0]].Body != "alpha quartz" {
				word = "beta"
			}
			err := c.Read(ctx, func(r *CorpusRead) error {
				hits, err := r.SearchKeyword(ctx, "c1", word, Filter{}, 10, 2)
				if err != nil || len(hits) != 1 {
					t.Fatalf("ranking: %v %v", hits, err)
				}
				up := row
				up.ID, up.Body, up.ContentHash = ids[0], tc.body, tc.hash
				if _, err := c.ApplySync(ctx, "c1", SyncUpdate{Upsert: []Chunk{up}, SourceHash: tc.hash}); err != nil {
					t.Fatalf("a sync during the read: %v", err)
				}
				rows, err := r.ChunksByID(ctx, []int64{hits[0].ID})
				if err != nil {
					return err
				}
				if got := rows[hits[0].ID].Body; got != before[ids[0]].Body {
					t.Errorf("inside the snapshot the ranked row shows %q, want %q (what it was ranked on)", got, before[ids[0]].Body)
				}
				again, _ := r.SearchKeyword(ctx, "c1", word, Filter{}, 10, 2)
				if len(again) != 1 {
					t.Errorf("inside the snapshot the ranking changed: %v", again)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			after, _ := c.ChunksByID(ctx, ids)
			if after[ids[0]].Body != tc.body {
				t.Errorf("after the read: %q, want %q", after[ids[0]].Body, tc.body)
			}
		})
	}
}
