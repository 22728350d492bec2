package worker_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/worker"
)

func TestForwarder(t *testing.T) {
	t.Parallel()

	t.Run("PostsExactBytesWithHeadersAndStandardWebhooksSignature", func(t *testing.T) {
		t.Parallel()
		key := []byte("forward-key-0123456789")
		secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
		body := []byte(`{"id":"evt_1","type":"invoice.paid",  "odd spacing": true}`)
		var got *http.Request
		var gotBody []byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r
			gotBody, _ = io.ReadAll(r.Body)
			w.WriteHeader(http.StatusAccepted)
		}))
		t.Cleanup(srv.Close)
		f, err := worker.NewForwarder(srv.URL, secret)
		if err != nil {
			t.Fatal(err)
		}
		res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", EventType: "invoice.paid", Payload: body, Attempt: 3})
		if res.Err != nil || res.HTTPStatus != http.StatusAccepted {
			t.Fatalf("result: got %+v, want success with 202", res)
		}
		if string(gotBody) != string(body) {
			t.Errorf("body: got %q, want %q", gotBody, body)
		}
		for h, want := range map[string]string{
			"Hookd-Event-Id": "evt_1", "Hookd-Event-Type": "invoice.paid", "Hookd-Attempt": "3", "webhook-id": "evt_1",
		} {
			if v := got.Header.Get(h); v != want {
				t.Errorf("%s: got %q, want %q", h, v, want)
			}
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte("evt_1." + got.Header.Get("webhook-timestamp") + "."))
		mac.Write(body)
		if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); got.Header.Get("webhook-signature") != want {
			t.Errorf("webhook-signature: got %q, want %q", got.Header.Get("webhook-signature"), want)
		}
	})

	t.Run("UnsignedWithoutSecret", func(t *testing.T) {
		t.Parallel()
		var sig string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sig = r.Header.Get("webhook-signature")
		}))
		t.Cleanup(srv.Close)
		f, err := worker.NewForwarder(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		if res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte("{}")}); res.Err != nil || sig != "" {
			t.Errorf("got %+v, signature %q; want success, unsigned", res, sig)
		}
	})

	t.Run("Non2xxIsAReadableFailure", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, strings.Repeat("x", 300))
		}))
		t.Cleanup(srv.Close)
		f, _ := worker.NewForwarder(srv.URL, "")
		res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte("{}")})
		// Cut to 200 bytes, and says so.
		want := "downstream answered 500: " + strings.Repeat("x", 200) + "…"
		if res.Err == nil || res.Err.Error() != want || res.HTTPStatus != 500 {
			t.Errorf("got %+v, want error %q and status 500", res, want)
		}
	})

	t.Run("RedirectIsAFailureNamingWhereItPoints", func(t *testing.T) {
		t.Parallel()
		// The app moved to https: following the 301 would turn the POST into
		// a body-less GET, whose 200 would mark an event the app never saw.
		var gets, posts atomic.Int64
		final := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				posts.Add(1)
			} else {
				gets.Add(1)
			}
		}))
		t.Cleanup(final.Close)
		for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
			http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, final.URL+"/stripe-events", status)
			}))
			t.Cleanup(srv.Close)
			f, _ := worker.NewForwarder(srv.URL, "")
			res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte("{}")})
			want := fmt.Sprintf("downstream answered %d redirecting to %s/stripe-events", status, final.URL)
			if res.Err == nil || !strings.Contains(res.Err.Error(), want) || res.HTTPStatus != status {
				t.Errorf("%d: got %+v, want a failure containing %q and status %d", status, res, want, status)
			}
			if res.Err != nil && !strings.Contains(res.Err.Error(), "HOOKD_FORWARD_URL") {
				t.Errorf("%d: error %q does not say which setting to fix", status, res.Err)
			}
		}
		if gets.Load() != 0 || posts.Load() != 0 {
			t.Errorf("the redirect target got %d GETs and %d POSTs, want none: redirects are not followed", gets.Load(), posts.Load())
		}
	})

	t.Run("RedirectErrorKeepsNoSecretOfTheLocation", func(t *testing.T) {
		t.Parallel()
		// A sign-in redirect or a signed URL carries a token in its query,
		// and last_error reaches pages, logs and alerts.
		for _, tc := range []struct{ location, want string }{
			{"https://user:pw@app.example.com/hooks?token=s3cr3t#frag", "redirecting to https://app.example.com/hooks:"},
			{"/login?next=%2Fstripe&sig=s3cr3t", "/login:"},
		} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", tc.location)
				w.WriteHeader(http.StatusFound)
			}))
			t.Cleanup(srv.Close)
			f, _ := worker.NewForwarder(srv.URL+"/stripe", "")
			res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte("{}")})
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Errorf("Location %q: got %v, want an error containing %q", tc.location, res.Err, tc.want)
				continue
			}
			for _, secret := range []string{"s3cr3t", "pw@", "next=", "frag"} {
				if strings.Contains(res.Err.Error(), secret) {
					t.Errorf("Location %q: error %q keeps %q", tc.location, res.Err, secret)
				}
			}
		}
	})

	t.Run("ErrorBodyReadsAsOneLine", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, contentType, body, want string
		}{
			{"plain text", "text/plain", "Internal error\n   at handler.go:12\n", "Internal error at handler.go:12"},
			{"JSON", "application/json", "{\"error\":\n  \"no such invoice\"}", `{"error": "no such invoice"}`},
			// An HTML page is kept as the text a browser shows: a proxy's
			// page says what happened, not its markup.
			{"a proxy's HTML page", "text/html",
				"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n" +
					"<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
				"502 Bad Gateway nginx"},
			{"HTML sniffed without a Content-Type", "", "<html>\n  <h1>Bad gateway</h1>\n</html>\n", "Bad gateway"},
			// A framework's error page puts kilobytes of styles and scripts
			// before its message.
			{"a framework's HTML page", "text/html; charset=utf-8",
				"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>TypeError at /stripe</title><style>" +
					strings.Repeat("body { margin: 0; padding: 0 } ", 300) + "</style><script>" + strings.Repeat("var a = 1; ", 200) +
					"</script></head><body><h1>TypeError at /stripe</h1><pre class=exception_value>&#39;NoneType&#39; object is not subscriptable</pre></body></html>",
				"TypeError at /stripe 'NoneType' object is not subscriptable"},
			{"a long HTML page", "text/html", "<p>" + strings.Repeat("é", 150) + "</p>", strings.Repeat("é", 100) + "…"},
		} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				w.WriteHeader(http.StatusBadGateway)
				io.WriteString(w, tc.body)
			}))
			f, _ := worker.NewForwarder(srv.URL, "")
			res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte("{}")})
			srv.Close()
			if want := "downstream answered 502: " + tc.want; res.Err == nil || res.Err.Error() != want {
				t.Errorf("%s: got %v, want %q", tc.name, res.Err, want)
			}
		}
	})

	t.Run("NetworkErrorIsAFailure", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		f, _ := worker.NewForwarder(srv.URL+"/hook?token=s3cret", "")
		res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte("{}")})
		if res.Err == nil || res.HTTPStatus != 0 || !strings.Contains(res.Err.Error(), "connect") {
			t.Errorf("got %+v, want a connection error without status", res)
		}
		if res.Err != nil && strings.Contains(res.Err.Error(), "s3cret") {
			t.Errorf("error %q repeats the forward URL's query", res.Err)
		}
	})

	t.Run("RejectsMalformedSecret", func(t *testing.T) {
		t.Parallel()
		if _, err := worker.NewForwarder("http://localhost", "whsec_%%%"); err == nil {
			t.Error("got nil error for a secret that is not base64")
		}
	})
}

