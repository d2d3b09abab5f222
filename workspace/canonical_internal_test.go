package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets"
	"github.com/txkernel/txkernel/secrets/secretstest"
	"github.com/txkernel/txkernel/unidiff"
)

// canonicalWhole is canonicalDiff as it was before each file's diff was
// checked in its own job: the diffs rendered one after the other, joined,
// and the whole redacted by redactDiff. It is the reference canonicalDiff
// must equal byte for byte, findings and their order included.
func canonicalWhole(w *Target, files []plannedFile) (raw, redacted []byte, findings []protocol.SecretFinding) {
	for _, f := range files {
		raw = append(raw, unidiff.FileDiff(f.path, f.path, f.old, f.new, f.oldExists, f.kind != protocol.ChangeDelete, f.oldMode, f.newMode)...)
	}
	redacted, findings = w.redactDiff(raw)
	return raw, redacted, findings
}

// checkCanonical fails t when canonicalDiff of files differs from
// canonicalWhole in any byte or finding, and reports whether it took the
// path that skips redactDiff (the redacted diff is the raw one).
func checkCanonical(t testing.TB, w *Target, name string, files []plannedFile) (skipped bool) {
	t.Helper()
	wantRaw, want, wantF := canonicalWhole(w, files)
	raw, got, gotF := w.canonicalDiff(slices.Clone(files))
	if !bytes.Equal(raw, wantRaw) || !bytes.Equal(got, want) || !slices.Equal(gotF, wantF) || (gotF == nil) != (wantF == nil) {
		t.Fatalf("%s: canonicalDiff differs from redacting the whole diff:\nfindings %+v\nwant     %+v\ndiff\n%s\nwant\n%s", name, gotF, wantF, got, want)
	}
	return len(got) > 0 && &got[0] == &raw[0]
}

// plannedFromCommit returns the plannedFiles of one fzf corpus commit,
// in path order as Plan sorts them: modified, added and deleted files.
// edit, when set, changes each file's old and new bytes first.
func plannedFromCommit(t *testing.T, dir string, edit func(i int, p string, old, new []byte) ([]byte, []byte)) []plannedFile {
	base, exp := readFiles(t, filepath.Join(dir, "base")), readFiles(t, filepath.Join(dir, "expected"))
	var paths []string
	for p := range base {
		paths = append(paths, p)
	}
	for p := range exp {
		if _, ok := base[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var files []plannedFile
	for i, p := range paths {
		old, oldOK := base[p]
		new, newOK := exp[p]
		if oldOK && newOK && bytes.Equal(old, new) {
			continue
		}
		if edit != nil {
			old, new = edit(i, p, old, new)
		}
		f := plannedFile{path: p, kind: protocol.ChangeModify, old: old, new: new, oldExists: oldOK, oldMode: 0o644, newMode: 0o644}
		switch {
		case !oldOK:
			f.kind, f.oldMode = protocol.ChangeAdd, 0
		case !newOK:
			f.kind, f.newMode, f.new = protocol.ChangeDelete, 0, nil
		}
		files = append(files, f)
	}
	return files
}

// TestCanonicalDiffAsWhole: on the real fzf commits, canonicalDiff, which
// checks each file's diff for secrets in that file's job and skips the
// scan of the joined diff when every check is clean, gives the bytes and
// findings of redacting the joined diff, with no secret, with secrets
// planted on added, removed and context lines, with a private key block
// that starts in one file's diff and ends in the next one's, and with a
// secret found in one file whose copy in another file no rule would
// match on its own. The clean commits must take the shortcut (else it
// is dead code), the planted ones must not.
func TestCanonicalDiffAsWhole(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "shared", "corpora", "patches", "fzf")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Skipf("skipping: %v (the shared test data lives beside the repository)", err)
	}
	planted := secretstest.Secrets(7)
	aws, gh := planted[0].Secret, planted[1].Secret
	keyLines := strings.Split(strings.TrimSuffix(planted[2].Secret, "\n"), "\n")
	w := &Target{scanner: secrets.NewScanner()}
	touched := false // an edit planted something in this commit
	edits := []struct {
		name  string
		dirty bool
		edit  func(i int, p string, old, new []byte) ([]byte, []byte)
	}{
		{"clean", false, nil},
		{"secrets", true, func(i int, p string, old, new []byte) ([]byte, []byte) {
			if i%3 != 0 || old == nil || new == nil {
				return old, new
			}
			touched = true
			old = append([]byte("token = "+gh+"\nctx = \""+aws+"\"\n"), old...)
			new = append([]byte("ctx = \""+aws+"\"\n"), new...)
			return old, append(new, "\n++ aws_key = "+aws+"\n"...)
		}},
		// The key's BEGIN line and first body lines end the first
		// file's new text, its other body lines and END line start the
		// second's: only the scan of the joined diff sees one block.
		{"key across files", true, func(i int, p string, old, new []byte) ([]byte, []byte) {
			switch {
			case i == 0 && new != nil:
				touched = true
				return old, append(append(bytes.Clone(new), '\n'), strings.Join(keyLines[:3], "\n")+"\n"...)
			case i == 1 && new != nil:
				return old, append([]byte(strings.Join(keyLines[3:], "\n")+"\n"), new...)
			}
			return old, new
		}},
		// The first file assigns the token to a keyword; the last one
		// only passes it to a call, which no rule matches, but whole-diff
		// redaction copies the finding to it.
		{"copy in another file", true, func(i int, p string, old, new []byte) ([]byte, []byte) {
			switch {
			case i == 0 && new != nil:
				touched = true
				return old, append([]byte("api_token = \""+gh[4:]+"\"\n"), new...)
			case i > 0 && new != nil:
				return old, append([]byte("call("+gh[4:]+")\n"), new...)
			}
			return old, new
		}},
	}
	commits, skipped := 0, 0
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		for _, ed := range edits {
			touched = false
			files := plannedFromCommit(t, dir, ed.edit)
			if len(files) < 2 {
				continue
			}
			skip := checkCanonical(t, w, e.Name()+" "+ed.name, files)
			if ed.dirty && touched && skip {
				t.Fatalf("%s %s: the shortcut was taken over planted secrets", e.Name(), ed.name)
			}
			if !ed.dirty && skip {
				skipped++
			}
		}
		commits++
	}
	if commits < 50 || skipped < commits/2 {
		t.Fatalf("%d commits, %d took the shortcut: the corpus is not being read, or the shortcut is dead", commits, skipped)
	}
}

