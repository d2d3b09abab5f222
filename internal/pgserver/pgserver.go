// Package pgserver runs a throwaway PostgreSQL server from the installed
// server binaries (initdb and postgres, found on PATH, through pg_config
// --bindir, or under /usr/lib/postgresql/*/bin), for the tests
// (internal/pgtest) and `make demo-team`. The server listens only on a
// unix socket in a short temporary directory (no TCP port is taken),
// trusts that socket, and gets SIGKILL if the process that started it
// dies.
//
// PostgreSQL refuses to run as root: as root the server runs as the
// postgres user (or nobody), with its directory given to that user.
package pgserver

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
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Port is the servers' port number, on their socket only.
const Port = 5432

// Server is a throwaway PostgreSQL server.
type Server struct {
	// Dir is the temporary directory: the data directory (data/), the
	// socket and the server's log (server.log).
	Dir string
	// Admin is the URL of the postgres database as the superuser
	// (postgres), over the socket.
	Admin string

	bin  string
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start makes a data directory with initdb (superuser postgres, trust
// authentication, UTF-8, no fsync of its own files) and starts a server on
// it, waiting up to 30 s for it to accept connections. On error nothing
// is left behind.
func Start() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempRoot(), "txkpg")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin, cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	s.Admin = s.URL("postgres", "postgres")
	if err := s.Restart(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// tempRoot is where a server's directory is made: the temporary
// directory ($TMPDIR: make test puts it on tmpfs) when the server's user
// can reach it and its name is short enough, /tmp otherwise. The socket's
// path must fit in sun_path (about 107 bytes), and the server runs as
// postgres, which must be able to enter every directory on the way (a
// TMPDIR under a 0700 home is not).
func tempRoot() string {
	root := os.TempDir()
	if len(root) > 48 {
		return "/tmp"
	}
	for d := root; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return root
		}
	}
}

// URL is the URL of database db as user, over the socket, with no
// password (the server trusts its socket).
func (s *Server) URL(db, user string) string {
	return (&url.URL{Scheme: "postgres", User: url.User(user), Path: "/" + db, RawQuery: url.Values{
		"host": {s.Dir}, "port": {strconv.Itoa(Port)}, "sslmode": {"disable"}}.Encode()}).String()
}

// Restart starts the server on its data directory (after Stop, or the
// first time) and waits up to 30 s for it to accept connections.
func (s *Server) Restart() error {
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.Dir, "data"), "-k", s.Dir, "-p", strconv.Itoa(Port),
		"-c", "listen_addresses=", "-c", "max_connections=200", "-c", "shared_buffers=64MB",
		// Dynamic shared memory in files under the data directory rather
		// than POSIX segments in /dev/shm: a server killed with SIGKILL
		// (Pdeathsig below, when the test binary that started it dies)
		// leaves its segments behind, and those in /dev/shm outlived every
		// test run, in the tmpfs where make test's scratch TMPDIR lives too.
		"-c", "dynamic_shared_memory_type=mmap")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
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
		conn, err := pgx.Connect(context.Background(), s.Admin)
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
			s.Stop()
			return fmt.Errorf("the server did not accept connections within 30 s: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the server with PostgreSQL's fast shutdown (SIGINT: open
// transactions are rolled back and every session ends), killing it after
// 10 s. Its files stay, for Restart. Stopping a stopped server does
// nothing.
func (s *Server) Stop() { s.shutdown(syscall.SIGINT) }

// shutdown sends the postmaster sig (PostgreSQL's shutdown modes are its
// signals) and waits for it to exit, killing it after 10 s.
func (s *Server) shutdown(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	_ = s.signalGroup(syscall.SIGCONT) // a frozen server cannot shut down
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
}

// StopImmediate stops the server with PostgreSQL's immediate shutdown
// (SIGQUIT): every process exits at once, rolling nothing back and
// releasing no lock on the way, as a crash would; the next Restart runs
// crash recovery. Its files stay. Stopping a stopped server does nothing.
func (s *Server) StopImmediate() { s.shutdown(syscall.SIGQUIT) }

// SmartShutdown asks the server for a smart shutdown (SIGTERM): it
// refuses new connections (57P03, "the database system is shutting
// down") and waits for its sessions to end before it stops.
func (s *Server) SmartShutdown() error {
	if s.cmd == nil {
		return errors.New("the server is not running")
	}
	return s.cmd.Process.Signal(syscall.SIGTERM)
}

// Freeze stops the server and every backend with SIGSTOP, as a paused VM
// or a silent network partition looks to a client: connections stay
// open, and nothing answers. Thaw resumes it.
func (s *Server) Freeze() error { return s.signalGroup(syscall.SIGSTOP) }

// Thaw resumes a server Freeze stopped (SIGCONT).
func (s *Server) Thaw() error { return s.signalGroup(syscall.SIGCONT) }

// signalGroup sends sig to the postmaster and to each of its children:
// PostgreSQL's backends call setsid(), so they are not in the
// postmaster's process group, and are found through /proc. The
// postmaster goes first, so that it forks no child the walk misses.
func (s *Server) signalGroup(sig syscall.Signal) error {
	if s.cmd == nil {
		return errors.New("the server is not running")
	}
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, d := range procs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so the fields
		// are read after its closing parenthesis.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			_ = syscall.Kill(child, sig)
		}
	}
	return nil
}

// Remove stops the server and removes its directory.
func (s *Server) Remove() {
	s.Stop()
	os.RemoveAll(s.Dir)
}

// Exec runs one statement as the superuser on the postgres database.
func (s *Server) Exec(sql string) error {
	return Exec(s.Admin, sql)
}

// Exec runs one statement on the database at url.
func Exec(url, sql string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// BinDir finds the directory of the server binaries: an error names what
// to install when there is none.
func BinDir() (string, error) {
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
	return "", errors.New("initdb and postgres are not installed (Debian: apt-get install postgresql-15)")
}

// credential is the user the server runs as: nil (this process's) unless
// this process is root, whom PostgreSQL refuses; then postgres, or
// nobody.
func credential() (*syscall.Credential, error) {
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
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run the server as")
}
