// Package pgtest gives tests a real PostgreSQL server: one per test
// binary, a throwaway server (internal/pgserver) stopped by Stop, or one
// of a test's own (Private) that it may stop and restart. Each test gets
// its own database, made from a template database migrated once.
//
// TXKERNEL_TEST_PG=postgres://… points the tests at an external server
// instead; its user must be allowed to create databases and roles, and
// the server must let Role log in without a password (see URL).
// Without either, the tests skip, except when TXKERNEL_TEST_PG_REQUIRED
// is set (.ci/run sets it): then they fail, so that CI never passes by
// skipping them.
//
// The package is only imported by tests; it imports testing.
package pgtest

import (
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/internal/pgserver"
)

// EnvURL names an external server's URL (libpq syntax) the tests use
// instead of starting one.
const EnvURL = "TXKERNEL_TEST_PG"

// EnvRequired names the variable that, when set, makes a missing server a
// failure, not a skip.
const EnvRequired = "TXKERNEL_TEST_PG_REQUIRED"

// Role is the non-superuser, non-owner-of-anything role the kernel's
// connections use in tests, so that row-level security applies to them
// (a superuser bypasses it). Each test database is owned by it.
const Role = "txkernel_test"

// Server is a running PostgreSQL server.
type Server struct {
	admin string           // URL of the postgres database as a superuser
	local *pgserver.Server // nil for an external server

	mu        sync.Mutex
	templates map[string]*template
	n         int
}

type template struct {
	once sync.Once
	err  error
}

var (
	once     sync.Once
	shared   *Server
	startErr error
)

// Shared returns the test binary's server, starting it on first use. It
// skips tb when no server can be had (see the package comment), or fails
// it when one is required.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	skipShort(tb)
	once.Do(func() { shared, startErr = start() })
	if startErr != nil {
		if os.Getenv(EnvRequired) != "" {
			tb.Fatalf("PostgreSQL is required (%s is set): %v", EnvRequired, startErr)
		}
		tb.Skipf("skipping: no PostgreSQL server: %v (install postgresql-15, or set %s)", startErr, EnvURL)
	}
	return shared
}

// skipShort skips tb under -short: a real PostgreSQL server is a heavy
// test's (seconds to start, and the team-memory tests restart it); make
// test runs them, and fails when none can be had (EnvRequired).
func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("skipped under -short: it needs a real PostgreSQL server")
	}
}

// Stop stops the server Shared started, if any, and removes its files.
// Call it from TestMain after m.Run.
func Stop() {
	if shared != nil && shared.local != nil {
		shared.local.Remove()
	}
}

// Private starts a server of tb's own, which tb may stop and restart
// (Stop, Restart) without disturbing the other tests; it is removed when
// tb ends. It skips (or fails, see Shared) like Shared, and skips with an
// external server (TXKERNEL_TEST_PG), which it cannot restart.
func Private(tb testing.TB) *Server {
	tb.Helper()
	skipShort(tb)
	if os.Getenv(EnvURL) != "" {
		tb.Skipf("skipping: this test restarts its server, and %s names an external one", EnvURL)
	}
	s, err := start()
	if err != nil {
		if os.Getenv(EnvRequired) != "" {
			tb.Fatalf("PostgreSQL is required (%s is set): %v", EnvRequired, err)
		}
		tb.Skipf("skipping: no PostgreSQL server: %v (install postgresql-15)", err)
	}
	tb.Cleanup(s.local.Remove)
	return s
}

// Stop stops s (fast shutdown: open transactions roll back, sessions
// end); its files stay, for Restart.
func (s *Server) Stop() { s.local.Stop() }

// StopImmediate stops s with PostgreSQL's immediate shutdown (every
// process exits at once, as in a crash: no session releases its locks on
// the way out); its files stay, for Restart, which runs crash recovery.
func (s *Server) StopImmediate() { s.local.StopImmediate() }

// Freeze stops every process of s with SIGSTOP (a paused VM, a silent
// partition: connections stay open and nothing answers) until Thaw; the
// server is thawed when tb ends.
func (s *Server) Freeze(tb testing.TB) {
	tb.Helper()
	if err := s.local.Freeze(); err != nil {
		tb.Fatalf("freeze PostgreSQL: %v", err)
	}
	tb.Cleanup(func() { _ = s.local.Thaw() })
}

// SmartShutdown starts a smart shutdown of s: new connections are refused
// with 57P03 until its sessions end and it stops.
func (s *Server) SmartShutdown(tb testing.TB) {
	tb.Helper()
	if err := s.local.SmartShutdown(); err != nil {
		tb.Fatalf("shut PostgreSQL down: %v", err)
	}
}

