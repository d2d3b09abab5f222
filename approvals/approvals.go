// Package approvals decides which approvals an apply needs and whether they
// are granted. It is pure logic over a transaction's ledger events (seed 001,
// "Approvals in the apply phase") plus a per-process Registry that holds
// approve_for_session grants and the deny decisions of every transaction.
//
// Deny sticks: once a fingerprint has a deny decision in any ledger, every
// later apply that needs it fails fast, in this process and after a restart
// (the Registry is rebuilt from the ledgers at start-up). There is no silent
// retry.
package approvals

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/txkernel/txkernel/protocol"
)

// Policy is the --approval-policy flag.
type Policy string

const (
	// Untrusted (the default) requires a person's approval of every patchset.
	Untrusted Policy = "untrusted"
	// Never grants the patchset approval automatically and records it with
	// source "policy". The secrets_override and hard_avoid_override
	// guardrails still need a person.
	Never Policy = "never"
)

// ParsePolicy parses an --approval-policy value; it errors on anything but
// untrusted and never.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Untrusted, Never:
		return p, nil
	}
	return "", fmt.Errorf("unknown approval policy %q (want untrusted or never)", s)
}

// Requirement is one approval an apply needs: a kind and its fingerprint.
type Requirement struct {
	Kind        string
	Fingerprint string
	Reason      string
}

// Fingerprint returns the approval key for kind and a patch_id:
// "patchset:{patch_id}" (seed 001) or "secrets_override:{patch_id}".
func Fingerprint(kind, patchID string) string { return kind + ":" + patchID }

// workspaceReason is the reason of a workspace patch's patchset approval.
const workspaceReason = "apply this patch to the workspace"

// Required lists the approvals a workspace patch needs: always its
// patchset approval, and a secrets_override when secrets appear in its
// added lines.
func Required(patchID string, containsSecrets bool) []Requirement {
	return RequiredFor(patchID, workspaceReason, containsSecrets)
}

// RequiredFor is Required for any target: reason is the patchset
// approval's reason, which names what the patch changes ("patch document
// \"d\" at revision 3 (2 operations)"), so a person asked to approve
// reads what they approve.
func RequiredFor(patchID, reason string, containsSecrets bool) []Requirement {
	reqs := []Requirement{{
		Kind:        protocol.ApprovalPatchset,
		Fingerprint: Fingerprint(protocol.ApprovalPatchset, patchID),
		Reason:      reason,
	}}
	if containsSecrets {
		reqs = append(reqs, Requirement{
			Kind:        protocol.ApprovalSecretsOverride,
			Fingerprint: Fingerprint(protocol.ApprovalSecretsOverride, patchID),
			Reason:      "the patch adds lines that look like secrets",
		})
	}
	return reqs
}

// HardAvoidOverride is the approval a document change needs when it lifts
// a recipe's hard avoids (seed 003: a hard avoid holds "unless the user
// explicitly overrides it for this recipe"): kind hard_avoid_override,
// fingerprint "hard_avoid_override:{patch_id}", and a reason naming the
// recipe and what is lifted. Like secrets_override, no policy grants it
// (Evaluate): a person must.
func HardAvoidOverride(patchID, docID string, lifted []string) Requirement {
	return Requirement{
		Kind:        protocol.ApprovalHardAvoidOverride,
		Fingerprint: Fingerprint(protocol.ApprovalHardAvoidOverride, patchID),
		Reason:      fmt.Sprintf("the patch lifts hard avoids of recipe %q: %s", docID, strings.Join(quoted(lifted), ", ")),
	}
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// ValidDecision reports whether d is approve, approve_for_session or deny.
func ValidDecision(d string) bool {
	switch d {
	case protocol.DecisionApprove, protocol.DecisionApproveForSession, protocol.DecisionDeny:
		return true
	}
	return false
}

// State is the approval state folded from one transaction's events:
// requests in ledger order and the decision taken on each.
type State struct {
	Requests  []protocol.ApprovalRequest
	Decisions []protocol.ApprovalDecision
}

// Event is what the approval state reads of one ledger event: its type
// and, on an approval/request or approval/decision event, the request or
// decision it carries. The engine adapts its ledger's events (tx/record's
// Event) to it, so that approvals sits a floor below the record layer and
// does not import it.
type Event struct {
	Type     string
	Approval *protocol.ApprovalRequest
	Decision *protocol.ApprovalDecision
}

// Add folds one ledger event into s: an approval/request event's request
// and an approval/decision event's decision, in the order given; any other
// event, or one without its payload, leaves s as it is.
func (s *State) Add(ev Event) {
	switch {
	case ev.Type == protocol.EventApprovalRequest && ev.Approval != nil:
		s.Requests = append(s.Requests, *ev.Approval)
	case ev.Type == protocol.EventApprovalDecision && ev.Decision != nil:
		s.Decisions = append(s.Decisions, *ev.Decision)
	}
}

// Request returns the request with id, if the ledger has it.
func (s *State) Request(id string) (protocol.ApprovalRequest, bool) {
	i := slices.IndexFunc(s.Requests, func(r protocol.ApprovalRequest) bool { return r.ApprovalRequestID == id })
	if i < 0 {
		return protocol.ApprovalRequest{}, false
	}
	return s.Requests[i], true
}

// DecisionFor returns the decision taken on request id, if any.
func (s *State) DecisionFor(id string) (protocol.ApprovalDecision, bool) {
	i := slices.IndexFunc(s.Decisions, func(d protocol.ApprovalDecision) bool { return d.ApprovalRequestID == id })
	if i < 0 {
		return protocol.ApprovalDecision{}, false
	}
	return s.Decisions[i], true
}

// Pending lists requests that have no decision yet, in ledger order.
func (s *State) Pending() []protocol.ApprovalRequest {
	out := []protocol.ApprovalRequest{}
	for _, r := range s.Requests {
		if _, ok := s.DecisionFor(r.ApprovalRequestID); !ok {
			out = append(out, r)
		}
	}
	return out
}

// decided returns the strongest decision on fingerprint fp: a deny wins over
// any grant, so a fingerprint once denied stays denied.
func (s *State) decided(fp string) (protocol.ApprovalDecision, bool) {
	var found protocol.ApprovalDecision
	ok := false
	for _, d := range s.Decisions {
		if d.Fingerprint != fp {
			continue
		}
		if d.Decision == protocol.DecisionDeny {
			return d, true
		}
		found, ok = d, true
	}
	return found, ok
}

// Denial says where a fingerprint was denied.
type Denial struct {
	TransactionID string
	Decision      protocol.ApprovalDecision
}

// Registry holds what outlives one transaction: approve_for_session grants
// (this process only, by design) and deny decisions (rebuilt from every
// ledger at start-up). It is safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	session map[string]bool
	denied  map[string]Denial
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{session: map[string]bool{}, denied: map[string]Denial{}}
}

