package markdown

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/zeebo/blake3"
)

// PreambleKey is the chunk key of the text before a document's first
// heading.
const PreambleKey = "_preamble"

// Split splits a markdown document into chunks by heading path: one chunk
// per ATX heading (CommonMark §4.2; any level, outside fenced code), from
// the heading to the next heading of any level, plus a preamble chunk
// for non-blank text before the first heading. name titles the preamble.
//
// A chunk's Key is its heading path, lower-cased and joined by " > ",
// with "#2", "#3", … on repeats of the same path; so editing one
// section's text changes that chunk's Hash and nothing else, and renaming
// a heading changes the keys under it only (and its repeats'). Setext
// headings ("Title\n===") are body text.
//
// A heading with no body of its own (a title straight above its first
// subsection) is no chunk: it is merged into the chunk that follows it,
// whose Start and Line then begin at that heading, so no chunk, search
// hit or citation is headings only. Trailing headings with nothing after
// them extend the previous chunk's End instead; a document of headings
// alone keeps its first one as its only chunk. The merged heading's key
// stays reserved, so whether a section is empty never renumbers a later
// repeat of the same path.
//
// The only error is *NotUTF8Error.
func Split(name string, data []byte) ([]Chunk, error) {
	if err := checkUTF8(data); err != nil {
		return nil, err
	}
	src := string(data)
	lines := splitLines(src)
	type open struct {
		level int
		title string
	}
	var stack []open
	var out []Chunk
	seen := map[string]int{} // base key → the last repeat number given
	used := map[string]bool{}
	var f fence
	cur := Chunk{Start: 0, Line: 1, Title: name}
	bodyFrom := 0
	var pending *Chunk // the first heading-only chunk not yet merged
	flush := func(end int) {
		body, at := trimmed(src, bodyFrom, end)
		if cur.HeadingPath == nil && body == "" {
			return
		}
		cur.End, cur.Body, cur.BodyStart = end, body, at
		key := PreambleKey
		if cur.HeadingPath != nil {
			key = strings.ToLower(strings.Join(cur.HeadingPath, " > "))
		}
		base := key
		for used[key] {
			// A repeat, or a heading that happens to read "x#2".
			seen[base] = max(seen[base], 1) + 1
			key = base + "#" + strconv.Itoa(seen[base])
		}
		used[key] = true
		cur.Key = key
		cur.Hash = chunkHash(cur.HeadingPath, body)
		if body == "" {
			if pending == nil {
				c := cur
				pending = &c
			}
			return
		}
		if pending != nil {
			cur.Start, cur.Line = pending.Start, pending.Line
			pending = nil
		}
		out = append(out, cur)
	}
	for _, l := range lines {
		if f.step(l.text) {
			continue
		}
		level, text := heading(l.text)
		if level == 0 {
			continue
		}
		flush(l.start)
		for len(stack) > 0 && stack[len(stack)-1].level >= level {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, open{level, text})
		path := make([]string, len(stack))
		for i, o := range stack {
			path[i] = o.title
		}
		cur = Chunk{HeadingPath: path, Title: text, Start: l.start, Line: l.num}
		bodyFrom = l.next
	}
	flush(len(src))
	switch {
	case pending != nil && len(out) == 0:
		out = append(out, *pending)
	case pending != nil:
		out[len(out)-1].End = len(src)
	}
	return out, nil
}

// trimmed returns src[from:to] without surrounding white space, and the
// offset where it starts.
func trimmed(src string, from, to int) (string, int) {
	s := src[from:to]
	t := strings.TrimLeft(s, " \t\r\n")
	at := from + len(s) - len(t)
	return strings.TrimRight(t, " \t\r\n"), at
}

// chunkHash is the hex BLAKE3 of a chunk's heading path and body: its
// content hash, independent of where it sits in the document.
func chunkHash(path []string, body string) string {
	b, _ := json.Marshal([]any{path, body})
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:])
}
