package worker_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookd/hookd/worker"
)

// TestForwarder_AppDownFailures: the failures that say the app is down,
// and only those, are of the kind the circuit breaker counts.
func TestForwarder_AppDownFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		down   bool
	}{
		{http.StatusBadGateway, true}, {http.StatusServiceUnavailable, true}, {http.StatusGatewayTimeout, true},
		{http.StatusInternalServerError, false}, {http.StatusBadRequest, false}, {http.StatusNotFound, false},
		{http.StatusUnprocessableEntity, false}, {http.StatusTooManyRequests, false}, {http.StatusMovedPermanently, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(tc.status)
		}))
		f, err := worker.NewForwarder(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte(`{}`)})
		srv.Close()
		if res.Err == nil || worker.IsAppDown(res.Err) != tc.down {
			t.Errorf("%d: err %v, app down %v; want down %v", tc.status, res.Err, worker.IsAppDown(res.Err), tc.down)
		}
	}

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		f, err := worker.NewForwarder("http://"+addr+"/hook", "")
		if err != nil {
			t.Fatal(err)
		}
		res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte(`{}`)})
		if !worker.IsAppDown(res.Err) {
			t.Errorf("refused connection: err %v is not app-down", res.Err)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		f, err := worker.NewForwarder(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		res := f.Process(ctx, worker.Delivery{EventID: "evt_1", Payload: []byte(`{}`)})
		if !worker.IsAppDown(res.Err) {
			t.Errorf("timeout: err %v is not app-down", res.Err)
		}
	})

	t.Run("ShutdownIsNotAnOutage", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		f, err := worker.NewForwarder(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		res := f.Process(ctx, worker.Delivery{EventID: "evt_1", Payload: []byte(`{}`)})
		if res.Err == nil || worker.IsAppDown(res.Err) {
			t.Errorf("cancelled: err %v, want a failure that is not app-down", res.Err)
		}
	})
}
