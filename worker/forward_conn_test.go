package worker_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/worker"
)

// The protocols an app may speak to the forwarder: HTTP/1.1 in the clear,
// and HTTP/2 over TLS.
var appProtocols = []string{"HTTP/1.1", "HTTP/2"}

// startApp serves h over proto and returns a Forwarder that trusts it.
// configure, when set, adjusts the server before it starts.
func startApp(t *testing.T, proto string, h http.Handler, configure func(*http.Server)) (*httptest.Server, *worker.Forwarder) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	if configure != nil {
		configure(srv.Config)
	}
	if proto == "HTTP/2" {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	f, err := worker.NewForwarder(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if proto == "HTTP/2" {
		worker.TrustTLS(f, srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs)
	}
	return srv, f
}

type appConn struct{}

// A connection dropped after the app has read the whole call, while the app
// goes on handling it (a proxy's timeout, a load balancer's drain), leaves
// the call's fate unknown to hookd. The attempt fails; the call is never
// sent again at once on a new connection, where the app would hold the
// event twice under one lease. The drop comes on a kept connection's
// second call: net/http only considers sending a call again on a reused
// connection.
func TestForwarder_OneAttemptIsOneCall(t *testing.T) {
	t.Parallel()
	for _, proto := range appProtocols {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			calls := map[string]int{}
			handling := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := r.Header.Get("Hookd-Event-Id")
				mu.Lock()
				calls[id]++
				mu.Unlock()
				if id != "evt_dropped" {
					return
				}
				// The whole call is read; the connection goes, the app
				// goes on handling the event.
				r.Context().Value(appConn{}).(net.Conn).Close()
				<-handling
			})
			_, f := startApp(t, proto, h, func(s *http.Server) {
				s.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
					return context.WithValue(ctx, appConn{}, c)
				}
			})
			// Before the server's Close, which waits for its handlers.
			t.Cleanup(func() { close(handling) })
			warm := worker.Delivery{EventID: "evt_warm", EventType: "invoice.paid", Payload: []byte(`{"id":"evt_warm"}`), Attempt: 1}
			if res := f.Process(t.Context(), warm); res.Err != nil {
				t.Fatalf("the call that opens the connection: %v", res.Err)
			}
			dropped := worker.Delivery{EventID: "evt_dropped", EventType: "invoice.paid", Payload: []byte(`{"id":"evt_dropped"}`), Attempt: 1}
			if res := f.Process(t.Context(), dropped); res.Err == nil {
				t.Fatal("a call whose connection dropped before its answer succeeded; want a failed attempt")
			}
			mu.Lock()
			defer mu.Unlock()
			if n := calls["evt_dropped"]; n != 1 {
				t.Fatalf("one attempt reached the app %d times while the first call was still being handled; want once", n)
			}
		})
	}
}

// App servers close a kept connection after a few idle seconds (gunicorn
// 2 s, Node and uvicorn 5 s). A call sent on one just as the app closes it
// never gets an answer; the forwarder drops idle connections before the
// app does (HOOKD_FORWARD_IDLE_TIMEOUT), so no attempt fails because of
// it. Each app here closes idle connections after idle; calls are sent
// just before, at and just after that moment.
func TestForwarder_AppsClosingIdleConnectionsFailNoAttempt(t *testing.T) {
	t.Parallel()
	for _, idle := range []time.Duration{2 * time.Second, 5 * time.Second} {
		for _, proto := range appProtocols {
			t.Run(fmt.Sprintf("%s/%s", proto, idle), func(t *testing.T) {
				t.Parallel()
				var answered atomic.Int64
				_, f := startApp(t, proto, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { answered.Add(1) }),
					func(s *http.Server) { s.IdleTimeout = idle })
				sent := 0
				for _, offset := range []time.Duration{-20 * time.Millisecond, 0, 20 * time.Millisecond} {
					d := worker.Delivery{EventID: "evt_first", EventType: "invoice.paid", Payload: []byte(`{}`), Attempt: 1}
					if res := f.Process(t.Context(), d); res.Err != nil {
						t.Fatalf("first call: %v", res.Err)
					}
					// The scenario's own timing: the next call goes out
					// when the app is closing the idle connection.
					time.Sleep(idle + offset)
					d.EventID = "evt_at_close"
					if res := f.Process(t.Context(), d); res.Err != nil {
						t.Fatalf("a call sent %s after the last, as the app closes idle connections after %s: %v", idle+offset, idle, res.Err)
					}
					sent += 2
				}
				if n := answered.Load(); n != int64(sent) {
					t.Fatalf("the app answered %d calls, want %d", n, sent)
				}
			})
		}
	}
}
