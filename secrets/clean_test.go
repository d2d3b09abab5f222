package secrets

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/secrets/secretstest"
)

// TestCleanLines: a line holding what any rule reports, or a private key
// BEGIN marker (even one whose block is not a key), is not clean; lines
// no rule reports are, skip bytes dropped first.
func TestCleanLines(t *testing.T) {
	p := secretstest.Secrets(3)
	key := strings.Split(strings.TrimSuffix(p[2].Secret, "\n"), "\n")
	for _, tc := range []struct {
		name, text string
		skip       int
		clean      bool
	}{
		{"code", "func f() {\n\treturn nil\n}\n", 0, true},
		{"empty", "", 0, true},
		{"keyword without value", "token := r.Token()\napi_key: ${API_KEY}\n", 0, true},
		{"aws", "x\nid = " + p[0].Secret + "\n", 0, false},
		{"github", "t := \"" + p[1].Secret + "\"", 0, false},
		{"generic", "password = \"" + p[1].Secret[4:] + "\"\n", 0, false},
		{"begin marker", "a\n" + key[0] + "\n", 0, false},
		{"begin marker without a body", "-----BEGIN PRIVATE KEY-----\n", 0, false},
		{"key body without its marker", strings.Join(key[1:], "\n"), 0, true},
		{"secret in the skipped byte", "A" + p[0].Secret[1:] + "\n", 1, true},
		{"secret past the skipped byte", "+" + p[0].Secret + "\n", 1, false},
	} {
		s := NewScanner()
		if got := s.CleanLines(tc.text, tc.skip); got != tc.clean {
			t.Errorf("%s: CleanLines = %v, want %v", tc.name, got, tc.clean)
		}
		// Clean means the full scan finds nothing, whatever the lines
		// are joined with.
		if tc.clean && tc.skip == 0 {
			if red, found := s.RedactString(tc.text); red != tc.text || found != nil {
				t.Errorf("%s: clean, but RedactString finds %+v", tc.name, found)
			}
		}
	}
}

// shortcutPair returns a scanner that checks large texts on every core
// first (the default) and one that scans them whole, each with an empty
// memory of clean texts.
func shortcutPair() (fast, serial *Scanner) {
	fast, serial = NewScanner(), NewScanner()
	serial.serial = true
	return fast, serial
}

// checkShortcut fails t when RedactString or RedactJSON of text differs
// between a scanner that checks its lines on every core first and one
// that scans it whole.
func checkShortcut(t testing.TB, name, text string) {
	t.Helper()
	fast, serial := shortcutPair()
	got, gotF := fast.RedactString(text)
	want, wantF := serial.RedactString(text)
	if got != want || !slices.Equal(gotF, wantF) || (gotF == nil) != (wantF == nil) {
		t.Fatalf("%s: RedactString with the line check differs: %+v, want %+v", name, gotF, wantF)
	}
	// The same text again: the memory of clean texts answers.
	if again, againF := fast.RedactString(text); again != want || !slices.Equal(againF, wantF) {
		t.Fatalf("%s: RedactString a second time differs", name)
	}
	data, err := json.Marshal(map[string]string{"diff": text, "note": "x"})
	if err != nil {
		t.Fatal(err)
	}
	fast, serial = shortcutPair()
	gotJ, gotC := fast.RedactJSON(data)
	wantJ, wantC := serial.RedactJSON(data)
	if gotC != wantC || !bytes.Equal(gotJ, wantJ) {
		t.Fatalf("%s: RedactJSON with the line check differs", name)
	}
}

// TestRedactStringShortcut: on some 300 KB of the real fzf diffs' lines,
// RedactString and RedactJSON give the same as the whole scan, with no
// secret (where the line check must pass, so the shortcut is live), and
// with a private key block across the point where the text is cut into
// parts, a secret found in one part whose copy in the other no rule
// matches, a secret on the last line, and CRLF lines.
func TestRedactStringShortcut(t *testing.T) {
	lines := diffContentLines(t, 0)
	var b strings.Builder
	for _, l := range lines {
		if b.Len() > 300<<10 {
			break
		}
		b.WriteString(l + "\n")
	}
	clean := b.String()
	if s := NewScanner(); !s.cleanText(clean) {
		t.Fatal("the fzf lines are not clean line by line: the shortcut is never taken")
	}
	p := secretstest.Secrets(5)
	mid := strings.IndexByte(clean[len(clean)/2-200:], '\n') + len(clean)/2 - 200 + 1
	cases := map[string]string{
		"clean":           clean,
		"key across cut":  clean[:mid] + p[2].Secret + clean[mid:],
		"copy across cut": "api_token = \"" + p[1].Secret[4:] + "\"\n" + clean + "f(" + p[1].Secret[4:] + ")\n",
		"secret at end":   clean + "id=" + p[0].Secret,
		"crlf":            strings.ReplaceAll(clean, "\n", "\r\n") + "k = " + p[0].Secret + "\r\n",
	}
	for name, text := range cases {
		if name != "clean" && NewScanner().cleanText(text) {
			t.Fatalf("%s: the line check passes a text with a secret", name)
		}
		checkShortcut(t, name, text)
	}
}

