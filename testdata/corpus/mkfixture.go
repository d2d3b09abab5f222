//go:build ignore

// mkfixture writes a realistic OPEN_QUESTIONS-style correspondence log
// (seed 004) built from the Rust RFC corpus, and its ground truth, for the
// corpus tests and benchmarks:
//
//	go run testdata/corpus/mkfixture.go -rfcs ../shared/corpora/rust-rfcs/text \
//	    -sections 1200 -out OPEN_QUESTIONS.md -truth truth.json
//
// Each section is one level-2 section of an RFC (taken round-robin over
// the RFCs, so neighbours differ), headed "## <Roman>. <rfc name>:
// <heading>" and attributed to one or two of six authors with a date.
// About 15 % carry [EXEC:MICRO] and 8 % [EXEC:GOV] (in the heading or
// at the start of the body), about 10 % a status tag at the end of the
// body; sections after LXIV say what they respond to and most cite files;
// about 5 % are by an external caller. Past 3,999 the numerals write
// thousands as repeated Ms, as the log grammar accepts. Seven sections file the previous
// section's number (a collision), and one body holds a "## Notes on
// numbering" heading that the grammar refuses. The output depends only on
// the flags and the RFC files: the same input gives the same bytes.
//
// The truth file is a JSON array, one object per section in order:
// {filed, title, authors, date, exec_tags, status_tags, source}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/txkernel/txkernel/markdown"
)

type truth struct {
	Filed      string   `json:"filed"`
	Title      string   `json:"title"`
	Authors    []string `json:"authors"`
	Date       string   `json:"date"`
	ExecTags   []string `json:"exec_tags"`
	StatusTags []string `json:"status_tags"`
	Source     string   `json:"source"`
}

type piece struct {
	rfc, name, heading, body string
}

var (
	authors    = []string{"c_lawd", "Grok", "Claude", "Gemini", "Codex", "jeebs"}
	statusTags = []string{"EXPERIMENT PENDING", "GOVERNANCE RULE CANDIDATE", "OPEN", "RESOLVED", "SUPERSEDED"}
	// tagLike is bracketed text the log grammar would read as a tag; RFC
	// text that looks like one is lower-cased so that the only tags in
	// the log are the ones this program puts there.
	tagLike = regexp.MustCompile(`\[([A-Z][A-Z :\-]*[A-Z])\]`)
)

