package markdown

import (
	"regexp"
	"strings"
)

// maxRoman is the largest section number a heading may carry.
const maxRoman = 99_999

// romanRE is the canonical (subtractive) form of the numerals: "IIII",
// "VV" and "IC" are refused, so that a typo is reported rather than read
// as some other number. Thousands beyond MMM are written as more Ms
// ("MMMMCMXCIX" is 4999), the usual extension, so that a log may grow
// past 3999 sections.
var romanRE = regexp.MustCompile(`^M{0,99}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$`)

var romanDigit = map[byte]int{'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}

// RomanValue returns the value of a Roman numeral in canonical form, in
// either case ("LXVI" and "lxvi" are 66), and whether s is one. The empty
// string is not a numeral.
func RomanValue(s string) (int, bool) {
	u := strings.ToUpper(s)
	if u == "" || !romanRE.MatchString(u) {
		return 0, false
	}
	v := 0
	for i := 0; i < len(u); i++ {
		d := romanDigit[u[i]]
		if i+1 < len(u) && romanDigit[u[i+1]] > d {
			v -= d
		} else {
			v += d
		}
	}
	return v, true
}

// Roman writes n (1–maxRoman) as an upper-case Roman numeral, thousands
// as repeated Ms; "" outside that range.
func Roman(n int) string {
	if n < 1 || n > maxRoman {
		return ""
	}
	vals := []int{1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1}
	syms := []string{"M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"}
	var b strings.Builder
	for i, v := range vals {
		for n >= v {
			b.WriteString(syms[i])
			n -= v
		}
	}
	return b.String()
}

// isRomanLetter reports whether c can appear in a numeral.
func isRomanLetter(c byte) bool {
	_, ok := romanDigit[c&^0x20]
	return ok && (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z')
}
