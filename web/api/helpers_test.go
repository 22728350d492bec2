package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/idempotency"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web/api"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/reconcile"
)

// bundle is /api/v1 served alone (api.NewHandler) on a database of the
// test's own, its actions with everything they may need: a reconciler and
// a Stripe client over a fake Stripe API (stripe), whose recovered events
// an app that answers 200 takes.
type bundle struct {
	srv      *httptest.Server
	pool     *pgxpool.Pool
	store    *queue.Store
	accounts *accounts.Store
	stripe   *stripetest.Server
	doc      servedDoc
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{stripe: stripetest.NewServer(t)}
	b.store, b.pool = queuetest.NewStore(t)
	b.accounts = accounts.New(b.pool)
	logger := slog.New(slog.DiscardHandler)
	ep := b.stripe.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
	eps := []endpoint.Endpoint{{Label: endpoint.DefaultLabel, Kind: endpoint.Snapshot, StripeID: ep.ID, Secrets: []string{"whsec_api"}}}
	client := stripeapi.New(stripeapi.Config{Key: b.stripe.Key(), URL: b.stripe.URL, PagePause: -1, RateLimitWait: time.Millisecond})
	rec := receiver.New(b.store, logger, receiver.Config{Endpoints: eps, Processor: okApp{}})
	acts := actions.New(actions.Stores{Queue: b.store, Logger: logger, Accounts: b.accounts, Stripe: client,
		Reconciler: reconcile.New(b.store, rec, logger, reconcile.Config{Client: client, Endpoints: eps})})
	b.srv = httptest.NewServer(api.NewHandler(api.Options{Logger: logger, Actions: acts, Tokens: tokens.New(b.pool),
		Idempotency: idempotency.New(b.pool), Rate: 10_000}))
	t.Cleanup(b.srv.Close)
	b.doc = b.served(t)
	return b
}

// okApp is an app that takes every event.
type okApp struct{}

func (okApp) Process(context.Context, worker.Delivery) worker.Result {
	return worker.Result{HTTPStatus: 200}
}

// token makes an account of role, and a token named name of scope for it;
// it returns a client calling with the token, and the token.
func (b *bundle) token(t *testing.T, role accounts.Role, scope tokens.Scope, name string) (*client, tokens.Token) {
	t.Helper()
	ctx := context.Background()
	u, err := b.accounts.CreateUser(ctx, name+"@example.com", "correct horse battery", role)
	if err != nil {
		t.Fatal(err)
	}
	var secret string
	var tok tokens.Token
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		secret, tok, err = tokens.New(b.pool).Create(ctx, tx, u.ID, name, scope, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, b: b, secret: secret}, tok
}

// servedDoc is the document GET /api/v1/openapi.json serves, loaded, and a
// router over it that finds each request's operation.
type servedDoc struct {
	doc    *openapi3.T
	router routers.Router
}

var loadMu sync.Mutex

func (b *bundle) served(t *testing.T) servedDoc {
	t.Helper()
	res, err := http.Get(b.srv.URL + api.Prefix + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET openapi.json: %d, %v", res.StatusCode, err)
	}
	loadMu.Lock() // kin-openapi's loader is not safe for concurrent use
	defer loadMu.Unlock()
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served document is not valid OpenAPI: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: b.srv.URL + api.Prefix}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return servedDoc{doc: doc, router: router}
}

// client calls /api/v1 with a token, and checks every request it sends and
// every answer it gets against the served document.
type client struct {
	t      *testing.T
	b      *bundle
	secret string
}

// response is an answer of the API.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) want(t *testing.T, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// problem is the answer as a problem, which must say why.
func (r response) problem(t *testing.T) api.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.body)
	}
	var p api.Problem
	r.decode(t, &p)
	if p.Status != r.status || p.Detail == "" {
		t.Fatalf("problem %+v of a %d: want its status and a detail", p, r.status)
	}
	return p
}

// call sends method path (under /api/v1) with body (JSON; nil for none),
// having checked the request against the document, and checks the answer
// against it.
func (c *client) call(method, path string, body any) response {
	c.t.Helper()
	return c.send(method, path, body, true)
}

// callInvalid sends a request the document refuses, to see the server
// refuse it too; the answer is still checked.
func (c *client) callInvalid(method, path string, body any) response {
	c.t.Helper()
	return c.send(method, path, body, false)
}

func (c *client) send(method, path string, body any, valid bool) response {
	c.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			c.t.Fatal(err)
		}
	}
	req := c.request(method, path, raw)
	route, params, err := c.b.doc.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("%s %s is no operation of the document: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); valid && err != nil {
		c.t.Fatalf("%s %s: the request is not valid against the document: %v", method, path, err)
	}
	res, err := http.DefaultClient.Do(c.request(method, path, raw))
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Fatalf("%s %s: the answer (%d) is not valid against the document: %v\n%s", method, path, res.StatusCode, err, got)
	}
	return response{status: res.StatusCode, header: res.Header, body: got}
}

func (c *client) request(method, path string, body []byte) *http.Request {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.b.srv.URL+api.Prefix+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	return req
}

// auditRows is the audit log, oldest first.
func (b *bundle) auditRows(t *testing.T) []audit.Entry {
	t.Helper()
	entries, err := audit.New(b.pool).Before(context.Background(), time.Time{}, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
		entries[i], entries[j] = entries[j], entries[i]
	}
	return entries
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }
