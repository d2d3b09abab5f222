package secrets

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/txkernel/txkernel/secrets/secretstest"

	"github.com/txkernel/txkernel/internal/testenv"
)

// TestPrefiltersChangeNothing checks that the cheap line tests in front of
// the AWS, GitHub and generic patterns never skip a line the pattern
// matches: on crafted lines (case folding, Unicode folds, operators,
// lengths) and on every line of the real RFC texts and fzf patches.
func TestPrefiltersChangeNothing(t *testing.T) {
	testenv.Volume(t)
	s := NewScanner()
	lines := []string{
		"api_key = q8Zr2LmX9vT4pK7wN3yB",
		"API_KEY: \"hT6qP9zR2mW8xK4vL7nJ\"",
		"\u212aey=Xq3vB8nM2kL9pR5tW7zY", // KELVIN SIGN folds to k
		"token => Zx9cV2bN7mQ4wE8rT3yU;",
		"password ?= Pl5oK8iJ3uH7yG2tF9rD",
		"\u017fecret=Jd4fG7hK2lP9qW3eR8tY", // LONG S folds to s for the pattern (the keyword test then refuses it)
		"no operator here but a token abcdefghijklmnopqrstuvwxyz",
		"AKIAZZZZZZZZZZZZZZZZ", "x ASIAQWERTYUIOPASDFGH y",
		"ghp_0123456789abcdefghijklmnopqrstuvwxyz", "github_pat_" + strings.Repeat("a", 82),
		"short=1", "",
		"my.Secret-Id\"\t:=  `Qw8eR4tY2uI6oP9aS3dF`", "x accessToken'=>\"Zm4nB7vC2xL9kJ5hG8fD\"",
		"api ?=Hy6tG3fR9eD2sW5qA8zX", "key:=Ab3cD5eF7gH9iJ2kL4mN", "key: =Ab3cD5eF7gH9iJ2kL4mN", "token=:Ab3cD5eF7gH9iJ2kL4mN",
		"the key: a sentence with words", "authors = [\"someone@example.com\"]", "keyboard := abcdefghijklmnop",
	}
	for _, dir := range []string{"corpora/rust-rfcs/text", "corpora/patches/fzf"} {
		root := filepath.Join("..", "..", "shared", dir)
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || len(lines) > 60000 {
				return nil
			}
			b, err := os.ReadFile(p)
			if err == nil {
				lines = append(lines, strings.Split(string(b), "\n")...)
			}
			return nil
		})
	}
	// The sweeping rename of the bucket benchmark: every line that names
	// Rust gets a non-ASCII "™", which the prefilter must still see
	// through.
	for _, l := range lines[12:] {
		if strings.Contains(l, "Rust") {
			lines = append(lines, strings.ReplaceAll(l, "Rust", "Rust™"))
		}
	}
	lines = append(lines, "Rust™ api_key = q8Zr2LmX9vT4pK7wN3yB", "\u212a\u212a\u212a \u017fecret: Jd4fG7hK2lP9qW3eR8tY™",
		// U+0130 lowers to "i"; other non-ASCII runes and invalid UTF-8
		// are no class of the pattern, before lowering or after.
		"AP\u0130 = q8Zr2LmX9vT4pK7wN3yB", "\u0130\u0130 token = \"q8Zr2LmX9vT4pK7wN3yB\"", "tok\u00e9n_key=\u00e9q8Zr2LmX9vT4pK7wN3yB",
		"\xffapi_key\xfe= q8Zr2LmX9vT4pK7wN3yB\xff", "ключ api_key: q8Zr2LmX9vT4pK7wN3yB ключ", "\u0131api=q8Zr2LmX9vT4pK7wN3yB")
	if len(lines) < 1000 {
		t.Logf("only the crafted lines: ../shared is absent")
	}
	mayMatch := 0
	for _, l := range lines {
		if got, want := s.genericMatches(l), s.genericMatchesAll(l); !reflect.DeepEqual(got, want) {
			t.Fatalf("generic prefilter changed %q: %v, want %v", l, got, want)
		}
		if got, want := mayBeGeneric(l), mayBeGenericLower(l); got != want {
			t.Fatalf("one-pass generic prefilter on %q: %v, the lowering one %v", l, got, want)
		} else if got {
			mayMatch++
		}
		if got, want := hasAWSPrefix(l), slices.ContainsFunc(awsPrefixes, func(p string) bool { return strings.Contains(l, p) }); got != want {
			t.Fatalf("hasAWSPrefix(%q) = %v, want %v", l, got, want)
		}
		if got, want := awsMatches(s, l), s.aws.FindAllStringIndex(l, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("AWS prefilter changed %q: %v, want %v", l, got, want)
		}
		if got, want := githubMatches(s, l), s.github.FindAllStringIndex(l, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("GitHub prefilter changed %q: %v, want %v", l, got, want)
		}
	}
	if mayMatch < 10 {
		t.Errorf("the generic prefilter passed only %d lines: the comparison tests nothing", mayMatch)
	}
	// The crafted lines that must match still do.
	for _, l := range lines[:5] {
		if len(s.genericMatches(l)) == 0 {
			t.Errorf("no generic match in %q", l)
		}
	}
}

