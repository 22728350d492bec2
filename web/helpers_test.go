package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/alexedwards/scs/pgxstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/idempotency"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/web/api"
)

const testPassword = "correct horse battery"

// testBundle is a dashboard served over HTTP on a database of its own.
type testBundle struct {
	// srv is nil with withoutServer: the test serves its own.
	srv      *httptest.Server
	store    *queue.Store
	accounts *accounts.Store
	audit    *audit.Log
	pool     *pgxpool.Pool
	// dbURL is the database's URL, for the replicas a test opens on it.
	dbURL string
}

// storesOn returns the server's stores over pool, with store as its queue.
func storesOn(store *queue.Store, pool *pgxpool.Pool) web.Stores {
	return web.Stores{Queue: store, Accounts: accounts.New(pool), Tokens: tokens.New(pool), Audit: audit.New(pool), Activity: activity.New(pool),
		Rejections: rejections.New(pool)}
}

type setupConfig struct {
	opts web.Options
	// apiRate, when set, serves /api/v1 too, each token at this rate.
	apiRate   float64
	newServer func(http.Handler) *httptest.Server
	storeOpts []queue.Option
}

type setupOption func(*setupConfig)

// withOptions serves the dashboard with opts, its stores, Sessions and
// Gatherer filled in.
func withOptions(opts web.Options) setupOption { return func(c *setupConfig) { c.opts = opts } }

// withNewServer serves it through newServer: httptest.NewServer (the
// default) or httptest.NewTLSServer.
func withNewServer(newServer func(http.Handler) *httptest.Server) setupOption {
	return func(c *setupConfig) { c.newServer = newServer }
}

// withAPI serves /api/v1 too, on the same server, each token limited to
// rate requests a second.
func withAPI(rate float64) setupOption { return func(c *setupConfig) { c.apiRate = rate } }

// withoutServer serves nothing, for a test that serves its own receiver
// or replicas on the bundle's database.
func withoutServer() setupOption { return func(c *setupConfig) { c.newServer = nil } }

// withStoreOptions gives the queue's Store these options.
func withStoreOptions(opts ...queue.Option) setupOption {
	return func(c *setupConfig) { c.storeOpts = append(c.storeOpts, opts...) }
}

// setup serves the dashboard on a fresh, migrated database of t's own and
// returns the bundle of what the test works with. Every test of the
// package that needs a database starts with it.
func setup(t testing.TB, opts ...setupOption) *testBundle {
	t.Helper()
	c := setupConfig{newServer: httptest.NewServer}
	for _, o := range opts {
		o(&c)
	}
	b := &testBundle{dbURL: queuetest.NewDatabaseURL(t)}
	cfg, err := pgxpool.ParseConfig(b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// Enough connections for the race tests' goroutines to really overlap.
	cfg.MaxConns = 32
	if b.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// Registered after the database's own cleanup, so it runs first.
	t.Cleanup(b.pool.Close)
	b.store = queue.New(b.pool, c.storeOpts...)
	stores := storesOn(b.store, b.pool)
	b.accounts, b.audit = stores.Accounts, stores.Audit
	if c.newServer == nil {
		return b
	}
	c.opts.Sessions = pgxstore.NewWithCleanupInterval(b.pool, 0)
	c.opts.Stores, c.opts.Gatherer = stores, prometheus.NewRegistry()
	if c.apiRate > 0 {
		c.opts.API = &api.Options{Tokens: tokens.New(b.pool), Idempotency: idempotency.New(b.pool), Rate: c.apiRate}
	}
	b.srv = c.newServer(web.NewServer(c.opts))
	t.Cleanup(b.srv.Close)
	return b
}

// setupWith is setup with opts served through newServer.
func setupWith(t *testing.T, opts web.Options, newServer func(http.Handler) *httptest.Server) *testBundle {
	t.Helper()
	return setup(t, withOptions(opts), withNewServer(newServer))
}

// client is one browser: its own cookies, redirects not followed so tests
// see them, and the CSRF token of the last page it loaded.
type client struct {
	t    testing.TB
	b    *testBundle
	http *http.Client
	csrf string
}

func (b *testBundle) client(t testing.TB) *client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if b.srv.TLS != nil {
		hc.Transport = b.srv.Client().Transport
	}
	return &client{t: t, b: b, http: hc}
}

// response is a finished response with its body read and, for HTML, parsed.
type response struct {
	status int
	header http.Header
	body   string
	doc    *goquery.Document
}

func (c *client) do(req *http.Request) response {
	c.t.Helper()
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	r := response{status: res.StatusCode, header: res.Header, body: string(body)}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		if r.doc, err = goquery.NewDocumentFromReader(strings.NewReader(r.body)); err != nil {
			c.t.Fatal(err)
		}
		if tok, ok := r.doc.Find(`input[name="_csrf"]`).First().Attr("value"); ok {
			c.csrf = tok
		}
	}
	return r
}

func (c *client) get(path string) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.b.srv.URL+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.do(req)
}

// post submits a form the way the page's form would, with the CSRF token
// of the last page loaded unless form sets _csrf itself.
func (c *client) post(path string, form url.Values) response {
	c.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if !form.Has("_csrf") {
		form.Set("_csrf", c.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, c.b.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

// follow loads the page a redirect points to.
func (c *client) follow(r response) response {
	c.t.Helper()
	if r.status != http.StatusSeeOther {
		c.t.Fatalf("status %d, want 303 See Other; body:\n%s", r.status, r.body)
	}
	return c.get(r.header.Get("Location"))
}

// signIn creates an account with role and signs the client in with it.
func (c *client) signIn(role accounts.Role) accounts.User {
	c.t.Helper()
	u, err := c.b.accounts.CreateUser(context.Background(), string(role)+"@example.com", testPassword, role)
	if err != nil {
		c.t.Fatal(err)
	}
	c.get("/login")
	r := c.post("/login", url.Values{"email": {u.Email}, "password": {testPassword}})
	if r.status != http.StatusSeeOther {
		c.t.Fatalf("sign in as %s: status %d, want 303; body:\n%s", role, r.status, r.body)
	}
	// Like a browser, land on the page, which carries the session's new
	// CSRF token.
	c.follow(r)
	return u
}

// formValues returns the values a form would submit from its inputs.
func formValues(form *goquery.Selection) url.Values {
	values := url.Values{}
	form.Find("input").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		value, _ := s.Attr("value")
		values.Set(name, value)
	})
	return values
}

func testid(doc *goquery.Document, id string) string {
	return strings.TrimSpace(doc.Find(`[data-testid="` + id + `"]`).Text())
}

func wantStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body:\n%s", r.status, want, r.body)
	}
}

// auditEntries returns the audit log, newest first.
func auditEntries(t *testing.T, b *testBundle) []audit.Entry {
	t.Helper()
	page, err := b.audit.Read(context.Background(), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	return page.Entries
}

// lastAudit returns the newest audit entry with action, failing without one.
func lastAudit(t *testing.T, b *testBundle, action audit.Action) audit.Entry {
	t.Helper()
	for _, e := range auditEntries(t, b) {
		if e.Action == action {
			return e
		}
	}
	t.Fatalf("no %s entry in the audit log", action)
	return audit.Entry{}
}

func countAudit(t *testing.T, b *testBundle, action audit.Action) int {
	t.Helper()
	n := 0
	for _, e := range auditEntries(t, b) {
		if e.Action == action {
			n++
		}
	}
	return n
}
