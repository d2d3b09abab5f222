package recipe

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/txkernel/txkernel/jsondoc"
)

// newIDs hands out ids for added steps and ingredients: prefix and the
// smallest number above every id of that form in use, so they are
// deterministic and never collide.
type newIDs struct {
	prefix string
	next   int
}

func idsAfter(prefix string, used []string) *newIDs {
	n := 0
	for _, id := range used {
		if len(id) > len(prefix) && id[:len(prefix)] == prefix {
			if k, err := strconv.Atoi(id[len(prefix):]); err == nil && k > n {
				n = k
			}
		}
	}
	return &newIDs{prefix: prefix, next: n + 1}
}

func (g *newIDs) take() string {
	id := g.prefix + strconv.Itoa(g.next)
	g.next++
	return id
}

// Compile turns a validated PatchSet into RFC 6902 operations on the recipe
// document, in patch order. Every change to an existing item is guarded by
// a test of its id at its index, so operations computed against another
// version fail instead of changing the wrong item. Added steps get ids
// s<N> and ingredients i<N> (see newIDs) and status todo; the first note
// creates notes when the recipe has none.
func Compile(r *Recipe, ps *PatchSet) ([]jsondoc.Operation, error) {
	stepIDs := make([]string, len(r.Steps))
	for i, s := range r.Steps {
		stepIDs[i] = s.ID
	}
	ingIDs := make([]string, len(r.Ingredients))
	for i, g := range r.Ingredients {
		ingIDs[i] = g.ID
	}
	sids, iids := idsAfter("s", stepIDs), idsAfter("i", ingIDs)
	hasNotes := r.Notes != nil
	var ops []jsondoc.Operation
	test := func(list string, i int, id string) {
		ops = append(ops, jsondoc.Operation{Op: "test", Path: fmt.Sprintf("/%s/%d/id", list, i), Value: id, HasValue: true})
	}
	for k, p := range ps.Patches {
		switch p.Op {
		case "update_step", "add_step":
			id := p.StepID
			if p.Op == "add_step" {
				id = p.AfterStepID
			}
			i := indexOf(stepIDs, id)
			if i < 0 {
				return nil, fmt.Errorf("patch %d: no step %q", k, id)
			}
			test("steps", i, id)
			if p.Op == "update_step" {
				ops = append(ops, jsondoc.Operation{Op: "replace", Path: fmt.Sprintf("/steps/%d/text", i), Value: p.Text, HasValue: true})
				continue
			}
			nid := sids.take()
			ops = append(ops, jsondoc.Operation{Op: "add", Path: fmt.Sprintf("/steps/%d", i+1), HasValue: true,
				Value: map[string]any{"id": nid, "text": p.Text, "status": "todo"}})
			stepIDs = insertAt(stepIDs, i+1, nid)
		case "update_ingredient", "remove_ingredient":
			i := indexOf(ingIDs, p.ID)
			if i < 0 {
				return nil, fmt.Errorf("patch %d: no ingredient %q", k, p.ID)
			}
			test("ingredients", i, p.ID)
			if p.Op == "update_ingredient" {
				ops = append(ops, jsondoc.Operation{Op: "replace", Path: fmt.Sprintf("/ingredients/%d/text", i), Value: p.Text, HasValue: true})
				continue
			}
			ops = append(ops, jsondoc.Operation{Op: "remove", Path: fmt.Sprintf("/ingredients/%d", i)})
			ingIDs = append(ingIDs[:i:i], ingIDs[i+1:]...)
		case "add_ingredient":
			nid := iids.take()
			ops = append(ops, jsondoc.Operation{Op: "add", Path: "/ingredients/-", HasValue: true, Value: map[string]any{"id": nid, "text": p.Text}})
			ingIDs = append(ingIDs, nid)
		case "add_note":
			if !hasNotes {
				ops = append(ops, jsondoc.Operation{Op: "add", Path: "/notes", Value: []any{p.Text}, HasValue: true})
				hasNotes = true
				continue
			}
			ops = append(ops, jsondoc.Operation{Op: "add", Path: "/notes/-", Value: p.Text, HasValue: true})
		default:
			return nil, fmt.Errorf("patch %d: unknown op %q", k, p.Op)
		}
	}
	return ops, nil
}

