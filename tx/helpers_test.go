package tx

import (
	"github.com/txkernel/txkernel/errs"
)

// kindData returns the kind of err as a string ("stale", "denied", ...) and
// its typed data, as errs.KindOf finds them; ("internal", nil) for an error
// without a kind. Tests compare the kind with a string so that a renamed
// errs.Kind constant shows up as a failure, not as a silent match.
func kindData(err error) (string, any) {
	k, d := errs.KindOf(err)
	return string(k), d
}

// kindOf is kindData's kind alone; "" for a nil error.
func kindOf(err error) string {
	if err == nil {
		return ""
	}
	k, _ := kindData(err)
	return k
}
