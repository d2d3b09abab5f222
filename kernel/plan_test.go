package kernel

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets"
)

// TestDecodePlan covers turn/start's plan: absent, text, a list of steps
// in both shapes, and every refusal with the field and reason it names.
func TestDecodePlan(t *testing.T) {
	ok := []struct {
		raw  string
		want *protocol.TurnPlan
	}{
		{``, nil},
		{`null`, nil},
		{`"read a.txt, then fix it"`, &protocol.TurnPlan{Text: "read a.txt, then fix it"}},
		{`["read", {"step":"edit","status":"in_progress"}, {"status":"completed","step":"test"}, {"step":"ship"}]`,
			&protocol.TurnPlan{Steps: []protocol.PlanStep{
				{Step: "read", Status: "pending"}, {Step: "edit", Status: "in_progress"},
				{Step: "test", Status: "completed"}, {Step: "ship", Status: "pending"}}}},
	}
	for _, c := range ok {
		got, err := decodePlan(json.RawMessage(c.raw))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("decodePlan(%s) = %+v, %v; want %+v", c.raw, got, err, c.want)
		}
	}
	bad := []struct{ raw, field, reason string }{
		{`7`, "plan", "wrong-type"},
		{`{"step":"x"}`, "plan", "wrong-type"},
		{`true`, "plan", "wrong-type"},
		{`""`, "plan", "empty"},
		{`"  \n"`, "plan", "empty"},
		{`[]`, "plan", "empty"},
		{`[7]`, "plan[0]", "wrong-type"},
		{`["a", null]`, "plan[1]", "wrong-type"},
		{`["a", ""]`, "plan[1]", "empty"},
		{`[{}]`, "plan[0].step", "missing-member"},
		{`[{"status":"pending"}]`, "plan[0].step", "missing-member"},
		{`[{"step":7}]`, "plan[0].step", "wrong-type"},
		{`[{"step":"a","status":"done"}]`, "plan[0].status", "unknown-status"},
		{`[{"step":"a","status":"inProgress"}]`, "plan[0].status", "unknown-status"},
		{`[{"step":"a","status":1}]`, "plan[0].status", "wrong-type"},
		{`[{"step":"a","Step":"b"}]`, "plan[0].Step", "unknown-member"},
		{`[{"step":"a","step":"b"}]`, "plan[0].step", "duplicate-member"},
		{`"` + strings.Repeat("x", maxPlanText+1) + `"`, "plan", "too-long"},
		{`[` + strings.Repeat(`"x",`, maxPlanSteps) + `"x"]`, "plan", "too-many-steps"},
	}
	for _, c := range bad {
		_, err := decodePlan(json.RawMessage(c.raw))
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Invalid {
			t.Errorf("decodePlan(%.40s): %v, want an errs.Invalid error", c.raw, err)
			continue
		}
		d, _ := e.Data.(errs.InvalidData)
		if d.Field != c.field || d.Reason != c.reason {
			t.Errorf("decodePlan(%.40s): data %+v, want field %q reason %q", c.raw, d, c.field, c.reason)
		}
	}
}

// TestRedactPlan checks that a secret in a plan never reaches the ledger.
func TestRedactPlan(t *testing.T) {
	sc := secrets.NewScanner()
	key := "AKIAZ3MJQ7X4RT2WPLKB"
	p := redactPlan(sc, &protocol.TurnPlan{Text: "rotate " + key, Steps: []protocol.PlanStep{{Step: "drop " + key, Status: "pending"}}})
	if strings.Contains(p.Text, key) || strings.Contains(p.Steps[0].Step, key) || p.Steps[0].Status != "pending" {
		t.Errorf("redactPlan = %+v", p)
	}
}

// FuzzDecodePlan feeds arbitrary JSON to the plan decoder: it must never
// panic, must refuse only with an errs.Invalid error naming a plan field,
// and what it accepts must be a plan with text or steps within bounds.
func FuzzDecodePlan(f *testing.F) {
	for _, s := range []string{`"x"`, `["a",{"step":"b","status":"completed"}]`, `[{"step":"a","step":"b"}]`,
		`[{"step":"a","status":"nope"}]`, `{}`, `[[]]`, `null`, `1e999`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // turn/start's params decode refuses it before
		}
		p, err := decodePlan(raw)
		if err != nil {
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Invalid {
				t.Fatalf("decodePlan(%q): %v is not errs.Invalid", raw, err)
			}
			if d, ok := e.Data.(errs.InvalidData); !ok || !strings.HasPrefix(d.Field, "plan") {
				t.Fatalf("decodePlan(%q): data %#v names no plan field", raw, e.Data)
			}
			return
		}
		if p == nil {
			return
		}
		if (p.Text == "") == (len(p.Steps) == 0) || len(p.Text) > maxPlanText || len(p.Steps) > maxPlanSteps {
			t.Fatalf("decodePlan(%q) = %+v", raw, p)
		}
		for _, st := range p.Steps {
			if st.Step == "" || (st.Status != "pending" && st.Status != "in_progress" && st.Status != "completed") {
				t.Fatalf("decodePlan(%q): step %+v", raw, st)
			}
		}
	})
}
