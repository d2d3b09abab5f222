package tx

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// FuzzLoadLedger feeds arbitrary bytes to the ledger loader: it must never
// panic; it either refuses with an error or returns events numbered 1..n,
// and what it leaves on disk is exactly the whole lines it accepted.
func FuzzLoadLedger(f *testing.F) {
	var good []byte
	for i, ev := range []record.Event{
		{Seq: 1, TS: now(), Type: protocol.EventTurnStart, TransactionID: "tx-f"},
		{Seq: 2, TS: now(), Type: protocol.EventTxStatus, TransactionID: "tx-f", Status: protocol.StateProposed},
	} {
		line, err := ev.Encode()
		if err != nil {
			f.Fatal(err)
		}
		good = append(good, line...)
		f.Add(bytes.Clone(good))
		f.Add(append(bytes.Clone(good), line[:len(line)/2+i]...))
	}
	f.Add([]byte("{}\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, LedgerFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := loadLedger(path, "tx-f", nil)
		if err != nil {
			return
		}
		for i, ev := range l.events {
			if ev.Seq != int64(i+1) || ev.TransactionID != "tx-f" {
				t.Fatalf("event %d accepted with seq %d, tx %q", i, ev.Seq, ev.TransactionID)
			}
		}
		left, _ := os.ReadFile(path)
		if len(left) > 0 && left[len(left)-1] != '\n' {
			t.Fatalf("a torn tail was left in place: %q", left)
		}
		if !bytes.HasPrefix(data, left) {
			t.Fatal("the loader changed accepted bytes")
		}
	})
}
