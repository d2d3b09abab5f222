package corpus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// twoSections is a small log: two sections, the second filed under a
// wrong number (a collision).
const twoSections = "## I. One (a, 2026-01-01)\n\nfirst body\n\n## V. Two (b, 2026-01-02)\n\nsecond body\n"

func write(t *testing.T, ws, rel, text string) string {
	t.Helper()
	p := filepath.Join(ws, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func openCorpus(s *Service, rel string, gov any) (*protocol.CorpusInfo, error) {
	watch := false
	p := &protocol.CorpusOpenParams{Path: rel, Watch: &watch}
	if gov != nil {
		raw, _ := json.Marshal(gov)
		p.GovernanceDir = raw
	}
	return s.Open(context.Background(), p)
}

// invalid returns err's errs.Invalid data, or fails.
func invalid(t *testing.T, err error) map[string]any {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		t.Fatalf("want an errs.Invalid error, got %v", err)
	}
	b, _ := json.Marshal(e.Data)
	var d map[string]any
	json.Unmarshal(b, &d)
	return d
}

// TestGovernanceDirRefused: a governanceDir whose governance files would
// be a log, lie inside a log or an indexed folder, or are another log's is
// refused at corpus/open (errs.Invalid, data.reason); nothing is written
// and the log's bytes are unchanged.
func TestGovernanceDirRefused(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(t *testing.T, s *Service, ws string) // other corpora, registered first
		log    string
		gov    string
		reason string
		at     string // data.path
	}{
		{"log named ONBOARDING_PROMPT.md in its own folder", nil, "notes/ONBOARDING_PROMPT.md", "notes", reasonIsTheLog, "notes/ONBOARDING_PROMPT.md"},
		{"log named GOVERNANCE_LOG.md in its own folder", nil, "notes/GOVERNANCE_LOG.md", "notes", reasonIsTheLog, "notes/GOVERNANCE_LOG.md"},
		{"log named collision.log", nil, "notes/collision.log", "notes", reasonIsTheLog, "notes/collision.log"},
		{"log named .section_count", nil, "notes/.section_count", "notes", reasonIsTheLog, "notes/.section_count"},
		{"log named the prompt's temporary file", nil, "notes/ONBOARDING_PROMPT.md.tmp", "notes", reasonIsTheLog, "notes/ONBOARDING_PROMPT.md.tmp"},
		{"log named the prompt's template", nil, "notes/ONBOARDING_PROMPT.template.md", "notes", reasonIsTheLog, "notes/ONBOARDING_PROMPT.template.md"},
		{"the log itself", nil, "notes/log.md", "notes/log.md", reasonIsTheLog, "notes/log.md"},
		{"inside the log", nil, "notes/log.md", "notes/log.md/gov", reasonIsTheLog, "notes/log.md"},
		{"the log's folder as an absolute path", nil, "notes/ONBOARDING_PROMPT.md", "$WS/notes", reasonIsTheLog, "notes/ONBOARDING_PROMPT.md"},
		{"an indexed folder", func(t *testing.T, s *Service, ws string) {
			write(t, ws, "docs/a.md", "# A\n\ntext\n")
			if _, err := openCorpus(s, "docs", nil); err != nil {
				t.Fatal(err)
			}
		}, "notes/log.md", "docs", reasonIndexed, "docs"},
		{"a folder inside an indexed folder", func(t *testing.T, s *Service, ws string) {
			write(t, ws, "docs/a.md", "# A\n\ntext\n")
			if _, err := openCorpus(s, "docs", nil); err != nil {
				t.Fatal(err)
			}
		}, "notes/log.md", "docs/sub/governance", reasonIndexed, "docs"},
		{"another log's name", func(t *testing.T, s *Service, ws string) {
			write(t, ws, "other/GOVERNANCE_LOG.md", twoSections)
			if _, err := openCorpus(s, "other/GOVERNANCE_LOG.md", nil); err != nil {
				t.Fatal(err)
			}
		}, "notes/log.md", "other", reasonIsALog, "other/GOVERNANCE_LOG.md"},
		{"another log's governance folder", func(t *testing.T, s *Service, ws string) {
			write(t, ws, "notes/first.md", twoSections)
			if _, err := openCorpus(s, "notes/first.md", nil); err != nil {
				t.Fatal(err)
			}
		}, "notes/log.md", "notes/governance", reasonInUse, "notes/governance"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			s, _ := newService(t, ws)
			if tc.setup != nil {
				tc.setup(t, s, ws)
			}
			logPath := write(t, ws, tc.log, twoSections)
			before := listFiles(t, ws)
			gov := strings.ReplaceAll(tc.gov, "$WS", ws)
			_, err := openCorpus(s, tc.log, gov)
			d := invalid(t, err)
			if d["field"] != "governanceDir" || d["reason"] != tc.reason || d["path"] != tc.at {
				t.Fatalf("data %v; want reason %s path %s", d, tc.reason, tc.at)
			}
			if b, _ := os.ReadFile(logPath); string(b) != twoSections {
				t.Fatalf("the log was written: %q", b)
			}
			if after := listFiles(t, ws); after != before {
				t.Fatalf("a refused open wrote into the workspace:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// listFiles lists every file and folder under dir with its size.
func listFiles(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(dir, p)
			fmt.Fprintf(&b, "%s:%d ", rel, fi.Size())
		}
		return nil
	})
	return b.String()
}

// TestGovernanceConflicts is the writer's rule on its own: which paths
// the governance writer of corpus c_self may write.
func TestGovernanceConflicts(t *testing.T) {
	x := &indexedSet{
		logs:    map[string]string{"notes/log.md": "c_self", "notes/GOVERNANCE_LOG.md": "c_other"},
		folders: map[string]string{"docs": "c_docs"},
		owners:  map[string]string{"notes/governance": "c_self", "shared": "c_other"},
	}
	files := []struct{ p, reason string }{
		{"notes/log.md", reasonIsTheLog},
		{"notes/GOVERNANCE_LOG.md", reasonIsALog},
		{"docs/ONBOARDING_PROMPT.md", reasonIndexed},
		{"docs/deep/GOVERNANCE_LOG.markdown", reasonIndexed},
		{"docs/gov/collision.log", ""},      // not markdown: the folder does not index it
		{"docs/.gov/GOVERNANCE_LOG.md", ""}, // hidden: the folder does not index it
		{"docs2/GOVERNANCE_LOG.md", ""},     // a sibling, not inside
		{"notes/governance/ONBOARDING_PROMPT.md", ""},
		{"NOTES/Log.md", reasonIsTheLog},                 // one file on a case-insensitive file system
		{"Docs/sub/onboarding_prompt.MD", reasonIndexed}, // likewise
	}
	for _, f := range files {
		if r, _ := x.fileConflict(f.p, "c_self"); r != f.reason {
			t.Errorf("fileConflict(%s) = %q, want %q", f.p, r, f.reason)
		}
	}
	dirs := []struct{ d, reason string }{
		{"notes", reasonIsALog}, // its GOVERNANCE_LOG.md is c_other's log
		{"notes/governance", ""},
		{"notes/log.md", reasonIsTheLog},
		{"docs", reasonIndexed},
		{"docs/.hidden", reasonIndexed},
		{"shared", reasonInUse},
		{"Shared", reasonInUse},
		{"elsewhere", ""},
	}
	for _, d := range dirs {
		if r, _, _ := x.dirConflict(d.d, "c_self"); r != d.reason {
			t.Errorf("dirConflict(%s) = %q, want %q", d.d, r, d.reason)
		}
	}
}

// TestGovernanceWriterRefusesALog: a log registered after another log's
// governance folder was chosen, at the path of one of its files, is never
// written: the writer checks at every write, so the rebuild's
// GOVERNANCE_LOG.md line is refused (a governance_unwritable warning) and
// the log's bytes stay the same.
func TestGovernanceWriterRefusesALog(t *testing.T) {
	ws := t.TempDir()
	s, _ := newService(t, ws)
	write(t, ws, "notes/log.md", twoSections)
	info, err := openCorpus(s, "notes/log.md", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first sync's model line made GOVERNANCE_LOG.md; a host now opens
	// it as a log of its own, keeping its governance in the data dir.
	victim := filepath.Join(ws, "notes", "governance", "GOVERNANCE_LOG.md")
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, "\n## I. Now a log (x, 2026-01-01)\n\nbody\n"...)
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openCorpus(s, "notes/governance/GOVERNANCE_LOG.md", "null"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Rebuild(context.Background(), &protocol.CorpusRebuildParams{CorpusID: info.CorpusID})
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	for _, w := range res.Warnings {
		warned = warned || (w.Kind == "governance_unwritable" && w.Path == "notes/governance/GOVERNANCE_LOG.md")
	}
	if !warned {
		t.Fatalf("the rebuild's log line was not refused: %+v", res.Warnings)
	}
	if after, _ := os.ReadFile(victim); !bytes.Equal(after, b) {
		t.Fatalf("the governance writer wrote a registered log:\n%s", after)
	}
	// Directly: every writing entry point refuses.
	db, _ := s.store(context.Background())
	c, _ := db.Get(context.Background(), info.CorpusID)
	g := s.governanceFor(context.Background(), db, c)
	if err := g.appendLines(governanceLogName, "x\n"); invalid(t, err)["reason"] != reasonIsALog {
		t.Fatalf("appendLines: %v", err)
	}
	// A governance value without its indexed set writes nothing.
	g.indexed = nil
	if err := g.appendLines(collisionLogName, "x\n"); err == nil {
		t.Fatal("a writer without the indexed set wrote")
	}
	if after, _ := os.ReadFile(victim); !bytes.Equal(after, b) {
		t.Fatalf("the log changed")
	}
}

// TestGovernanceTwoLogsOneFolder: two logs in one folder each get their
// own governance files (the first governance/, the second
// governance/<name>/), so their counts and collision logs are separate,
// and the choice holds when both are opened again.
func TestGovernanceTwoLogsOneFolder(t *testing.T) {
	ws := t.TempDir()
	s, _ := newService(t, ws)
	write(t, ws, "notes/a.md", twoSections)
	write(t, ws, "notes/b.md", twoSections+"## III. Three (c, 2026-01-03)\n\nthird\n\n## IX. Four (d, 2026-01-04)\n\nfourth\n")
	for round := 0; round < 2; round++ {
		for _, l := range []string{"notes/a.md", "notes/b.md"} {
			if _, err := openCorpus(s, l, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		dir        string
		count      int
		collisions int
	}{{"notes/governance", 2, 1}, {"notes/governance/b", 4, 2}} {
		n, err := ReadSectionCount(filepath.Join(ws, c.dir, sectionCountName))
		if err != nil || n != c.count {
			t.Fatalf("%s/.section_count = %d, %v; want %d", c.dir, n, err, c.count)
		}
		b, _ := os.ReadFile(filepath.Join(ws, c.dir, collisionLogName))
		if got := strings.Count(string(b), "\n"); got != c.collisions {
			t.Fatalf("%s/collision.log has %d lines, want %d:\n%s", c.dir, got, c.collisions, b)
		}
	}
}

// TestGovernanceNoSections: a file with no section heading opened as a
// log is indexed empty with a no_sections warning, and no governance file
// is written, in the workspace or the data dir.
func TestGovernanceNoSections(t *testing.T) {
	for _, gov := range []string{"", "null", `"notes/gov"`} {
		ws := t.TempDir()
		s, _ := newService(t, ws)
		write(t, ws, "notes/readme.md", "# Readme\n\nNo numbered section here.\n\n## Notes\n")
		p := &protocol.CorpusOpenParams{Path: "notes/readme.md", Watch: new(bool), GovernanceDir: json.RawMessage(gov)}
		info, err := s.Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		var warned bool
		for _, w := range info.Sync.Warnings {
			warned = warned || w.Kind == "no_sections"
		}
		if !warned {
			t.Fatalf("governanceDir %v: no no_sections warning: %+v", gov, info.Sync.Warnings)
		}
		if _, err := s.Rebuild(context.Background(), &protocol.CorpusRebuildParams{CorpusID: info.CorpusID}); err != nil {
			t.Fatal(err)
		}
		if got := listFiles(t, filepath.Join(ws, "notes")); strings.Contains(got, "gov") {
			t.Fatalf("governanceDir %v: governance files written for a file with no sections: %s", gov, got)
		}
		for _, name := range writtenNames {
			if _, err := os.Stat(s.govPath(info.CorpusID, name)); err == nil {
				t.Fatalf("governanceDir %v: %s written in the data dir", gov, name)
			}
		}
	}
}

// TestGovernanceHardLink: a governance file that is a hard link of another
// file (a log, say, linked in under a governance name) is never written
// through: not appended to, and not truncated by the prompt's temporary
// file.
func TestGovernanceHardLink(t *testing.T) {
	ws := t.TempDir()
	s, _ := newService(t, ws)
	write(t, ws, "notes/log.md", twoSections)
	info, err := openCorpus(s, "notes/log.md", nil)
	if err != nil {
		t.Fatal(err)
	}
	other := write(t, ws, "other.md", "precious bytes\n")
	db, _ := s.store(context.Background())
	c, _ := db.Get(context.Background(), info.CorpusID)
	g := s.governanceFor(context.Background(), db, c)
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{collisionLogName, func() error { return g.appendLines(collisionLogName, "x\n") }},
		{onboardingName + ".tmp", func() error { return g.writeOnboarding(c.Path, 9) }},
		{sectionCountName, func() error {
			n, err := g.lockSectionCount(context.Background(), true, time.Now().Add(time.Second))
			if err == nil {
				n.unlock()
			}
			return err
		}},
	} {
		link := filepath.Join(ws, "notes", "governance", tc.name)
		os.Remove(link)
		if err := os.Link(other, link); err != nil {
			t.Skipf("no hard links here: %v", err)
		}
		err := tc.write()
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Sandbox {
			t.Fatalf("%s: a write through a hard link: %v", tc.name, err)
		}
		if b, _ := os.ReadFile(other); string(b) != "precious bytes\n" {
			t.Fatalf("%s: the linked file was written: %q", tc.name, b)
		}
		os.Remove(link)
	}
}

// TestGovernanceLegacySharedFolder: a data dir from before per-log folders
// may name one governance folder for two logs. The first-registered log
// keeps it; the other's next sync moves its files to its own folder (a
// governance_moved warning) and fills it though the log is unchanged;
// the owner's count is untouched.
func TestGovernanceLegacySharedFolder(t *testing.T) {
	ws := t.TempDir()
	s, _ := newService(t, ws)
	write(t, ws, "notes/a.md", twoSections)
	write(t, ws, "notes/b.md", twoSections+"## III. Three (c, 2026-01-03)\n\nthird\n")
	if _, err := openCorpus(s, "notes/a.md", nil); err != nil {
		t.Fatal(err)
	}
	b, err := openCorpus(s, "notes/b.md", nil)
	if err != nil {
		t.Fatal(err)
	}
	// What an earlier release left: b's setting names a's folder.
	if err := os.WriteFile(s.govPath(b.CorpusID, governanceSetting), []byte(`{"dir":"notes/governance"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(ws, "notes", "governance", "b"))
	res, err := s.Sync(context.Background(), &protocol.CorpusParams{CorpusID: b.CorpusID})
	if err != nil {
		t.Fatal(err)
	}
	var moved bool
	for _, w := range res.Warnings {
		moved = moved || (w.Kind == "governance_moved" && w.Path == "notes/governance")
	}
	if !moved {
		t.Fatalf("no governance_moved warning: %+v", res.Warnings)
	}
	for _, c := range []struct {
		dir string
		n   int
	}{{"notes/governance", 2}, {"notes/governance/b", 3}} {
		if n, err := ReadSectionCount(filepath.Join(ws, c.dir, sectionCountName)); err != nil || n != c.n {
			t.Fatalf("%s/.section_count = %d, %v; want %d", c.dir, n, err, c.n)
		}
	}
	// A new governanceDir for an unchanged log is filled at once.
	if _, err := openCorpus(s, "notes/a.md", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if n, err := ReadSectionCount(filepath.Join(ws, "elsewhere", sectionCountName)); err != nil || n != 2 {
		t.Fatalf("elsewhere/.section_count = %d, %v; want 2", n, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "elsewhere", onboardingName)); err != nil {
		t.Fatalf("no onboarding prompt in the new folder: %v", err)
	}
}

// TestLogGrammarReparse: a log indexed under the earlier grammar, which
// left "[exec:gov]" in the body, is parsed again at its next sync though
// its bytes did not change: the tag becomes metadata and leaves the body,
// and the sync after that skips the unchanged log.
func TestLogGrammarReparse(t *testing.T) {
	ws := t.TempDir()
	s, db := newService(t, ws)
	src := "## I. Title (a, 2026-01-01)\n\nx [exec:gov] y\n"
	write(t, ws, "log.md", src)
	ctx := context.Background()
	c, err := db.OpenCorpus(ctx, corpusID("log.md"), "log.md", "log")
	if err != nil {
		t.Fatal(err)
	}
	// What grammar 1 stored: the tag in the body, no exec tag, and the
	// plain hash of the bytes.
	old := logChunk("log.md", "1", 1, &markdown.Section{Filed: "I", FiledNumber: 1, Title: "Title", Authors: []string{"a"}, CreatedAt: "2026-01-01",
		Body: "x [exec:gov] y", ExecTags: []string{}, StatusTags: []string{}, End: len(src), Line: 1})
	if _, err := db.ApplySync(ctx, c.ID, store.SyncUpdate{Upsert: []store.Chunk{old}, SourceHash: hashHex([]byte(src)), SourceSize: int64(len(src))}); err != nil {
		t.Fatal(err)
	}
	// Its count is current, so only the grammar can make the sync parse.
	os.MkdirAll(filepath.Dir(s.govPath(c.ID, sectionCountName)), 0o700)
	if err := os.WriteFile(s.govPath(c.ID, sectionCountName), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true} {
		res, err := s.Sync(ctx, &protocol.CorpusParams{CorpusID: c.ID})
		if err != nil {
			t.Fatal(err)
		}
		if res.Unchanged != want {
			t.Fatalf("sync %d: unchanged %v, want %v", i+1, res.Unchanged, want)
		}
	}
	h, err := s.Section(ctx, &protocol.CorpusSectionParams{CorpusID: c.ID, CanonicalNumber: 1})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(h.Section.ExecTags, ",") != "EXEC:GOV" || strings.Contains(h.Section.Body, "exec") {
		t.Fatalf("after the re-parse: exec_tags %v body %q", h.Section.ExecTags, h.Section.Body)
	}
}
