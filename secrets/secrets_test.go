package secrets

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/internal/testenv"
)

// rnd returns a deterministic pseudo-random string of n bytes from alphabet.
// Test secrets are generated rather than written out so that this file does
// not itself trip secret scanners (GitHub push protection among them).
func rnd(seed uint64, n int, alphabet string) string {
	r := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

const (
	alnum  = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b64    = alnum + "+/"
	hexa   = "0123456789abcdef"
)

var (
	ghBody   = rnd(1, 36, alnum)
	fineBody = rnd(2, 82, alnum+"_")
	awsBody  = rnd(3, 16, base32)
)

// secretCase is one line and the secret text the scanner must report in it
// ("" for a false-positive sample that must yield nothing).
type secretCase struct {
	rule, line, secret string
}

func secretCases() []secretCase {
	hex64 := rnd(4, 64, hexa)
	mixed := rnd(5, 32, alnum)
	return []secretCase{
		// aws-access-key-id
		{RuleAWSAccessKeyID, "aws_access_key_id = AKIA" + awsBody, "AKIA" + awsBody},
		{RuleAWSAccessKeyID, `"AccessKeyId": "ASIA` + awsBody + `",`, "ASIA" + awsBody},
		{RuleAWSAccessKeyID, "key=A3TX" + awsBody, "A3TX" + awsBody},
		{RuleAWSAccessKeyID, "id: ABIA" + awsBody + "\r", "ABIA" + awsBody},
		{RuleAWSAccessKeyID, "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", ""},
		{RuleAWSAccessKeyID, "AKIA" + strings.ToLower(awsBody), ""},
		{RuleAWSAccessKeyID, "AKIA" + awsBody[:15], ""},
		{RuleAWSAccessKeyID, "XAKIA" + awsBody, ""},
		{RuleAWSAccessKeyID, "AKIA" + awsBody + "Z", ""},
		{RuleAWSAccessKeyID, "AKIA1234567890189018", ""}, // 0, 1, 8, 9 are not base32
		{RuleAWSAccessKeyID, "AKIAAAAAAAAAAAAAAAAA", ""},
		// GitHub
		{RuleGitHubPAT, `token: "ghp_` + ghBody + `"`, "ghp_" + ghBody},
		{RuleGitHubOAuth, "gho_" + ghBody, "gho_" + ghBody},
		{RuleGitHubAppToken, "export GH=ghu_" + ghBody, "ghu_" + ghBody},
		{RuleGitHubAppToken, "ghs_" + ghBody + ";", "ghs_" + ghBody},
		{RuleGitHubRefreshToken, "(ghr_" + ghBody + ")", "ghr_" + ghBody},
		{RuleGitHubFineGrainedPAT, "GITHUB_TOKEN=github_pat_" + fineBody, "github_pat_" + fineBody},
		{RuleGitHubPAT, "ghp_" + ghBody[:35], ""},
		{RuleGitHubPAT, "ghp_" + ghBody + "x", ""},
		{RuleGitHubPAT, "xghp_" + ghBody, ""},
		{RuleGitHubPAT, "ghp_" + strings.Repeat("x", 36), ""},
		{RuleGitHubPAT, "ghx_" + ghBody, ""},
		{RuleGitHubFineGrainedPAT, "github_pat_" + fineBody[:81], ""},
		// generic-api-key (true positives, several syntaxes)
		{RuleGenericAPIKey, `"client_secret" : "` + hex64 + `",`, hex64},
		{RuleGenericAPIKey, `api_key = "` + mixed + `"`, mixed},
		{RuleGenericAPIKey, "export AUTH_TOKEN=" + mixed, mixed},
		{RuleGenericAPIKey, "\tapiKey: '" + mixed + "',", mixed},
		{RuleGenericAPIKey, "SecretKey := `" + mixed + "`", mixed},
		{RuleGenericAPIKey, `'db_password' => '` + mixed + `',`, mixed},
		{RuleGenericAPIKey, "GET /v1?access_token=" + mixed + "&page=2", mixed},
		{RuleGenericAPIKey, "generic_token = CLOJARS_" + hex64[:60], "CLOJARS_" + hex64[:60]},
		{RuleGenericAPIKey, "clientsecret=" + mixed + "\r", mixed},
		{RuleGenericAPIKey, `{"accessKeyId":"` + mixed + `"}`, mixed},
		{RuleGenericAPIKey, "password: " + rnd(6, 20, b64), rnd(6, 20, b64)},
		// generic-api-key (false positives)
		{RuleGenericAPIKey, "client_vpn_endpoint_id = aws_ec2_client_vpn_endpoint.client-vpn-endpoint.id", ""},
		{RuleGenericAPIKey, "key: ctrl-alt-delete-f12-shift", ""},
		{RuleGenericAPIKey, `api_key = "your_api_key_here_123"`, ""},
		{RuleGenericAPIKey, "password = changeme123456789", ""},
		{RuleGenericAPIKey, "secret = ${SECRET_KEY_FROM_ENV_1}", ""},
		{RuleGenericAPIKey, "token := getToken(ctx, cfg.Timeout2)", ""},
		{RuleGenericAPIKey, `key := "xxxxxxxxxxxxxxxxxxxx1"`, ""},
		{RuleGenericAPIKey, `monkey = "` + mixed + `"`, ""},
		{RuleGenericAPIKey, `keyboard = "` + mixed + `"`, ""},
		{RuleGenericAPIKey, `capital = "` + mixed + `"`, ""},
		{RuleGenericAPIKey, `if key == "` + mixed + `" {`, ""},
		{RuleGenericAPIKey, `if key=="` + mixed + `" {`, ""},
		{RuleGenericAPIKey, "access: github.com/junegunn/fzf/v2/src/tui", ""},
		{RuleGenericAPIKey, "token: 1.2.3-beta.4+build.5678", ""},
		{RuleGenericAPIKey, "key: tui.KeyCtrlF12.String", ""},
		{RuleGenericAPIKey, "api_key = AKIAIOSFODNN7EXAMPLE", ""},
		{RuleGenericAPIKey, "api_key = abababab12121212", ""},
		{RuleGenericAPIKey, "api_key = " + mixed[:15], ""},
		{RuleGenericAPIKey, "api_key = " + rnd(7, 151, alnum), ""},
		{RuleGenericAPIKey, "the key is " + mixed, ""},
		{RuleGenericAPIKey, "keymap = map[string]Action{", ""},
		{RuleGenericAPIKey, "key_bindings=/usr/share/fzf/shell/key-bindings.bash2", ""},
		{RuleGenericAPIKey, "password combination.", ""},
		{RuleGenericAPIKey, "apiVersion: apps/v1beta2", ""},
		{RuleGenericAPIKey, "auth_method: oauth2-client-credentials", ""},
		{RuleGenericAPIKey, "token: sha256:" + hex64, ""},                         // ':' ends the value: a digest reference, not a secret
		{RuleGenericAPIKey, `"fingerprint":"secrets_override:` + hex64 + `"`, ""}, // the kernel's own approval fingerprint: a digest
		{RuleGenericAPIKey, "secrets_override: " + mixed, mixed},
	}
}

func TestRules(t *testing.T) {
	s := NewScanner()
	for _, tc := range secretCases() {
		fs := s.ScanLines([]string{tc.line})
		if tc.secret == "" {
			if len(fs) != 0 {
				t.Errorf("%s false positive in %q: %+v (%q)", tc.rule, tc.line, fs, tc.line[fs[0].Start:fs[0].End])
			}
			continue
		}
		if len(fs) != 1 {
			t.Errorf("%s: %q: got %d findings %+v, want 1", tc.rule, tc.line, len(fs), fs)
			continue
		}
		f := fs[0]
		if f.Rule != tc.rule || f.Line != 1 || tc.line[f.Start:f.End] != tc.secret {
			t.Errorf("%s: %q: got %s %q", tc.rule, tc.line, f.Rule, tc.line[f.Start:f.End])
		}
		out, rfs := s.RedactLines([]string{tc.line})
		want := strings.Replace(tc.line, tc.secret, "[REDACTED:"+tc.rule+"]", 1)
		if out[0] != want || len(rfs) != 1 {
			t.Errorf("%s: redacted %q, want %q", tc.rule, out[0], want)
		}
	}
}

func pemBody(seed uint64, lines int) []string {
	var out []string
	for i := range lines {
		out = append(out, rnd(seed+uint64(i), 64, b64))
	}
	return append(out, rnd(seed+99, 20, b64)+"==")
}

func TestPrivateKeyRedaction(t *testing.T) {
	s := NewScanner()
	body := pemBody(10, 5)
	lines := append([]string{"config:", "  key: |", "    -----BEGIN RSA PRIVATE KEY-----"}, indent("    ", body)...)
	lines = append(lines, "    -----END RSA PRIVATE KEY-----", "after: "+body[0][:10])
	out, fs := s.RedactLines(lines)
	if len(fs) != 1 || fs[0].Rule != RulePrivateKey || fs[0].Line != 3 || fs[0].Start != 4 {
		t.Fatalf("findings = %+v", fs)
	}
	want := []string{"config:", "  key: |", "    [REDACTED:private-key]"}
	for range body {
		want = append(want, "[REDACTED:private-key]")
	}
	want = append(want, "    -----END RSA PRIVATE KEY-----", "after: "+body[0][:10])
	if strings.Join(out, "\n") != strings.Join(want, "\n") {
		t.Errorf("redacted:\n%s\nwant:\n%s", strings.Join(out, "\n"), strings.Join(want, "\n"))
	}

	// CRLF text through RedactString keeps every \r and \n.
	crlf := "a\r\n-----BEGIN OPENSSH PRIVATE KEY-----\r\n" + strings.Join(body, "\r\n") + "\r\n-----END OPENSSH PRIVATE KEY-----\r\nz"
	got, fs := s.RedactString(crlf)
	if len(fs) != 1 || strings.Count(got, "\r\n") != strings.Count(crlf, "\r\n") || strings.Contains(got, body[1]) {
		t.Errorf("CRLF redaction: %q %+v", got, fs)
	}

	// Encrypted PEM with header fields, and a truncated block with no END.
	enc := append([]string{"-----BEGIN EC PRIVATE KEY-----", "Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-128-CBC,0123456789ABCDEF", ""}, body...)
	out, fs = s.RedactLines(enc)
	if len(fs) != 1 || strings.Contains(strings.Join(out, "\n"), body[2]) || strings.Contains(strings.Join(out, "\n"), "DEK-Info") {
		t.Errorf("encrypted/truncated key: %q %+v", out, fs)
	}
}

func indent(p string, ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = p + l
	}
	return out
}

