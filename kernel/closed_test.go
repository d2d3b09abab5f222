package kernel

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// TestDecodeParamsWireNames checks that decode errors name wire members
// only: no embedded Go struct name (ReadContextParams embeds
// MemoryRequest) and no Go type, and that unknown and mis-cased members
// are refused with the known ones listed, except unknown members of
// initialize's Open params.
func TestDecodeParamsWireNames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		into   func() any
		params string
		field  string // "" when the params decode
		reason string
		known  []string
	}{
		{"embedded struct type name", func() any { return new(protocol.ReadContextParams) }, `{"principal":"alice"}`, "principal", "", nil},
		{"nested under an embedded struct", func() any { return new(protocol.ReadContextParams) }, `{"principal":{"roles":"agent"}}`, "principal.roles", "", nil},
		{"misspelt filter", func() any { return new(protocol.CorpusSearchParams) }, `{"filters":{"author":["a"]}}`, "filters.author", "unknown-member",
			[]string{"authors", "date_range", "exec_tags", "is_external_caller", "retro_dark_fields", "status_tags"}},
		{"misspelt date range end", func() any { return new(protocol.CorpusSearchParams) }, `{"filters":{"date_range":{"until":"2020-01-01"}}}`, "filters.date_range.until", "unknown-member", []string{"from", "to"}},
		{"filters in another case", func() any { return new(protocol.CorpusSearchParams) }, `{"filters":{"Authors":["a"]}}`, "filters.Authors", "wrong-case",
			[]string{"authors", "date_range", "exec_tags", "is_external_caller", "retro_dark_fields", "status_tags"}},
		{"unknown top-level member", func() any { return new(protocol.CorpusSearchParams) }, `{"corpusId":"c","newThing":1}`, "newThing", "unknown-member",
			[]string{"corpusId", "filters", "k", "minScore", "mode", "query"}},
		{"transactionID for transactionId", func() any { return new(protocol.TxParams) }, `{"transactionID":"tx-1"}`, "transactionID", "wrong-case", []string{"transactionId"}},
		{"initialize keeps a host's own members", func() any { return new(protocol.InitializeParams) }, `{"processId":1,"capabilities":{"x":{}},"clientInfo":{"name":"h"}}`, "", "", nil},
		{"initialize's capabilities keep a host's own members", func() any { return new(protocol.InitializeParams) },
			`{"capabilities":{"experimentalApi":true,"workspace":{"applyEdit":true},"optOutNotificationMethods":["turn/item"]}}`, "", "", nil},
		{"initialize's capabilities in another case", func() any { return new(protocol.InitializeParams) },
			`{"capabilities":{"OptOutNotificationMethods":["turn/item"]}}`, "capabilities.OptOutNotificationMethods", "wrong-case", []string{"optOutNotificationMethods"}},
		{"initialize in another case", func() any { return new(protocol.InitializeParams) }, `{"ClientInfo":{"name":"h"}}`, "ClientInfo", "wrong-case", []string{"caller", "capabilities", "clientInfo", "protocolVersion"}},
		{"a member inside an object of initialize", func() any { return new(protocol.InitializeParams) }, `{"clientInfo":{"name":"h","title":"T"}}`, "", "", nil},
		{"a selector decodes itself", func() any { return new(protocol.ReadContextParams) }, `{"selector":"published"}`, "", "", nil},
		{"type mismatch in filters", func() any { return new(protocol.CorpusSearchParams) }, `{"filters":{"authors":"a"}}`, "filters.authors", "", nil},
	} {
		err := decodeParams([]byte(tc.params), tc.into())
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var e *errs.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, want an errs.Error", tc.name, err)
			continue
		}
		d, _ := e.Data.(errs.InvalidData)
		if d.Field != tc.field || d.Reason != tc.reason || !slices.Equal(d.Known, tc.known) {
			t.Errorf("%s: data %+v, want field %q reason %q known %v", tc.name, d, tc.field, tc.reason, tc.known)
		}
		for _, goName := range []string{"MemoryRequest", "MemoryPrincipal", "[]string", "Go struct"} {
			if strings.Contains(e.Error(), goName) {
				t.Errorf("%s: message %q names Go's %s", tc.name, e.Error(), goName)
			}
		}
	}
}
