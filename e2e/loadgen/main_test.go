package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The load is meant to look like Stripe's traffic: events of 1 to 2 KB, each
// with a new id, that parse as JSON.
func TestEventGenMakesDistinctEventsOfOneToTwoKB(t *testing.T) {
	t.Parallel()
	gen := newEventGen("evt_test_")
	seen := map[string]bool{}
	for range 2500 {
		body := gen.next()
		if len(body) < 1024 || len(body) > 2048 {
			t.Fatalf("event of %d bytes, want 1024 to 2048", len(body))
		}
		var ev struct{ ID, Type string }
		if err := json.Unmarshal(body, &ev); err != nil || ev.Type != "invoice.paid" {
			t.Fatalf("not a Stripe event: %v, %s", err, body)
		}
		if seen[ev.ID] {
			t.Fatalf("id %s made twice", ev.ID)
		}
		seen[ev.ID] = true
	}
}

// The poster reads net/http's answers, as hookd sends them, over one kept-
// alive connection.
func TestPosterReadsNetHTTPAnswers(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) == "busy" {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "event is being handled by another delivery", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "processed %s\n", r.Header.Get("Stripe-Signature"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	p := &poster{addr: u.Host, path: "/webhooks/stripe"}
	t.Cleanup(p.close)

	for i, want := range []struct {
		body, sig string
		status    int
		answer    string
	}{
		{"{}", "t=1,v1=a", 200, "processed t=1,v1=a\n"},
		{"busy", "t=2,v1=b", 503, "event is being handled by another delivery\n"},
		{"{}", "t=3,v1=c", 200, "processed t=3,v1=c\n"},
	} {
		status, answer, err := p.post([]byte(want.body), want.sig)
		if err != nil || status != want.status || string(answer) != want.answer {
			t.Errorf("post %d = %d %q, %v; want %d %q", i, status, answer, err, want.status, want.answer)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want the one kept alive", n)
	}
}

// Each process loadgen starts takes its pool's size from its URL, whatever
// the URL said before.
func TestWithPoolSizeSetsPoolMaxConns(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"postgres://u:p@127.0.0.1:5432/db?sslmode=disable",
		"postgres://u:p@127.0.0.1:5432/db?pool_max_conns=4&sslmode=disable",
		"postgres://u:p@127.0.0.1:5432/db",
	} {
		got, err := url.Parse(withPoolSize(in, 8))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := url.Parse(in)
		if got.Query().Get("pool_max_conns") != "8" || got.Host != want.Host || got.Path != want.Path ||
			got.Query().Get("sslmode") != want.Query().Get("sslmode") {
			t.Errorf("withPoolSize(%q, 8) = %q, want the same URL with pool_max_conns=8", in, got)
		}
	}
}

// The suspects rounds count a delivery answered "processed" by its
// latency and one answered "deferred" by number, and stop at any other
// answer: every event they post is new.
func TestPostFastSortsProcessedFromDeferred(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch i := n.Add(1); {
		case i <= 3:
			fmt.Fprintln(w, "processed")
		case i <= 5:
			fmt.Fprintln(w, "deferred")
		default:
			fmt.Fprintln(w, "duplicate")
		}
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/webhooks/stripe")
	processed, deferred, err := postFast(t.Context(), u, "evt_test_", time.Now().Add(time.Minute), nil)
	if len(processed) != 3 || deferred != 2 || err == nil || !strings.Contains(err.Error(), "200: duplicate") {
		t.Errorf("postFast = %d processed, %d deferred, %v; want 3, 2 and the duplicate's error", len(processed), deferred, err)
	}
}