func TestPrivateKeyForms(t *testing.T) {
	s := NewScanner()
	body := pemBody(20, 3)
	oneLine := `{"private_key": "-----BEGIN PRIVATE KEY-----\n` + strings.Join(body, `\n`) + `\n-----END PRIVATE KEY-----\n", "x": 1}`
	goSrc := []string{
		"const key = \"-----BEGIN PRIVATE KEY-----\\n\" +",
		"\t\"" + body[0] + "\\n\" +",
		"\t\"" + body[1] + "\\n\" +",
		"\t\"-----END PRIVATE KEY-----\\n\"",
		"func f() {}",
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  int // findings
		keep  []string
	}{
		{"json one line", []string{oneLine}, 1, []string{`{"private_key": "`, `\n", "x": 1}`}},
		{"go concatenation", goSrc, 1, []string{"func f() {}"}},
		{"pgp block", []string{"-----BEGIN PGP PRIVATE KEY BLOCK-----", ""}, 0, nil},
		{"pgp block with body", append([]string{"-----BEGIN PGP PRIVATE KEY BLOCK-----", ""}, append(body, "-----END PGP PRIVATE KEY BLOCK-----")...), 1, []string{"-----END PGP PRIVATE KEY BLOCK-----"}},
		// False positives: parsers that only mention the markers.
		{"header constant", []string{`const hdr = "-----BEGIN RSA PRIVATE KEY-----"`, "func parse(b []byte) (Key, error) {", "\treturn nil, nil", "}"}, 0, nil},
		{"both markers in code", []string{`begin := "-----BEGIN RSA PRIVATE KEY-----"`, `end := "-----END RSA PRIVATE KEY-----"`}, 0, nil},
		{"short body", []string{"-----BEGIN RSA PRIVATE KEY-----", "...", "-----END RSA PRIVATE KEY-----"}, 0, nil},
		{"inline short", []string{"-----BEGIN RSA PRIVATE KEY----- abc -----END RSA PRIVATE KEY-----"}, 0, nil},
		{"public key", []string{"-----BEGIN PUBLIC KEY-----", body[0], body[1], "-----END PUBLIC KEY-----"}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, fs := s.RedactLines(tc.lines)
			if len(fs) != tc.want {
				t.Fatalf("findings = %+v, want %d", fs, tc.want)
			}
			joined := strings.Join(out, "\n")
			if tc.want > 0 {
				for _, b := range body[:2] {
					if strings.Contains(joined, b) {
						t.Errorf("body line survived: %q", joined)
					}
				}
			} else if joined != strings.Join(tc.lines, "\n") {
				t.Errorf("changed without findings: %q", joined)
			}
			for _, k := range tc.keep {
				if !strings.Contains(joined, k) {
					t.Errorf("lost %q: %q", k, joined)
				}
			}
		})
	}
}

