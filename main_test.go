package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
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

func TestParseConfig_Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("serve", nil, envOf(nil), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":8080" || cfg.ForwardTimeout != 10*time.Second || cfg.RetryInterval != 5*time.Second ||
		cfg.MarkerRetention != 720*time.Hour || cfg.MaxBody != 1<<20 || cfg.MaxBodyMemory != 32<<20 || len(cfg.StripeSecrets) != 0 ||
		cfg.Processor != "forward" ||
		cfg.AlertURL != "" || cfg.AlertPendingAge != time.Hour || cfg.PublicURL != "" ||
		cfg.MetricsAddr != "127.0.0.1:9090" || cfg.MetricsPublic ||
		cfg.DashboardConns != 4 || cfg.DashboardTimeout != 5*time.Second {
		t.Fatalf("defaults = %+v, want SPEC.md's", cfg)
	}
}

func TestParseConfig_FlagOverridesEnvironment(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{
		"HOOKD_RETRY_INTERVAL":  "2s",
		"HOOKD_ADDR":            ":9000",
		"STRIPE_WEBHOOK_SECRET": "whsec_old, whsec_new",
	})
	cfg, err := parseConfig("serve", []string{"-retry-interval", "750ms"}, env, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RetryInterval != 750*time.Millisecond {
		t.Errorf("retry interval = %v, want the flag's 750ms", cfg.RetryInterval)
	}
	if cfg.Addr != ":9000" {
		t.Errorf("addr = %q, want the environment's :9000", cfg.Addr)
	}
	if len(cfg.StripeSecrets) != 2 || cfg.StripeSecrets[1].Reveal() != "whsec_new" {
		t.Errorf("secrets = %d, want both rolled secrets", len(cfg.StripeSecrets))
	}
}

func TestParseConfig_BooleanFlagNeedsNoValue(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"HOOKD_SECURE_COOKIES": "false"})
	cfg, err := parseConfig("serve", []string{"-secure-cookies", "-addr", ":9001"}, env, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.SecureCookies || cfg.Addr != ":9001" {
		t.Fatalf("secure cookies %v, addr %q; want the bare flag to mean true and the next flag kept", cfg.SecureCookies, cfg.Addr)
	}
	cfg, err = parseConfig("serve", nil, envOf(map[string]string{"HOOKD_SECURE_COOKIES": "true"}), new(bytes.Buffer))
	if err != nil || !cfg.SecureCookies {
		t.Fatalf("HOOKD_SECURE_COOKIES=true gave %v, %v", cfg.SecureCookies, err)
	}
}

// Behind an https public URL the session cookie is Secure by default; an
// explicit HOOKD_SECURE_COOKIES wins either way.
func TestParseConfig_SecureCookiesFollowAnHTTPSPublicURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want bool
	}{
		{map[string]string{"HOOKD_PUBLIC_URL": "https://hookd.example.com"}, nil, true},
		{map[string]string{"HOOKD_PUBLIC_URL": "HTTPS://hookd.example.com"}, nil, true},
		{map[string]string{"HOOKD_PUBLIC_URL": "http://localhost:8080"}, nil, false},
		{map[string]string{}, nil, false},
		{map[string]string{"HOOKD_PUBLIC_URL": "https://hookd.example.com", "HOOKD_SECURE_COOKIES": "false"}, nil, false},
		{map[string]string{"HOOKD_PUBLIC_URL": "https://hookd.example.com"}, []string{"-secure-cookies=false"}, false},
		{map[string]string{"HOOKD_PUBLIC_URL": "http://localhost:8080", "HOOKD_SECURE_COOKIES": "true"}, nil, true},
	} {
		cfg, err := parseConfig("serve", tc.args, envOf(tc.env), new(bytes.Buffer))
		if err != nil || cfg.SecureCookies != tc.want {
			t.Errorf("%v %v: secure cookies %v, %v; want %v", tc.env, tc.args, cfg.SecureCookies, err, tc.want)
		}
	}
}

