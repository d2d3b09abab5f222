package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestErrorIsComparesCode(t *testing.T) {
	err := fmt.Errorf("apply: %w", NewError(CodeStaleBase, map[string]any{"stalePaths": []string{"a"}}, "stale base: %d file(s)", 1))
	if !errors.Is(err, ErrCode(CodeStaleBase)) {
		t.Fatal("a wrapped stale-base error must match ErrCode(CodeStaleBase)")
	}
	if errors.Is(err, ErrCode(CodeNotFound)) {
		t.Fatal("codes must differ")
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Message != "stale base: 1 file(s)" {
		t.Fatalf("As = %+v", pe)
	}
	b, _ := json.Marshal(pe)
	if string(b) != `{"code":-32001,"message":"stale base: 1 file(s)","data":{"stalePaths":["a"]}}` {
		t.Fatalf("wire form %s", b)
	}
}

func TestApplicationCodesInServerRange(t *testing.T) {
	for _, c := range []int64{CodeStaleBase, CodeNotFound, CodeApprovalDenied, CodeSandboxViolation, CodeValidationFailed,
		CodeTransactionClosed, CodeAlreadyDecided, CodeLedgerCorrupt, CodeNotInitialized, CodeShuttingDown} {
		if c < -32099 || c > -32000 {
			t.Errorf("code %d is outside -32099..-32000", c)
		}
	}
}
