package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue/queuetest"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRun_MigrateTwiceIsANoop(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"DATABASE_URL": unmigratedDatabaseURL(t)})

	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate"}, env, nil, &out, &out); err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	if !strings.Contains(out.String(), "applied 00001_webhook_queue.sql") {
		t.Fatalf("first migrate printed %q, want the migrations it applied", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"migrate"}, env, nil, &out, &out); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if strings.TrimSpace(out.String()) != "migrate: schema is up to date" {
		t.Fatalf("second migrate printed %q, want nothing applied", out.String())
	}
}

func TestRun_UnreachableDatabaseIsOneLine(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"DATABASE_URL": "postgres://nobody:x@127.0.0.1:1/none?connect_timeout=2"})
	err := run(context.Background(), []string{"migrate"}, env, nil, new(bytes.Buffer), new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "connect to database at 127.0.0.1:1/none as nobody") {
		t.Fatalf("err = %v, want a connection error naming the database", err)
	}
	if strings.Contains(err.Error(), "x@") {
		t.Fatalf("err = %v shows the password", err)
	}
}

const testSecret = "whsec_main_test"

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testBundle is a fresh, migrated database of the test's own for hookd to
// run on: its URL, hookd's DATABASE_URL, and a pool on it for the rows a test
// puts in place and the assertions it makes in SQL.
type testBundle struct {
	dbURL string
	// pool connects only when first used, so a test may change the
	// database's settings before it does.
	pool *pgxpool.Pool
}

// setup returns the bundle of a test on a fresh database. Every test of the
// package that needs a database starts with it.
func setup(t testing.TB) *testBundle {
	t.Helper()
	b := &testBundle{dbURL: queuetest.NewDatabaseURL(t)}
	var err error
	if b.pool, err = pgxpool.New(context.Background(), b.dbURL); err != nil {
		t.Fatal(err)
	}
	// Registered after the database's own cleanup, so it runs first.
	t.Cleanup(b.pool.Close)
	return b
}

// startServe runs `hookd serve` with env on its own port, and on its own
// database unless env names one,
// waits until /readyz answers 200, and returns the base URL and a stop
// function that cancels the context and returns run's error.
func startServe(t testing.TB, env map[string]string) (string, func() error, *e2etest.SyncBuffer) {
	t.Helper()
	if env["DATABASE_URL"] == "" {
		env["DATABASE_URL"] = setup(t).dbURL
	}
	if env["HOOKD_METRICS_ADDR"] == "" {
		// The default, 127.0.0.1:9090, is one port for every hookd of the
		// tests running at once.
		env["HOOKD_METRICS_ADDR"] = "127.0.0.1:0"
	}
	for attempt := 1; ; attempt++ {
		base, stop, stderr, err := tryServe(t, env)
		if err == nil {
			return base, stop, stderr
		}
		// freeAddr's port is free when it returns, but another process
		// (any outgoing connection takes an ephemeral port) may take it
		// before hookd binds it: a new port, then.
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("run returned early: %v\n%s", err, stderr)
		}
	}
}

