// Package record owns what the engine keeps on disk (DESIGN.md §4):
// the lines of events.jsonl (Event), transaction.json (Transaction), the
// proposal pointer a target plans into (Proposal) and the commit record
// that is an apply's commit point (Commit), with their one codec. The wire
// types in protocol are projections of these (Event.Wire, Proposal.Wire,
// Commit.Wire), so the notification a host receives can change without
// changing a byte on disk, and the other way round.
//
// A ledger line (PROTOCOL.md §10.4) is a JSON object whose last member is
// "checksum":"blake3:<64 hex digits>", the BLAKE3 hash of the line's bytes
// before that member. Hashing the bytes as written, not a re-encoding,
// keeps verification independent of how JSON is encoded. The engine
// writes and reads ledgers with it; test fixtures that copy ledgers reseal
// lines with it, so the format is written in one place.
package record

import (
	"bytes"
	"encoding/hex"
	"errors"

	"github.com/zeebo/blake3"
)

// prefix starts the checksum member at the end of every line.
const prefix = `,"checksum":"blake3:`

// tailLen is the length of the checksum member and the closing `"}`.
const tailLen = len(prefix) + 64 + 2

// Seal returns the ledger line for body, a JSON object without a checksum
// member (as json.Marshal writes one, with an empty Checksum omitted),
// followed by a newline. body must end with '}'.
func Seal(body []byte) ([]byte, error) {
	body = bytes.TrimRight(body, "\n")
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return nil, errors.New("record: body is not a JSON object")
	}
	open := body[:len(body)-1]
	sum := blake3.Sum256(open)
	line := make([]byte, 0, len(open)+tailLen+1)
	line = append(line, open...)
	line = append(line, prefix...)
	line = hex.AppendEncode(line, sum[:])
	return append(line, "\"}\n"...), nil
}

// Verify checks line's checksum (line without its newline). Its errors
// name what is wrong: "no checksum", "checksum is not hex" or "checksum
// mismatch".
func Verify(line []byte) error {
	if len(line) < tailLen+2 || line[0] != '{' || !bytes.HasSuffix(line, []byte(`"}`)) {
		return errors.New("no checksum")
	}
	at := len(line) - tailLen
	if !bytes.Equal(line[at:at+len(prefix)], []byte(prefix)) {
		return errors.New("no checksum")
	}
	want, err := hex.DecodeString(string(line[at+len(prefix) : len(line)-2]))
	if err != nil {
		return errors.New("checksum is not hex")
	}
	got := blake3.Sum256(line[:at])
	if !bytes.Equal(want, got[:]) {
		return errors.New("checksum mismatch")
	}
	return nil
}

// Reseal returns line (with or without its newline) with every old
// replaced by new in its body and the checksum recomputed: how a fixture
// copies a ledger under another transaction id.
func Reseal(line []byte, old, new string) ([]byte, error) {
	line = bytes.TrimRight(line, "\n")
	at := bytes.LastIndex(line, []byte(prefix))
	if at < 0 {
		return nil, errors.New("record: a line without a checksum")
	}
	body := bytes.ReplaceAll(line[:at], []byte(old), []byte(new))
	return Seal(append(body, '}'))
}
