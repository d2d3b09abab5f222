package workspace_test

import (
	"context"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets/secretstest"
	"github.com/txkernel/txkernel/workspace"
)

// TestSecretsInHeaderLikeLines: a secret on a changed line whose text
// makes the diff line look like a file header ("+++ ", "--- ", "@@ ",
// "diff --git ") is found and redacted like any other: an added one is a
// secret introduction (the proposal then needs secrets_override) at its
// own line of its own file, and none of them reaches the reviewable diff.
func TestSecretsInHeaderLikeLines(t *testing.T) {
	aws := secretstest.Secrets(7)[0].Secret
	for _, tc := range []struct {
		name, old, new string
		line           int
	}{
		{"added ++", "a\n", "a\n++ " + aws + "\n", 2},
		{"added @@", "a\n", "@@ " + aws + "\na\n", 1},
		{"added diff --git", "a\nb\n", "a\n+diff --git " + aws + "\nb\n", 2},
		{"removed --", "a\n-- " + aws + "\nb\n", "a\nb\nc = " + aws + "\n", 3},
		{"context ++", "x\n+++ b/" + aws + "\ny\n", "x\n+++ b/" + aws + "\nz = " + aws + "\n", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"s.txt": tc.old})
			res, err := f.e.Propose(context.Background(), workspace.Proposal(protocol.KindFiles, workspace.Input{Files: []protocol.FileInput{content("s.txt", tc.new)}}))
			if err != nil {
				t.Fatal(err)
			}
			p := res.Proposal
			if strings.Contains(p.Diff, aws) {
				t.Errorf("the reviewable diff holds the secret:\n%s", p.Diff)
			}
			if !p.ContainsSecretIntroductions || len(p.SecretFindings) != 1 ||
				p.SecretFindings[0].Path != "s.txt" || p.SecretFindings[0].Line != tc.line || p.SecretFindings[0].Rule == "" {
				t.Errorf("findings %+v (introductions %v), want one at s.txt:%d", p.SecretFindings, p.ContainsSecretIntroductions, tc.line)
			}
		})
	}
}
