package secrets

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestPrefiltersChangeNothing checks that the cheap line tests in front of
// the AWS, GitHub and generic patterns never skip a line the pattern
// matches: on crafted lines (case folding, Unicode folds, operators,
// lengths) and on every line of the real RFC texts and fzf patches.
func TestPrefiltersChangeNothing(t *testing.T) {
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
	lines = append(lines, "Rust™ api_key = q8Zr2LmX9vT4pK7wN3yB", "\u212a\u212a\u212a \u017fecret: Jd4fG7hK2lP9qW3eR8tY™")
	if len(lines) < 1000 {
		t.Logf("only the crafted lines: ../shared is absent")
	}
	for _, l := range lines {
		if got, want := s.genericMatches(l), s.genericMatchesAll(l); !reflect.DeepEqual(got, want) {
			t.Fatalf("generic prefilter changed %q: %v, want %v", l, got, want)
		}
		if got, want := awsMatches(s, l), s.aws.FindAllStringIndex(l, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("AWS prefilter changed %q: %v, want %v", l, got, want)
		}
		if got, want := githubMatches(s, l), s.github.FindAllStringIndex(l, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("GitHub prefilter changed %q: %v, want %v", l, got, want)
		}
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
	s := NewScanner()
	f.Fuzz(func(t *testing.T, line string) {
		if got, want := s.genericMatches(line), s.genericMatchesAll(line); !reflect.DeepEqual(got, want) {
			t.Fatalf("generic prefilter changed %q: %v, want %v", line, got, want)
		}
		if got, want := githubMatches(s, line), s.github.FindAllStringIndex(line, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("GitHub prefilter changed %q: %v, want %v", line, got, want)
		}
	})
}
