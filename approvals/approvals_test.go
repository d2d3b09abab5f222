package approvals

import (
	"testing"

	"github.com/txkernel/txkernel/protocol"
)

// fold builds the approval state from events, in order, as the engine
// does from its ledger.
func fold(events []Event) *State {
	st := &State{}
	for _, ev := range events {
		st.Add(ev)
	}
	return st
}

func ev(typ string, req *protocol.ApprovalRequest, d *protocol.ApprovalDecision) Event {
	return Event{Type: typ, Approval: req, Decision: d}
}

func TestEvaluate(t *testing.T) {
	const pid = "abc"
	patch := Fingerprint(protocol.ApprovalPatchset, pid)
	secrets := Fingerprint(protocol.ApprovalSecretsOverride, pid)
	reqPatch := &protocol.ApprovalRequest{ApprovalRequestID: "apr-1", Kind: protocol.ApprovalPatchset, Fingerprint: patch}
	decide := func(id, fp, d string) *protocol.ApprovalDecision {
		return &protocol.ApprovalDecision{ApprovalRequestID: id, Fingerprint: fp, Decision: d, Source: "user"}
	}
	for _, tc := range []struct {
		name      string
		policy    Policy
		secrets   bool
		events    []Event
		reg       func(*Registry)
		denied    bool
		auto      []string
		toRequest []string
		pending   []string
	}{
		{name: "untrusted asks for the patchset", policy: Untrusted, toRequest: []string{patch}},
		{name: "never grants the patchset", policy: Never, auto: []string{"policy"}},
		{name: "never still asks for secrets", policy: Never, secrets: true, auto: []string{"policy"}, toRequest: []string{secrets}},
		{name: "requested once stays pending", policy: Untrusted, events: []Event{ev(protocol.EventApprovalRequest, reqPatch, nil)}, pending: []string{"apr-1"}},
		{name: "approved is ready", policy: Untrusted, events: []Event{ev(protocol.EventApprovalRequest, reqPatch, nil), ev(protocol.EventApprovalDecision, nil, decide("apr-1", patch, protocol.DecisionApprove))}},
		{name: "denied fails fast", policy: Never, events: []Event{ev(protocol.EventApprovalRequest, reqPatch, nil), ev(protocol.EventApprovalDecision, nil, decide("apr-1", patch, protocol.DecisionDeny))}, denied: true},
		{name: "denied elsewhere fails fast", policy: Untrusted, reg: func(r *Registry) {
			r.Observe("tx-other", *decide("apr-9", patch, protocol.DecisionDeny), false)
		}, denied: true},
		{name: "session grant is automatic", policy: Untrusted, reg: func(r *Registry) {
			r.Observe("tx-other", *decide("apr-9", patch, protocol.DecisionApproveForSession), true)
		}, auto: []string{"session"}},
		{name: "a grant from an earlier session is not", policy: Untrusted, reg: func(r *Registry) {
			r.Observe("tx-other", *decide("apr-9", patch, protocol.DecisionApproveForSession), false)
		}, toRequest: []string{patch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := NewRegistry()
			if tc.reg != nil {
				tc.reg(reg)
			}
			p := Evaluate("tx-1", fold(tc.events), Required(pid, tc.secrets), tc.policy, reg)
			if (p.Denied != nil) != tc.denied {
				t.Fatalf("denied = %v, want %v", p.Denied, tc.denied)
			}
			if got := p.AutoSource; len(got) != len(tc.auto) || (len(got) > 0 && got[0] != tc.auto[0]) {
				t.Fatalf("auto = %v, want %v", got, tc.auto)
			}
			var fps []string
			for _, r := range p.ToRequest {
				fps = append(fps, r.Fingerprint)
			}
			if len(fps) != len(tc.toRequest) || (len(fps) > 0 && fps[0] != tc.toRequest[0]) {
				t.Fatalf("toRequest = %v, want %v", fps, tc.toRequest)
			}
			var ids []string
			for _, r := range p.Pending {
				ids = append(ids, r.ApprovalRequestID)
			}
			if len(ids) != len(tc.pending) {
				t.Fatalf("pending = %v, want %v", ids, tc.pending)
			}
			wantReady := !tc.denied && len(tc.toRequest) == 0 && len(tc.pending) == 0
			if p.Ready() != wantReady {
				t.Fatalf("ready = %v, want %v", p.Ready(), wantReady)
			}
		})
	}
}

func TestParsePolicyAndDecision(t *testing.T) {
	for _, s := range []string{"untrusted", "never"} {
		if _, err := ParsePolicy(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"", "on-request", "NEVER"} {
		if _, err := ParsePolicy(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if ValidDecision("maybe") || !ValidDecision("approve_for_session") {
		t.Error("ValidDecision wrong")
	}
}
