// The helpers of the browser tests: chromium (a process, shared by the
// tests), and the in-process kernel with its desk.

package desk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/txkernel/txkernel/desk"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/deskfix"
)

var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserCancel []context.CancelFunc
	browserErr    error
)

// chromiumPath is the installed chromium, or "".
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// tab returns a new tab, in a browser context of its own, of the shared
// headless browser, for the rest of t (at most a minute).
func tab(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped under -short: it drives a real browser (chromium)")
	}
	path := chromiumPath()
	if path == "" {
		if os.Getenv("TXKERNEL_TEST_BROWSER_REQUIRED") != "" {
			t.Fatal("chromium is not installed and TXKERNEL_TEST_BROWSER_REQUIRED is set: apt-get install -y chromium")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium): the review desk's browser tests are skipped")
	}
	browserOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1100, 760),
			chromedp.Flag("disable-dev-shm-usage", true))
		actx, c1 := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, c2 := chromedp.NewContext(actx)
		browserCancel = []context.CancelFunc{c2, c1}
		browserErr = chromedp.Do(bctx)
		browserCtx = bctx
	})
	if browserErr != nil {
		t.Fatalf("start chromium: %v", browserErr)
	}
	tctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(tctx); err != nil {
		t.Fatal(err)
	}
	return tctx
}

func closeBrowser() {
	for _, c := range browserCancel {
		c()
	}
}

// run runs actions in ctx, failing t with what (and the page it was on).
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	start := time.Now()
	sub, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(sub, actions...); err != nil {
		failAt(t, ctx, what, err)
	}
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
}

// value runs one action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	start := time.Now()
	sub, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(sub, a)
	if err != nil {
		failAt(t, ctx, what, err)
	}
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	return v
}

// text is the visible text of the first element css selects.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	return value(t, ctx, "text of "+css, chromedp.Text(chromedp.CSS(css)))
}

func failAt(t *testing.T, ctx context.Context, what string, err error) {
	t.Helper()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(short, chromedp.Location())
	body, _ := chromedp.Run(short, chromedp.Text(chromedp.CSS("body")))
	t.Fatalf("%s: %v (at %s)\n%s", what, err, loc, body)
}

// shot takes a screenshot of the page: it must be a PNG, and it is saved
// as NAME.png under $TXKERNEL_DESK_SCREENSHOTS when that is set.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf := value(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	if len(buf) < 8 || string(buf[1:4]) != "PNG" {
		t.Fatalf("screenshot %s is not a PNG (%d bytes)", name, len(buf))
	}
	if dir := os.Getenv("TXKERNEL_DESK_SCREENSHOTS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// button is the XPath of the button whose accessible name (its text) is
// name, exactly.
func button(name string) string { return fmt.Sprintf(`//button[normalize-space()=%q]`, name) }

// link is the XPath of the link whose text is text, exactly.
func link(text string) string { return fmt.Sprintf(`//a[normalize-space()=%q]`, text) }

// reviewer is one reviewer of a test kernel and their token.
type reviewer struct {
	desk.Reviewer
	token string
}

// kernel is a running kernel with its desk.
type kernel struct {
	p        *harness.Proc
	base     string            // the desk's URL, without the trailing /
	once     map[string]string // principal → one-time link
	ws, data string
}

// startKernel runs deskfix.Start (the shared fixture) with rs.
func startKernel(t *testing.T, cmd string, rs []reviewer, files map[string]string, extra ...string) *kernel {
	t.Helper()
	fx := make([]deskfix.Reviewer, len(rs))
	for i, r := range rs {
		fx[i] = deskfix.Reviewer{Reviewer: r.Reviewer, Token: r.token}
	}
	k := deskfix.Start(t, cmd, fx, files, extra...)
	return &kernel{p: k.P, base: k.Base, once: k.Once, ws: k.WS, data: k.Data}
}

// signIn signs in on the /login form: the password field labelled Token,
// the Sign in button.
func signIn(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(chromedp.Search(`//input[@type="password" and @id=//label[normalize-space()="Token"]/@for]`)),
		chromedp.SendKeys(chromedp.Search(`//input[@type="password" and @id=//label[normalize-space()="Token"]/@for]`), token),
		chromedp.Click(chromedp.Search(button("Sign in"))),
		chromedp.WaitVisible(chromedp.Search(`//h1[normalize-space()="Inbox"]`)),
	)
}

// The desk's HTTP helpers, shared with the other desk tests (deskfix).
var (
	httpSignIn = deskfix.SignIn
	get        = deskfix.Get
	csrfRe     = deskfix.CSRF
)

// proposeAndAsk proposes diff over stdio and calls apply/execute, which
// must wait for approvals; it returns the transaction id and the pending
// approval requests' ids.
func proposeAndAsk(t *testing.T, p *harness.Proc, diff string) (string, []string) {
	t.Helper()
	res := p.MustResult("turn/start", harness.DiffParams([]byte(diff)))
	txID := harness.Str(res["transactionId"])
	ap := p.MustResult("apply/execute", map[string]any{"transactionId": txID})
	if ap["ok"] != false {
		t.Fatalf("apply/execute before approval: %v", ap)
	}
	var ids []string
	for _, pa := range ap["pendingApprovals"].([]any) {
		ids = append(ids, harness.Str(pa.(map[string]any)["approvalRequestId"]))
	}
	return txID, ids
}

// axNode is a node of the page's accessibility tree: its role and
// accessible name as the browser computes them.
type axNode struct{ role, name string }

// axNames returns the accessible names of the page's nodes of the given
// roles, in document order, from the browser's accessibility tree (what a
// screen reader announces).
func axNames(t *testing.T, ctx context.Context, roles ...string) []axNode {
	t.Helper()
	str := func(v *accessibility.Value) string {
		var s string
		if v != nil {
			_ = json.Unmarshal(v.Value, &s)
		}
		return s
	}
	return value(t, ctx, "accessibility tree", chromedp.Action[[]axNode](func(ctx context.Context, tg *chromedp.Target) ([]axNode, error) {
		res, err := cdp.Call(ctx, tg, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
		if err != nil {
			return nil, err
		}
		var out []axNode
		for _, n := range res.Nodes {
			if r := str(n.Role); !n.Ignored && slices.Contains(roles, r) {
				out = append(out, axNode{r, str(n.Name)})
			}
		}
		return out, nil
	}))
}

// wantAX checks that the page's nodes of those roles are exactly want.
func wantAX(t *testing.T, ctx context.Context, want []axNode, roles ...string) {
	t.Helper()
	if got := axNames(t, ctx, roles...); !slices.Equal(got, want) {
		t.Errorf("accessible %v: %v, want %v", roles, got, want)
	}
}
