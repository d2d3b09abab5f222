package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/store/memtest"
)

// TestMemoryConformance runs the store.Memory conformance suite on
// kernel.db.
func TestMemoryConformance(t *testing.T) {
	memtest.Run(t, func(t *testing.T) store.Memory {
		db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), store.FileName))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db.Memory()
	})
}
