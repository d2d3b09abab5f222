package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/txkernel/txkernel/desk"
	"github.com/txkernel/txkernel/kernel"
)

// reviewFlags are the review desk's flags (PROTOCOL.md §15), which serve
// and mcp both take.
type reviewFlags struct {
	addr, reviewers *string
}

func newReviewFlags(fs *flag.FlagSet) *reviewFlags {
	return &reviewFlags{
		addr:      fs.String("review", "", "serve the review desk, the person's web page for approvals, PatchSets and memory curation, at ADDR (loopback only; \":0\" picks a port); needs --reviewers"),
		reviewers: fs.String("reviewers", "", "with --review: JSON array of {\"principal_id\", \"roles\", \"token_sha256\", \"scopes\"?, \"purpose\"?}: who may sign in to the desk (token_sha256 is the lowercase hex sha256 of the reviewer's token)"),
	}
}

// check reports a usage error: --review and --reviewers go together.
func (f *reviewFlags) check(stderr io.Writer) bool {
	if (*f.addr == "") != (*f.reviewers == "") {
		fmt.Fprintln(stderr, "txkernel: --review and --reviewers go together")
		return false
	}
	return true
}

// start opens the desk over k's services when --review is set (nil
// otherwise), prints its address and a one-time sign-in link per reviewer
// on stderr, and serves it until ctx ends. agentToken is the MCP bearer
// token, if any: a reviewer whose token is the agent's is refused, since a
// reviewer's credential is never an agent's.
func (f *reviewFlags) start(ctx context.Context, k *openKernel, agentToken []byte, stderr io.Writer) (*desk.Server, error) {
	if *f.addr == "" {
		return nil, nil
	}
	rs, err := desk.LoadReviewers(*f.reviewers)
	if err != nil {
		return nil, fmt.Errorf("--reviewers: %v", err)
	}
	if len(agentToken) > 0 {
		h := desk.TokenHash(agentToken)
		for _, r := range rs {
			if r.TokenSHA256 == h {
				return nil, fmt.Errorf("--reviewers: %s's token is the MCP --token-file's: a reviewer's credential is never an agent's", r.PrincipalID)
			}
		}
	}
	d, err := desk.Listen(desk.Options{
		Addr: *f.addr, Reviewers: rs, Invoker: kernel.NewInvoker(k.cfg), Workspace: k.cfg.Workspace,
		JournalPath: filepath.Join(k.dataDir, "review-desk.jsonl"), Logger: k.log,
	})
	if err != nil {
		return nil, err
	}
	links := d.OnceLinks()
	ids := make([]string, 0, len(links))
	for id := range links {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fmt.Fprintf(stderr, "txkernel: review desk at %s/\n", d.URL())
	for _, id := range ids {
		fmt.Fprintf(stderr, "txkernel: review desk: sign in as %s (one-time link): %s\n", id, links[id])
	}
	go func() {
		if err := d.Serve(ctx); err != nil {
			k.log.Error("review desk stopped", "err", err)
		}
	}()
	return d, nil
}
