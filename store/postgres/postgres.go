// Package postgres keeps seed 002's curated memory in PostgreSQL, so that
// every kernel of a team reads and curates one memory (DESIGN.md §5,
// "Beyond one machine"). This file opens the database and migrates it;
// schema.go holds the schema. The store.Memory implementation over it is
// what comes next: until then no kernel serves memory from PostgreSQL.
//
// What holds already: the schema mirrors kernel.db's memory tables with a
// tenant on every row; row-level security, forced on every memory table,
// shows a connection only the rows of the tenant its transaction names
// (inTenant), so a query that forgets its predicate still cannot read
// another tenant's rows; migrations are ordered and versioned, each in
// one SQL transaction, under a session advisory lock, so kernels starting
// at once do not collide; and a database migrated by a newer kernel is
// refused.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txkernel/txkernel/errs"
)

// migrateLock is the advisory lock key Migrate holds: any constant both
// kernels agree on ("txkmigr" in ASCII).
const migrateLock int64 = 0x74786b6d69677272

// SchemaData is the data of the error for a database migrated by a newer
// txkernel: its schema version and the newest this one knows.
type SchemaData struct {
	Version int `json:"version"`
	Known   int `json:"known"`
}

// Store is the memory database of a team: a pgx connection pool.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects to url (libpq or pgx syntax; a unix socket directory goes
// in ?host=), migrates the database (Migrate) and returns the store. The
// password comes from the URL's environment (PGPASSWORD) or ~/.pgpass, as
// libpq's: never put it on a command line.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, errs.InvalidData{Field: "memory-store"}, "the memory store URL: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Migrate brings the database to the newest schema this txkernel knows:
// under a session advisory lock (another kernel migrating at the same time
// waits, then finds nothing to do), each missing step in its own SQL
// transaction with its version row, so a crash leaves a whole step or
// none. A database at a newer version than this txkernel knows is refused
// (errs.Internal with SchemaData): its rows may mean what this kernel does
// not know.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("memory store: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return fmt.Errorf("memory store: migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLock)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS txk_schema (
		version    integer PRIMARY KEY,
		applied_at text NOT NULL
	)`); err != nil {
		return fmt.Errorf("memory store: %w", err)
	}
	var v int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM txk_schema`).Scan(&v); err != nil {
		return fmt.Errorf("memory store: %w", err)
	}
	if v > len(migrations) {
		return errs.New(errs.Internal, SchemaData{Version: v, Known: len(migrations)},
			"the memory database is at schema version %d; this txkernel knows %d: run a newer txkernel", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO txk_schema (version, applied_at) VALUES ($1, $2)`, i+1, time.Now().UTC().Format(time.RFC3339Nano))
			return err
		})
		if err != nil {
			return fmt.Errorf("memory store: %w", err)
		}
	}
	return nil
}

// maxAttempts bounds the retries of a transaction that lost a
// serialization conflict or a deadlock to another kernel.
const maxAttempts = 5

// inTenant runs fn in one SQL transaction that sees only tenant's rows:
// txk.tenant_id is set for the transaction alone (set_config's is_local),
// which every row-level security policy compares with each row's tenant.
// A serialization failure (40001) or deadlock (40P01) is retried, up to
// maxAttempts in all, with a short growing pause: the other kernel's
// transaction won, and this one runs again on what it committed.
func (s *Store) inTenant(ctx context.Context, tenant string, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('txk.tenant_id', $1, true)`, tenant); err != nil {
				return err
			}
			return fn(tx)
		})
		if !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		}
	}
	return err
}

// retryable reports a serialization failure or a deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}
