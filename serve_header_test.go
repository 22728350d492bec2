package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/config"
)

// A request's header is bounded: a header past maxHeaderBytes is answered
// 431 with its reason, however long the sender would keep sending, and one
// as long as a browser's with many cookies is served as ever.
func TestHTTPServer_BoundsTheHeader(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(config.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	// Shutdown, not Close: it waits for the connection the 431 ends,
	// which net/http lingers on for half a second.
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	for _, tc := range []struct {
		name   string
		size   int
		status int
	}{
		{"ABrowsersCookies", 16 << 10, http.StatusOK},
		{"PastTheBound", maxHeaderBytes + 8<<10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Cookie", "big="+strings.Repeat("x", tc.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if tc.status == http.StatusRequestHeaderFieldsTooLarge && !strings.Contains(string(body), "Request Header Fields Too Large") {
			t.Errorf("%s: the 431 does not say why: %q", tc.name, body)
		}
	}
}