func main() {
	rfcs := flag.String("rfcs", "../shared/corpora/rust-rfcs/text", "folder of RFC markdown files")
	n := flag.Int("sections", 1000, "number of sections")
	out := flag.String("out", "OPEN_QUESTIONS.md", "log to write")
	truthPath := flag.String("truth", "", "ground truth JSON to write (optional)")
	flag.Parse()
	if *n < 1 || *n > 99_999 {
		log.Fatalf("-sections %d: want 1..99999", *n)
	}
	pieces, err := collect(*rfcs)
	if err != nil {
		log.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(4, 2026))
	collisions := map[int]bool{}
	for len(collisions) < min(7, *n/100) {
		collisions[2+rng.IntN(*n-1)] = true
	}
	notes := 1 + rng.IntN(*n)
	var b strings.Builder
	b.WriteString("# OPEN QUESTIONS\n\nA shared log of numbered sections. Append only; file the next number.\n\n")
	var tr []truth
	day := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= *n; i++ {
		// Past the RFCs' sections (about 7,000), topics come round again,
		// as they do in a long log.
		p := pieces[(i-1)%len(pieces)]
		if i%3 == 0 {
			day = day.AddDate(0, 0, 1)
		}
		t := truth{Filed: markdown.Roman(i), Title: p.name + ": " + p.heading, Date: day.Format("2006-01-02"),
			ExecTags: []string{}, StatusTags: []string{}, Source: p.rfc + "#" + p.heading}
		if collisions[i] {
			t.Filed = markdown.Roman(i - 1)
		}
		t.Authors = []string{authors[rng.IntN(len(authors))]}
		if rng.IntN(10) == 0 {
			if a := authors[rng.IntN(len(authors))]; a != t.Authors[0] {
				t.Authors = append(t.Authors, a)
			}
		}
		exec := ""
		switch r := rng.IntN(100); {
		case r < 15:
			exec = "EXEC:MICRO"
		case r < 23:
			exec = "EXEC:GOV"
		}
		inHeading := rng.IntN(2) == 0
		heading := "## " + t.Filed + ". " + t.Title
		if exec != "" && inHeading {
			heading += " [" + exec + "]"
		}
		b.WriteString(heading + "\n")
		label := "Author"
		if len(t.Authors) > 1 {
			label = "Authors"
		}
		fmt.Fprintf(&b, "*%s: %s | Date: %s*\n", label, strings.Join(t.Authors, ", "), t.Date)
		if i > 64 {
			var meta []string
			if rng.IntN(4) == 0 {
				meta = append(meta, "Responds to: none")
			} else {
				meta = append(meta, "Responds to: "+markdown.Roman(1+rng.IntN(i-1)))
			}
			switch rng.IntN(4) {
			case 0:
				meta = append(meta, "Refs: none")
			case 1:
			default:
				meta = append(meta, "Refs: "+p.rfc)
			}
			b.WriteString("*" + strings.Join(meta, " | ") + "*\n")
		}
		if rng.IntN(20) == 0 {
			b.WriteString("Caller: external\n")
		}
		b.WriteString("\n")
		body := p.body
		if exec != "" {
			t.ExecTags = []string{exec}
			if !inHeading {
				body = "[" + exec + "]\n" + body
			}
		}
		if i == notes {
			body += "\n\n## Notes on numbering\n\nNumbers are filed by their authors; the store keeps order of appearance."
		}
		if rng.IntN(10) == 0 {
			t.StatusTags = append(t.StatusTags, statusTags[rng.IntN(len(statusTags))])
			if rng.IntN(5) == 0 {
				if s := statusTags[rng.IntN(len(statusTags))]; s != t.StatusTags[0] {
					t.StatusTags = append(t.StatusTags, s)
				}
			}
			body += "\n\n"
			for j, s := range t.StatusTags {
				if j > 0 {
					body += " "
				}
				body += "[" + s + "]"
			}
		}
		b.WriteString(body + "\n\n")
		tr = append(tr, t)
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	if *truthPath != "" {
		raw, _ := json.MarshalIndent(tr, "", " ")
		if err := os.WriteFile(*truthPath, raw, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// collect returns the RFCs' level-2 sections of at least 300 bytes,
// round-robin: every RFC's first, then every RFC's second, and so on.
func collect(dir string) ([]piece, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no RFCs in %s", dir)
	}
	sort.Strings(files)
	var per [][]piece
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		per = append(per, sections(filepath.Base(f), string(raw)))
	}
	var out []piece
	for round := 0; ; round++ {
		added := false
		for _, ps := range per {
			if round < len(ps) {
				out = append(out, ps[round])
				added = true
			}
		}
		if !added {
			return out, nil
		}
	}
}

// sections splits one RFC at its level-1 and level-2 headings outside
// code fences and keeps the level-2 sections with enough prose.
func sections(file, text string) []piece {
	name := strings.TrimSuffix(file, ".md")
	if i := strings.IndexByte(name, '-'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.ReplaceAll(name, "-", " ")
	var out []piece
	var cur *piece
	var body []string
	var f fence
	flush := func() {
		if cur != nil {
			cur.body = clean(body)
			if len(cur.body) >= 300 {
				out = append(out, *cur)
			}
		}
		cur, body = nil, nil
	}
	for _, l := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		if f.step(l) {
			body = append(body, l)
			continue
		}
		if strings.HasPrefix(l, "# ") || strings.HasPrefix(l, "## ") {
			flush()
			if strings.HasPrefix(l, "## ") {
				h := tagLike.ReplaceAllStringFunc(strings.TrimSpace(strings.Trim(l[3:], "# ")), strings.ToLower)
				h = strings.NewReplacer("(", "", ")", "", "[", "", "]", "").Replace(h)
				cur = &piece{rfc: "text/" + file, name: name, heading: h}
			}
			continue
		}
		body = append(body, l)
	}
	flush()
	return out
}

// clean trims a section's lines to at most about 2,000 bytes, cut at a
// blank line outside code, with tag-like brackets lower-cased.
func clean(lines []string) string {
	var keep []string
	size := 0
	var f fence
	for _, l := range lines {
		code := f.step(l)
		if strings.TrimSpace(l) == "" && !code && size > 2000 {
			break
		}
		keep = append(keep, strings.TrimRight(l, " \t"))
		size += len(l) + 1
	}
	if f.n > 0 {
		keep = append(keep, strings.Repeat(string(f.char), f.n))
	}
	s := strings.TrimSpace(strings.Join(keep, "\n"))
	return tagLike.ReplaceAllStringFunc(s, strings.ToLower)
}

// fence follows CommonMark fenced code blocks (at most three spaces of
// indent, three or more ` or ~, closed by a run of the same character at
// least as long with nothing after it), as the log grammar does.
type fence struct {
	char byte
	n    int
}

// step reports whether l is a fence line or code, and updates the state.
func (f *fence) step(l string) bool {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return f.n > 0
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	switch {
	case n < 3:
		return f.n > 0
	case f.n == 0:
		if t[0] == '`' && strings.ContainsRune(t[n:], '`') {
			return false
		}
		f.char, f.n = t[0], n
	case t[0] == f.char && n >= f.n && strings.TrimSpace(t[n:]) == "":
		f.n = 0
	}
	return true
}
