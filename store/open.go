package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"

	vec "github.com/asg017/sqlite-vec-go-bindings/cgo"
	"github.com/mattn/go-sqlite3"

	"github.com/txkernel/txkernel/errs"
)

// FileName is the database's name inside the data dir.
const FileName = "kernel.db"

// driverName is go-sqlite3 with a connect hook that sets the per-connection
// pragmas vec0 needs (DESIGN.md §5): a 64 MiB page cache and a 256 MiB
// memory map. Measured here, they make vec0 inserts about 10× and KNN
// queries about 2× faster; the DSN cannot set mmap_size, so a hook does.
const driverName = "sqlite3_txkernel"

func init() {
	// sqlite-vec is compiled into the binary and registered as an auto
	// extension: every connection opened afterwards has vec0.
	vec.Auto()
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if _, err := c.Exec("PRAGMA cache_size = -65536; PRAGMA mmap_size = 268435456;", nil); err != nil {
			return err
		}
		// txk_fts_tokens(sz): a chunk's length in tokens from its FTS5
		// docsize row (memory_bm25.go), so that one statement per version
		// stores its chunks' lengths.
		return c.RegisterFunc("txk_fts_tokens", chunkTokens, true)
	}})
}

// DB is kernel.db. It is safe for concurrent use.
type DB struct {
	db *sql.DB
}

// Open opens (creating it, mode 0600) the database at path, checks that
// every connection runs in WAL mode with synchronous=FULL, and applies the
// migrations this binary knows. A database migrated by a newer binary is
// refused (errs.Internal). So is a database that does not match its
// identity file (identity.go): missing or empty where kernel.db.id
// records one, another database, or an older copy (IdentityError).
func Open(ctx context.Context, path string) (*DB, error) {
	if err := CheckFile(path); err != nil {
		return nil, err
	}
	// Create the file with mode 0600 first: it holds documents verbatim.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f.Close()
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	// BEGIN IMMEDIATE: a writer takes the write lock at BEGIN, so two
	// writers never both read and then fail to upgrade (SQLITE_BUSY).
	q.Set("_txlock", "immediate")
	db, err := sql.Open(driverName, "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	s := &DB{db: db}
	if err := s.check(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.identify(ctx, path); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// check verifies the pragmas on a connection: the DSN applies them to
// every new connection, and this catches a driver that ignored them.
func (s *DB) check(ctx context.Context) error {
	var mode string
	var sync int
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("kernel.db: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return fmt.Errorf("kernel.db: %w", err)
	}
	if mode != "wal" || sync != 2 {
		return fmt.Errorf("kernel.db: journal_mode %s, synchronous %d; want wal and 2 (FULL)", mode, sync)
	}
	return nil
}

// Close closes the database.
func (s *DB) Close() error { return s.db.Close() }

// tx runs fn in one SQL transaction (BEGIN IMMEDIATE) and commits it; any
// error rolls it back.
func (s *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	t, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("kernel.db: begin: %w", err)
	}
	if err := fn(t); err != nil {
		t.Rollback()
		return err
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("kernel.db: commit: %w", err)
	}
	return nil
}

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrConstraint &&
		(se.ExtendedCode == sqlite3.ErrConstraintUnique || se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey)
}

// internal wraps an unexpected SQL error.
func internal(err error, what string) error {
	return errs.Wrap(errs.Internal, err, nil, "kernel.db: %s", what)
}

// Opener opens kernel.db once, on first use, for every domain of one
// kernel: a kernel that never touches a document, the corpus or memory
// never creates the file. cmd owns it and closes it last. It is safe for
// concurrent use.
type Opener struct {
	path string
	mu   sync.Mutex
	db   *DB
}

// NewOpener returns an Opener of the database at path (not opened yet).
func NewOpener(path string) *Opener { return &Opener{path: path} }

// Open returns the database, opening and migrating it on the first call
// (errors as Open's; a failed open is retried by the next call).
func (o *Opener) Open(ctx context.Context) (*DB, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.db == nil {
		db, err := Open(ctx, o.path)
		if err != nil {
			return nil, err
		}
		o.db = db
	}
	return o.db, nil
}

// Close closes the database if it was opened.
func (o *Opener) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.db == nil {
		return nil
	}
	err := o.db.Close()
	o.db = nil
	return err
}
