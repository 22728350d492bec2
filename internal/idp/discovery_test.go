package idp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/idp"
)

// discoveryServer answers the discovery document; while down it answers
// 500. Every read is counted; hold, until closed, keeps each read waiting.
type discoveryServer struct {
	srv   *httptest.Server
	reads atomic.Int64
	down  atomic.Bool
	hold  chan struct{}
}

func startDiscovery(t *testing.T) *discoveryServer {
	t.Helper()
	d := &discoveryServer{hold: make(chan struct{})}
	close(d.hold)
	var issuer string
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		d.reads.Add(1)
		<-d.hold
		if d.down.Load() {
			http.Error(w, "internal error at 10.0.3.7", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": issuer, "authorization_endpoint": issuer + "/auth", "token_endpoint": issuer + "/token",
			"jwks_uri": issuer + "/keys", "end_session_endpoint": issuer + "/logout",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	}))
	issuer = d.srv.URL
	t.Cleanup(d.srv.Close)
	return d
}

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Requests that arrive while the discovery document is being read all wait
// for that one read: 50 at once make exactly one request to the provider.
func TestDiscovery_OneSharedRead(t *testing.T) {
	t.Parallel()
	d := startDiscovery(t)
	d.hold = make(chan struct{})
	p := idp.New(idp.Config{Issuer: d.srv.URL, ClientID: "hookd", RedirectURL: "https://hooks.example.com/auth/oidc/callback"})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			_, err := p.Start(context.Background())
			errs <- err
		})
	}
	// Every caller is waiting on the read (or about to), which is held.
	deadline := time.Now().Add(30 * time.Second)
	for d.reads.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no read of the discovery document within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	close(d.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := d.reads.Load(); n != 1 {
		t.Errorf("%d reads of the discovery document for 50 sign-ins at once, want 1", n)
	}
}

// A failed read is answered from memory for 30 s, so sign-ins do not queue
// behind a provider that is down; then it is tried again. A document read
// is used for a day, then read again.
func TestDiscovery_FailureCachedAndRefreshedDaily(t *testing.T) {
	t.Parallel()
	d := startDiscovery(t)
	d.down.Store(true)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := idp.New(idp.Config{Issuer: d.srv.URL, ClientID: "hookd", Now: clk.Now})
	ctx := context.Background()
	for range 3 {
		if _, err := p.Start(ctx); err == nil {
			t.Fatal("sign-in started with the provider down")
		}
	}
	if n := d.reads.Load(); n != 1 {
		t.Errorf("%d reads in the first 30 s after a failure, want 1", n)
	}
	clk.Add(31 * time.Second)
	d.down.Store(false)
	if _, err := p.Start(ctx); err != nil {
		t.Fatalf("after 31 s with the provider back: %v", err)
	}
	if n := d.reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}
	clk.Add(23 * time.Hour)
	if _, err := p.Start(ctx); err != nil || d.reads.Load() != 2 {
		t.Errorf("within the day: %v, %d reads, want the document kept", err, d.reads.Load())
	}
	clk.Add(2 * time.Hour)
	// Past a day: the old document serves while it is read again.
	if _, err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for d.reads.Load() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads 30 s after the document turned a day old, want 3", d.reads.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if url, ok := p.EndSessionURL(ctx, "id-token", "https://hooks.example.com/auth/oidc/signed-out"); !ok ||
		url != d.srv.URL+"/logout?client_id=hookd&id_token_hint=id-token&post_logout_redirect_uri=https%3A%2F%2Fhooks.example.com%2Fauth%2Foidc%2Fsigned-out" {
		t.Errorf("end session URL %q (%v)", url, ok)
	}
}

func TestCheckIssuer_HTTPSOrLoopback(t *testing.T) {
	t.Parallel()
	for issuer, ok := range map[string]bool{
		"https://sso.example.com/realms/acme": true,
		"http://localhost:9998/":              true,
		"http://127.0.0.1:8080":               true,
		"http://[::1]:8080":                   true,
		"http://sso.example.com":              false,
		"http://10.0.0.7:8080":                false,
		"ftp://sso.example.com":               false,
	} {
		if err := idp.CheckIssuer(issuer); (err == nil) != ok {
			t.Errorf("CheckIssuer(%s) = %v, want ok %v", issuer, err, ok)
		}
	}
}
