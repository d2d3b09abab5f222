package tx

import (
	"slices"
	"testing"
)

// TestTxIDsMonotonic: ids made in a burst (many per millisecond) are
// distinct, well-formed, and sort newest first in the order they were made.
func TestTxIDsMonotonic(t *testing.T) {
	var c idClock
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = c.newTxID()
		if len(ids[i]) != txIDLen || !validTxID(ids[i]) {
			t.Fatalf("malformed id %q", ids[i])
		}
	}
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, listOrder)
	slices.Reverse(sorted)
	if !slices.Equal(sorted, ids) {
		t.Fatal("ids do not sort in creation order")
	}
	if len(slices.Compact(sorted)) != len(ids) {
		t.Fatal("duplicate ids")
	}
	if listOrder("tx-0123456789abcdef", ids[0]) <= 0 {
		t.Fatal("an id of an earlier release must sort as older than a new one")
	}
}