// Thaw resumes s after Freeze.
func (s *Server) Thaw(tb testing.TB) {
	tb.Helper()
	if err := s.local.Thaw(); err != nil {
		tb.Fatalf("thaw PostgreSQL: %v", err)
	}
}

// Admin is the URL of s's postgres database as the superuser: for a test
// that shows a superuser is refused, or that sets up roles.
func (s *Server) Admin() string { return s.admin }

// Exec runs one statement as the superuser on the postgres database.
func (s *Server) Exec(sql string) error { return s.exec(sql) }

// Restart starts s again on the same data and socket, after Stop, and
// waits until it accepts connections.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.local.Restart(); err != nil {
		tb.Fatalf("restart PostgreSQL: %v", err)
	}
}

// start starts a server, or uses the external one.
func start() (*Server, error) {
	s := &Server{admin: os.Getenv(EnvURL), templates: map[string]*template{}}
	if s.admin == "" {
		local, err := pgserver.Start()
		if err != nil {
			return nil, err
		}
		s.local, s.admin = local, local.Admin
	}
	if err := s.setup(); err != nil {
		if s.local != nil {
			s.local.Remove()
		}
		return nil, err
	}
	return s, nil
}

// setup creates Role when it is missing.
func (s *Server) setup() error {
	return s.exec(fmt.Sprintf(`DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN
			CREATE ROLE %[1]s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
		END IF;
	END $$`, Role))
}

// exec runs one statement as the superuser on the postgres database.
func (s *Server) exec(sql string) error { return pgserver.Exec(s.admin, sql) }

// URL returns the URL of database db on s, connecting as user with no
// password: the server started here trusts its socket, and an external
// server (TXKERNEL_TEST_PG) must let Role in the same way (trust, or a
// ~/.pgpass line).
func (s *Server) URL(db, user string) string {
	u, err := url.Parse(s.admin)
	if err != nil {
		return ""
	}
	u.Path = "/" + db
	u.User = url.User(user)
	q := u.Query()
	q.Del("user")
	q.Del("password")
	u.RawQuery = q.Encode()
	return u.String()
}

// Template returns the name of template database name, created on first
// use: an empty database owned by Role that setup (given its URL, as
// Role) fills, for instance by migrating it. A failed setup fails every
// test that asks for the template.
func (s *Server) Template(tb testing.TB, name string, setup func(url string) error) string {
	tb.Helper()
	s.mu.Lock()
	t, ok := s.templates[name]
	if !ok {
		t = &template{}
		s.templates[name] = t
	}
	s.mu.Unlock()
	t.once.Do(func() {
		db := "tpl_" + name
		if t.err = s.exec(fmt.Sprintf("DROP DATABASE IF EXISTS %s", db)); t.err != nil {
			return
		}
		if t.err = s.exec(fmt.Sprintf("CREATE DATABASE %s OWNER %s", db, Role)); t.err != nil {
			return
		}
		t.err = setup(s.URL(db, Role))
	})
	if t.err != nil {
		tb.Fatalf("template database %s: %v", name, t.err)
	}
	return "tpl_" + name
}

// Database creates a database for tb, owned by Role, as a copy of the
// template database tpl ("" for an empty one), drops it when tb ends, and
// returns its URL as Role.
func (s *Server) Database(tb testing.TB, tpl string) string {
	tb.Helper()
	url, drop, err := s.NewDatabase(tpl)
	if err != nil {
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Logf("%v", err)
		}
	})
	return url
}

// NewDatabase is Database for what outlives one test, such as a
// benchmark's fixture kept across -count runs: the caller drops it.
func (s *Server) NewDatabase(tpl string) (url string, drop func() error, err error) {
	s.mu.Lock()
	s.n++
	db := fmt.Sprintf("t_%d_%d", os.Getpid(), s.n)
	s.mu.Unlock()
	sql := fmt.Sprintf("CREATE DATABASE %s OWNER %s", db, Role)
	if tpl != "" {
		// FILE_COPY copies the template's files: about 20 ms, where the
		// default WAL_LOG strategy writes every page to the WAL.
		sql += fmt.Sprintf(" TEMPLATE %s STRATEGY FILE_COPY", tpl)
	}
	if err := s.exec(sql); err != nil {
		return "", nil, err
	}
	drop = func() error {
		if err := s.exec(fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", db)); err != nil {
			return fmt.Errorf("drop database %s: %w", db, err)
		}
		return nil
	}
	return s.URL(db, Role), drop, nil
}
