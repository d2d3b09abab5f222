// Package postgres keeps seed 002's curated memory in PostgreSQL, so that
// every kernel of a team reads and curates one memory (docs/DESIGN.md §5,
// "Beyond one machine"; serve --memory-store postgres://…). This file
// opens the database, migrates it and runs each store method's SQL
// transaction; schema.go holds the schema; memory*.go implement
// store.Memory over it.
//
// The schema mirrors kernel.db's memory tables with a tenant on every
// row; row-level security, forced on every memory table, shows a
// connection only the rows of the tenant its transaction names
// (inTenant), so a query that forgets its predicate still cannot read
// another tenant's rows; migrations are ordered and versioned, each in
// one SQL transaction, under a session advisory lock, so kernels starting
// at once do not collide; and a database migrated by a newer kernel is
// refused. A server that is down or restarting gives errs.Unavailable,
// never a hang, and the pool reconnects once it is back.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
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

// connectTimeout bounds a connection attempt when the URL sets no
// connect_timeout.
const connectTimeout = 5 * time.Second

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
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// Without connect_timeout in the URL, a server that does not
		// answer (a dropped TCP SYN) would hold a request for the
		// system's TCP timeout, minutes: give up and say unavailable.
		cfg.ConnConfig.ConnectTimeout = connectTimeout
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

// maxAttempts bounds the attempts of one transaction: after a
// serialization conflict or a deadlock with another kernel, or a
// connection that broke before anything was committed (the server
// restarted, or a pooled connection was stale).
const maxAttempts = 5

// inTenant runs fn in one SQL transaction that sees only tenant's rows:
// txk.tenant_id is set for the transaction alone (set_config's is_local),
// which every row-level security policy compares with each row's tenant.
//
// A serialization failure (40001) or deadlock (40P01) is retried, up to
// maxAttempts in all, with a short growing pause: the other kernel's
// transaction won, and this one runs again on what it committed. So is a
// lost or refused connection, before the commit: the server rolled the
// transaction back, and the pool dials again. When the server is out of
// reach the error is errs.Unavailable, at once or after the connect
// timeout, never a hang; a connection lost during the commit itself is errs.Unavailable
// with OutcomeUnknown, and is not retried here, since the commit may have
// happened. A connection that cannot be made at all is not retried.
func (s *Store) inTenant(ctx context.Context, tenant string, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		var committing bool
		err = s.attempt(ctx, tenant, fn, &committing)
		if err == nil {
			return nil
		}
		if reason, lost := connectionLost(err); lost {
			if committing && !pgconn.SafeToRetry(err) {
				return unavailable(err, reason, true)
			}
			// No connection could be made: the server is down, and
			// dialling again at once would only make the caller wait.
			if reason == "unreachable" || attempt == maxAttempts {
				return unavailable(err, reason, false)
			}
		} else if !retryable(err) {
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

// attempt runs fn once in its own transaction; committing is set once
// fn has succeeded and the commit is sent.
func (s *Store) attempt(ctx context.Context, tenant string, fn func(pgx.Tx) error, committing *bool) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after a commit this does nothing
	if _, err := tx.Exec(ctx, `SELECT set_config('txk.tenant_id', $1, true)`, tenant); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	*committing = true
	return tx.Commit(ctx)
}

// retryable reports a serialization failure or a deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// connectionLost reports an error that says the server is out of reach,
// not that the request was wrong, and why (errs.UnavailableData.Reason):
// no connection could be made ("unreachable"), the server is shutting
// down or starting up ("shutting-down": 57P01, 57P02, 57P03), or the
// connection broke ("connection-lost": class 08, a closed connection, a
// network error).
func connectionLost(err error) (string, bool) {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return "unreachable", true
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03":
			return "shutting-down", true
		case strings.HasPrefix(pe.Code, "08"):
			return "connection-lost", true
		}
		return "", false
	}
	if errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) {
		return "connection-lost", true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return "connection-lost", true
	}
	return "", false
}

// unavailable is the errs.Unavailable error of a lost connection.
func unavailable(err error, reason string, outcomeUnknown bool) error {
	msg := "the memory store (PostgreSQL) is out of reach"
	if outcomeUnknown {
		msg += "; the connection broke while the request was committing, so it may or may not have been applied"
	}
	return errs.Wrap(errs.Unavailable, err, errs.UnavailableData{Service: "memory-store", Reason: reason, OutcomeUnknown: outcomeUnknown},
		"%s: %v; send the request again once the server is back", msg, rootCause(err))
}

// rootCause is err's innermost cause, for a message without the store's
// own wrapping.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
