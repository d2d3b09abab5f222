// Package postgres keeps seed 002's curated memory in PostgreSQL, so that
// every kernel of a team reads and curates one memory (docs/DESIGN.md §5,
// "Beyond one machine"; serve --memory-store postgres://…). This file
// opens the database, migrates it and runs each store method's SQL
// transaction; schema.go holds the schema; memory*.go implement
// memory.Store over it.
//
// The schema mirrors kernel.db's memory tables with a tenant on every
// row; row-level security, forced on every memory table, shows a
// connection only the rows of the tenant its transaction names
// (inTenant), so a query that forgets its predicate still cannot read
// another tenant's rows; migrations are ordered and versioned, each in
// one SQL transaction, under a session advisory lock, so kernels starting
// at once do not collide; and a database migrated by a newer kernel is
// refused. A server that is down, restarting or frozen (a paused VM, a
// silent partition) gives errs.Unavailable, never a hang: every store
// call runs under a deadline (Options.Timeout, the URL's
// statement_timeout, DefaultTimeout) that the server enforces too
// (statement_timeout, idle_in_transaction_session_timeout), and the pool's
// TCP connections send keepalives; the pool reconnects once the server is
// back.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
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

// DefaultTimeout bounds one store call (all its attempts) when neither
// Options.Timeout nor the URL's statement_timeout says otherwise.
const DefaultTimeout = 15 * time.Second

// keepAlive is the TCP keepalive of the pool's connections: a peer that
// vanished (a silent partition) is noticed in idle + interval*count, about
// 25 s, not the system's two hours.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}

// Options configures Open.
type Options struct {
	// Timeout bounds each store call, all its attempts included, and is
	// the server's statement_timeout and
	// idle_in_transaction_session_timeout for the pool's sessions. Zero
	// takes the URL's statement_timeout, or DefaultTimeout.
	Timeout time.Duration
	// Migrate brings the schema up to date (Migrate). Without it a
	// database behind this txkernel's schema is refused, naming
	// `txkernel migrate` (a serving role that does not own the tables
	// cannot migrate them).
	Migrate bool
	// AllowPrivileged serves through a superuser or a BYPASSRLS role,
	// which row-level security does not bind. Only `txkernel migrate`
	// sets it: serving refuses such a role (CheckRole).
	AllowPrivileged bool
}

// Store is the memory database of a team: a pgx connection pool.
type Store struct {
	pool    *pgxpool.Pool
	timeout time.Duration // per store call; 0 means DefaultTimeout
	owner   bool          // the role owns the memory tables (OwnsTables)
}

// OwnsTables reports whether the store's role owns the memory tables.
// Row-level security is forced, so it binds the owner too, but an owner
// may turn it off: serve through a role that owns nothing (`txkernel
// migrate --serving-role`). The kernel logs a warning.
func (s *Store) OwnsTables() bool { return s.owner }

// Open connects to url (libpq or pgx syntax; a unix socket directory goes
// in ?host=), migrates the database (Migrate) and returns the store, as
// OpenWith with Options{Migrate: true}.
func Open(ctx context.Context, url string) (*Store, error) {
	return OpenWith(ctx, url, Options{Migrate: true})
}

// OpenWith connects to url and returns the store. The password comes from
// the URL's environment (PGPASSWORD) or ~/.pgpass, as libpq's: never put
// it on a command line. Errors: errs.Invalid for a bad URL or timeout;
// errs.Unavailable when the server is out of reach (the caller may start
// without it and open it later); errs.PermissionDenied for a role that
// row-level security does not bind (CheckRole); errs.Internal for a
// schema newer or (without o.Migrate) older than this txkernel's.
func OpenWith(ctx context.Context, url string, o Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, errs.InvalidData{Field: "memory-store"}, "the memory store URL: %v", err)
	}
	timeout := o.Timeout
	if st, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; ok && timeout == 0 {
		if timeout, err = parseTimeout(st); err != nil {
			return nil, err
		}
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ms := strconv.FormatInt(timeout.Milliseconds(), 10)
	// The server ends a statement, or a session idle in a transaction (a
	// kernel frozen while it holds the scope's lock), that outlives the
	// deadline: the same bound on both sides.
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = ms
	if _, ok := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = ms
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// Without connect_timeout in the URL, a server that does not
		// answer (a dropped TCP SYN) would hold a request for the
		// system's TCP timeout, minutes: give up and say unavailable.
		cfg.ConnConfig.ConnectTimeout = min(connectTimeout, timeout)
	}
	dialer := &net.Dialer{Timeout: cfg.ConnConfig.ConnectTimeout, KeepAliveConfig: keepAlive}
	cfg.ConnConfig.DialFunc = dialer.DialContext
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	s := &Store{pool: pool, timeout: timeout}
	if err := s.open(ctx, o); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// open checks the role and the schema, under the store's deadline.
