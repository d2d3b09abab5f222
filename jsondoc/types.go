package jsondoc

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/txkernel/txkernel/errs"
)

// Document type names (doc/types).
const (
	TypeJSON             = "json"
	TypeClosingChecklist = "closing_checklist"
	TypeRecipe           = "recipe"
)

// DocType is a document type: its name, a line for people, and its JSON
// Schema (draft 2020-12; nil for json, which accepts any value).
type DocType struct {
	Name        string
	Description string
	Schema      json.RawMessage
	// JSONPatchMembers, when not nil, are the only top-level members a
	// json_patch (patch/validate, patch/apply, turn/start) may touch: the
	// rest of the document is state that changes only through the type's
	// own proposals (a recipe's PatchSets). See CheckJSONPatch.
	JSONPatchMembers []string
}

//go:embed schemas/*.json
var schemaFiles embed.FS

var types = []DocType{
	{Name: TypeJSON, Description: "any JSON value; no schema"},
	{Name: TypeClosingChecklist, Description: "a deal's closing checklist: issues_by_id with status and citations, entries_by_id"},
	{Name: TypeRecipe, Description: "a recipe: title, steps with todo/done status, ingredients, notes, userDefaults, overrides; its state changes only by PatchSets, patch/* changes only userDefaults and overrides",
		JSONPatchMembers: []string{"userDefaults", "overrides"}},
}

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
)

// schemas compiles the embedded schemas once.
func schemas() (map[string]*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		compiled = map[string]*jsonschema.Schema{}
		for i := range types {
			t := &types[i]
			if t.Name == TypeJSON {
				continue
			}
			raw, err := schemaFiles.ReadFile("schemas/" + t.Name + ".json")
			if err != nil {
				compileErr = err
				return
			}
			t.Schema = raw
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				compileErr = err
				return
			}
			url := "mem:///" + t.Name + ".json"
			if err := c.AddResource(url, doc); err != nil {
				compileErr = err
				return
			}
			if compiled[t.Name], err = c.Compile(url); err != nil {
				compileErr = err
				return
			}
		}
	})
	return compiled, compileErr
}

// rulesVersion names the kernel's own rules beyond the schemas (a recipe's
// unique ids): change it whenever ValidateDoc checks something new, so
// that RulesDigest changes with it.
const rulesVersion = "txkernel-doc-rules-1"

// RulesDigest identifies what ValidateDoc checks for docType: the hex
// sha256 of the kernel's rules version, the type's name and its schema's
// bytes. A content ValidateDoc accepted is valid for as long as the digest
// is the same, so a store that records the digest a content was validated
// under lets a later kernel (after a restart, or an upgrade that changed
// no rule) skip validating it again. "" for an unknown type.
func RulesDigest(docType string) string {
	t, err := LookupType(docType)
	if err != nil {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(rulesVersion + "\x00" + t.Name + "\x00"))
	h.Write(t.Schema)
	return hex.EncodeToString(h.Sum(nil))
}

// Types lists the document types, each with its schema.
func Types() []DocType {
	schemas()
	return slices.Clone(types)
}

// LookupType returns the type name, or errs.Invalid (reason
// "unknown-doc-type").
func LookupType(name string) (DocType, error) {
	for _, t := range Types() {
		if t.Name == name {
			return t, nil
		}
	}
	return DocType{}, errs.New(errs.Invalid, errs.InvalidData{Field: "docType", Reason: "unknown-doc-type"},
		"unknown docType %q (json, closing_checklist or recipe)", name)
}

// Violation is one way a document breaks its type: where (an RFC 6901
// pointer into the document), which JSON Schema keyword failed
// ("required", "type", …; KeywordUniqueIDs for the kernel's own id check)
// and why, as a sentence ("missing required property `text`").
type Violation struct {
	Path    string `json:"path"`
	Keyword string `json:"keyword"`
	Message string `json:"message"`
}

// SchemaData is the data of an errs.Validation error from ValidateDoc:
// every violation found.
type SchemaData struct {
	DocType    string      `json:"docType"`
	Violations []Violation `json:"violations"`
}

// ValidateDoc checks v against docType's schema, and for recipes that step
// and ingredient ids are unique. It reports every violation at once
// (errs.Validation with SchemaData, listed by schemaViolations).
func ValidateDoc(docType string, v any) error {
	if _, err := LookupType(docType); err != nil {
		return err
	}
	if docType == TypeJSON {
		return nil
	}
	all, err := schemas()
	if err != nil {
		return errs.Wrap(errs.Internal, err, nil, "document schemas")
	}
	var vs []Violation
	if err := all[docType].Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return errs.Wrap(errs.Internal, err, nil, "validate %s", docType)
		}
		vs = append(vs, schemaViolations(ve)...)
	}
	if docType == TypeRecipe {
		vs = append(vs, duplicateIDs(v, "steps")...)
		vs = append(vs, duplicateIDs(v, "ingredients")...)
	}
	if len(vs) == 0 {
		return nil
	}
	sortViolations(vs)
	return errs.New(errs.Validation, SchemaData{DocType: docType, Violations: vs},
		"the document would not be a valid %s: %s at %q (%d violation(s), all in data.violations)", docType, vs[0].Message, vs[0].Path, len(vs))
}

// duplicateIDs reports ids used twice in the array v[field].
func duplicateIDs(v any, field string) []Violation {
	m, _ := v.(map[string]any)
	items, _ := m[field].([]any)
	first := map[string]int{}
	var out []Violation
	for i, it := range items {
		o, _ := it.(map[string]any)
		id, ok := o["id"].(string)
		if !ok {
			continue
		}
		if j, dup := first[id]; dup {
			out = append(out, Violation{Path: fmt.Sprintf("/%s/%d/id", field, i), Keyword: KeywordUniqueIDs, Message: fmt.Sprintf("id %q is already used by /%s/%d", id, field, j)})
			continue
		}
		first[id] = i
	}
	return out
}
