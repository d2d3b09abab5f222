package tx

import (
	"context"
	"errors"
	"testing"

	"github.com/txkernel/txkernel/approvals"
)

// TestNoWaitNeverWaits: under NoWait, Status and Events answer a
// transaction in memory whose lock is free, and return ErrWouldBlock at
// once when an apply holds the lock or the transaction is not in memory;
// without NoWait the same calls wait for the lock and answer.
func TestNoWaitNeverWaits(t *testing.T) {
	f := newKVFixture(t, approvals.Never)
	id := f.propose("a", "1")
	nw := NoWait(context.Background())
	if st, err := f.e.Status(nw, id); err != nil || st.TransactionID != id {
		t.Fatalf("Status under NoWait with the lock free: %+v %v", st, err)
	}
	tr, err := f.e.locked(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.Status(nw, id); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("Status under NoWait with the lock held: %v, want ErrWouldBlock", err)
	}
	if _, err := f.e.Events(nw, id, 0); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("Events under NoWait with the lock held: %v, want ErrWouldBlock", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.e.Status(context.Background(), id)
		done <- err
	}()
	tr.release()
	if err := <-done; err != nil {
		t.Fatalf("Status waiting for the lock: %v", err)
	}
	if _, err := f.e.Status(nw, "tx-00000000000000000000"); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("Status under NoWait of a transaction not in memory: %v, want ErrWouldBlock", err)
	}
}