func TestRedactMisc(t *testing.T) {
	s := NewScanner()
	tok := "ghp_" + ghBody
	// Two rules on one value: the specific one wins, reported once.
	out, fs := s.RedactLines([]string{"github_token = " + tok})
	if len(fs) != 1 || fs[0].Rule != RuleGitHubPAT || out[0] != "github_token = [REDACTED:github-pat]" {
		t.Errorf("overlap: %q %+v", out, fs)
	}
	// A copy of a found secret that no rule would match on its own.
	out, fs = s.RedactLines([]string{tok, "x" + tok + "x"})
	if len(fs) != 2 || strings.Contains(out[1], tok) {
		t.Errorf("copy: %q %+v", out, fs)
	}
	// Text without secrets is returned byte for byte, invalid UTF-8 included.
	in := "a\r\nb\xff\xfe\n\n\r"
	if got, fs := s.RedactString(in); got != in || fs != nil {
		t.Errorf("RedactString changed clean text: %q %+v", got, fs)
	}
	if got, _ := s.RedactString(""); got != "" {
		t.Errorf("empty: %q", got)
	}
}

// sharedDir returns ../shared/<sub> relative to the repository root, where
// the shared test data lives (as e2e/harness and tx find it), or skips.
func sharedDir(t testing.TB, sub string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "shared", sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("skipping: %s is absent (the shared test data lives beside the repository)", dir)
	}
	return dir
}

