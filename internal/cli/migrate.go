package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/txkernel/txkernel/store/postgres"
)

// migrate is `txkernel migrate --memory-store URL [--serving-role ROLE]`:
// it brings a team's PostgreSQL memory database to this txkernel's schema
// as the URL's role, which should own the tables (the migrating owner),
// and, with --serving-role, grants ROLE what serving needs and nothing
// more (postgres.Store.GrantServing), so that kernels serve through a
// role that owns nothing and row-level security binds. It is the one
// command that may connect as a superuser or a BYPASSRLS role; serve
// refuses them. Exit status: 0 on success, 1 on an error, 2 on a usage
// error.
func migrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	url := fs.String("memory-store", "", "the postgres:// URL of the memory database, as the role that owns (or will own) its tables; the password comes from PGPASSWORD or ~/.pgpass")
	role := fs.String("serving-role", "", "a role to grant row access for serving (it must not own the tables, be a superuser or have BYPASSRLS)")
	timeout := fs.Duration("timeout", time.Minute, "bound on the migration")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if *url == "" || fs.NArg() > 0 || !(strings.HasPrefix(*url, "postgres://") || strings.HasPrefix(*url, "postgresql://")) {
		fmt.Fprintln(stderr, "usage: txkernel migrate --memory-store postgres://… [--serving-role ROLE]")
		return 2
	}
	if hasPassword(*url) {
		fmt.Fprintf(stderr, "txkernel migrate: the URL %s carries a password, which a command line shows to every user of the machine (ps): put it in PGPASSWORD or ~/.pgpass\n", redactURL(*url))
		return 1
	}
	ctx := context.Background()
	s, err := postgres.OpenWith(ctx, *url, postgres.Options{Timeout: *timeout, Migrate: true, AllowPrivileged: true})
	if err != nil {
		fmt.Fprintf(stderr, "txkernel migrate: %v\n", err)
		return 1
	}
	defer s.Close()
	if *role != "" {
		if err := s.GrantServing(ctx, *role); err != nil {
			fmt.Fprintf(stderr, "txkernel migrate: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "granted %s row access for serving\n", *role)
	}
	fmt.Fprintln(stdout, "the memory database is at this txkernel's schema")
	return 0
}
