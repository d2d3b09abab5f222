package kernel

import (
	"testing"

	"github.com/txkernel/txkernel/protocol"
)

// TestMethodsTable checks the exported table against what the kernel
// answers: every request has params and result types, and the methods a
// person decides are exactly the six the MCP facade must never offer.
func TestMethodsTable(t *testing.T) {
	decides := map[string]bool{}
	requests := 0
	for _, m := range Methods() {
		if m.Service == "" {
			t.Errorf("%s has no service name", m.Name)
		}
		if m.Notification {
			continue
		}
		requests++
		if m.Params == nil || m.Result == nil {
			t.Errorf("%s: params %v, result %v; a request needs both", m.Name, m.Params, m.Result)
		}
		if m.Effect == Decides {
			decides[m.Name] = true
		}
	}
	if requests != len(RequestMethods()) {
		t.Errorf("Methods has %d requests, RequestMethods %d", requests, len(RequestMethods()))
	}
	want := []string{protocol.MethodApprovalRespond, protocol.MethodPatchSetDecide, protocol.MethodMemoryAccept,
		protocol.MethodMemoryReject, protocol.MethodMemoryRebase, protocol.MethodMemoryPromote}
	if len(decides) != len(want) {
		t.Errorf("decisions %v, want %v", decides, want)
	}
	for _, name := range want {
		if !decides[name] {
			t.Errorf("%s is not a decision", name)
		}
	}
	for _, name := range []string{protocol.MethodApplyExecute, protocol.MethodPatchApply} {
		for _, m := range Methods() {
			if m.Name == name && m.Effect != Destroys {
				t.Errorf("%s: effect %v, want destroys", name, m.Effect)
			}
		}
	}
}