// TestFzfAddedLinesNoFindings scans every added line of the 100 fzf
// commits (each commit dir holds base/, expected/, meta.json and
// patch.diff, a plain "git diff"; the three patch.renames.diff variants
// add a subset of the same lines) and holds the scanner to zero findings:
// fzf is Go and shell code dense with "key" identifiers (keymaps,
// keybindings), the generic rule's hardest everyday input.
func TestFzfAddedLinesNoFindings(t *testing.T) {
	root := sharedDir(t, filepath.Join("corpora", "patches", "fzf"))
	patches, err := filepath.Glob(filepath.Join(root, "*", "patch.diff"))
	if err != nil || len(patches) == 0 {
		t.Fatalf("no patch.diff under %s: %v", root, err)
	}
	s := NewScanner()
	files, lines, findings := 0, 0, 0
	for _, p := range patches {
		commit := filepath.Base(filepath.Dir(p))
		for _, fd := range diffAddedLines(t, p) {
			files++
			lines += len(fd.added)
			for _, f := range s.ScanLines(fd.added) {
				findings++
				t.Errorf("%s %s: %s", commit, fd.path, describeFinding(fd.added, f))
			}
		}
	}
	if len(patches) != 100 || lines == 0 {
		t.Errorf("scanned %d patches and %d added lines; want the 100 fzf commits", len(patches), lines)
	}
	t.Logf("fzf: %d commits, %d file diffs, %d added lines scanned, %d findings", len(patches), files, lines, findings)
}

type fileAdds struct {
	path  string
	added []string
}

// diffAddedLines returns the added lines of each file section of a git
// diff, in order, without their "+". Hunk bodies are read by the line
// counts of their "@@ -a,b +c,d @@" headers, so an added line that itself
// starts with "++ " or "diff --git" is content, not a header.
func diffAddedLines(t *testing.T, p string) []fileAdds {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []fileAdds
	oldLeft, newLeft := 0, 0
	for i, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if oldLeft > 0 || newLeft > 0 {
			switch {
			case strings.HasPrefix(l, "+"):
				newLeft--
				out[len(out)-1].added = append(out[len(out)-1].added, l[1:])
			case strings.HasPrefix(l, "-"):
				oldLeft--
			case strings.HasPrefix(l, " ") || l == "":
				oldLeft--
				newLeft--
			case strings.HasPrefix(l, "\\"): // "\ No newline at end of file"
			default:
				t.Fatalf("%s:%d: hunk ends early at %q", p, i+1, l)
			}
			continue
		}
		switch {
		case strings.HasPrefix(l, "diff --git "):
			out = append(out, fileAdds{path: strings.TrimPrefix(l, "diff --git ")})
		case strings.HasPrefix(l, "+++ b/") && len(out) > 0:
			out[len(out)-1].path = strings.TrimPrefix(l, "+++ b/")
		case strings.HasPrefix(l, "@@ "):
			var a, b, c, d int
			if _, err := fmt.Sscanf(l, "@@ -%d,%d +%d,%d @@", &a, &b, &c, &d); err == nil {
				oldLeft, newLeft = b, d
			} else if _, err := fmt.Sscanf(l, "@@ -%d +%d,%d @@", &a, &c, &d); err == nil {
				oldLeft, newLeft = 1, d
			} else if _, err := fmt.Sscanf(l, "@@ -%d,%d +%d @@", &a, &b, &c); err == nil {
				oldLeft, newLeft = b, 1
			} else if _, err := fmt.Sscanf(l, "@@ -%d +%d @@", &a, &c); err == nil {
				oldLeft, newLeft = 1, 1
			} else {
				t.Fatalf("%s:%d: bad hunk header %q", p, i+1, l)
			}
		}
	}
	if oldLeft > 0 || newLeft > 0 {
		t.Fatalf("%s: truncated hunk", p)
	}
	return out
}

// describeFinding shows a finding so a person can judge it without the
// secret being printed: the rule, the line number, the secret's length,
// entropy and first four bytes, and the line as RedactLines leaves it.
func describeFinding(lines []string, f Finding) string {
	secret := lines[f.Line-1][f.Start:f.End]
	red, _ := NewScanner().RedactLines(lines[f.Line-1 : f.Line])
	shown := red[0]
	if len(shown) > 160 {
		shown = shown[:160] + "…"
	}
	return fmt.Sprintf("line %d [%s] %d bytes, entropy %.2f, starts %q: %q", f.Line, f.Rule, len(secret), entropy(secret), secret[:min(4, len(secret))], shown)
}

// knownSecrets lists findings in the shared corpora that a person has
// judged to be real secrets (or deliberate test secrets), as
// "path:line:rule" relative to ../shared. It is empty: no finding there
// has been shown to be a secret, so every finding is a false positive.
var knownSecrets = map[string]string{}

