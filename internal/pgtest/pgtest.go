// Package pgtest gives tests a real PostgreSQL server: one per test
// binary, started from the installed server binaries (initdb and postgres,
// found on PATH, through pg_config --bindir, or under
// /usr/lib/postgresql/*/bin), listening only on a unix socket in a short
// temporary directory, and stopped by Stop (or, if the test binary dies,
// by the kernel: the server gets SIGKILL when its parent exits). Each test
// gets its own database, made from a template database migrated once.
//
// PostgreSQL refuses to run as root: as root the server runs as the
// postgres user (or nobody), with the data directory given to that user.
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
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names an external server's URL (libpq syntax) the tests use
// instead of starting one.
const EnvURL = "TXKERNEL_TEST_PG"

// EnvRequired, when set, makes a missing server a failure, not a skip.
const EnvRequired = "TXKERNEL_TEST_PG_REQUIRED"

// Role is the non-superuser, non-owner-of-anything role the kernel's
// connections use in tests, so that row-level security applies to them
// (a superuser bypasses it). Each test database is owned by it.
const Role = "txkernel_test"

// Server is a running PostgreSQL server.
type Server struct {
	admin string // URL of the postgres database as a superuser
	dir   string // the temporary directory (data and socket); "" for an external server
	bin   string // the directory of the server binaries
	cred  *syscall.Credential
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd has exited

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
	once.Do(func() { shared, startErr = start() })
	if startErr != nil {
		if os.Getenv(EnvRequired) != "" {
			tb.Fatalf("PostgreSQL is required (%s is set): %v", EnvRequired, startErr)
		}
		tb.Skipf("skipping: no PostgreSQL server: %v (install postgresql-15, or set %s)", startErr, EnvURL)
	}
	return shared
}

// Stop stops the server Shared started, if any, and removes its files.
// Call it from TestMain after m.Run.
func Stop() {
	if shared == nil || shared.cmd == nil {
		return
	}
	shared.Stop()
	os.RemoveAll(shared.dir)
}

// Private starts a server of tb's own, which tb may stop and restart
// (Stop, Restart) without disturbing the other tests; it is stopped and
// removed when tb ends. It skips (or fails, see Shared) like Shared, and
// skips with an external server (TXKERNEL_TEST_PG), which it cannot
// restart.
func Private(tb testing.TB) *Server {
	tb.Helper()
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
	tb.Cleanup(func() {
		s.Stop()
		os.RemoveAll(s.dir)
	})
	return s
}

// Stop stops s with PostgreSQL's fast shutdown (SIGINT: open transactions
// are rolled back and every session is ended), waiting up to 10 s before
// killing it. Its files stay, for Restart.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
}

// Restart starts s again on the same data and socket, after Stop, and
// waits until it accepts connections.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.launch(); err != nil {
		tb.Fatalf("restart PostgreSQL: %v", err)
	}
}

// start starts a server, or uses the external one.
func start() (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		s := &Server{admin: u, templates: map[string]*template{}}
		return s, s.setup()
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	// The socket path must fit in sun_path (about 107 bytes).
	dir, err := os.MkdirTemp("/tmp", "txkpg")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, templates: map[string]*template{}}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	s.bin, s.cred = bin, cred
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	s.admin = (&url.URL{Scheme: "postgres", Path: "/postgres", RawQuery: url.Values{
		"host": {dir}, "port": {strconv.Itoa(port)}, "user": {"postgres"}, "sslmode": {"disable"}}.Encode()}).String()
	if err := s.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, s.setup()
}

// port is the servers' port number, on their socket only: no TCP port is
// taken.
const port = 5432

// launch starts the server on s.dir and waits up to 30 s for it to
// accept connections.
func (s *Server) launch() error {
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"), "-k", s.dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=", "-c", "max_connections=200", "-c", "shared_buffers=64MB")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), s.admin)
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			s.Stop()
			return fmt.Errorf("the server did not accept connections within 30 s: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
func (s *Server) exec(sql string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

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
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.exec(fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", db)); err != nil {
			tb.Logf("drop database %s: %v", db, err)
		}
	})
	return s.URL(db, Role)
}

// binDir finds the directory of the server binaries.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", errors.New("initdb and postgres are not installed")
}

// serverCredential is the user the server runs as: nil (this process's)
// unless this process is root, whom PostgreSQL refuses; then postgres,
// or nobody.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and there is no postgres or nobody user to run the server as")
}
