package jsondoc

import (
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidateChange is ValidateDoc for a patched document: after is the
// result of jsondoc.Patch on before, and before is a value this process
// has validated against docType (ValidateDoc or ValidateChange returned
// nil). It gives ValidateDoc's answer, error for error, but validates only
// what the patch changed: Patch shares every container it did not write
// with before, and a JSON Schema's verdict on an instance depends only on
// the instance and the subschema, so a shared container that was valid
// under a subschema is valid under it again. A 20-operation patch of a
// megabyte checklist revalidates a few issues rather than thousands.
//
// The schema is descended only through object and array keywords whose
// verdict is the conjunction of their members' or items' verdicts (type,
// required, properties, additionalProperties, items, and a lone $ref);
// at any other subschema the changed subtree is validated whole. Whenever
// that finds the document invalid, ValidateDoc runs in full, so the
// violations are exactly ValidateDoc's. The type's own rules beyond its
// schema (a recipe's unique ids) always run in full.
func ValidateChange(docType string, before, after any) error {
	if _, err := LookupType(docType); err != nil {
		return err
	}
	if docType == TypeJSON {
		return nil
	}
	all, err := schemas()
	if err != nil || !changeValid(all[docType], before, after) {
		return ValidateDoc(docType, after)
	}
	if docType == TypeRecipe {
		if len(duplicateIDs(after, "steps")) > 0 || len(duplicateIDs(after, "ingredients")) > 0 {
			return ValidateDoc(docType, after)
		}
	}
	return nil
}

// changeValid reports whether after is valid against s, given that before
// was (before is nil when there was nothing at this place). false means
// invalid, or that a keyword refused a new member outright (the caller
// validates in full, which says why).
func changeValid(s *jsonschema.Schema, before, after any) bool {
	if same(before, after) {
		return true
	}
	if target, ok := loneRef(s); ok {
		return changeValid(target, before, after)
	}
	switch a := after.(type) {
	case map[string]any:
		if !objectOnly(s) {
			break
		}
		for _, k := range s.Required {
			if _, ok := a[k]; !ok {
				return false
			}
		}
		b, _ := before.(map[string]any)
		for k, v := range a {
			child, ok := s.Properties[k]
			if !ok {
				switch ap := s.AdditionalProperties.(type) {
				case *jsonschema.Schema:
					child = ap
				case bool:
					if !ap {
						return false
					}
					continue
				default: // absent: any value
					continue
				}
			}
			if !changeValid(child, b[k], v) {
				return false
			}
		}
		return true
	case []any:
		if !arrayOnly(s) {
			break
		}
		b, _ := before.([]any)
		var shared map[uintptr]bool // before's containers, when items moved
		for i, v := range a {
			var old any
			if i < len(b) && len(a) == len(b) {
				old = b[i]
			} else if id, ok := identity(v); ok {
				if shared == nil {
					shared = containerIDs(b)
				}
				if shared[id] {
					continue // one of before's items, valid under the same items schema
				}
			}
			if !changeValid(s.Items2020, old, v) {
				return false
			}
		}
		return true
	}
	return s.Validate(after) == nil
}

// same reports whether after is before itself: the same map, or the same
// backing array and length (identity; Patch never writes a container it
// shares, so these hold the same values).
func same(before, after any) bool {
	a, ok := identity(after)
	if !ok {
		return false
	}
	b, ok := identity(before)
	if !ok || a != b {
		return false
	}
	if as, ok := after.([]any); ok {
		bs, _ := before.([]any)
		return len(as) == len(bs)
	}
	return true
}

// containerIDs are the identities of the containers among vs.
func containerIDs(vs []any) map[uintptr]bool {
	m := make(map[uintptr]bool, len(vs))
	for _, v := range vs {
		if id, ok := identity(v); ok {
			m[id] = true
		}
	}
	return m
}

// loneRef returns the schema s refers to when $ref is its only validating
// keyword.
func loneRef(s *jsonschema.Schema) (*jsonschema.Schema, bool) {
	if s.Ref == nil {
		return nil, false
	}
	c := *s
	c.Ref = nil
	if !noApplicators(&c) || c.Types != nil || !noObjectKeywords(&c) || len(c.Required) > 0 || len(c.Properties) > 0 ||
		c.AdditionalProperties != nil || !noArrayKeywords(&c) || c.Items2020 != nil || !noScalarKeywords(&c) {
		return nil, false
	}
	return s.Ref, true
}

// objectOnly reports whether s's verdict on an object is its type, its
// required members and its members' verdicts under properties and
// additionalProperties, nothing else.
func objectOnly(s *jsonschema.Schema) bool {
	return noApplicators(s) && s.Ref == nil && allowsOnly(s.Types, "object") && noObjectKeywords(s)
}

// noObjectKeywords reports whether s has no object keyword but required,
// properties and additionalProperties.
func noObjectKeywords(s *jsonschema.Schema) bool {
	return s.MaxProperties == nil && s.MinProperties == nil && s.PropertyNames == nil &&
		len(s.PatternProperties) == 0 && len(s.Dependencies) == 0 && len(s.DependentRequired) == 0 &&
		len(s.DependentSchemas) == 0 && s.UnevaluatedProperties == nil
}

// arrayOnly reports whether s's verdict on an array is its type and each
// item's verdict under one items schema (draft 2020-12), nothing else.
func arrayOnly(s *jsonschema.Schema) bool {
	return noApplicators(s) && s.Ref == nil && allowsOnly(s.Types, "array") && noArrayKeywords(s) && s.Items2020 != nil
}

// allowsOnly reports whether types is exactly {typ}.
func allowsOnly(types *jsonschema.Types, typ string) bool {
	return types != nil && slices.Equal(types.ToStrings(), []string{typ})
}

// noApplicators reports whether s has none of the keywords that look at
// the instance as a whole or through other schemas.
func noApplicators(s *jsonschema.Schema) bool {
	return s.Bool == nil && s.RecursiveRef == nil && s.DynamicRef == nil && s.Enum == nil && s.Const == nil &&
		s.Not == nil && len(s.AllOf) == 0 && len(s.AnyOf) == 0 && len(s.OneOf) == 0 &&
		s.If == nil && s.Then == nil && s.Else == nil && s.Format == nil && len(s.Extensions) == 0
}

// noArrayKeywords reports whether s has no array keyword but items.
func noArrayKeywords(s *jsonschema.Schema) bool {
	return s.MinItems == nil && s.MaxItems == nil && !s.UniqueItems && s.Contains == nil &&
		s.MinContains == nil && s.MaxContains == nil && s.Items == nil && s.AdditionalItems == nil &&
		len(s.PrefixItems) == 0 && s.UnevaluatedItems == nil
}

// noScalarKeywords reports whether s has no string or number keyword.
func noScalarKeywords(s *jsonschema.Schema) bool {
	return s.MinLength == nil && s.MaxLength == nil && s.Pattern == nil && s.ContentEncoding == nil &&
		s.ContentMediaType == nil && s.ContentSchema == nil && s.Maximum == nil && s.Minimum == nil &&
		s.ExclusiveMaximum == nil && s.ExclusiveMinimum == nil && s.MultipleOf == nil
}