// TestSharedCorporaFindings measures precision on a harder negative
// corpus: every line of every text file under ../shared (the Rust RFCs'
// markdown, the fzf commits' base/ and expected/ trees and patches, the
// SciFact abstracts, the JSON Patch, JSON Pointer and unified-diff
// conformance fixtures, the seeds). Each file is scanned whole, so
// multi-line private keys count. It logs lines and findings per area and
// every finding, redacted, and fails on any finding not in knownSecrets.
func TestSharedCorporaFindings(t *testing.T) {
	testenv.Volume(t) // scans about 35 MB
	// WalkDir does not descend a symlinked root; ../shared may be one.
	root, err := filepath.EvalSymlinks(sharedDir(t, "."))
	if err != nil {
		t.Fatal(err)
	}
	type tally struct{ files, lines, candidates, findings int }
	areas := map[string]*tally{}
	s := NewScanner()
	var total tally
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			return nil // binary
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		area := corpusArea(rel)
		if areas[area] == nil {
			areas[area] = &tally{}
		}
		lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
		a := areas[area]
		a.files++
		a.lines += len(lines)
		for _, l := range lines {
			a.candidates += s.candidates(l)
		}
		for _, f := range s.ScanLines(lines) {
			key := fmt.Sprintf("%s:%d:%s", rel, f.Line, f.Rule)
			if why, ok := knownSecrets[key]; ok {
				t.Logf("known secret %s (%s)", key, why)
				continue
			}
			a.findings++
			t.Errorf("%s: %s", rel, describeFinding(lines, f))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(areas))
	for n := range areas {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := areas[n]
		total.files += a.files
		total.lines += a.lines
		total.findings += a.findings
		total.candidates += a.candidates
		t.Logf("%-36s %5d files %8d lines %5d candidates %3d findings", n, a.files, a.lines, a.candidates, a.findings)
	}
	t.Logf("%-36s %5d files %8d lines %5d candidates %3d findings", "total", total.files, total.lines, total.candidates, total.findings)
	if total.files == 0 {
		t.Errorf("no text file found under %s", root)
	}
}

var candidateHints = []string{"key", "api", "token", "secret", "client", "passwd", "password", "auth", "access",
	"akia", "asia", "abia", "acca", "a3t", "gh", "-----begin"}

// candidates counts the raw rule matches in line before any value filter:
// AWS and GitHub token shapes, BEGIN … PRIVATE KEY markers, and generic
// assignments to an identifier with a keyword. It shows how much of a
// corpus the filters had to reject.
func (s *Scanner) candidates(line string) int {
	// Every rule's regex needs one of these (ASCII case-folded); skipping
	// the rest keeps this count from tripling the test's time.
	lower := strings.ToLower(line)
	if !slices.ContainsFunc(candidateHints, func(h string) bool { return strings.Contains(lower, h) }) {
		return 0
	}
	n := len(s.aws.FindAllStringIndex(line, -1)) + len(s.github.FindAllStringIndex(line, -1)) + len(s.keyBegin.FindAllStringIndex(line, -1))
	for _, m := range s.generic.FindAllStringSubmatchIndex(line, -1) {
		if identHasKeyword(line[m[2]:m[3]]) {
			n++
		}
	}
	return n
}

// corpusArea groups a path under ../shared for the report: the fzf
// commits by base/, expected/ and patch files, everything else by its
// first two directories.
func corpusArea(rel string) string {
	parts := strings.Split(rel, "/")
	if len(parts) >= 5 && parts[0] == "corpora" && parts[1] == "patches" {
		if len(parts) >= 6 && (parts[4] == "base" || parts[4] == "expected") {
			return "corpora/patches/fzf/*/" + parts[4]
		}
		return "corpora/patches/fzf/*/(patch, meta)"
	}
	if len(parts) > 2 {
		return parts[0] + "/" + parts[1]
	}
	if len(parts) == 2 {
		return parts[0]
	}
	return "."
}

func FuzzScanner(f *testing.F) {
	for _, tc := range secretCases() {
		f.Add(tc.line)
	}
	for _, rs := range ruleSampleTable() {
		for _, c := range rs.tps {
			f.Add(c.text)
		}
		for _, text := range rs.fps {
			f.Add(text)
		}
	}
	f.Add("-----BEGIN RSA PRIVATE KEY-----\n" + strings.Join(pemBody(30, 2), "\n") + "\n-----END RSA PRIVATE KEY-----")
	f.Add("a\r\n\xff\n\n")
	s := NewScanner()
	f.Fuzz(func(t *testing.T, text string) {
		lines := strings.Split(text, "\n")
		found := s.ScanLines(lines)
		out, fs := s.RedactLines(lines)
		if len(out) != len(lines) {
			t.Fatalf("line count %d -> %d", len(lines), len(out))
		}
		if len(fs) != len(found) {
			t.Fatalf("ScanLines found %d, RedactLines %d", len(found), len(fs))
		}
		for _, f := range fs {
			if f.Line < 1 || f.Line > len(lines) || f.Start < 0 || f.End > len(lines[f.Line-1]) || f.Start >= f.End {
				t.Fatalf("bad finding %+v", f)
			}
			secret := lines[f.Line-1][f.Start:f.End]
			if strings.Contains(out[f.Line-1], secret) {
				t.Fatalf("secret %q survives in %q", secret, out[f.Line-1])
			}
		}
		red, _ := s.RedactString(text)
		if len(fs) == 0 && red != text {
			t.Fatalf("clean text changed: %q -> %q", text, red)
		}
		if strings.Count(red, "\n") != strings.Count(text, "\n") {
			t.Fatalf("newline count changed")
		}
	})
}

