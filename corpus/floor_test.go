package corpus

import "testing"

// TestFloorParam: corpus/search's semantic floor is DefaultMinScore when
// minScore is absent, never below the noise floor when it is 0, the given
// value otherwise, and out-of-range values are refused.
func TestFloorParam(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		in   *float64
		want float64
		err  bool
	}{
		{nil, DefaultMinScore, false},
		{f(0), noiseFloor, false},
		{f(0.35), 0.35, false},
		{f(-0.1), 0, true},
		{f(1), 0, true},
	} {
		got, err := floorParam(tc.in)
		if (err != nil) != tc.err || !tc.err && got != tc.want {
			t.Errorf("floorParam(%v) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
	if DefaultMinScore <= noiseFloor {
		t.Fatal("the default floor must be a real similarity, above float noise")
	}
}
