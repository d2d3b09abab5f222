package desk

import (
	"fmt"
	"html/template"
)

// pages are the desk's pages; each is parsed with the layout.
var pages = []string{"login", "inbox", "tx", "patchset", "memory", "history", "error"}

func parseTemplates() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pages {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "assets/templates/layout.html", "assets/templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("review desk template %s: %v", name, err)
		}
		out[name] = t
	}
	return out, nil
}
