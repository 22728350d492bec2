package demoapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/forwardsig"
)

// Command runs `hookd demo-app`: the app `make run` forwards to, which
// fails some events on purpose so the dashboard has a story to tell. It
// listens where HOOKD_FORWARD_URL points, so the demo's hookd and its app
// share one setting, and checks signatures with HOOKD_FORWARD_SECRET.
func Command(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) error {
	fs := config.NewFlagSet("demo-app", "Takes most events; answers some with a 500, lets some time out, and rejects\n"+
		RejectedType+" with a 422 until it is dead. For make run's demo only.", stderr)
	addr := fs.String("addr", "", "listen address (default: the host and port of $HOOKD_FORWARD_URL)")
	down := fs.Duration("down", 0, "answer every delivery 503 for this long from the first one, an outage that opens hookd's circuit breaker (0: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.ReadSettings(getenv, "HOOKD_FORWARD_URL", "HOOKD_FORWARD_SECRET")
	if err != nil {
		return err
	}
	if *addr == "" {
		forwardURL := cfg.ForwardURL
		if forwardURL == "" {
			return errors.New("HOOKD_FORWARD_URL: set it to where hookd forwards, where the demo app then listens (or pass -addr)")
		}
		u, err := url.Parse(forwardURL)
		if err != nil || u.Host == "" {
			return fmt.Errorf("HOOKD_FORWARD_URL: not an absolute http URL (got %q)", forwardURL)
		}
		*addr = u.Host
	}
	secret := cfg.ForwardSecret.Reveal()

	logger := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "demo-app")
	app, err := New(secret, logger)
	if err != nil {
		return fmt.Errorf("HOOKD_FORWARD_SECRET: %v", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("demo app: %v", err)
	}
	key, _ := forwardsig.ParseSecret(secret) // demoapp.New checked it
	handler := &outage{next: app, lasts: *down, key: key, logger: logger}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("demo app listening", "addr", ln.Addr().String(), "verifies_signatures", secret != "")

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("demo app: %w", err)
	case <-ctx.Done():
	}
	// A hanging delivery would hold Shutdown for minutes; the demo has no
	// work worth waiting for.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	logger.Info("demo app stopped")
	return nil
}

// OutagePath is where `hookd send-test-event -outage` asks the demo app to
// go down: a POST whose body is how long, signed like a delivery.
const OutagePath = "/_demo/outage"

// MaxOutage bounds an outage asked for at OutagePath.
const MaxOutage = 24 * time.Hour

// outage is the demo app down for a while: from its first delivery for
// -down, or from when send-test-event -outage asks. Every delivery is then
// answered 503, as a load balancer answers for an app that is not there,
// so hookd's circuit breaker opens, and closes when a probe finds the app
// back.
type outage struct {
	next http.Handler
	// lasts is -down's outage; 0 for none.
	lasts time.Duration
	// key checks an outage request's signature (HOOKD_FORWARD_SECRET);
	// nil takes any, as the app then takes any delivery.
	key    []byte
	logger *slog.Logger
	once   sync.Once
	until  atomic.Int64 // unix nanoseconds
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == OutagePath {
		o.serveOutage(w, r)
		return
	}
	if o.lasts > 0 {
		o.once.Do(func() { o.begin(o.lasts, "hookd demo-app -down") })
	}
	if time.Now().UnixNano() < o.until.Load() {
		http.Error(w, "demo app is down (an outage for the demo)", http.StatusServiceUnavailable)
		return
	}
	o.next.ServeHTTP(w, r)
}

func (o *outage) begin(d time.Duration, why string) time.Time {
	until := time.Now().Add(d)
	o.until.Store(until.UnixNano())
	o.logger.Info("demo app down: answering 503 until the outage ends", "for", d, "until", until.Format(time.TimeOnly), "asked_by", why)
	return until
}

// serveOutage starts the outage a signed POST to OutagePath asks for.
func (o *outage) serveOutage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST how long the demo app should be down, e.g. 60s", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64))
	if err != nil {
		http.Error(w, "read the outage's length: "+err.Error(), http.StatusBadRequest)
		return
	}
	if o.key != nil && !forwardsig.Verify(r.Header, o.key, body, time.Now(), 5*time.Minute) {
		http.Error(w, "the outage request is not signed with HOOKD_FORWARD_SECRET (hookd send-test-event -outage signs it)",
			http.StatusUnauthorized)
		return
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(body)))
	if err != nil || d <= 0 || d > MaxOutage {
		http.Error(w, fmt.Sprintf("the body must be how long to be down, between 1s and %s, e.g. 60s (got %q)", MaxOutage, body),
			http.StatusBadRequest)
		return
	}
	until := o.begin(d, "hookd send-test-event -outage")
	fmt.Fprintf(w, "demo app down for %s, until %s\n", d, until.Format(time.TimeOnly))
}