func TestWordLists(t *testing.T) {
	for _, m := range []map[string]bool{keywords, companions} {
		for w := range m {
			if len(w) > maxWordLen || w != strings.ToLower(w) {
				t.Errorf("word %q breaks compound's assumptions (maxWordLen %d, lowercase)", w, maxWordLen)
			}
		}
	}
	for _, tc := range []struct {
		ident string
		want  bool
	}{
		{"api_key", true}, {"APIKey", true}, {"apikey", true}, {"AWS_SECRET_ACCESS_KEY", true},
		{"secretaccesskey", true}, {"clientId", true}, {"x-auth-token", true}, {"keys", true},
		{"monkey", false}, {"keyboard", false}, {"author", false}, {"capital", false}, {"keymap", false},
		{"tokenizer", false}, {"accessor", false},
	} {
		if got := identHasKeyword(tc.ident); got != tc.want {
			t.Errorf("identHasKeyword(%q) = %v, want %v", tc.ident, got, tc.want)
		}
	}
}

// ruleSamples lists, for one rule, lines (or multi-line texts) that must be
// found and lines that must not, the way gitleaks validates each rule with
// true-positive and false-positive samples. Secrets are generated (rnd),
// never written out. In a true positive, secret is text that must be gone
// after redaction; every finding must carry the rule.
type ruleSamples struct {
	rule string
	tps  []tp
	fps  []string
}

type tp struct{ text, secret string }

// fineGrained returns a fine-grained PAT body in GitHub's layout: 22
// alphanumerics, "_", 59 alphanumerics.
func fineGrained(seed uint64) string {
	return rnd(seed, 22, alnum) + "_" + rnd(seed+1, 59, alnum)
}

// snakeIdent returns a lowercase snake_case identifier of exactly n bytes.
func snakeIdent(n int) string {
	words := []string{"expiration", "warning", "days", "before", "notification", "is", "sent", "to", "the", "owner", "of", "each", "token"}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		if b.Len() > 0 {
			b.WriteByte('_')
		}
		b.WriteString(words[i%len(words)])
	}
	s := b.String()[:n]
	return strings.TrimRight(s, "_") + strings.Repeat("s", n-len(strings.TrimRight(s, "_")))
}

func githubSamples(rule, prefix string, seed uint64) ruleSamples {
	tok := func(i uint64) string { return prefix + rnd(seed+i, 36, alnum) }
	t1, t2, t3, t4, t5 := tok(1), tok(2), tok(3), tok(4), tok(5)
	return ruleSamples{rule: rule,
		tps: []tp{
			{`token: "` + t1 + `"`, t1},
			{"export GH_TOKEN=" + t2, t2},
			{"git clone https://x-access-token:" + t3 + "@github.com/o/r.git", t3},
			{`-H "Authorization: Bearer ` + t4 + `"`, t4},
			{`{"token":"` + t5 + `","expires_at":null}`, t5},
		},
		fps: []string{
			prefix + strings.Repeat("x", 36),                              // placeholder run
			"GH_TOKEN=" + prefix + "1234567890abcdefghijklmnopqrstuvwxyz", // sequential placeholder
			"token: " + prefix + strings.Repeat("aB", 18),                 // low entropy, no run
			prefix + t1[4:39],     // 35 characters
			prefix + t1[4:] + "Z", // 37 characters: part of something longer
			"x" + t1,              // inside a longer word
			`if strings.HasPrefix(tok, "` + prefix + `") {`, // code that names the prefix
			"re := regexp.MustCompile(`" + prefix + "[0-9A-Za-z]{36}`)",
			prefix + "****************************" + t1[len(t1)-8:], // masked in a log
		},
	}
}