func (s *Store) open(ctx context.Context, o Options) error {
	ctx, cancel := context.WithTimeout(ctx, s.deadline())
	defer cancel()
	err := func() error {
		if !o.AllowPrivileged {
			if err := CheckRole(ctx, s.pool); err != nil {
				return err
			}
		}
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE tablename = 'mem_elements' AND tableowner = current_user)`).Scan(&s.owner); err != nil {
			return fmt.Errorf("memory store: read the tables' owner: %w", err)
		}
		err := checkSchema(ctx, s.pool)
		if o.Migrate && err != nil && !errs.KindIs(err, errs.Unavailable) {
			if _, data := errs.KindOf(err); data != nil && data.(SchemaData).Version < len(migrations) {
				// Behind: migrate. An up-to-date database is not touched,
				// so a serving role without CREATE starts.
				return Migrate(ctx, s.pool)
			}
		}
		return err
	}()
	if reason, lost := connectionLost(err); lost || errors.Is(err, context.DeadlineExceeded) {
		if !lost {
			reason = "timeout"
		}
		return unavailable(err, reason, false)
	}
	return err
}

// RoleData is the data of the refusal of a role row-level security does
// not bind.
type RoleData struct {
	Role      string `json:"role"`
	Superuser bool   `json:"superuser"`
	BypassRLS bool   `json:"bypassrls"`
	Reason    string `json:"reason"` // "privileged-role"
}

// CheckRole refuses (errs.PermissionDenied, RoleData) to serve through a
// superuser or a role with BYPASSRLS: row-level security does not apply
// to them, so one tenant's request could read another's rows. Serve
// through a role that holds only the grants `txkernel migrate
// --serving-role` gives (docs: RELIABILITY.md, "Team memory").
func CheckRole(ctx context.Context, pool *pgxpool.Pool) error {
	var d RoleData
	err := pool.QueryRow(ctx, `SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user`).Scan(&d.Role, &d.Superuser, &d.BypassRLS)
	if err != nil {
		return fmt.Errorf("memory store: read the role: %w", err)
	}
	if d.Superuser || d.BypassRLS {
		d.Reason = "privileged-role"
		what := "a superuser"
		if !d.Superuser {
			what = "a BYPASSRLS role"
		}
		return errs.New(errs.PermissionDenied, d,
			"the memory store URL connects as %s, %s, which row-level security does not bind: serve through a role that owns nothing and has only the grants `txkernel migrate --serving-role %s` gives, and migrate as the owner",
			d.Role, what, "ROLE")
	}
	return nil
}

// checkSchema refuses a database whose schema is not this txkernel's:
// newer (SchemaData, as Migrate), or older, naming `txkernel migrate`.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	var v int
	err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM txk_schema`).Scan(&v)
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42P01" {
		v, err = 0, nil // no txk_schema: never migrated
	}
	if err != nil {
		return fmt.Errorf("memory store: %w", err)
	}
	switch {
	case v > len(migrations):
		return errs.New(errs.Internal, SchemaData{Version: v, Known: len(migrations)},
			"the memory database is at schema version %d; this txkernel knows %d: run a newer txkernel", v, len(migrations))
	case v < len(migrations):
		return errs.New(errs.Internal, SchemaData{Version: v, Known: len(migrations)},
			"the memory database is at schema version %d, this txkernel's is %d: run `txkernel migrate --memory-store URL` as the tables' owner", v, len(migrations))
	}
	return nil
}

// GrantServing gives role what serving needs and nothing more: it may
// read and write the memory tables' rows, under their row-level security,
// and read the schema version; it owns nothing, so it can neither
// change a policy nor turn row-level security off. The caller is the
// tables' owner (`txkernel migrate --serving-role`).
func (s *Store) GrantServing(ctx context.Context, role string) error {
	ctx, cancel := context.WithTimeout(ctx, s.deadline())
	defer cancel()
	id := pgx.Identifier{role}.Sanitize()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`GRANT USAGE ON SCHEMA public TO ` + id,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ` + id,
			`REVOKE INSERT, UPDATE, DELETE ON txk_schema FROM ` + id,
			`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ` + id,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("memory store: %s: %w", q, err)
			}
		}
		return nil
	})
}

// parseTimeout reads a statement_timeout: milliseconds, or a duration
// with a unit (Go's, such as 15s or 500ms).
func parseTimeout(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errs.New(errs.Invalid, errs.InvalidData{Field: "memory-store", Reason: "bad-timeout"},
			"the memory store URL's statement_timeout %q is neither milliseconds nor a duration such as 15s", v)
	}
	return d, nil
}

