package desk

import (
	"html"
	"html/template"
	"strings"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
)

// highlight adds syntax highlighting to a diff's code lines, by the
// lexer chroma picks for each file's name (the "+++ b/…" or "diff --git"
// header); a file it has no lexer for stays plain. Each line is tokenised
// alone, so a construct spanning lines (a block comment, a raw string)
// may be coloured as code on its later lines: the colours are a reading
// aid, the text is exact. Highlighting happens on the server, with
// classes (assets/static/chroma.css), so the Content-Security-Policy
// needs no inline style.
func highlight(lines []diffLine) {
	var lexer chroma.Lexer
	for i := range lines {
		d := &lines[i]
		switch d.Class {
		case "meta":
			if name, ok := headerPath(d.Text); ok {
				lexer = nil
				if name != "/dev/null" {
					lexer = lexers.Match(name)
				}
			}
			continue
		case "add", "del", "ctx":
		default:
			continue
		}
		if lexer == nil || d.Text == "" {
			continue
		}
		code := d.Text[1:]
		it, err := lexer.Tokenise(nil, code)
		if err != nil {
			continue
		}
		var b strings.Builder
		for _, tok := range it.Tokens() {
			text := html.EscapeString(strings.TrimSuffix(tok.Value, "\n"))
			if text == "" {
				continue
			}
			// An error token is only a construct cut by the line's end.
			if cls := chroma.StandardTypes[tok.Type]; cls != "" && tok.Type != chroma.Error {
				b.WriteString(`<span class="` + cls + `">` + text + `</span>`)
			} else {
				b.WriteString(text)
			}
		}
		d.Prefix = d.Text[:1]
		// Safe: every token's text is escaped above, and the class names
		// are chroma's fixed table.
		d.HTML = template.HTML(b.String())
	}
}

// headerPath reads the file name of a diff header line: "+++ b/x" (the
// new side), or "diff --git a/x b/x" before it.
func headerPath(l string) (string, bool) {
	switch {
	case strings.HasPrefix(l, "+++ "):
		return strings.TrimPrefix(strings.TrimPrefix(l, "+++ "), "b/"), true
	case strings.HasPrefix(l, "diff --git "):
		f := strings.Fields(l)
		return strings.TrimPrefix(f[len(f)-1], "b/"), true
	}
	return "", false
}
