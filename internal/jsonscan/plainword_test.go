package jsonscan

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestPlainWord: plainWord of eight bytes is true exactly when each byte
// is one Unquote copies as it is, for every byte value at every
// position of an otherwise plain word, and for random words (mostly
// plain bytes, so that both answers come up).
func TestPlainWord(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' }
	want := func(b []byte) bool {
		for _, c := range b {
			if !plain(c) {
				return false
			}
		}
		return true
	}
	check := func(b []byte) {
		if got := plainWord(binary.LittleEndian.Uint64(b)); got != want(b) {
			t.Fatalf("plainWord(%q) = %v, want %v", b, got, want(b))
		}
	}
	for pos := range 8 {
		for c := range 256 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			check(b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[bool]int{}
	for range 200000 {
		b := make([]byte, 8)
		for i := range b {
			b[i] = byte(0x20 + r.IntN(0x60))
			if r.IntN(40) == 0 {
				b[i] = byte(r.IntN(256))
			}
		}
		check(b)
		seen[want(b)]++
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("random words were all one kind: %v", seen)
	}
}