// Timeout is the bound of one store call.
func (s *Store) Timeout() time.Duration { return s.deadline() }

func (s *Store) deadline() time.Duration {
	if s.timeout <= 0 {
		return DefaultTimeout
	}
	return s.timeout
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
	return migrateTo(ctx, pool, len(migrations))
}

// migrateTo is Migrate up to version target (a test brings a database
// to an older version to prove its upgrade).
func migrateTo(ctx context.Context, pool *pgxpool.Pool, target int) error {
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
	for i := v; i < target; i++ {
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
// reach the error is errs.Unavailable, at once, after the connect
// timeout, or when the call's deadline (Store.Timeout) passes, never a
// hang. A write whose connection was lost or whose deadline passed during
// the commit itself is errs.Unavailable with OutcomeUnknown, and is not
// retried here, since the commit may have happened; a read's outcome is
// never unknown. A connection that cannot be made at all is not retried.
func (s *Store) inTenant(ctx context.Context, tenant string, fn func(pgx.Tx) error) error {
	return s.run(ctx, tenant, false, fn)
}

// inTenantLocked is inTenant holding the transaction-scoped advisory
// lock of key (hashtextextended(key, 0)) before fn runs, taken in the
// statement that names the tenant: one round trip less for every write.
func (s *Store) inTenantLocked(ctx context.Context, tenant, key string, fn func(pgx.Tx) error) error {
	return s.runLocked(ctx, tenant, key, false, fn)
}

// readTenant is inTenant for a transaction that writes nothing: its
// failure is never of unknown outcome.
func (s *Store) readTenant(ctx context.Context, tenant string, fn func(pgx.Tx) error) error {
	return s.run(ctx, tenant, true, fn)
}

func (s *Store) run(ctx context.Context, tenant string, readOnly bool, fn func(pgx.Tx) error) error {
	return s.runLocked(ctx, tenant, "", readOnly, fn)
}

// runLocked is run, taking the advisory lock of key first when key is
// not "" (inTenantLocked).
func (s *Store) runLocked(ctx context.Context, tenant, key string, readOnly bool, fn func(pgx.Tx) error) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.deadline())
	defer cancel()
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		var committing bool
		err = s.attempt(ctx, tenant, key, fn, &committing)
		if err == nil {
			return nil
		}
		unknown := committing && !readOnly
		if parent.Err() == nil && (ctx.Err() != nil || isTimeout(err)) {
			// The deadline passed, or the server cancelled a statement
			// that outlived statement_timeout: a frozen or overloaded
			// server.
			return unavailable(err, "timeout", unknown && !pgconn.SafeToRetry(err))
		}
		if reason, lost := connectionLost(err); lost {
			if unknown && !pgconn.SafeToRetry(err) {
				return unavailable(err, reason, true)
			}
			// No connection could be made: the server is down, and
			// dialling again at once would only make the caller wait.
			if reason == "unreachable" || reason == "shutting-down" || attempt == maxAttempts {
				return unavailable(err, reason, false)
			}
		} else if !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			if parent.Err() == nil {
				return unavailable(err, "timeout", false)
			}
			return parent.Err()
		case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		}
	}
	return err
}

// isTimeout reports the server's statement_timeout or
// idle_in_transaction_session_timeout (57014, 25P03) or a network deadline.
func isTimeout(err error) bool {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code == "57014" || pe.Code == "25P03"
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// attempt runs fn once in its own transaction (holding the advisory
// lock of key, unless it is ""); committing is set once fn has succeeded
// and the commit is sent.
func (s *Store) attempt(ctx context.Context, tenant, key string, fn func(pgx.Tx) error, committing *bool) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after a commit this does nothing
	if key == "" {
		_, err = tx.Exec(ctx, `SELECT set_config('txk.tenant_id', $1, true)`, tenant)
	} else {
		_, err = tx.Exec(ctx, `SELECT set_config('txk.tenant_id', $1, true), pg_advisory_xact_lock(hashtextextended($2, 0))`, tenant, key)
	}
	if err != nil {
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
	// A server that is shutting down refuses new connections with
	// 57P03 inside a ConnectError: the PgError says more than
	// "unreachable", so it is looked at first.
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03":
			return "shutting-down", true
		case strings.HasPrefix(pe.Code, "08"):
			return "connection-lost", true
		}
		if _, ok := errors.AsType[*pgconn.ConnectError](err); !ok {
			return "", false
		}
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return "unreachable", true
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
	switch reason {
	case "timeout":
		msg = "the memory store (PostgreSQL) did not answer within the deadline"
	case "shutting-down":
		msg = "the memory store (PostgreSQL) is shutting down or starting up"
	}
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