func TestDisplayURL_ShowsNoSecret(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://user:pass@app.example.com:8443/hooks/stripe?token=abc#x": "https://app.example.com:8443/hooks/stripe",
		"http://app.internal/stripe":                                      "http://app.internal/stripe",
		"not a url":                                                       "(an unparseable URL)",
	} {
		if got := worker.DisplayURL(raw); got != want {
			t.Errorf("DisplayURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// More calls at once than the 64 a Forwarder keeps connections for by
// default each keep their connection for the next call once KeepConns says
// so: a drain at a high
// HOOKD_RETRY_CONCURRENCY reuses its connections rather than opening one
// for most calls.
func TestForwarder_KeepsAConnectionForEachCallAtOnce(t *testing.T) {
	t.Parallel()
	const atOnce = 100
	var opened atomic.Int64
	arrived := make(chan struct{}, atOnce)
	release := make(chan struct{})
	var held atomic.Bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if held.Load() {
			arrived <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f, err := worker.NewForwarder(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	f.KeepConns(atOnce)

	// round sends atOnce calls that the app holds until all of them have
	// arrived, so each is on a connection of its own, and returns how many
	// connections the round opened.
	round := func() int64 {
		before := opened.Load()
		held.Store(true)
		var calls sync.WaitGroup
		for i := range atOnce {
			calls.Go(func() {
				d := worker.Delivery{EventID: fmt.Sprintf("evt_%d", i), EventType: "invoice.paid", Payload: []byte(`{}`), Attempt: 1}
				if res := f.Process(t.Context(), d); res.Err != nil {
					t.Errorf("call %d: %v", i, res.Err)
				}
			})
		}
		for range atOnce {
			<-arrived
		}
		held.Store(false)
		for range atOnce {
			release <- struct{}{}
		}
		calls.Wait()
		return opened.Load() - before
	}
	if n := round(); n != atOnce {
		t.Fatalf("first round opened %d connections, want %d", n, atOnce)
	}
	// A connection goes back to the pool just after its call returns, so a
	// round that starts at once may open one or two; a later round opens
	// none. With the default 64 kept, every round opens 36.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := round()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a round of %d calls at once still opened %d connections", atOnce, n)
		}
	}
}
