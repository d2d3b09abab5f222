package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/pgtest"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/memory/memorytest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range benchCleanup {
		f()
	}
	pgtest.Stop()
	os.Exit(code)
}

// migrated is a database for t at the newest schema, copied from a
// template migrated once per test binary.
func migrated(t *testing.T) string {
	t.Helper()
	srv := pgtest.Shared(t)
	tpl := srv.Template(t, "memory", func(url string) error {
		s, err := Open(context.Background(), url)
		if err != nil {
			return err
		}
		s.Close()
		return nil
	})
	return srv.Database(t, tpl)
}

// TestMigrateConcurrently: four kernels opening one empty database at
// once all succeed, and each step is applied once (the advisory lock);
// opening it again changes nothing.
func TestMigrateConcurrently(t *testing.T) {
	url := pgtest.Shared(t).Database(t, "")
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := Open(ctx, url)
			if err == nil {
				s.Close()
			}
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatalf("a concurrent Open: %v", err)
		}
	}
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n, max int
	if err := s.pool.QueryRow(ctx, `SELECT count(*), max(version) FROM txk_schema`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations) || max != len(migrations) {
		t.Fatalf("txk_schema has %d rows up to version %d, want %d steps once each", n, max, len(migrations))
	}
}

// TestNewerSchemaRefused: a database a newer txkernel migrated is refused
// with the versions in the error's data, and left as it is.
func TestNewerSchemaRefused(t *testing.T) {
	url := migrated(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO txk_schema (version, applied_at) VALUES ($1, 'later')`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, url)
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("Open of a newer database: %v, want an errs.Error", err)
	}
	if d, ok := e.Data.(SchemaData); !ok || d.Version != len(migrations)+1 || d.Known != len(migrations) {
		t.Fatalf("error data %#v, want the database's and this kernel's versions", e.Data)
	}
}

// TestRowLevelSecurityTrims proves the backstop: every memory table has a
// forced tenant policy, so a query with no predicate at all sees only the
// rows of the tenant its transaction names (none outside a tenant's
// transaction), and a row of another tenant cannot be written.
func TestRowLevelSecurityTrims(t *testing.T) {
	url := migrated(t)
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, table := range memoryTables {
		var enabled, forced bool
		var policies int
		err := s.pool.QueryRow(ctx, `SELECT c.relrowsecurity, c.relforcerowsecurity,
			(SELECT count(*) FROM pg_policies p WHERE p.tablename = c.relname AND p.policyname = 'tenant')
			FROM pg_class c WHERE c.relname = $1`, table).Scan(&enabled, &forced, &policies)
		if err != nil || !enabled || !forced || policies != 1 {
			t.Errorf("%s: row-level security enabled %v, forced %v, tenant policies %d (%v)", table, enabled, forced, policies, err)
		}
	}
	insert := func(tenant, element string) error {
		return s.inTenant(ctx, tenant, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO mem_elements (tenant_id, organization_id, repository_id, element_id, type, source_kind, created_at)
				VALUES ($1, 'org', 'repo', $2, 'decision', 'ingest', 'now')`, tenant, element)
			return err
		})
	}
	for _, r := range [][2]string{{"acme", "e1"}, {"acme", "e2"}, {"globex", "e3"}} {
		if err := insert(r[0], r[1]); err != nil {
			t.Fatalf("insert %v: %v", r, err)
		}
	}
	count := func(tenant string) (n int, tenants []string) {
		err := s.inTenant(ctx, tenant, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT tenant_id FROM mem_elements`) // no predicate
			if err != nil {
				return err
			}
			tenants, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(tenants), tenants
	}
	if n, ts := count("acme"); n != 2 || ts[0] != "acme" || ts[1] != "acme" {
		t.Fatalf("acme sees %v", ts)
	}
	if n, ts := count("globex"); n != 1 || ts[0] != "globex" {
		t.Fatalf("globex sees %v", ts)
	}
	var outside int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM mem_elements`).Scan(&outside); err != nil || outside != 0 {
		t.Fatalf("outside any tenant's transaction: %d rows (%v), want none", outside, err)
	}
	err = s.inTenant(ctx, "acme", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO mem_elements (tenant_id, organization_id, repository_id, element_id, type, source_kind, created_at)
			VALUES ('globex', 'org', 'repo', 'e4', 'decision', 'ingest', 'now')`)
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		t.Fatalf("acme writing a globex row: %v, want a row-level security violation (42501)", err)
	}
}

// TestRetryable: serialization failures and deadlocks are retried,
// nothing else.
func TestRetryable(t *testing.T) {
	for code, want := range map[string]bool{"40001": true, "40P01": true, "23505": false, "42501": false} {
		if got := retryable(&pgconn.PgError{Code: code}); got != want {
			t.Errorf("retryable(%s) = %v", code, got)
		}
	}
	if retryable(errors.New("x")) || retryable(nil) {
		t.Error("a non-PostgreSQL error is retryable")
	}
}

// TestConnectionLost: what says the server is out of reach is told apart
// from what says the request was wrong, through the store's wrapping; and
// a server that is down gives errs.Unavailable at once, with its data.
func TestConnectionLost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		reason string
	}{
		{"shutdown", &pgconn.PgError{Code: "57P01"}, "shutting-down"},
		{"starting up", &pgconn.PgError{Code: "57P03"}, "shutting-down"},
		{"connection failure", &pgconn.PgError{Code: "08006"}, "connection-lost"},
		{"closed conn", fmt.Errorf("read: %w", pgconn.ErrConnClosed), "connection-lost"},
		{"eof, wrapped by the store", internal(io.ErrUnexpectedEOF, "read element"), "connection-lost"},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, "connection-lost"},
		{"unique violation", &pgconn.PgError{Code: "23505"}, ""},
		{"a kernel error", memory.ErrElementNotFound("a.md"), ""},
		{"plain", errors.New("x"), ""},
	} {
		reason, lost := connectionLost(tc.err)
		if reason != tc.reason || lost != (tc.reason != "") {
			t.Errorf("%s: connectionLost = %q, %v; want %q", tc.name, reason, lost, tc.reason)
		}
	}
	// A server nobody listens for: the socket directory exists, the socket does not.
	s, err := pgxpool.New(context.Background(), "postgres:///x?host="+t.TempDir()+"&user=nobody")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	err = (&Store{pool: s}).inTenant(context.Background(), "t", func(pgx.Tx) error { return nil })
	var d errs.UnavailableData
	if e, ok := errors.AsType[*errs.Error](err); ok {
		d, _ = e.Data.(errs.UnavailableData)
	}
	if !errs.KindIs(err, errs.Unavailable) || d.Service != "memory-store" || d.Reason != "unreachable" || d.OutcomeUnknown {
		t.Fatalf("a request to a server that is down: %v (%+v)", err, d)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the unavailable error took %v", took)
	}
}

// TestMemoryConformance runs the memory.Store conformance suite on a
// PostgreSQL database per test, connected as a role row-level security
// applies to.
func TestMemoryConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Store {
		s, err := Open(context.Background(), migrated(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s.Memory()
	})
}
