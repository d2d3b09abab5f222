package corpus

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/embedding"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// Table tests of seed 004's rules at the functions that enforce them
// (docs/RULES.md 004-3 to 004-6); corpus_test's tests show the same rules
// through the kernel's methods.

// recorder is an embedder that keeps every text it was asked to embed.
type recorder struct{ texts []string }

func (r *recorder) Info() embedding.Info {
	return embedding.Info{Model: "recorder", ModelVersion: "1", Dims: 2}
}

func (r *recorder) Embed(_ context.Context, texts []string, _ embedding.Purpose) ([][]float32, error) {
	r.texts = append(r.texts, texts...)
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, 0}
	}
	return out, nil
}

// oneSection parses a log of one section and returns it.
func oneSection(t *testing.T, log string) *markdown.Section {
	t.Helper()
	l, err := markdown.ParseLog([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sections) != 1 {
		t.Fatalf("%d sections in %q, want 1", len(l.Sections), log)
	}
	return &l.Sections[0]
}

// TestTagsNeverEmbedded: exec_tags and status_tags are "NEVER encoded into
// vectors" (seed 004; docs/RULES.md 004-3). A section's row (logChunk)
// carries its tags, but its body, body hash and the only text embedSome
// hands the embedder are those of the same section written without any
// tag: tagging or untagging a section never changes what is embedded.
func TestTagsNeverEmbedded(t *testing.T) {
	const head = "## I. The vote\n*Author: c_lawd | Date: 2026-02-01*\n\n"
	plain := head + "The vote passed.\n\nWe move on.\n"
	for _, tc := range []struct {
		name         string
		log          string
		exec, status []string
	}{
		{"exec tag at a line's end", head + "The vote passed. [EXEC:GOV]\n\nWe move on.\n", []string{"EXEC:GOV"}, nil},
		{"exec tag spelt loosely", head + "The vote passed. [exec: micro]\n\nWe move on.\n", []string{"EXEC:MICRO"}, nil},
		{"status tag on its own line", head + "[EXPERIMENT PENDING]\nThe vote passed.\n\nWe move on.\n", nil, []string{"EXPERIMENT PENDING"}},
		{"both, twice", head + "The vote passed. [EXEC:GOV] [OPEN]\n\nWe move on. [EXEC:GOV]\n", []string{"EXEC:GOV"}, []string{"OPEN"}},
		{"tag in the heading", strings.Replace(head, "The vote", "The vote [EXEC:GOV]", 1) + "The vote passed.\n\nWe move on.\n", []string{"EXEC:GOV"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := logChunk("log.md", "k", 1, oneSection(t, plain))
			got := logChunk("log.md", "k", 1, oneSection(t, tc.log))
			if !slices.Equal(got.ExecTags, nonNil(tc.exec)) || !slices.Equal(got.StatusTags, nonNil(tc.status)) {
				t.Errorf("tags %v %v, want %v %v", got.ExecTags, got.StatusTags, tc.exec, tc.status)
			}
			if got.Body != want.Body || got.BodyHash != want.BodyHash {
				t.Errorf("body %q (hash %s), want the untagged %q (hash %s)", got.Body, got.BodyHash, want.Body, want.BodyHash)
			}
			if got.ContentHash == want.ContentHash {
				t.Errorf("the content hash ignores the tags: a citation would not change with them")
			}
			r := &recorder{}
			vecs, n, err := embedSome(context.Background(), r, []store.Chunk{got, want}, []bool{true, false})
			if err != nil || n != 1 || vecs[0] == nil || vecs[1] != nil {
				t.Fatalf("embedSome = %d vectors, %v; want the one needed", n, err)
			}
			if len(r.texts) != 1 || r.texts[0] != want.Body {
				t.Fatalf("embedded %q, want only the untagged body %q", r.texts, want.Body)
			}
			if strings.Contains(r.texts[0], "[") {
				t.Errorf("the embedded text holds a bracket: %q", r.texts[0])
			}
		})
	}
}

// TestFilterRules: filters are predicates, never query vectors (seed 004;
// docs/RULES.md 004-3): filter turns the wire's filters into the store's
// predicates only, an exec tag filter in any of ExecTag's spellings
// selecting the normalised tag, any other value kept as given, and a date
// that is not YYYY-MM-DD refused with its field.
func TestFilterRules(t *testing.T) {
	tags := func(v ...string) *[]string { return &v }
	for _, tc := range []struct {
		name     string
		in       *protocol.CorpusFilters
		exec     *[]string
		status   *[]string
		from, to string
		field    string // the refused field; "" when accepted
	}{
		{name: "no filters", in: nil},
		{name: "exec tag as written", in: &protocol.CorpusFilters{ExecTags: tags("EXEC:GOV")}, exec: tags("EXEC:GOV")},
		{name: "exec tag loosely spelt", in: &protocol.CorpusFilters{ExecTags: tags("exec: gov", " [EXEC:MICRO] ")}, exec: tags("EXEC:GOV", "EXEC:MICRO")},
		{name: "no exec tag is kept", in: &protocol.CorpusFilters{ExecTags: tags("GOVERNANCE")}, exec: tags("GOVERNANCE")},
		{name: "empty list selects untagged rows", in: &protocol.CorpusFilters{ExecTags: tags()}, exec: tags()},
		{name: "status tags as given", in: &protocol.CorpusFilters{StatusTags: tags("OPEN", "exec: gov")}, status: tags("OPEN", "exec: gov")},
		{name: "date range", in: &protocol.CorpusFilters{DateRange: &protocol.DateRange{From: "2026-01-01", To: "2026-12-31"}}, from: "2026-01-01", to: "2026-12-31"},
		{name: "open-ended date range", in: &protocol.CorpusFilters{DateRange: &protocol.DateRange{To: "2026-12-31"}}, to: "2026-12-31"},
		{name: "short date", in: &protocol.CorpusFilters{DateRange: &protocol.DateRange{From: "2026-1-1"}}, field: "filters.date_range.from"},
		{name: "not a date", in: &protocol.CorpusFilters{DateRange: &protocol.DateRange{From: "2026-01-01", To: "yesterday"}}, field: "filters.date_range.to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := filter(tc.in)
			if tc.field != "" {
				var e *errs.Error
				if !errors.As(err, &e) || e.Kind != errs.Invalid {
					t.Fatalf("filter = %v, want errs.Invalid", err)
				}
				if d, ok := e.Data.(errs.InvalidData); !ok || d.Field != tc.field || d.Reason != "format" {
					t.Fatalf("data = %#v, want field %s, reason format", e.Data, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			same := func(a, b *[]string) bool { return (a == nil) == (b == nil) && (a == nil || slices.Equal(*a, *b)) }
			if !same(f.ExecTags, tc.exec) || !same(f.StatusTags, tc.status) || f.DateFrom != tc.from || f.DateTo != tc.to {
				t.Errorf("filter = %+v, want exec %v, status %v, dates %q..%q", f, tc.exec, tc.status, tc.from, tc.to)
			}
		})
	}
}

// openLog opens twoSections (one collision: "V" filed second) at
// notes/log.md in a new workspace and returns the service, the corpus id
// and its governance.
func openLog(t *testing.T) (*Service, string, governance) {
	t.Helper()
	ws := t.TempDir()
	s, _ := newService(t, ws)
	write(t, ws, "notes/log.md", twoSections)
	info, err := openCorpus(s, "notes/log.md", nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := s.store(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Get(context.Background(), info.CorpusID)
	if err != nil {
		t.Fatal(err)
	}
	return s, info.CorpusID, s.governanceFor(context.Background(), db, c)
}

// TestAppendCollisionsAppendOnly: collision.log "is append-only; never
// corrected" (seed 004; docs/RULES.md 004-4). Whatever appendCollisions is
// given, what the log held stays its first bytes; a collision it holds
// (same canonical number and filed numeral) is never written again; any
// other is appended once, a second filing under another numeral
// included.
func TestAppendCollisionsAppendOnly(t *testing.T) {
	logged := protocol.CollisionEntry{CanonicalSectionNumber: 2, SectionNumberFiled: "V", FiledNumber: 5, Title: "Two"}
	fresh := protocol.CollisionEntry{CanonicalSectionNumber: 3, SectionNumberFiled: "IX", FiledNumber: 9, Title: "Three"}
	refiled := protocol.CollisionEntry{CanonicalSectionNumber: 2, SectionNumberFiled: "VI", FiledNumber: 6, Title: "Two, refiled"}
	for _, tc := range []struct {
		name string
		in   []protocol.CollisionEntry
		want []string // the filed numerals appended, in order
	}{
		{"nothing", nil, nil},
		{"the one logged", []protocol.CollisionEntry{logged}, nil},
		{"a new one", []protocol.CollisionEntry{fresh}, []string{"IX"}},
		{"the same section under another numeral", []protocol.CollisionEntry{refiled}, []string{"VI"}},
		{"logged and new mixed", []protocol.CollisionEntry{logged, fresh, logged, refiled}, []string{"IX", "VI"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, g := openLog(t)
			before, err := g.read(collisionLogName)
			if err != nil || strings.Count(string(before), "\n") != 1 {
				t.Fatalf("collision.log after the open: %q, %v; want the one collision", before, err)
			}
			got, err := g.appendCollisions(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var filed []string
			for _, e := range got {
				filed = append(filed, e.SectionNumberFiled)
				if e.LoggedAt == "" {
					t.Errorf("appended %+v without loggedAt", e)
				}
			}
			if !slices.Equal(filed, tc.want) {
				t.Fatalf("appended %v, want %v", filed, tc.want)
			}
			after, _ := g.read(collisionLogName)
			if !bytes.HasPrefix(after, before) {
				t.Fatalf("collision.log was rewritten:\nbefore %q\nafter  %q", before, after)
			}
			if n := strings.Count(string(after[len(before):]), "\n"); n != len(tc.want) {
				t.Fatalf("%d lines appended, want %d", n, len(tc.want))
			}
			// Again: nothing more, whatever is passed.
			if again, err := g.appendCollisions(tc.in); err != nil || len(again) != 0 {
				t.Fatalf("the same collisions again appended %v, %v", again, err)
			}
			if final, _ := g.read(collisionLogName); !bytes.Equal(final, after) {
				t.Fatalf("a second append changed collision.log: %q", final)
			}
		})
	}
}

// TestLockSectionCount: .section_count is read and written under its
// exclusive flock (seed 004: "Atomic read/write via flock"; docs/RULES.md
// 004-5). lockSectionCount reads the count the file holds (-1 for none),
// creates the file only when asked, holds the lock against any other
// writer until unlock, and gives up on a lock held elsewhere at the
// deadline (a lockedError naming the file) or when its context ends.
func TestLockSectionCount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content *string // nil: no file
		create  bool
		held    bool // another writer holds the lock
		cancel  bool // the context has ended
		before  int  // the count read; with wantNil no lock at all
		wantNil bool
		locked  bool // a *lockedError
	}{
		{name: "no file, not created", wantNil: true},
		{name: "no file, created", create: true, before: -1},
		{name: "a count", content: ptr("12\n"), before: 12},
		{name: "a count without newline", content: ptr("7"), before: 7},
		{name: "not a number", content: ptr("twelve\n"), before: -1},
		{name: "empty", content: ptr(""), before: -1},
		{name: "held past the deadline", content: ptr("3\n"), held: true, locked: true},
		{name: "held, request cancelled", content: ptr("3\n"), held: true, cancel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, g := openLog(t)
			path := g.path(sectionCountName)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.held {
				other, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close()
				if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			deadline := time.Now().Add(50 * time.Millisecond)
			if tc.cancel {
				cancel()
				deadline = time.Now().Add(time.Minute)
			}
			start := time.Now()
			sc, err := g.lockSectionCount(ctx, tc.create, deadline)
			switch {
			case tc.locked:
				var le *lockedError
				if !errors.As(err, &le) || le.path != path {
					t.Fatalf("lockSectionCount = %v, want a lockedError naming %s", err, path)
				}
				return
			case tc.cancel:
				if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
					t.Fatalf("lockSectionCount = %v after %v, want context.Canceled at once", err, time.Since(start))
				}
				return
			case err != nil:
				t.Fatal(err)
			case tc.wantNil:
				if sc != nil {
					t.Fatalf("a lock on a file that was not to be created")
				}
				if _, err := os.Lstat(path); !os.IsNotExist(err) {
					t.Fatalf("%s was created: %v", path, err)
				}
				return
			}
			if sc == nil || sc.before != tc.before {
				t.Fatalf("lockSectionCount = %+v, want before %d", sc, tc.before)
			}
			// Held: no other writer gets it until unlock.
			other, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
				t.Fatalf("another writer's flock while the count is held: %v, want EWOULDBLOCK", err)
			}
			if err := sc.write(tc.before + 2); err != nil {
				t.Fatal(err)
			}
			sc.unlock()
			if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatalf("flock after unlock: %v", err)
			}
			b, _ := os.ReadFile(path)
			if strings.TrimSpace(string(b)) != strconv.Itoa(tc.before+2) {
				t.Fatalf(".section_count = %q after writing %d", b, tc.before+2)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestQueryIsTail: linear_tail is "DEFAULT for all external callers; not
// opt-out" and semantic search "OPT-IN only" per call (seed 004;
// docs/RULES.md 004-6). corpus/query answers with the tail whatever query
// or mode it is given (saying so when one was), and corpus/search ranks
// only in a mode the call names.
func TestQueryIsTail(t *testing.T) {
	s, id, _ := openLog(t)
	ctx := context.Background()
	for _, tc := range []struct {
		query, mode string
	}{
		{"", ""},
		{"second body", ""},
		{"", protocol.SearchSemantic},
		{"second body", protocol.SearchHybrid},
	} {
		out, err := s.Query(ctx, &protocol.CorpusQueryParams{CorpusID: id, Query: tc.query, Mode: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		if out.Route != protocol.WhyTail || len(out.Hits) != 2 || out.Hits[0].Section.CanonicalSectionNumber != 1 || out.Hits[1].Section.CanonicalSectionNumber != 2 {
			t.Errorf("query %q mode %q: route %s, %d hits, want linear_tail's two sections in order", tc.query, tc.mode, out.Route, len(out.Hits))
		}
		if asked := tc.query != "" || tc.mode != ""; (out.Note != "") != asked {
			t.Errorf("query %q mode %q: note %q", tc.query, tc.mode, out.Note)
		}
	}
	for _, tc := range []struct {
		mode, reason string
	}{
		{"", "required"},
		{"vector", "unknown"},
		{"KEYWORD", "unknown"},
		{protocol.SearchKeyword, ""},
		{protocol.SearchSemantic, ""},
		{protocol.SearchHybrid, ""},
	} {
		out, err := s.Search(ctx, &protocol.CorpusSearchParams{CorpusID: id, Query: []byte(`"second body"`), Mode: tc.mode})
		if tc.reason == "" {
			if err != nil || out.Route != tc.mode {
				t.Errorf("search mode %q = %v, %v; want route %s", tc.mode, out, err, tc.mode)
			}
			continue
		}
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Invalid {
			t.Fatalf("search mode %q: %v, want errs.Invalid", tc.mode, err)
		}
		if d, ok := e.Data.(errs.InvalidData); !ok || d.Field != "mode" || d.Reason != tc.reason {
			t.Errorf("search mode %q: data %#v, want field mode, reason %s", tc.mode, e.Data, tc.reason)
		}
	}
}