func TestParseConfig_TrustedProxies(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("serve", nil, envOf(map[string]string{"HOOKD_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8,::1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range cfg.TrustedProxies {
		got = append(got, n.String())
	}
	if want := "127.0.0.1/32 10.0.0.0/8 ::1/128"; strings.Join(got, " ") != want {
		t.Errorf("trusted proxies %v, want %s", got, want)
	}
}

func TestParseConfig_BadValueNamesTheVariable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"UnparseableDuration", map[string]string{"HOOKD_RETRY_INTERVAL": "5"}, nil, `HOOKD_RETRY_INTERVAL: not a duration like 10s, 5m or 720h (got "5")`},
		{"NegativeDuration", map[string]string{"HOOKD_FORWARD_TIMEOUT": "-1s"}, nil, "HOOKD_FORWARD_TIMEOUT: must be greater than zero"},
		{"BadURL", map[string]string{"HOOKD_FORWARD_URL": "localhost:3000/hooks"}, nil, "HOOKD_FORWARD_URL: not an absolute http(s) URL"},
		{"BadBodyLimit", map[string]string{"HOOKD_MAX_BODY": "1MB"}, nil, "HOOKD_MAX_BODY: not a whole number"},
		{"BodyMemoryBelowDefaultBodyLimit", map[string]string{"HOOKD_MAX_BODY_MEMORY": "1048575"}, nil,
			"HOOKD_MAX_BODY_MEMORY: must be at least HOOKD_MAX_BODY (1048576), or a body of that size could never be read (got 1048575)"},
		{"BodyMemoryBelowBodyLimit", map[string]string{"HOOKD_MAX_BODY": "4194304"}, []string{"-max-body-memory", "2097152"},
			"HOOKD_MAX_BODY_MEMORY: must be at least HOOKD_MAX_BODY (4194304)"},
		{"BadFlag", nil, []string{"-marker-retention", "30d"}, "-marker-retention: not a duration"},
		{"BadStripeSecret", map[string]string{"STRIPE_WEBHOOK_SECRET": "sk_live_oops"}, nil, "STRIPE_WEBHOOK_SECRET: each secret must start with whsec_"},
		{"ForwardTimeoutBeyondItsLimit", map[string]string{"HOOKD_FORWARD_TIMEOUT": "5m"}, nil, "HOOKD_FORWARD_TIMEOUT: must be shorter than 2m0s, or a replica that dies mid-retry keeps its events waiting"},
		{"RetentionBelowStripesRedeliveryWindow", map[string]string{"HOOKD_MARKER_RETENTION": "71h"}, nil,
			`HOOKD_MARKER_RETENTION: must be at least 72h: Stripe redelivers an event for up to 3 days`},
		{"RetentionFlagBelowStripesRedeliveryWindow", nil, []string{"-marker-retention", "24h"}, "-marker-retention: must be at least 72h"},
		{"ZeroInlineConcurrency", map[string]string{"HOOKD_INLINE_CONCURRENCY": "0"}, nil, "HOOKD_INLINE_CONCURRENCY: must be greater than zero"},
		{"UnknownProcessor", map[string]string{"HOOKD_PROCESSOR": "drop"}, nil, `HOOKD_PROCESSOR: must be forward or discard (got "drop")`},
		{"BadForwardSecret", map[string]string{"HOOKD_FORWARD_SECRET": "whsec_!!!"}, nil, "HOOKD_FORWARD_SECRET: the part after whsec_ is not valid base64"},
		{"BadTrustedProxy", map[string]string{"HOOKD_TRUSTED_PROXIES": "10.0.0.0/8, nginx"}, nil, `HOOKD_TRUSTED_PROXIES: "nginx" is not a CIDR`},
		{"BadAlertURL", map[string]string{"HOOKD_ALERT_URL": "hooks.slack.com/services/T0/B0/x"}, nil, "HOOKD_ALERT_URL: not an absolute http(s) URL"},
		{"ZeroPendingAge", map[string]string{"HOOKD_ALERT_PENDING_AGE": "0s"}, nil, "HOOKD_ALERT_PENDING_AGE: must be greater than zero"},
		{"BadPublicURL", map[string]string{"HOOKD_PUBLIC_URL": "/hookd"}, nil, "HOOKD_PUBLIC_URL: not an absolute http(s) URL"},
		{"ZeroDashboardConns", map[string]string{"HOOKD_DASHBOARD_CONNS": "0"}, nil, "HOOKD_DASHBOARD_CONNS: must be greater than zero"},
		{"TooManyDashboardConns", map[string]string{"HOOKD_DASHBOARD_CONNS": "101"}, nil, "HOOKD_DASHBOARD_CONNS: at most 100"},
		{"NoDashboardTimeout", map[string]string{"HOOKD_DASHBOARD_TIMEOUT": "0s"}, nil, "HOOKD_DASHBOARD_TIMEOUT: must be greater than zero"},
		{"SubMillisecondDashboardTimeout", map[string]string{"HOOKD_DASHBOARD_TIMEOUT": "500us"}, nil, "HOOKD_DASHBOARD_TIMEOUT: at least 1ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig("serve", tc.args, envOf(tc.env), new(bytes.Buffer))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("err spans lines: %q", err)
			}
		})
	}
}

