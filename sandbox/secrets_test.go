package sandbox

import (
	"bufio"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{RuleGenericAPIKey, "token: sha256:" + hex64, ""}, // ':' ends the value: a digest reference, not a secret
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

// TestNoFindingsOnFzfCommits runs the scanner over the added lines of 100
// real commits of the fzf repository, code dense with "key" identifiers,
// to hold the generic rule to its precision target: zero findings.
func TestNoFindingsOnFzfCommits(t *testing.T) {
	patches, _ := filepath.Glob("../../shared/corpora/patches/fzf/*/patch.diff")
	if len(patches) == 0 {
		t.Skip("fzf corpus not found at ../../shared/corpora/patches/fzf/*/patch.diff (it lives outside the module)")
	}
	s := NewScanner()
	total, lines := 0, 0
	for _, p := range patches {
		commit := filepath.Base(filepath.Dir(p))
		for file, added := range addedLines(t, p) {
			lines += len(added)
			for _, f := range s.ScanLines(added) {
				total++
				t.Errorf("%s %s:%d [%s] %q in %q", commit, file, f.Line, f.Rule, added[f.Line-1][f.Start:f.End], added[f.Line-1])
			}
		}
	}
	t.Logf("%d patches, %d added lines, %d findings", len(patches), lines, total)
}

// addedLines returns the "+" lines of a unified diff, without the "+",
// grouped by the file they are added to.
func addedLines(t *testing.T, p string) map[string][]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make(map[string][]string)
	file := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "+++ "):
			file = strings.TrimPrefix(strings.TrimPrefix(l, "+++ "), "b/")
		case strings.HasPrefix(l, "+"):
			out[file] = append(out[file], l[1:])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func FuzzScanner(f *testing.F) {
	for _, tc := range secretCases() {
		f.Add(tc.line)
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
