package protocol

import (
	"encoding/json"
	"testing"
)

// TestBaselineSelector: seed 002's two spellings decode; anything else is
// an error.
func TestBaselineSelector(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want BaselineSelector
		ok   bool
	}{
		{`"published"`, BaselineSelector{Kind: SelectorPublished}, true},
		{`{"baseline_id":"bl_1"}`, BaselineSelector{Kind: SelectorBaselineID, BaselineID: "bl_1"}, true},
		{`{"kind":"baseline_id","baseline_id":"bl_1"}`, BaselineSelector{Kind: SelectorBaselineID, BaselineID: "bl_1"}, true},
		{`{"kind":"published"}`, BaselineSelector{Kind: SelectorPublished}, true},
		{`{}`, BaselineSelector{Kind: SelectorPublished}, true},
		{`"latest"`, BaselineSelector{}, false},
		{`{"kind":"published","baseline_id":"bl_1"}`, BaselineSelector{}, false},
		{`{"kind":"baseline_id"}`, BaselineSelector{}, false},
		{`7`, BaselineSelector{}, false},
	} {
		var got BaselineSelector
		err := json.Unmarshal([]byte(tc.in), &got)
		if (err == nil) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzBaselineSelector: any JSON decodes to a published or baseline_id
// selector, or errors; never a panic, never a baseline_id selector
// without an id.
func FuzzBaselineSelector(f *testing.F) {
	f.Add([]byte(`"published"`))
	f.Add([]byte(`{"baseline_id":"bl_1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s BaselineSelector
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		switch {
		case s.Kind == SelectorPublished && s.BaselineID == "":
		case s.Kind == SelectorBaselineID && s.BaselineID != "":
		default:
			t.Fatalf("%q decoded to %+v", data, s)
		}
	})
}
