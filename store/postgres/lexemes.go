package postgres

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"

	"github.com/txkernel/txkernel/protocol"
)

// Lexemes: the store's keyword index is computed here, in the kernel,
// not by the server's to_tsvector (issue 39). PostgreSQL's parser is the
// dominant cost of an ingest (about 4× the whole ingest of the SQLite
// store on the RFC backlog, whatever the text search configuration);
// computing the lexemes in Go costs a fraction of that and leaves the
// server only rows to store. Documents and queries are cut and stemmed by
// this one function (lexer), so they always agree: a word is a run of
// letters and digits, lower-cased (search.Terms's words), an English
// stopword is dropped, and the rest is stemmed by the Snowball English
// stemmer, the algorithm of PostgreSQL's english configuration, so that
// postings written before issue 39 (by to_tsvector('english', …)) keep
// matching the same words.

// maxLexemeBytes bounds a word that is indexed: a longer one (a hash, a
// base64 blob) is skipped, as PostgreSQL's parser skips words over 2047
// bytes, so that an index entry always fits a B-tree page.
const maxLexemeBytes = 255

// lexer cuts text into lexemes. It numbers the lexemes it has seen and
// caches each word's lexeme: a backlog repeats its vocabulary, and the
// stemmer is the cost of a word. A lexer is not safe for concurrent use.
type lexer struct {
	words   map[string]int32 // a word's lexeme id; -1 for a stopword
	ids     map[string]int32 // a lexeme's id
	lexemes []string         // by id
	buf     []byte           // the word being read
	out     []int32          // scan's lexeme ids
	slot    []int32          // chunk's: a lexeme id's place in the chunk's lists, plus 1
}

func newLexer() *lexer {
	return &lexer{words: make(map[string]int32, 4096), ids: make(map[string]int32, 4096)}
}

// maxStems bounds a lexer's cache: past it, the cache starts again.
const maxStems = 1 << 17

// lexers keeps lexers, and so their caches, from one store call to the
// next: a team's ingests share a vocabulary.
var lexers = sync.Pool{New: func() any { return newLexer() }}

// getLexer takes a lexer for the caller's use alone; putLexer gives it
// back. Lexeme ids mean something only to the lexer between the two.
func getLexer() *lexer {
	l := lexers.Get().(*lexer)
	if len(l.words) > maxStems {
		clear(l.words)
		clear(l.ids)
		l.lexemes, l.slot = l.lexemes[:0], l.slot[:0]
	}
	return l
}

func putLexer(l *lexer) { lexers.Put(l) }

// each calls fn with every lexeme of text, in order, one call per
// occurrence.
func (l *lexer) each(text string, fn func(lexeme string)) {
	l.out = l.out[:0]
	l.scan(text)
	for _, id := range l.out {
		fn(l.lexemes[id])
	}
}

// scan appends the ids of text's lexemes to l.out, in order, one per
// occurrence.
func (l *lexer) scan(text string) {
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			if isASCIIWordByte(c) {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				l.buf = append(l.buf, c)
			} else {
				l.flush()
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			l.buf = utf8.AppendRune(l.buf, unicode.ToLower(r))
		} else {
			l.flush()
		}
		i += n
	}
	l.flush()
}

func isASCIIWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// flush ends the word in l.buf, appending its lexeme's id to l.out
// unless it is a stopword or too long.
func (l *lexer) flush() {
	if len(l.buf) == 0 {
		return
	}
	defer func() { l.buf = l.buf[:0] }()
	if len(l.buf) > maxLexemeBytes {
		return
	}
	id, ok := l.words[string(l.buf)] // no allocation: the compiler looks up by the bytes
	if !ok {
		w := string(l.buf)
		id = -1
		if !english.IsStopWord(w) {
			x := english.Stem(w, false)
			if id, ok = l.ids[x]; !ok {
				id = int32(len(l.lexemes))
				l.ids[x] = id
				l.lexemes = append(l.lexemes, x)
			}
		}
		l.words[w] = id
	}
	if id >= 0 {
		l.out = append(l.out, id)
	}
}

// terms are the distinct lexemes of a query's words, in order of first
// occurrence.
func (l *lexer) terms(words []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range words {
		l.each(w, func(x string) {
			if !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		})
	}
	return out
}

// chunkTerms is one chunk's index: each lexeme (and its id in the lexer
// that cut it) with its count in the chunk's title and in its text, in
// order of first occurrence, and its length in lexemes (BM25's document
// length).
type chunkTerms struct {
	lexemes []string
	ids     []int32
	tf      [][2]int32 // [title, text]
	length  int32
}

// chunk indexes one chunk's title and text.
func (l *lexer) chunk(title, text string) chunkTerms {
	l.out = l.out[:0]
	l.scan(title)
	inTitle := len(l.out)
	l.scan(text)
	if len(l.slot) < len(l.lexemes) {
		l.slot = append(l.slot, make([]int32, len(l.lexemes)-len(l.slot))...)
	}
	ct := chunkTerms{length: int32(len(l.out))}
	for k, id := range l.out {
		j := l.slot[id]
		if j == 0 {
			ct.lexemes = append(ct.lexemes, l.lexemes[id])
			ct.ids = append(ct.ids, id)
			ct.tf = append(ct.tf, [2]int32{})
			j = int32(len(ct.lexemes))
			l.slot[id] = j
		}
		if k < inTitle {
			ct.tf[j-1][0]++
		} else {
			ct.tf[j-1][1]++
		}
	}
	for _, id := range ct.ids {
		l.slot[id] = 0
	}
	return ct
}

// scopeID is a scope's key in mem_postings, in place of its three ids: the
// first 8 bytes of the SHA-256 of the ids, each prefixed by its length in
// bytes and a colon, as a big-endian int64. scopeIDSQL computes the same
// in SQL. Two scopes sharing a key would only share postings rows, never
// results: search joins every posting to its chunk and keeps the chunks
// of the caller's scope and baseline.
func scopeID(s protocol.MemoryScope) int64 {
	var b []byte
	for _, id := range []string{s.TenantID, s.OrganizationID, s.RepositoryID} {
		b = strconv.AppendInt(b, int64(len(id)), 10)
		b = append(b, ':')
		b = append(b, id...)
	}
	sum := sha256.Sum256(b)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// scopeIDSQL is scopeID over a row's tenant_id, organization_id and
// repository_id columns, for the migration that converts the postings.
const scopeIDSQL = `('x' || encode(substring(sha256(convert_to(
	octet_length(tenant_id) || ':' || tenant_id || octet_length(organization_id) || ':' || organization_id ||
	octet_length(repository_id) || ':' || repository_id, 'UTF8')) FROM 1 FOR 8), 'hex'))::bit(64)::bigint`