// Observe records what a ledger's decisions mean beyond its transaction:
// denies always; approve_for_session grants only when live is true (a grant
// read back from disk after a restart belongs to an earlier session).
func (r *Registry) Observe(txID string, d protocol.ApprovalDecision, live bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch d.Decision {
	case protocol.DecisionDeny:
		if _, ok := r.denied[d.Fingerprint]; !ok {
			r.denied[d.Fingerprint] = Denial{TransactionID: txID, Decision: d}
		}
	case protocol.DecisionApproveForSession:
		if live {
			r.session[d.Fingerprint] = true
		}
	}
}

func (r *Registry) denial(fp string) (Denial, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.denied[fp]
	return d, ok
}

func (r *Registry) sessionGrant(fp string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.session[fp]
}

// Plan is what an apply must do about approvals before it may write.
type Plan struct {
	// Denied is set when a required fingerprint has a deny decision; the
	// apply must fail fast with CodeApprovalDenied.
	Denied *Denial
	// Auto are grants the kernel records itself (source "policy" or
	// "session"), as approval/decision events, before applying.
	Auto []Requirement
	// AutoSource gives the source of each entry of Auto.
	AutoSource []string
	// ToRequest have never been requested: emit approval/request for each.
	ToRequest []Requirement
	// Pending were requested earlier and still wait for a decision.
	Pending []protocol.ApprovalRequest
}

// Ready reports whether the apply may go ahead once Auto is recorded.
func (p Plan) Ready() bool {
	return p.Denied == nil && len(p.ToRequest) == 0 && len(p.Pending) == 0
}

// Evaluate decides, for the requirements of one transaction, what is denied,
// granted, automatic, pending or still to request. txID names the
// transaction whose ledger st was folded from.
func Evaluate(txID string, st *State, reqs []Requirement, policy Policy, reg *Registry) Plan {
	var p Plan
	pending := st.Pending()
	for _, req := range reqs {
		if d, ok := st.decided(req.Fingerprint); ok && d.Decision == protocol.DecisionDeny {
			p.Denied = &Denial{TransactionID: txID, Decision: d}
			return p
		}
		if d, ok := reg.denial(req.Fingerprint); ok {
			p.Denied = &d
			return p
		}
	}
	for _, req := range reqs {
		if _, ok := st.decided(req.Fingerprint); ok {
			continue // approved (a deny returned above)
		}
		switch {
		case reg.sessionGrant(req.Fingerprint):
			p.Auto = append(p.Auto, req)
			p.AutoSource = append(p.AutoSource, "session")
			continue
		case policy == Never && req.Kind == protocol.ApprovalPatchset:
			p.Auto = append(p.Auto, req)
			p.AutoSource = append(p.AutoSource, "policy")
			continue
		}
		i := slices.IndexFunc(pending, func(r protocol.ApprovalRequest) bool { return r.Fingerprint == req.Fingerprint })
		if i >= 0 {
			p.Pending = append(p.Pending, pending[i])
		} else {
			p.ToRequest = append(p.ToRequest, req)
		}
	}
	return p
}