func TestParseConfig_RetentionOfStripesWindowIsAccepted(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("serve", nil, envOf(map[string]string{"HOOKD_MARKER_RETENTION": "72h"}), new(bytes.Buffer))
	if err != nil || cfg.MarkerRetention != 72*time.Hour {
		t.Fatalf("72h: got %v, %v; want it accepted", cfg.MarkerRetention, err)
	}
}

func TestParseConfig_SecretsStayOutOfErrorsAndHelp(t *testing.T) {
	t.Parallel()
	_, err := parseConfig("serve", nil, envOf(map[string]string{"STRIPE_WEBHOOK_SECRET": "topsecret"}), new(bytes.Buffer))
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("err = %v: want an error that does not repeat the secret", err)
	}
	// An incoming webhook's URL carries its token.
	_, err = parseConfig("serve", nil, envOf(map[string]string{"HOOKD_ALERT_URL": "hooks.example/T0/topsecret"}), new(bytes.Buffer))
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("err = %v: want an error that does not repeat the alert URL", err)
	}
	var help bytes.Buffer
	_, err = parseConfig("serve", []string{"-h"}, envOf(map[string]string{"HOOKD_ADMIN_PASSWORD": "hunter2"}), &help)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp", err)
	}
	if strings.Contains(help.String(), "hunter2") {
		t.Fatal("-h output shows a secret from the environment")
	}
	for _, s := range settings {
		if !strings.Contains(help.String(), "$"+s.env) {
			t.Errorf("-h does not list %s", s.env)
		}
	}
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

func TestParseConfigRetrySettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HOOKD_RETRY_BATCH": "250"}
	cfg, err := parseConfig("serve", []string{"-retry-concurrency", "8"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || cfg.RetryBatch != 250 || cfg.RetryConcurrency != 8 {
		t.Errorf("got batch %d, concurrency %d, %v; want 250, 8", cfg.RetryBatch, cfg.RetryConcurrency, err)
	}
	for _, bad := range []string{"0", "1001"} {
		env["HOOKD_RETRY_BATCH"] = bad
		if _, err := parseConfig("serve", nil, func(k string) string { return env[k] }, io.Discard); err == nil ||
			!strings.Contains(err.Error(), "HOOKD_RETRY_BATCH") {
			t.Errorf("batch %s: got %v, want an error naming HOOKD_RETRY_BATCH", bad, err)
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

func TestParseConfig_MetricsAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, want string }{
		{"", "127.0.0.1:9090"}, {"off", ""}, {":9100", ":9100"}, {"10.0.0.5:9090", "10.0.0.5:9090"},
	} {
		cfg, err := parseConfig("serve", nil, envOf(map[string]string{"HOOKD_METRICS_ADDR": tc.value}), io.Discard)
		if err != nil || cfg.MetricsAddr != tc.want {
			t.Errorf("HOOKD_METRICS_ADDR=%q: %q, %v; want %q", tc.value, cfg.MetricsAddr, err, tc.want)
		}
	}
	_, err := parseConfig("serve", nil, envOf(map[string]string{"HOOKD_METRICS_ADDR": "9090"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "HOOKD_METRICS_ADDR") || !strings.Contains(err.Error(), "or off") {
		t.Errorf("HOOKD_METRICS_ADDR=9090: %v, want an error naming the variable and off", err)
	}
}
