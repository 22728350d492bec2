package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/web/api"
)

// apiDoc is the OpenAPI document the server serves, as served and as
// loaded, with a router over it that the test's requests find their
// operations with.
type apiDoc struct {
	raw    []byte
	doc    *openapi3.T
	router routers.Router
}

// servedDoc fetches /api/v1/openapi.json, which needs no token.
func (b *testBundle) servedDoc(t *testing.T) apiDoc {
	t.Helper()
	res, err := http.Get(b.srv.URL + api.Prefix + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET openapi.json: status %d, %v", res.StatusCode, err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served document is not valid OpenAPI: %v", err)
	}
	// The router matches absolute URLs: the document's server, relative,
	// on this test's server.
	routed := *doc
	routed.Servers = openapi3.Servers{{URL: b.srv.URL + api.Prefix}}
	router, err := legacy.NewRouter(&routed)
	if err != nil {
		t.Fatal(err)
	}
	return apiDoc{raw: raw, doc: doc, router: router}
}

// apiClient calls /api/v1 with a token ("" for none), and checks every
// request it sends and every answer it gets against the served document.
type apiClient struct {
	t     *testing.T
	b     *testBundle
	doc   apiDoc
	token string
	// hc is the client's HTTP client: no cookies unless a test gives it a
	// browser's.
	hc *http.Client
}

var docs sync.Map // *testBundle → apiDoc

func (b *testBundle) api(t *testing.T, token string) *apiClient {
	t.Helper()
	d, ok := docs.Load(b)
	if !ok {
		d, _ = docs.LoadOrStore(b, b.servedDoc(t))
		t.Cleanup(func() { docs.Delete(b) })
	}
	return &apiClient{t: t, b: b, doc: d.(apiDoc), token: token, hc: &http.Client{}}
}

type apiResponse struct {
	status int
	header http.Header
	body   []byte
}

func (r apiResponse) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r apiResponse) problem(t *testing.T) api.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.body)
	}
	var p api.Problem
	r.decode(t, &p)
	if p.Status != r.status || p.Title == "" || p.Detail == "" || p.Type == "" {
		t.Fatalf("problem %+v of a %d: want its status, a title, a detail and a type", p, r.status)
	}
	return p
}

func (r apiResponse) want(t *testing.T, status int) apiResponse {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

// call sends method path with body (JSON, nil for none) and the header's
// key-value pairs, checked against the document: the request must be
// valid, and the answer valid for it.
func (c *apiClient) call(method, path string, body any, header ...string) apiResponse {
	c.t.Helper()
	return c.send(method, path, body, true, header...)
}

// callInvalid sends a request the document refuses, to see the server
// refuse it too; the answer is still checked.
func (c *apiClient) callInvalid(method, path string, body any, header ...string) apiResponse {
	c.t.Helper()
	return c.send(method, path, body, false, header...)
}

func (c *apiClient) send(method, path string, body any, valid bool, header ...string) apiResponse {
	c.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			c.t.Fatal(err)
		}
	}
	req := c.request(method, path, raw, header)
	route, params, routeErr := c.doc.router.FindRoute(req)
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if valid {
		if routeErr != nil {
			c.t.Fatalf("%s %s is no operation of the document: %v", method, path, routeErr)
		}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			c.t.Fatalf("%s %s: the request is not valid against the document: %v", method, path, err)
		}
		req = c.request(method, path, raw, header)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	r := apiResponse{status: res.StatusCode, header: res.Header, body: got}
	if routeErr == nil {
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.status, Header: r.header,
			Body: io.NopCloser(bytes.NewReader(got)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			c.t.Fatalf("%s %s: the answer (%d) is not valid against the document: %v\n%s", method, path, r.status, err, got)
		}
	}
	return r
}

func (c *apiClient) request(method, path string, body []byte, header []string) *http.Request {
	c.t.Helper()
	req, err := http.NewRequest(method, c.b.srv.URL+api.Prefix+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// apiToken makes an account with role and a token of scope for it, named
// name, and returns the token's secret and the token.
func (b *testBundle) apiToken(t *testing.T, role accounts.Role, scope tokens.Scope, name string) (string, tokens.Token) {
	t.Helper()
	ctx := context.Background()
	u, err := b.accounts.CreateUser(ctx, name+"@example.com", testPassword, role)
	if err != nil {
		t.Fatal(err)
	}
	return b.tokenFor(t, u.ID, scope, name, 0)
}

// tokenFor makes a token for account, of scope, named name, lasting ttl
// (0: forever).
func (b *testBundle) tokenFor(t *testing.T, account int64, scope tokens.Scope, name string, ttl time.Duration) (string, tokens.Token) {
	t.Helper()
	ctx := context.Background()
	var secret string
	var tok tokens.Token
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		secret, tok, err = tokens.New(b.pool).Create(ctx, tx, account, name, scope, ttl)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "hkd_") {
		t.Fatalf("secret %q does not start hkd_", secret)
	}
	return secret, tok
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
