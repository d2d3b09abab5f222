package kernel

// This file decodes turn/start's optional plan (seed 001 lists plan items
// in a turn), strictly: its JSON type, every step's members by exact name,
// the step statuses, and bounds on its size.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/jsondoc"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets"
)

// Bounds of a plan: at most maxPlanSteps steps, and at most maxPlanText
// bytes in its text or in any one step.
const (
	maxPlanSteps = 1000
	maxPlanText  = 64 << 10
)

// decodePlan decodes turn/start's plan: absent (or null) is no plan; a
// string is a plan as text; an array is a list of steps, each a string (a
// pending step) or an object {step, status?} whose status is pending (the
// default), in_progress or completed. Anything else is errs.Invalid naming
// the field ("plan", "plan[2].status") with a reason: wrong-type, empty,
// too-long, too-many-steps, unknown-member, duplicate-member,
// missing-member or unknown-status.
func decodePlan(raw json.RawMessage) (*protocol.TurnPlan, error) {
	switch t := jsondoc.JSONType(raw); t {
	case "invalid", "null":
		return nil, nil
	case "string":
		text, err := planText(raw, "plan")
		if err != nil {
			return nil, err
		}
		return &protocol.TurnPlan{Text: text}, nil
	case "array":
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, errs.InvalidData{Field: "plan", Reason: "malformed-json"}, "plan is not valid JSON")
		}
		if len(elems) == 0 {
			return nil, planErr("plan", "empty", "plan has no steps: give at least one, or leave plan out")
		}
		if len(elems) > maxPlanSteps {
			return nil, planErr("plan", "too-many-steps", "plan has %d steps, more than %d", len(elems), maxPlanSteps)
		}
		steps := make([]protocol.PlanStep, len(elems))
		for i, e := range elems {
			st, err := planStep(e, fmt.Sprintf("plan[%d]", i))
			if err != nil {
				return nil, err
			}
			steps[i] = st
		}
		return &protocol.TurnPlan{Steps: steps}, nil
	default:
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "plan", Expected: "string or array", Got: t, Reason: jsondoc.ReasonWrongType},
			"plan must be a string or an array of steps, not %s", t)
	}
}

// planStep decodes one step: a string, or {step, status?} by exact names.
func planStep(raw json.RawMessage, field string) (protocol.PlanStep, error) {
	switch t := jsondoc.JSONType(raw); t {
	case "string":
		text, err := planText(raw, field)
		return protocol.PlanStep{Step: text, Status: protocol.StepPending}, err
	case "object":
	default:
		return protocol.PlanStep{}, errs.New(errs.Invalid, errs.InvalidData{Field: field, Expected: "string or object", Got: t, Reason: jsondoc.ReasonWrongType},
			"%s must be a string or an object {step, status}, not %s", field, t)
	}
	members, err := jsondoc.Members(raw, field)
	if err != nil {
		return protocol.PlanStep{}, err
	}
	st := protocol.PlanStep{Status: protocol.StepPending}
	hasStep := false
	for _, m := range members {
		f := field + "." + m.Name
		switch m.Name {
		case "step":
			if st.Step, err = planText(m.Value, f); err != nil {
				return protocol.PlanStep{}, err
			}
			hasStep = true
		case "status":
			if t := jsondoc.JSONType(m.Value); t != "string" {
				return protocol.PlanStep{}, jsondoc.TypeError(f, "string", t)
			}
			_ = json.Unmarshal(m.Value, &st.Status)
			switch st.Status {
			case protocol.StepPending, protocol.StepInProgress, protocol.StepCompleted:
			default:
				return protocol.PlanStep{}, planErr(f, "unknown-status", "%s must be pending, in_progress or completed, not %q", f, st.Status)
			}
		default:
			return protocol.PlanStep{}, planErr(f, "unknown-member", "unknown plan step member %q (members are step and status, in that exact case)", m.Name)
		}
	}
	if !hasStep {
		return protocol.PlanStep{}, planErr(field+".step", jsondoc.ReasonMissingMember, "%s.step is required", field)
	}
	return st, nil
}

// planText decodes a JSON string that must hold some text: not only
// white space, at most maxPlanText bytes.
func planText(raw json.RawMessage, field string) (string, error) {
	if t := jsondoc.JSONType(raw); t != "string" {
		return "", jsondoc.TypeError(field, "string", t)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errs.Wrap(errs.Invalid, err, errs.InvalidData{Field: field, Reason: "malformed-json"}, "%s is not a valid JSON string", field)
	}
	if strings.TrimSpace(s) == "" {
		return "", planErr(field, "empty", "%s is empty", field)
	}
	if len(s) > maxPlanText {
		return "", planErr(field, "too-long", "%s is %d bytes, more than %d", field, len(s), maxPlanText)
	}
	return s, nil
}

// planErr is the errs.Invalid error of a plan field, with a reason.
func planErr(field, reason, format string, args ...any) error {
	return errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: reason}, format, args...)
}

// redactPlan returns p with secrets redacted in its text and steps: the
// plan item is stored in the ledger and sent to the host, which carry no
// secret (PROTOCOL.md §7.4).
func redactPlan(sc *secrets.Scanner, p *protocol.TurnPlan) *protocol.TurnPlan {
	if p == nil {
		return nil
	}
	out := &protocol.TurnPlan{}
	if p.Text != "" {
		out.Text, _ = sc.RedactString(p.Text)
	}
	for _, st := range p.Steps {
		st.Step, _ = sc.RedactString(st.Step)
		out.Steps = append(out.Steps, st)
	}
	return out
}
