package powerloss

import (
	"fmt"
	"strconv"
	"strings"
)

// splitArgs splits at top-level commas. With -xx every string byte is an
// escape, so commas inside strings cannot occur; only braces and brackets
// nest.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" || len(out) > 0 {
		out = append(out, t)
	}
	return out
}

// unquote decodes an strace string written with -xx: "\x61\x62".
func unquote(s string) ([]byte, error) {
	if strings.HasSuffix(s, "...") {
		return nil, fmt.Errorf("string truncated by strace (raise -s): %.40s", s)
	}
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return nil, fmt.Errorf("not a string: %.40s", s)
	}
	return unescape(s[1 : len(s)-1])
}

func unescape(s string) ([]byte, error) {
	out := make([]byte, 0, len(s)/4)
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			out = append(out, s[i])
			i++
			continue
		}
		if i+3 < len(s)+0 && s[i+1] == 'x' {
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return nil, fmt.Errorf("bad escape %q", s[i:i+4])
			}
			out = append(out, byte(v))
			i += 4
			continue
		}
		return nil, fmt.Errorf("bad escape at %d", i)
	}
	return out, nil
}

// fdArg parses "5</path>" or "AT_FDCWD</cwd>" into its number (-100 for
// AT_FDCWD) and path.
func fdArg(s string) (fd int, path string, err error) {
	m := fdRE.FindStringSubmatch(s)
	if m == nil {
		return 0, "", fmt.Errorf("not a descriptor: %.40s", s)
	}
	if m[1] == "AT_FDCWD" {
		fd = -100
	} else if fd, err = strconv.Atoi(m[1]); err != nil {
		return 0, "", err
	}
	if m[2] != "" {
		b, err := unescape(m[2])
		if err != nil {
			return 0, "", err
		}
		path = string(b)
	}
	return fd, path, nil
}

func intArg(s string) (int64, error) {
	return strconv.ParseInt(s, 0, 64)
}
