package search

import (
	"slices"
	"testing"
)

func TestFloor(t *testing.T) {
	sem := []Scored{{ID: 1, Score: 0.2}, {ID: 2, Score: 0.7}, {ID: 3, Score: 1}, {ID: 4, Score: 1.4}}
	for _, tc := range []struct {
		name string
		min  float64
		want []int64
	}{
		{"zero floor drops similarity <= 0", 0, []int64{1, 2}},
		{"a negative minScore still keeps the zero floor", -0.5, []int64{1, 2}},
		{"minScore above the second hit", 0.5, []int64{1}},
		{"minScore equal to a similarity drops it", 0.8, nil},
	} {
		var got []int64
		for _, h := range Floor(sem, tc.min) {
			got = append(got, h.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if len(sem) != 4 || sem[1].ID != 2 {
		t.Fatal("Floor changed its input")
	}
}

func TestZeroVector(t *testing.T) {
	if !ZeroVector([]float32{0, 0, 0}) || !ZeroVector(nil) || ZeroVector([]float32{0, 1e-9, 0}) {
		t.Fatal("ZeroVector")
	}
}

// TestKeywordFloor: zero and negative BM25 scores are no hits; positive
// ones keep their order; Fuse applies the floor.
func TestKeywordFloor(t *testing.T) {
	kw := []Scored{{ID: 1, Score: 2.5}, {ID: 2, Score: 0}, {ID: 3, Score: 1e-9}, {ID: 4, Score: -0.1}}
	got := keywordFloor(kw)
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 3 {
		t.Fatalf("keywordFloor = %v, want ids 1 and 3", got)
	}
	if f := Fuse(kw, nil, DefaultTuning, 10); len(f) != 2 {
		t.Fatalf("Fuse kept %d keyword hits, want 2: %v", len(f), f)
	}
}

// TestMatchExprStopwords: a query of stop words only ("should") matches
// nothing; stop words are dropped from a mixed one.
func TestMatchExprStopwords(t *testing.T) {
	for q, want := range map[string]string{
		"should":                 "",
		"What should we do":      "",
		"should closures borrow": `"closures" OR "borrow"`,
	} {
		if got := MatchExpr(q); got != want {
			t.Errorf("MatchExpr(%q) = %q, want %q", q, got, want)
		}
	}
}

// TestTerms: the words a keyword query searches for are lower-cased,
// split at anything but letters and digits, free of stop words and
// repeats, in order of first occurrence; FTS5 syntax in the text is only
// punctuation.
func TestTerms(t *testing.T) {
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"should", nil},
		{"Closures, closures BORROW", []string{"closures", "borrow"}},
		{`"lantern" OR NEAR(oil*)`, []string{"lantern", "near", "oil"}},
		{"r2d2 über", []string{"r2d2", "über"}},
	} {
		if got := Terms(c.q); !slices.Equal(got, c.want) {
			t.Errorf("Terms(%q) = %q, want %q", c.q, got, c.want)
		}
	}
}
