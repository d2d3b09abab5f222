// Package secretstest makes secrets for tests that plant them and then
// check that no stored or emitted byte holds them (PROTOCOL.md §7.4). The
// secrets are generated at run time, so that no source file trips a
// secret scanner.
package secretstest

import (
	"math/rand/v2"
	"strings"
)

// Planted is one secret the scanner knows by shape: Kind names it ("aws",
// "github", "private-key"), Secret is the text to plant, and Needle the
// text that must appear nowhere afterwards (for a private key, one of its
// body lines: the markers may survive in a redaction's label).
type Planted struct {
	Kind, Secret, Needle string
}

// Secrets returns an AWS key id, a GitHub token and an RSA private key,
// the same for the same seed.
func Secrets(seed uint64) []Planted {
	r := rand.New(rand.NewPCG(31, seed))
	pick := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var body []string
	for range 6 {
		body = append(body, pick(64, alnum+"+/"))
	}
	aws := "AKIA" + pick(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
	gh := "ghp_" + pick(36, alnum)
	return []Planted{
		{"aws", aws, aws},
		{"github", gh, gh},
		{"private-key", "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Join(body, "\n") + "\n-----END RSA PRIVATE KEY-----\n", body[2]},
	}
}
