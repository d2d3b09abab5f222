package jsondoc

import (
	"sort"
	"strconv"
)

// Paths is the canonical path map of a document (seed 000's open
// question, answered yes): the RFC 6901 pointers a host writes patches
// with, by id, so that it never addresses an item by a guessed index.
//
//   - closing_checklist: issues_by_id.<id> → {path, status, citations,
//     appendCitation}; entries_by_id.<id> → {path};
//   - recipe: steps.<id> → {path, text, status}; ingredients.<id> →
//     {path, text}; notes and appendNote;
//   - json: the pointer of every member and element down to depth 3.
func Paths(docType string, v any) any {
	switch docType {
	case TypeClosingChecklist:
		m, _ := v.(map[string]any)
		issues := map[string]any{}
		for id := range asMap(m["issues_by_id"]) {
			p := "/issues_by_id/" + EscapeToken(id)
			issues[id] = map[string]string{"path": p, "status": p + "/status", "citations": p + "/citations", "appendCitation": p + "/citations/-"}
		}
		entries := map[string]any{}
		for id := range asMap(m["entries_by_id"]) {
			entries[id] = map[string]string{"path": "/entries_by_id/" + EscapeToken(id)}
		}
		return map[string]any{"issues_by_id": issues, "entries_by_id": entries}
	case TypeRecipe:
		m, _ := v.(map[string]any)
		steps := map[string]any{}
		for i, s := range asSlice(m["steps"]) {
			if id, ok := asMap(s)["id"].(string); ok {
				p := "/steps/" + strconv.Itoa(i)
				steps[id] = map[string]string{"path": p, "text": p + "/text", "status": p + "/status"}
			}
		}
		ings := map[string]any{}
		for i, s := range asSlice(m["ingredients"]) {
			if id, ok := asMap(s)["id"].(string); ok {
				p := "/ingredients/" + strconv.Itoa(i)
				ings[id] = map[string]string{"path": p, "text": p + "/text"}
			}
		}
		return map[string]any{"steps": steps, "ingredients": ings, "notes": "/notes", "appendNote": "/notes/-"}
	}
	var out []string
	walkPaths(v, "", 3, &out)
	sort.Strings(out)
	return out
}

func walkPaths(v any, prefix string, depth int, out *[]string) {
	if depth == 0 {
		return
	}
	switch c := v.(type) {
	case map[string]any:
		for k, e := range c {
			p := prefix + "/" + EscapeToken(k)
			*out = append(*out, p)
			walkPaths(e, p, depth-1, out)
		}
	case []any:
		for i, e := range c {
			p := prefix + "/" + strconv.Itoa(i)
			*out = append(*out, p)
			walkPaths(e, p, depth-1, out)
		}
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