func ruleSampleTable() []ruleSamples {
	aws := func(i uint64) string { return rnd(100+i, 16, base32) }
	fine := func(i uint64) string { return "github_pat_" + fineGrained(200+2*i) }
	f1, f2, f3, f4 := fine(1), fine(2), fine(3), fine(4)
	pem := func(kind string, seed uint64, n int) (string, string) {
		body := pemBody(seed, n)
		return "-----BEGIN " + kind + "-----\n" + strings.Join(body, "\n") + "\n-----END " + kind + "-----", body[1]
	}
	rsa, rsaLine := pem("RSA PRIVATE KEY", 300, 6)
	ossh, osshLine := pem("OPENSSH PRIVATE KEY", 310, 4)
	enc, encLine := pem("ENCRYPTED PRIVATE KEY", 320, 8)
	pgp, pgpLine := pem("PGP PRIVATE KEY BLOCK", 330, 5)
	ecBody := pemBody(340, 3)
	ecEnc := "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123456789ABCDEF\n\n" + strings.Join(ecBody, "\n") + "\n-----END EC PRIVATE KEY-----"
	gcpBody := pemBody(350, 4)
	gcp := `  "private_key": "-----BEGIN PRIVATE KEY-----\n` + strings.Join(gcpBody, `\n`) + `\n-----END PRIVATE KEY-----\n",`
	pubBody := pemBody(360, 4)

	mixed := func(i uint64) string { return rnd(400+i, 32, alnum) }
	hex64 := rnd(410, 64, hexa)
	uuid := "123e4567-e89b-12d3-a456-426614174000"
	sha1 := "3f786850e387550fdab836ed7e6dc881de23001b"
	sha256 := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	sri := "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="
	k8sSecret := base64.StdEncoding.EncodeToString([]byte(rnd(420, 24, alnum+"!#%&*-_")))

	return []ruleSamples{
		{rule: RuleAWSAccessKeyID,
			tps: []tp{
				{"aws_access_key_id = AKIA" + aws(1), "AKIA" + aws(1)},
				{`"AccessKeyId": "ASIA` + aws(2) + `",`, "ASIA" + aws(2)},
				{"export AWS_ACCESS_KEY_ID=AKIA" + aws(3), "AKIA" + aws(3)},
				{"https://b.s3.amazonaws.com/o?AWSAccessKeyId=AKIA" + aws(4) + "&Expires=1", "AKIA" + aws(4)},
				{"key: ABIA" + aws(5), "ABIA" + aws(5)},
				{"ACCA" + aws(6) + ",", "ACCA" + aws(6)},
				{"id=A3TX" + aws(7), "A3TX" + aws(7)},
			},
			fps: []string{
				// AWS's documentation key. Decision: not a finding. It is
				// published in AWS's docs and SDK tests, grants nothing, and
				// gitleaks allowlists every "…EXAMPLE" id the same way.
				"aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
				"AWS_ACCESS_KEY_ID=ASIAIOSFODNN7EXAMPLE",
				"AWS_ACCESS_KEY_ID=AKIAXXXXXXXXXXXXXXXX",
				"AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP", // sequential placeholder
				"principal = AKIA" + strings.ToLower(aws(1)),
				"AKIA" + aws(1)[:15],
				"MFRGGZDFMZTWQ2LK" + "AKIA" + aws(1), // inside a longer base32 run
				"AKIA1234567890ABCDEF",               // 0, 1, 8, 9 are not base32
				`if strings.HasPrefix(id, "AKIA") && len(id) == 20 {`,
			},
		},
		githubSamples(RuleGitHubPAT, "ghp_", 500),
		githubSamples(RuleGitHubOAuth, "gho_", 510),
		githubSamples(RuleGitHubAppToken, "ghs_", 520),
		githubSamples(RuleGitHubRefreshToken, "ghr_", 530),
		{rule: RuleGitHubFineGrainedPAT,
			tps: []tp{
				{"GITHUB_TOKEN=" + f1, f1},
				{`token: "` + f2 + `"`, f2},
				{"https://oauth2:" + f3 + "@github.com/o/r", f3},
				{`{"pat": "` + f4 + `"}`, f4},
			},
			fps: []string{
				"github_pat_" + strings.Repeat("X", 82),
				"github_pat_11ABCDEFGHIJKLMNOPQRSTUV_" + rnd(600, 59, alnum)[:53] + "abcdef", // sequential placeholder
				"github_pat_" + strings.Repeat("aB1", 27) + "a",                              // low entropy
				f1[:len(f1)-1], // 81 characters
				"var github_pat_" + snakeIdent(82) + " = 1", // an identifier of exactly the length
				`if strings.HasPrefix(tok, "github_pat_") {`,
				"github_pat_<your-token-here>",
			},
		},
		{rule: RulePrivateKey,
			tps: []tp{
				{rsa, rsaLine},
				{ossh, osshLine},
				{enc, encLine},
				{pgp, pgpLine},
				{ecEnc, ecBody[1]},
				{gcp, gcpBody[1]},
			},
			fps: []string{
				`const pemType = "-----BEGIN RSA PRIVATE KEY-----"` + "\nfunc parse(b []byte) (Key, error) {\n\treturn nil, nil\n}",
				"begin := \"-----BEGIN OPENSSH PRIVATE KEY-----\"\nend := \"-----END OPENSSH PRIVATE KEY-----\"",
				"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA...\n-----END RSA PRIVATE KEY-----",
				"-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("X", 64) + "\n" + strings.Repeat("X", 20) + "\n-----END PRIVATE KEY-----", // placeholder body
				"-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("AAAA", 40) + "\n-----END PRIVATE KEY-----",
				"-----BEGIN PRIVATE KEY-----\n[REDACTED]\n-----END PRIVATE KEY-----",
				"-----BEGIN PUBLIC KEY-----\n" + strings.Join(pubBody, "\n") + "\n-----END PUBLIC KEY-----",
				"-----BEGIN CERTIFICATE-----\n" + strings.Join(pubBody, "\n") + "\n-----END CERTIFICATE-----",
				"-----BEGIN RSA TESTING KEY-----\n" + strings.Join(pubBody, "\n") + "\n-----END RSA TESTING KEY-----", // Go's test-key spelling
				"// A key file starts with -----BEGIN OPENSSH PRIVATE KEY----- and ends with its END line.",
			},
		},
		{rule: RuleGenericAPIKey,
			tps: []tp{
				{`api_key = "` + mixed(1) + `"`, mixed(1)},
				{`"client_secret" : "` + hex64 + `",`, hex64},
				{`"client_id" : "` + hex64 + `"`, hex64}, // gitleaks' own true positive
				{"export AUTH_TOKEN=" + mixed(2), mixed(2)},
				{"db_password: " + uuid, uuid},             // a UUID can be a password
				{"  password: " + k8sSecret, k8sSecret},    // Kubernetes Secret data
				{"cache_password = " + mixed(3), mixed(3)}, // a strong word beats "cache"
				{"SecretKey := `" + mixed(4) + "`", mixed(4)},
			},
			fps: []string{
				// UUIDs (ids, not credentials, unless named secret/password).
				`client_id = "` + uuid + `"`,
				`"key": "f47ac10b-58cc-4372-a567-0e02b2c3d479",`,
				// git SHAs and other digests, named as such.
				"cache_key: " + sha1,
				`api_spec_commit = "` + sha1 + `"`,
				`"tokenHash": "` + sha256 + `"`,
				"sha256_key = " + sha256,
				// base64 of ordinary text.
				`"tokenText": "` + base64.StdEncoding.EncodeToString([]byte("hello world, this is not a secret")) + `"`,
				"auth_note=" + base64.RawURLEncoding.EncodeToString([]byte("The quick brown fox jumps over the lazy dog")),
				// references, templates and placeholders.
				`password = os.Getenv("X")`,
				"api_key: ${API_KEY}",
				`token = "<your token here>"`,
				`password: "{{ .Values.db.password }}"`,
				"api_key = process.env.API_KEY_V2",
				`token = "1234567890abcdefghij"`,
				`api_key = "test_key_1234567890"`,
				`key_id = "0123456789abcdef0123"`,
				// low entropy.
				`api_key = "abc123abc123abc123"`,
				"password = aaaa1111bbbb2222",
				// hex colour tables.
				`token_colors = {"#1a2b3c", "#4d5e6f", "#7a8b9c"}`,
				"keyColor: #3f51b5a1;",
				`const keyColors = "1f77b4ff7f0e2ca02cd627289467bd8c564be377c27f7f7fbcbd2217becf"`,
				// lock-file integrity hashes and Go module sums.
				`"integrity": "` + sri + `",`,
				"  integrity " + sri,
				"cache_key: " + sri,
				"golang.org/x/oauth2 v0.15.0 h1:s8pnnxNVzjWyrvYdFUQq5llS1PX2zhPXmccZv99h7uQ=",
				"key: h1:s8pnnxNVzjWyrvYdFUQq5llS1PX2zhPXmccZv99h7uQ=",
				// public keys.
				`publicKey: "BEl62iUYgUivxIkv69yViEuiBIa-Ib9-SkvMeAtA3LFgDzkrxZJjSgSnfckjBJuBkr3qBUYIHBQFLXYp5Nksh8U"`,
			},
		},
	}
}