// FuzzPrefilters checks on any line that the generic and GitHub
// prefilters never skip a line their pattern matches.
func FuzzPrefilters(f *testing.F) {
	f.Add("api_key = q8Zr2LmX9vT4pK7wN3yB")
	f.Add("\u212aey:=`Xq3vB8nM2kL9pR5tW7zY`")
	f.Add("the key: a sentence with words")
	f.Add("through ghp_0123456789abcdefghijklmnopqrstuvwxyz right")
	f.Add("x github_pat_" + strings.Repeat("a", 82))
	f.Add("Secret-Key\t'  ?=  \"Zm4nB7vC2xL9kJ5hG8fD")
	f.Add("Rust™ AP\u0130_\u212aey = q8Zr2LmX9vT4pK7wN3yB\xff")
	f.Add("x = 1; AUTH_TOKEN=>`0123456789abcdefghij` A3TAKIA")
	f.Add("\"-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\\n-----END OPENSSH PRIVATE KEY-----\"")
	s := NewScanner()
	ref := NewScanner()
	ref.reference = true
	f.Fuzz(func(t *testing.T, line string) {
		if got, want := s.genericMatches(line), s.genericMatchesAll(line); !reflect.DeepEqual(got, want) {
			t.Fatalf("generic prefilter changed %q: %v, want %v", line, got, want)
		}
		if got, want := mayBeGeneric(line), mayBeGenericLower(line); got != want {
			t.Fatalf("one-pass generic prefilter on %q: %v, the lowering one %v", line, got, want)
		}
		if got, want := awsMatches(s, line), s.aws.FindAllStringIndex(line, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("AWS prefilter changed %q: %v, want %v", line, got, want)
		}
		if got, want := s.scanPrivateKeys([]string{line}), ref.scanPrivateKeys([]string{line}); !reflect.DeepEqual(got, want) {
			t.Fatalf("key prefilter changed %q: %v, want %v", line, got, want)
		}
		if got, want := githubMatches(s, line), s.github.FindAllStringIndex(line, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("GitHub prefilter changed %q: %v, want %v", line, got, want)
		}
	})
}

// TestReferenceScannerAgrees checks that the scanner with its one-pass
// prefilters redacts and reports exactly what the reference scanner (the
// prefilters before them) does, line for line, on every content line of
// the real fzf patches with secrets of every rule planted among them
// (added, removed and context lines alike, as a proposal's diff is
// scanned).
func TestReferenceScannerAgrees(t *testing.T) {
	lines := diffContentLines(t, 0)
	for i, p := range secretstest.Secrets(7) {
		pl := strings.Split(strings.TrimSuffix(p.Secret, "\n"), "\n")
		at := (i + 1) * len(lines) / 4
		lines = slices.Insert(lines, at, pl...)
	}
	lines = append(lines, "api_key = q8Zr2LmX9vT4pK7wN3yB", "\tclient_SECRET: 'Zm4nB7vC2xL9kJ5hG8fD'")
	s, ref := NewScanner(), NewScanner()
	ref.reference = true
	got, gotF := s.RedactLines(lines)
	want, wantF := ref.RedactLines(lines)
	if !reflect.DeepEqual(gotF, wantF) {
		t.Fatalf("findings differ: %v, reference %v", gotF, wantF)
	}
	if len(wantF) < 5 {
		t.Fatalf("only %d findings: the planted secrets were not found", len(wantF))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: %q, reference %q", i, got[i], want[i])
		}
	}
}

// diffContentLines returns the content lines (context, removed, added;
// without their first byte) of the real fzf patches under ../../shared,
// as workspace's redactDiff hands them to RedactLines; with added > 0,
// only the added lines. It skips the test when ../shared is absent.
func diffContentLines(tb testing.TB, added int) []string {
	tb.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "..", "shared", "corpora", "patches", "fzf", "*", "patch.diff"))
	if len(paths) == 0 {
		tb.Skip("../shared is absent")
	}
	var lines []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "--- ") || l == "" {
				continue
			}
			if l[0] == '+' || added == 0 && (l[0] == '-' || l[0] == ' ') {
				lines = append(lines, l[1:])
			}
		}
	}
	return lines
}

// BenchmarkRedactLines compares, in one run, the reference prefilters
// with the one-pass ones on what a proposal's diff hands RedactLines:
// every content line of the 100 real fzf patches (about 1 MB), their
// added lines only, and those with "fzf" renamed "fzf™" (a sweep's
// non-ASCII lines). MB/s counts the lines' bytes; cpu-MB/s per second of
// the process's CPU time.
func BenchmarkRedactLines(b *testing.B) {
	for _, in := range []struct {
		name  string
		added int
		sweep bool
	}{{"all-lines", 0, false}, {"added-lines", 1, false}, {"sweep-added", 1, true}} {
		lines := diffContentLines(b, in.added)
		if in.sweep {
			// The bucket benchmark's sweeping rename: a non-ASCII "™"
			// on every line that names Rust (here: fzf).
			for i, l := range lines {
				lines[i] = strings.ReplaceAll(l, "fzf", "fzf™")
			}
		}
		n := 0
		for _, l := range lines {
			n += len(l) + 1
		}
		for _, impl := range []string{"reference", "one-pass"} {
			b.Run(in.name+"/impl="+impl, func(b *testing.B) {
				s := NewScanner()
				s.reference = impl == "reference"
				b.SetBytes(int64(n))
				cpu0 := cpuTime(b)
				for b.Loop() {
					s.RedactLines(lines)
				}
				// The machine is shared: MB per second of this process's
				// CPU time moves less than MB/s when others take the cores.
				b.ReportMetric(float64(n)*float64(b.N)/1e6/(float64(cpuTime(b)-cpu0)/1e9), "cpu-MB/s")
			})
		}
	}
}

// cpuTime returns the process's user plus system CPU time, in ns.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
