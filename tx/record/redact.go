package record

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/txkernel/txkernel/secrets"
)

// scanner is the one secret scanner of the record layer. It holds only
// compiled patterns and is safe for concurrent use.
var scanner = secrets.NewScanner()

// RedactJSON returns data, a JSON text, with every secret in its strings
// redacted (secrets.Scanner.RedactJSON), and whether anything was. It is
// the rule every persisted value passes through (Event.Encode,
// Transaction.Encode) and the one the kernel applies to every answer and
// notification it emits (PROTOCOL.md §7.4): whatever a target puts in a
// record or an answer, no secret's text reaches the disk or the host. The
// exact bytes a commit needs are kept in the transaction's blobs (mode
// 0600), never in a record.
func RedactJSON(data []byte) ([]byte, bool) {
	return scanner.RedactJSON(data)
}

// RedactText returns text (lines separated by "\n", any bytes) with every
// secret redacted, as proposal.patch and the turnDiff item keep it.
func RedactText(text []byte) []byte {
	out, _ := RedactTextString(text)
	return out
}

// RedactTextString is RedactText that also returns the result as a
// string, for a caller that needs both, the bytes for a file and the
// string for a JSON value (the engine's turnDiff item and turn/start
// answer): one copy of a large diff, not three.
func RedactTextString(text []byte) ([]byte, string) {
	s := string(text)
	out, findings := scanner.RedactString(s)
	if len(findings) == 0 && !strings.Contains(out, "[REDACTED:") {
		return text, s
	}
	return []byte(out), out
}

// Redacted returns p as it is persisted: every string of it redacted,
// decoded again, and whether redaction changed anything (when it did not,
// the result is p itself). The engine loads a transaction from what this
// returns, so the plan it applies is the one a restart would read back.
func (p *Proposal) Redacted() (*Proposal, bool, error) {
	if p == nil {
		return nil, false, nil
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, false, fmt.Errorf("proposal pointer: %w", err)
	}
	red, changed := RedactJSON(data)
	if !changed {
		return p, false, nil
	}
	out := new(Proposal)
	if err := json.Unmarshal(red, out); err != nil {
		return nil, false, fmt.Errorf("redacted proposal pointer: %w", err)
	}
	return out, true, nil
}

// Redacted returns c as it is persisted and whether redaction changed it
// (a commit record that holds a secret: recovery would read another
// record than the one the apply made, so the engine refuses it).
func (c *Commit) Redacted() (*Commit, bool, error) {
	if c == nil {
		return nil, false, nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, false, fmt.Errorf("commit record: %w", err)
	}
	red, changed := RedactJSON(data)
	if !changed {
		return c, false, nil
	}
	out := new(Commit)
	if err := json.Unmarshal(red, out); err != nil {
		return nil, false, fmt.Errorf("redacted commit record: %w", err)
	}
	return out, true, nil
}
