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
