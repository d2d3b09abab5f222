package tx

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/txkernel/txkernel/errs"
)

// TestNotFoundEchoBounded: an unknown transaction id is echoed whole up to
// maxEchoedID bytes, and cut there on a rune boundary beyond, in the
// message and the data alike.
func TestNotFoundEchoBounded(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		whole    bool
	}{
		{"real", "tx-0123456789abcdef0123", true},
		{"at the bound", strings.Repeat("a", maxEchoedID), true},
		{"a megabyte", "tx-" + strings.Repeat("a", 1<<20), false},
		{"cut inside a rune", strings.Repeat("a", maxEchoedID-1) + "é" + strings.Repeat("b", 10), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *errs.Error
			if !errors.As(notFoundTx(tc.id), &e) || e.Kind != errs.NotFound {
				t.Fatalf("notFoundTx: %v", notFoundTx(tc.id))
			}
			got := e.Data.(TxData).TransactionID
			switch {
			case tc.whole && got != tc.id:
				t.Fatalf("id echoed as %q, want it whole", got)
			case !tc.whole && (len(got) > maxEchoedID+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(tc.id, strings.TrimSuffix(got, "…"))):
				t.Fatalf("id of %d bytes echoed as %d bytes %q…", len(tc.id), len(got), got[:min(len(got), 40)])
			case !utf8.ValidString(got) || len(e.Error()) > 2*maxEchoedID:
				t.Fatalf("echo %q (valid UTF-8 %v), message of %d bytes", got, utf8.ValidString(got), len(e.Error()))
			}
		})
	}
}