// TestRuleSamples runs every rule's true- and false-positive samples and
// reports how many each rule has (at least 4 of each are required).
func TestRuleSamples(t *testing.T) {
	s := NewScanner()
	for _, rs := range ruleSampleTable() {
		t.Run(rs.rule, func(t *testing.T) {
			if len(rs.tps) < 4 || len(rs.fps) < 4 {
				t.Errorf("%d true and %d false positive samples; want at least 4 of each", len(rs.tps), len(rs.fps))
			}
			for _, c := range rs.tps {
				lines := strings.Split(c.text, "\n")
				out, fs := s.RedactLines(lines)
				if len(fs) == 0 {
					t.Errorf("missed: %q", c.text)
					continue
				}
				for _, f := range fs {
					if f.Rule != rs.rule {
						t.Errorf("%q: found %s %q, want only %s", c.text, f.Rule, lines[f.Line-1][f.Start:f.End], rs.rule)
					}
				}
				if red := strings.Join(out, "\n"); strings.Contains(red, c.secret) {
					t.Errorf("secret survives redaction: %q", red)
				}
			}
			for _, text := range rs.fps {
				lines := strings.Split(text, "\n")
				for _, f := range s.ScanLines(lines) {
					t.Errorf("false positive %s %q in %q", f.Rule, lines[f.Line-1][f.Start:f.End], text)
				}
			}
			t.Logf("%s: %d true positives, %d false positives", rs.rule, len(rs.tps), len(rs.fps))
		})
	}
}

// TestTokenFiltersKeepRandomTokens measures what the placeholder filters
// cost in recall: of n random tokens of each shape, at most one in a
// thousand may be missed (the run test alone expects 2e-4 to 4e-4).
func TestTokenFiltersKeepRandomTokens(t *testing.T) {
	s := NewScanner()
	const n = 5000
	missed := map[string]int{}
	for i := range uint64(n) {
		for _, tok := range []string{
			"AKIA" + rnd(1000+i, 16, base32),
			"ghp_" + rnd(20000+i, 36, alnum),
			"github_pat_" + fineGrained(40000+2*i),
		} {
			if fs := s.ScanLines([]string{"x = " + tok}); len(fs) != 1 {
				missed[tok[:4]]++
			}
		}
	}
	for shape, m := range missed {
		if m > n/1000 {
			t.Errorf("%s…: %d of %d random tokens missed", shape, m, n)
		}
	}
	t.Logf("random tokens missed, of %d per shape: %v", n, missed)
}