// FuzzRedactStringShortcut: for any text put into some 70 KB of clean
// lines (so that the line check on every core runs), at any offset,
// RedactString and RedactJSON give what the whole scan gives. The
// markers @AWS@, @GH@, @GHBODY@, @KEY@ become secrets made at run time
// (secretstest), so that no seed holds one.
func FuzzRedactStringShortcut(f *testing.F) {
	f.Add("token = \"@GHBODY@\"\nx(@GHBODY@)", uint16(0))
	f.Add("@KEY@", uint16(35000))
	f.Add("\n-----BEGIN PRIVATE KEY-----\n", uint16(65535))
	f.Add("a = @AWS@\r\nb", uint16(1))
	p := secretstest.Secrets(9)
	marks := strings.NewReplacer("@AWS@", p[0].Secret, "@GH@", p[1].Secret, "@GHBODY@", p[1].Secret[4:], "@KEY@", p[2].Secret)
	filler := strings.Repeat("\tfmt.Println(key, value) // a line of code\n", 1700)
	f.Fuzz(func(t *testing.T, text string, at uint16) {
		k := int(at) % (len(filler) + 1)
		checkShortcut(t, "fuzz", filler[:k]+marks.Replace(text)+filler[k:])
	})
}

// BenchmarkCleanLines: the line check on the content lines of the real
// fzf patches (about 1 MB), as one text. MB/s counts its bytes.
func BenchmarkCleanLines(b *testing.B) {
	text := strings.Join(diffContentLines(b, 0), "\n")
	s := NewScanner()
	if !s.CleanLines(text, 0) {
		b.Fatal("the fzf lines are not clean")
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		s.CleanLines(text, 0)
	}
}

// FuzzCleanLines: CleanLines, which searches the text once for the
// literals some rules need, answers as the check of every line with all
// of scan's per-line rules (lineRules) and the BEGIN marker, and when it
// finds a text clean the whole scan finds nothing in it.
func FuzzCleanLines(f *testing.F) {
	p := secretstest.Secrets(13)
	for _, s := range []string{
		"x\napi_key = " + p[1].Secret[4:] + "\n",
		"AKIA in prose\nsecret_token: " + p[1].Secret[4:],
		"\u212aey = " + p[1].Secret[4:] + "\nplain",
		"ghp_ is a prefix\n" + p[1].Secret,
		"---- not a marker\n-----BEGIN PRIVATE KEY-----",
		"+" + p[0].Secret + "\n",
	} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	s := NewScanner()
	f.Fuzz(func(t *testing.T, text string, skip uint8) {
		k := int(skip % 3)
		want := true
		for line := range strings.SplitSeq(text, "\n") {
			if len(line) < k {
				continue
			}
			line = line[k:]
			if strings.Contains(line, "-----") && s.keyBegin.MatchString(line) {
				want = false
			}
			s.lineRules(line, func(int, int, string) { want = false })
		}
		got := s.CleanLines(text, k)
		if got != want {
			t.Fatalf("CleanLines(%q, %d) = %v, the check of each line says %v", text, k, got, want)
		}
		if got && k == 0 {
			if red, found := NewScanner().RedactString(text); red != text || found != nil {
				t.Fatalf("CleanLines(%q) is true, but the scan finds %+v", text, found)
			}
		}
	})
}

// TestSumString: sumString is SHA-256 of the text, at the lengths around
// its buffer's.
func TestSumString(t *testing.T) {
	for _, n := range []int{0, 1, 16<<10 - 1, 16 << 10, 16<<10 + 1, 100 << 10} {
		text := strings.Repeat("diff line\n", n/10+1)[:n]
		if got, want := sumString(text), sha256.Sum256([]byte(text)); got != want {
			t.Errorf("%d bytes: sumString %x, want %x", n, got, want)
		}
	}
}
