package store

import (
	"context"

	"github.com/txkernel/txkernel/memory"
)

// MemoryStore implements memory.Store on kernel.db.
type MemoryStore struct{ *DB }

var _ memory.Store = (*MemoryStore)(nil)

// Memory returns the memory view of kernel.db.
func (s *DB) Memory() *MemoryStore { return &MemoryStore{s} }

// MemoryOf adapts a lazy kernel.db opener to a lazy memory.Store opener: the
// database is opened on first use, as open does.
func MemoryOf(open func(context.Context) (*DB, error)) func(context.Context) (memory.Store, error) {
	return func(ctx context.Context) (memory.Store, error) {
		db, err := open(ctx)
		if err != nil {
			return nil, err
		}
		return db.Memory(), nil
	}
}
