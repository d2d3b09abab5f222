package jsondoc

import (
	"slices"
	"strings"

	"github.com/txkernel/txkernel/errs"
)

// ReasonStateOnlyByPatchSet is the reason of a json_patch operation that
// touches a recipe's state (its steps, ingredients, notes, title or the
// whole document): seed 003's hard rules, "No implicit state mutation
// outside PatchSet" and "The AI never rewrites the full recipe".
const ReasonStateOnlyByPatchSet = "recipe-state-only-by-patchset"

// StateOnlyData is the data of the errs.Validation error of
// CheckJSONPatch: the operation at fault, which of its pointers (Field:
// "path" or "from") reaches the type's state, and the members a json_patch
// may change instead (as pointers: "/userDefaults", "/overrides").
type StateOnlyData struct {
	OpIndex int      `json:"opIndex"`
	Op      string   `json:"op"`
	Path    string   `json:"path"`
	From    string   `json:"from,omitempty"`
	Field   string   `json:"field"`
	Reason  string   `json:"reason"`
	Allowed []string `json:"allowed"`
}

// CheckJSONPatch refuses a json_patch on a document of docType that
// touches a member outside the type's JSONPatchMembers (the whole
// document included): errs.Validation with StateOnlyData, reason
// ReasonStateOnlyByPatchSet. Every operation counts, test included, and
// both move's and copy's from: pointers are compared parsed (RFC 6901), by
// their first reference token, so "/stepsX" is not "/steps" and
// "/userDefaults~1x" is not "/userDefaults". A pointer that does not parse
// is left to Apply, which refuses it. Types without JSONPatchMembers accept
// every operation. The document target calls it on every json_patch it
// plans or prepares, whichever method sent it.
func CheckJSONPatch(docType string, ops []Operation) error {
	t, err := LookupType(docType)
	if err != nil || t.JSONPatchMembers == nil {
		return err
	}
	for i, op := range ops {
		check := []string{"path"}
		if op.Op == "move" || op.Op == "copy" {
			check = append(check, "from")
		}
		for _, field := range check {
			ptr := op.Path
			if field == "from" {
				ptr = op.From
			}
			p, perr := ParsePointer(ptr)
			if perr != nil || (len(p) > 0 && slices.Contains(t.JSONPatchMembers, p[0])) {
				continue
			}
			allowed := make([]string, len(t.JSONPatchMembers))
			for k, m := range t.JSONPatchMembers {
				allowed[k] = "/" + EscapeToken(m)
			}
			at := "the whole " + docType
			if len(p) > 0 {
				at = "/" + EscapeToken(p[0])
			}
			desc := op.Op + " " + shown(op.Path)
			if len(check) == 2 {
				desc += " from " + shown(op.From)
			}
			return errs.New(errs.Validation, StateOnlyData{OpIndex: i, Op: op.Op, Path: op.Path, From: op.From, Field: field,
				Reason: ReasonStateOnlyByPatchSet, Allowed: allowed},
				"operation %d (%s) touches %s: a %s's state changes only through a PatchSet the user reviews (patchset/propose, then patchset/decide); patch/* may change only %s",
				i, desc, at, docType, strings.Join(allowed, " and "))
		}
	}
	return nil
}

// shown is a pointer as a message shows it: the root as "".
func shown(ptr string) string {
	if ptr == "" {
		return `""`
	}
	return ptr
}