// tryServe is one try of startServe on a port freeAddr picks: run's error
// when it returned before /readyz answered 200.
func tryServe(t testing.TB, env map[string]string) (string, func() error, *e2etest.SyncBuffer, error) {
	t.Helper()
	addr := freeAddr(t)
	env["HOOKD_ADDR"] = addr
	getenv := func(k string) string { return env[k] }

	ctx, cancel := context.WithCancel(t.Context())
	stderr := &e2etest.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, stderr) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			return fmt.Errorf("run did not return after cancel")
		}
	}
	base := "http://" + addr
	var early error
	queuetest.WaitFor(t, 10*time.Second, "/readyz to answer 200", func() bool {
		select {
		case err := <-done:
			early = err
			if early == nil {
				early = errors.New("run returned nil before /readyz answered")
			}
			return true
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if early != nil {
		cancel()
		return "", nil, stderr, early
	}
	return base, stop, stderr, nil
}

func TestRunServeStartsAndShutsDownCleanly(t *testing.T) {
	t.Parallel()
	metricsAddr := freeAddr(t)
	base, stop, stderr := startServe(t, map[string]string{
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_RETRY_INTERVAL":  "50ms",
		"HOOKD_PROCESSOR":       "discard",
		"HOOKD_METRICS_ADDR":    metricsAddr,
	})

	var out bytes.Buffer
	err := run(t.Context(), []string{"send-test-event", "-url", base + "/webhooks/stripe", "-type", "charge.refunded"},
		func(k string) string { return map[string]string{"STRIPE_WEBHOOK_SECRET": testSecret}[k] },
		strings.NewReader(""), &out, io.Discard)
	if err != nil || !strings.Contains(out.String(), "200 OK: processed") {
		t.Errorf("send-test-event: got %v, output %q; want 200 processed", err, out.String())
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`hookd_webhooks_received_total{outcome="processed"} 1`, "hookd_queue_events", "go_goroutines"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Without HOOKD_METRICS_PUBLIC, the address Stripe reaches has none.
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("main address /metrics: %d, want 404", resp.StatusCode)
	}

	if err := stop(); err != nil {
		t.Fatalf("run after cancel: got %v, want nil\n%s", err, stderr)
	}
	logs := stderr.String()
	for _, want := range []string{"HOOKD_PROCESSOR=discard: events are accepted and marked processed", "retry loop stopped", "stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, testSecret) {
		t.Errorf("log contains the signing secret:\n%s", logs)
	}
}

func TestRunServeWithoutSecretAnswers503AndSaysWhy(t *testing.T) {
	t.Parallel()
	base, stop, stderr := startServe(t, map[string]string{"HOOKD_PROCESSOR": "discard"})
	resp, err := http.Post(base+"/webhooks/stripe", "application/json", strings.NewReader(`{"id":"evt_1","type":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("got %d, want 503", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel: got %v, want nil", err)
	}
	if !strings.Contains(stderr.String(), "no STRIPE_WEBHOOK_SECRET configured") {
		t.Errorf("log does not say why:\n%s", stderr)
	}
}

func TestRunServeRefusesToForwardNowhere(t *testing.T) {
	t.Parallel()
	// Without a forward URL, forwarding (the default) would answer Stripe
	// 200 and drop every event. The refusal comes before the database is
	// touched, so this unreachable one is never dialled.
	for _, env := range []map[string]string{
		{"DATABASE_URL": "postgres://nobody:x@127.0.0.1:1/none?connect_timeout=2", "STRIPE_WEBHOOK_SECRET": testSecret},
		{"DATABASE_URL": "postgres://nobody:x@127.0.0.1:1/none?connect_timeout=2", "STRIPE_WEBHOOK_SECRET": testSecret,
			"HOOKD_PROCESSOR": "forward"},
	} {
		err := run(t.Context(), []string{"serve"}, envOf(env), strings.NewReader(""), io.Discard, io.Discard)
		if err == nil {
			t.Fatalf("HOOKD_PROCESSOR=%q without HOOKD_FORWARD_URL: serve returned nil, want a refusal", env["HOOKD_PROCESSOR"])
		}
		for _, want := range []string{"HOOKD_FORWARD_URL", "HOOKD_PROCESSOR=discard"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to name %s", err, want)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("err spans lines: %q", err)
		}
	}
}

// A client trickling a request body one byte a second is cut off well
// within a minute, so slow clients cannot pile up connections.
func TestRunServeCutsOffATrickledBody(t *testing.T) {
	t.Parallel()
	base, stop, _ := startServe(t, map[string]string{"STRIPE_WEBHOOK_SECRET": testSecret, "HOOKD_PROCESSOR": "discard"})
	t.Cleanup(func() { _ = stop() })
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST /webhooks/stripe HTTP/1.1\r\nHost: hookd\r\nContent-Type: application/json\r\n"+
		"Stripe-Signature: t=1,v1=00\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Whatever the server does, answer or close, ends the trickle.
	answered := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		answered <- string(b)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	sent := 0
	for sent < 60 {
		select {
		case answer := <-answered:
			t.Logf("cut off after %d bytes of body, one a second; answer: %q", sent, firstLine(answer))
			if strings.HasPrefix(answer, "HTTP/1.1 2") {
				t.Errorf("a trickled, truncated body was answered %q", firstLine(answer))
			}
			return
		case <-tick.C:
		}
		if _, err := conn.Write([]byte("{")); err != nil {
			t.Logf("cut off after %d bytes of body, one a second: %v", sent, err)
			return
		}
		sent++
	}
	t.Fatalf("still reading a body trickled one byte a second after %d bytes", sent)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

// The chart counts of the last deliveries are flushed when hookd stops, and
// the alerter, when configured, stops with it.
func TestRunServeFlushesActivityAtStop(t *testing.T) {
	t.Parallel()
	alerts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(alerts.Close)
	env := map[string]string{
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_PROCESSOR":       "discard",
		"HOOKD_ALERT_URL":       alerts.URL,
	}
	base, stop, stderr := startServe(t, env)
	for range 2 {
		err := run(t.Context(), []string{"send-test-event", "-url", base + "/webhooks/stripe"},
			func(k string) string { return map[string]string{"STRIPE_WEBHOOK_SECRET": testSecret}[k] },
			strings.NewReader(""), io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel: got %v, want nil\n%s", err, stderr)
	}
	pool, err := pgxpool.New(context.Background(), env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var received, processed int64
	if err := pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(received), 0), coalesce(sum(processed), 0) FROM activity_minutes`).Scan(&received, &processed); err != nil {
		t.Fatal(err)
	}
	if received != 2 || processed != 2 {
		t.Errorf("stored %d received, %d processed; want 2 and 2", received, processed)
	}
}

// HOOKD_ADMIN_EMAIL creates the account at the first start and leaves it
// alone at the next ones, saying so, so a password changed since stays.
func TestRunServeAdminBootstrapNeverOverwrites(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	env := func() map[string]string {
		return map[string]string{"DATABASE_URL": bundle.dbURL, "HOOKD_PROCESSOR": "discard",
			"HOOKD_ADMIN_EMAIL": "root@example.com", "HOOKD_ADMIN_PASSWORD": "bootstrap password"}
	}
	_, stop, stderr := startServe(t, env())
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "dashboard admin created") {
		t.Errorf("first start's log does not say the admin was created:\n%s", stderr)
	}

	accts := accounts.New(bundle.pool)
	if err := accts.SetPassword(t.Context(), "root@example.com", "changed on purpose"); err != nil {
		t.Fatal(err)
	}

	_, stop, stderr = startServe(t, env())
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "password and role are left as they are") {
		t.Errorf("second start's log does not say the account was left alone:\n%s", stderr)
	}
	if _, err := accts.Authenticate(t.Context(), "root@example.com", "changed on purpose"); err != nil {
		t.Errorf("the changed password no longer works after a restart: %v", err)
	}
}

// /metrics is served on HOOKD_METRICS_ADDR, alone, and not on the main
// address, which whoever reaches the receiver reaches too.
func TestRunServeMetricsOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	metricsAddr := freeAddr(t)
	base, stop, stderr := startServe(t, map[string]string{"HOOKD_PROCESSOR": "discard", "HOOKD_METRICS_ADDR": metricsAddr})
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := get("http://" + metricsAddr + "/metrics"); status != http.StatusOK || !strings.Contains(body, "hookd_queue_events") {
		t.Errorf("metrics listener /metrics: %d, want 200 with hookd_queue_events:\n%s", status, body)
	}
	if status, _ := get(base + "/metrics"); status != http.StatusNotFound {
		t.Errorf("main address /metrics: %d, want 404", status)
	}
	for _, path := range []string{"/", "/login", "/healthz"} {
		if status, _ := get("http://" + metricsAddr + path); status != http.StatusNotFound {
			t.Errorf("metrics listener %s: %d, want 404", path, status)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel: %v\n%s", err, stderr)
	}
}

// HOOKD_METRICS_PUBLIC=true serves /metrics on the main address too; with
// HOOKD_METRICS_ADDR off, there alone; with both off, nowhere.
func TestRunServeMetricsPublicOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name               string
		metricsAddr        string
		public, wantPublic bool
	}{
		{name: "PublicAndOwnListener", metricsAddr: freeAddr(t), public: true, wantPublic: true},
		{name: "PublicOnly", metricsAddr: "off", public: true, wantPublic: true},
		{name: "Nowhere", metricsAddr: "off", public: false, wantPublic: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"HOOKD_PROCESSOR": "discard", "HOOKD_METRICS_ADDR": tc.metricsAddr}
			if tc.public {
				env["HOOKD_METRICS_PUBLIC"] = "true"
			}
			base, stop, stderr := startServe(t, env)
			status, body := get(base + "/metrics")
			switch {
			case tc.wantPublic && (status != http.StatusOK || !strings.Contains(body, "hookd_queue_events")):
				t.Errorf("main address /metrics: %d, want 200 with hookd_queue_events:\n%s", status, body)
			case !tc.wantPublic && status != http.StatusNotFound:
				t.Errorf("main address /metrics: %d, want 404", status)
			}
			if tc.metricsAddr != "off" {
				if status, body := get("http://" + tc.metricsAddr + "/metrics"); status != http.StatusOK || !strings.Contains(body, "hookd_queue_events") {
					t.Errorf("metrics listener /metrics: %d, want 200 with hookd_queue_events:\n%s", status, body)
				}
			}
			if err := stop(); err != nil {
				t.Fatalf("run after cancel: %v\n%s", err, stderr)
			}
		})
	}
}
