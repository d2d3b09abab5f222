package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/memory/memorytest"
	"github.com/txkernel/txkernel/store"
)

// TestMemoryConformance runs the memory.Store conformance suite on
// kernel.db.
func TestMemoryConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Store {
		db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), store.FileName))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db.Memory()
	})
}