// fuzzSecret replaces the markers of a fuzz input with secrets made at
// run time (no source file, seed files included, holds one): @AWS@,
// @GH@, @GHBODY@ (the token without its prefix, which only the generic
// rule finds, and only when assigned), and @KEY@ (a PEM private key, several lines) and @BEGIN@ /
// @BODY@ / @END@ (its parts, to be split across files).
func fuzzSecret(s string) string {
	p := secretstest.Secrets(11)
	key := strings.Split(strings.TrimSuffix(p[2].Secret, "\n"), "\n")
	return strings.NewReplacer("@AWS@", p[0].Secret, "@GH@", p[1].Secret, "@GHBODY@", p[1].Secret[4:], "@KEY@", p[2].Secret,
		"@BEGIN@", key[0], "@BODY@", strings.Join(key[1:len(key)-1], "\n"), "@END@", key[len(key)-1]).Replace(s)
}

// FuzzCanonicalDiffAsWhole: for any three files (modified, added,
// deleted, mode-only changes, or binary) canonicalDiff gives what
// redacting the joined diff gives, byte for byte with the same findings.
// kinds holds two bits per text file (0 modify, 1 add, 2 delete, 3 mode
// change) and a bit for the binary third file. The seeds
// (testdata/fuzz/FuzzCanonicalDiffAsWhole) hold secrets on each kind of
// line, "++ " added lines, a missing final newline and a key split
// across two files.
func FuzzCanonicalDiffAsWhole(f *testing.F) {
	f.Add("a\nb\n", "a\nkey = @AWS@\nb", "x\n", "@GH@\n++ y\n", uint8(0))
	f.Add("", "@BEGIN@\n@BODY@\n", "@END@\nz\n", "", uint8(1|2<<2|1<<4))
	w := &Target{scanner: secrets.NewScanner()}
	f.Fuzz(func(t *testing.T, old1, new1, old2, new2 string, kinds uint8) {
		old1, new1, old2, new2 = fuzzSecret(old1), fuzzSecret(new1), fuzzSecret(old2), fuzzSecret(new2)
		text := func(path, old, new string, kind uint8) plannedFile {
			pf := plannedFile{path: path, kind: protocol.ChangeModify, old: []byte(old), new: []byte(new), oldExists: true, oldMode: 0o644, newMode: 0o644}
			switch kind & 3 {
			case 1:
				pf.kind, pf.old, pf.oldExists, pf.oldMode = protocol.ChangeAdd, nil, false, 0
			case 2:
				pf.kind, pf.new, pf.newMode = protocol.ChangeDelete, nil, 0
			case 3:
				pf.new, pf.newMode = pf.old, 0o755
			}
			return pf
		}
		files := []plannedFile{text("a/one.txt", old1, new1, kinds), text("b/two.txt", old2, new2, kinds>>2)}
		if kinds&(1<<4) != 0 {
			files = append(files, plannedFile{path: "c/three.bin", kind: protocol.ChangeModify,
				old: []byte("\x00" + old1), new: []byte("\x00" + new2), oldExists: true, oldMode: 0o644, newMode: 0o644})
		}
		checkCanonical(t, w, "fuzz", files)
	})
}