func indexOf(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

func insertAt(s []string, i int, v string) []string {
	s = append(s, "")
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

// CountImpacted counts what ps changes, by the kernel (seed 003: never
// trusted from the caller). No operation removes a step.
func CountImpacted(r *Recipe, ps *PatchSet) Impacted {
	var n Impacted
	seenStep, seenIng := map[string]bool{}, map[string]bool{}
	for _, p := range ps.Patches {
		switch p.Op {
		case "add_step":
			n.StepsAdded++
		case "update_step":
			if !seenStep[p.StepID] {
				seenStep[p.StepID] = true
				n.StepsModified++
			}
		case "add_ingredient":
			n.IngredientsAdded++
		case "update_ingredient":
			if !seenIng[p.ID] {
				seenIng[p.ID] = true
				n.IngredientsModified++
			}
		case "remove_ingredient":
			n.IngredientsRemoved++
		}
	}
	return n
}

// ReviewItem is one step or ingredient in Patch Review Mode: Change is
// added, modified, removed (rendered as a ghost in its original place) or
// unchanged; OldText is the text before a modification.
type ReviewItem struct {
	ID         string `json:"id"`
	Change     string `json:"change"`
	Text       string `json:"text"`
	OldText    string `json:"oldText,omitempty"`
	Status     string `json:"status,omitempty"`
	PatchIndex *int   `json:"patchIndex,omitempty"`
}

// ReviewNote is one note: added or unchanged.
type ReviewNote struct {
	Change string `json:"change"`
	Text   string `json:"text"`
}

// ReviewResult is what patchset/review returns: every item in its
// original position with its change, the full end state, and the counts.
type ReviewResult struct {
	PatchSetID  string       `json:"patchSetId"`
	Steps       []ReviewItem `json:"steps"`
	Ingredients []ReviewItem `json:"ingredients"`
	Notes       []ReviewNote `json:"notes"`
	EndState    *Recipe      `json:"endState"`
	Impacted    Impacted     `json:"impacted"`
}

// Review renders ps against the recipe document content (seed 003's rendering
// requirements: PROTOCOL.md §11): added steps right after their after_step_id,
// added ingredients at the end, removed ones where they were, and the end
// state the compiled patch produces.
func Review(content []byte, ps *PatchSet) (*ReviewResult, error) {
	var rec Recipe
	if err := json.Unmarshal(content, &rec); err != nil {
		return nil, err
	}
	r := &rec
	ops, err := Compile(r, ps)
	if err != nil {
		return nil, err
	}
	lim := jsondoc.DefaultLimits()
	doc, err := jsondoc.Decode(content, lim)
	if err != nil {
		return nil, err
	}
	after, err := jsondoc.Apply(doc, ops, lim)
	if err != nil {
		return nil, err
	}
	endRaw, err := jsondoc.Encode(after)
	if err != nil {
		return nil, err
	}
	var end Recipe
	if err := json.Unmarshal(endRaw, &end); err != nil {
		return nil, err
	}
	out := &ReviewResult{PatchSetID: ps.PatchSetID, EndState: &end, Impacted: CountImpacted(r, ps), Steps: []ReviewItem{}, Ingredients: []ReviewItem{}, Notes: []ReviewNote{}}
	// Ids of added items, as Compile gives them.
	var addedIng []string
	for _, g := range end.Ingredients {
		if indexOfIng(r.Ingredients, g.ID) < 0 {
			addedIng = append(addedIng, g.ID)
		}
	}
	for _, s := range r.Steps {
		it := ReviewItem{ID: s.ID, Change: "unchanged", Text: s.Text, Status: s.Status}
		for k, p := range ps.Patches {
			if p.Op == "update_step" && p.StepID == s.ID {
				it.Change, it.OldText, it.Text, it.PatchIndex = "modified", s.Text, p.Text, ptr(k)
			}
		}
		out.Steps = append(out.Steps, it)
		for k, p := range ps.Patches {
			if p.Op == "add_step" && p.AfterStepID == s.ID {
				out.Steps = append(out.Steps, ReviewItem{ID: addedID(end.Steps, p.Text, out.Steps), Change: "added", Text: p.Text, Status: "todo", PatchIndex: ptr(k)})
			}
		}
	}
	for _, g := range r.Ingredients {
		it := ReviewItem{ID: g.ID, Change: "unchanged", Text: g.Text}
		for k, p := range ps.Patches {
			switch {
			case p.Op == "update_ingredient" && p.ID == g.ID:
				it.Change, it.OldText, it.Text, it.PatchIndex = "modified", g.Text, p.Text, ptr(k)
			case p.Op == "remove_ingredient" && p.ID == g.ID:
				it.Change, it.PatchIndex = "removed", ptr(k)
			}
		}
		out.Ingredients = append(out.Ingredients, it)
	}
	k := 0
	for i, p := range ps.Patches {
		if p.Op == "add_ingredient" && k < len(addedIng) {
			out.Ingredients = append(out.Ingredients, ReviewItem{ID: addedIng[k], Change: "added", Text: p.Text, PatchIndex: ptr(i)})
			k++
		}
	}
	for _, n := range r.Notes {
		out.Notes = append(out.Notes, ReviewNote{Change: "unchanged", Text: n})
	}
	for _, p := range ps.Patches {
		if p.Op == "add_note" {
			out.Notes = append(out.Notes, ReviewNote{Change: "added", Text: p.Text})
		}
	}
	return out, nil
}

// addedID finds the id the end state gave an added step with text, not
// already listed.
func addedID(end []Step, text string, listed []ReviewItem) string {
	for _, s := range end {
		if s.Text != text {
			continue
		}
		taken := false
		for _, l := range listed {
			if l.ID == s.ID {
				taken = true
			}
		}
		if !taken {
			return s.ID
		}
	}
	return ""
}

func indexOfIng(gs []Ingredient, id string) int {
	for i, g := range gs {
		if g.ID == id {
			return i
		}
	}
	return -1
}

func ptr(i int) *int { return &i }
