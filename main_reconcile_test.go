package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
)

// reconcileEnv is a database, a fake Stripe API with one endpoint, and an
// app counting what hookd forwards to it.
type reconcileEnv struct {
	env  map[string]string
	api  *stripetest.Server
	pool *pgxpool.Pool

	mu  sync.Mutex
	got map[string]int
}

func newReconcileEnv(t *testing.T) *reconcileEnv {
	t.Helper()
	e := &reconcileEnv{api: stripetest.NewServer(t), got: map[string]int{}}
	bundle := setup(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.got[r.Header.Get("Hookd-Event-Id")]++
		e.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(app.Close)
	e.pool = bundle.pool
	ep := e.api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid", "invoice.payment_failed"}})
	e.env = map[string]string{
		"DATABASE_URL":               bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET":      "whsec_reconcile_command",
		"HOOKD_FORWARD_URL":          app.URL,
		"STRIPE_API_KEY":             e.api.Key(),
		"STRIPE_WEBHOOK_ENDPOINT_ID": ep.ID,
		"HOOKD_STRIPE_API_URL":       e.api.URL,
		"HOOKD_LOG_LEVEL":            "warn",
	}
	return e
}

func (e *reconcileEnv) forwarded() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.got {
		n += c
	}
	return n
}

func (e *reconcileEnv) reconcile(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), append([]string{"reconcile"}, args...), envOf(e.env), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

func (e *reconcileEnv) tableCounts(t *testing.T) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	for _, table := range []string{"processed_webhook_events", "webhook_events", "webhook_attempts", "reconcile_runs", "audit_log"} {
		var n int64
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		counts[table] = n
	}
	return counts
}

func TestReconcileCommand_RecoversOnceAndPrintsOneLine(t *testing.T) {
	t.Parallel()
	e := newReconcileEnv(t)
	for i := range 5 {
		e.api.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Duration(i+1) * time.Hour)})
	}
	e.api.AddEvent(stripetest.Event{Type: "customer.created", Created: time.Now().Add(-time.Hour)})

	out, _, err := e.reconcile(t, "-dry-run", "-since", "24h")
	if err != nil {
		t.Fatal(err)
	}
	if want := "dry run over 24h: examined 6, already processed 0, already queued 0, would recover 5, " +
		"skipped by type 1, skipped as too young 0\n"; out != want {
		t.Errorf("dry run printed %q, want %q", out, want)
	}
	if e.forwarded() != 0 {
		t.Errorf("a dry run forwarded %d events", e.forwarded())
	}

	out, _, err = e.reconcile(t, "-since", "24h")
	if err != nil {
		t.Fatal(err)
	}
	if want := "reconciled 24h: examined 6, already processed 0, already queued 0, recovered 5, queued 0, " +
		"in flight 0, skipped by type 1, skipped as too young 0\n"; out != want {
		t.Errorf("run printed %q, want %q", out, want)
	}
	out, _, err = e.reconcile(t)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "already processed 5, already queued 0, recovered 0,") {
		t.Errorf("second run printed %q, want 5 already processed and 0 recovered", out)
	}
	if e.forwarded() != 5 {
		t.Errorf("forwarded: got %d, want 5", e.forwarded())
	}
}

func TestReconcileCommand_PullsOneEvent(t *testing.T) {
	t.Parallel()
	e := newReconcileEnv(t)
	id, _ := e.api.AddEvent(stripetest.Event{Type: "invoice.payment_failed"})
	out, _, err := e.reconcile(t, "-event", id)
	if err != nil {
		t.Fatal(err)
	}
	if want := id + " (invoice.payment_failed): recovered: processed now\n"; out != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	if out, _, _ = e.reconcile(t, "-event", id); !strings.Contains(out, "already processed") {
		t.Errorf("second pull printed %q", out)
	}
	if _, _, err := e.reconcile(t, "-event", "evt_unknown"); err == nil || !strings.Contains(err.Error(), "30 days") {
		t.Errorf("unknown event: got %v, want Stripe's 404 and the 30 days", err)
	}
	if e.forwarded() != 1 {
		t.Errorf("forwarded: got %d, want 1", e.forwarded())
	}
}

// -account pulls an event of a connected account through the Connect
// endpoint; it needs -event and an acct_ id.
func TestReconcileCommand_PullsAConnectedAccountsEvent(t *testing.T) {
	t.Parallel()
	e := newReconcileEnv(t)
	connect := e.api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
	delete(e.env, "STRIPE_WEBHOOK_SECRET")
	e.env["STRIPE_WEBHOOK_SECRETS"] = "default=whsec_reconcile_command;connect=whsec_reconcile_connect"
	e.env["HOOKD_ENDPOINTS"] = "default:stripe_id=" + e.env["STRIPE_WEBHOOK_ENDPOINT_ID"] + ";connect:connect=true,stripe_id=" + connect.ID
	delete(e.env, "STRIPE_WEBHOOK_ENDPOINT_ID")
	id, _ := e.api.AddEvent(stripetest.Event{Type: "invoice.paid", Account: "acct_1Cli"})

	if _, _, err := e.reconcile(t, "-event", id); err == nil || !strings.Contains(err.Error(), "30 days") {
		t.Errorf("pulled as the platform's own: got %v, want Stripe's 404", err)
	}
	out, _, err := e.reconcile(t, "-event", id, "-account", "acct_1Cli")
	if want := id + " (invoice.paid): recovered: processed now\n"; err != nil || out != want {
		t.Errorf("pulled under its account: printed %q, %v; want %q", out, err, want)
	}
	if e.forwarded() != 1 {
		t.Errorf("forwarded: got %d, want 1", e.forwarded())
	}
	for args, want := range map[[2]string]string{
		{"-account", "acct_1Cli"}: "it needs -event",
		{"-account", "cus_1"}:     "not a Stripe account id",
	} {
		argv := []string{args[0], args[1]}
		if want != "it needs -event" {
			argv = append(argv, "-event", id)
		}
		if _, _, err := e.reconcile(t, argv...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want an error saying %q", argv, err, want)
		}
	}
}

func TestReconcileCommand_APIErrorIsOneLineAndChangesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		break_     func(e *reconcileEnv)
	}{
		{"BadKey", "Stripe rejected STRIPE_API_KEY (401", func(e *reconcileEnv) { e.env["STRIPE_API_KEY"] = "rk_test_not_the_right_one" }},
		{"WrongEndpoint", "check STRIPE_WEBHOOK_ENDPOINT_ID", func(e *reconcileEnv) { e.env["STRIPE_WEBHOOK_ENDPOINT_ID"] = "we_gone" }},
		{"NoPermission", "Read access to Webhook Endpoints", func(e *reconcileEnv) { e.api.Deny("/v1/webhook_endpoints") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newReconcileEnv(t)
			e.api.AddEvent(stripetest.Event{Type: "invoice.paid"})
			tc.break_(e)
			before := e.tableCounts(t)
			out, _, err := e.reconcile(t)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), e.env["STRIPE_API_KEY"]) {
				t.Errorf("the error shows the key: %v", err)
			}
			if out != "" {
				t.Errorf("printed %q, want nothing on stdout", out)
			}
			if after := e.tableCounts(t); !maps.Equal(before, after) {
				t.Errorf("table counts changed: before %v, after %v", before, after)
			}
			if e.forwarded() != 0 {
				t.Errorf("forwarded %d events", e.forwarded())
			}
		})
	}
}

func TestParseConfig_Reconcile(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("serve", nil, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReconcileInterval != time.Hour || cfg.ReconcileWindow != 72*time.Hour || cfg.StripeAPIURL != "https://api.stripe.com" {
		t.Errorf("defaults: interval %s, window %s, url %s; want 1h, 72h and Stripe's API", cfg.ReconcileInterval,
			cfg.ReconcileWindow, cfg.StripeAPIURL)
	}
	ok := map[string]string{"STRIPE_API_KEY": "rk_live_abcdef123456", "STRIPE_WEBHOOK_ENDPOINT_ID": "we_123", "HOOKD_RECONCILE_INTERVAL": "0"}
	if cfg, err = config.Parse("serve", nil, envOf(ok), io.Discard); err != nil || cfg.ReconcileInterval != 0 {
		t.Errorf("interval 0: %v, %s; want accepted as off", err, cfg.ReconcileInterval)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STRIPE_API_KEY": "rk_live_abcdef123456"}, "STRIPE_WEBHOOK_ENDPOINT_ID: required"},
		{map[string]string{"STRIPE_WEBHOOK_ENDPOINT_ID": "we_123"}, "STRIPE_API_KEY: required"},
		{map[string]string{"STRIPE_API_KEY": "pk_live_publishable99"}, "STRIPE_API_KEY: must be a restricted key"},
		{map[string]string{"STRIPE_WEBHOOK_ENDPOINT_ID": "evt_123"}, "STRIPE_WEBHOOK_ENDPOINT_ID: must be a webhook endpoint id"},
		{map[string]string{"HOOKD_RECONCILE_WINDOW": "721h"}, "HOOKD_RECONCILE_WINDOW: at most 720h"},
		{map[string]string{"HOOKD_RECONCILE_WINDOW": "100h", "HOOKD_MARKER_RETENTION": "96h"}, "HOOKD_RECONCILE_WINDOW: at most HOOKD_MARKER_RETENTION"},
		{map[string]string{"HOOKD_RECONCILE_INTERVAL": "-1m"}, "HOOKD_RECONCILE_INTERVAL: must not be negative"},
		{map[string]string{"HOOKD_STRIPE_API_URL": "api.stripe.com"}, "HOOKD_STRIPE_API_URL: not an absolute"},
	} {
		_, err := config.Parse("serve", nil, envOf(tc.env), io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "publishable99") {
			t.Errorf("the error shows the key: %v", err)
		}
	}
}

// TestReconcileCommand_TenThousandEvents measures a run over 10,000 missing
// events on 100 pages, through the command as an operator runs it (with its
// 100 ms pause between pages), then the same window again, when every event
// is processed. It is a measurement, so it runs only when asked:
//
//	HOOKD_MEASURE_RECONCILE=1 go test -run TenThousand -v .
func TestReconcileCommand_TenThousandEvents(t *testing.T) {
	if os.Getenv("HOOKD_MEASURE_RECONCILE") == "" {
		t.Skip("a measurement: set HOOKD_MEASURE_RECONCILE=1 to run it")
	}
	e := newReconcileEnv(t)
	for i := range 10_000 {
		e.api.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Hour - time.Duration(i)*time.Second)})
	}
	start := time.Now()
	out, _, err := e.reconcile(t, "-since", "72h")
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s(wall time %s, %d list requests)", out, took.Round(time.Millisecond), e.api.Requests("/v1/events"))
	if e.forwarded() != 10_000 {
		t.Errorf("forwarded %d, want 10000", e.forwarded())
	}

	// The routine case: the same window again, every event processed.
	start = time.Now()
	out, _, err = e.reconcile(t, "-since", "72h")
	took = time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s(wall time %s, second run)", out, took.Round(time.Millisecond))
	if e.forwarded() != 10_000 {
		t.Errorf("forwarded %d after the second run, want still 10000", e.forwarded())
	}
}

func TestParseConfig_StripeAPIRateAndReconcileAccounts(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("serve", nil, envOf(nil), io.Discard)
	if err != nil || cfg.StripeAPIRate != 20 || cfg.ReconcileAccounts != nil {
		t.Fatalf("defaults: rate %v, accounts %v, %v; want 20 and none", cfg.StripeAPIRate, cfg.ReconcileAccounts, err)
	}
	cfg, err = config.Parse("serve", nil, envOf(map[string]string{
		"HOOKD_STRIPE_API_RATE": "0.5", "HOOKD_RECONCILE_ACCOUNTS": "acct_1A, acct_1B,"}), io.Discard)
	if err != nil || cfg.StripeAPIRate != 0.5 || strings.Join(cfg.ReconcileAccounts, ",") != "acct_1A,acct_1B" {
		t.Errorf("got rate %v, accounts %v, %v", cfg.StripeAPIRate, cfg.ReconcileAccounts, err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HOOKD_STRIPE_API_RATE": "0"}, "HOOKD_STRIPE_API_RATE: not a number of reads per second greater than zero"},
		{map[string]string{"HOOKD_STRIPE_API_RATE": "fast"}, "HOOKD_STRIPE_API_RATE: not a number"},
		{map[string]string{"HOOKD_STRIPE_API_RATE": "500"}, "HOOKD_STRIPE_API_RATE: at most 100"},
		{map[string]string{"HOOKD_RECONCILE_ACCOUNTS": "acct_1A,cus_1B"}, `HOOKD_RECONCILE_ACCOUNTS: "cus_1B" is not a connected account id (acct_`},
	} {
		_, err := config.Parse("serve", nil, envOf(tc.env), io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.env, err, tc.want)
		}
	}
}

// A dry run changes nothing, its database's schema included: on a database
// that migrations have not reached, it says to run hookd migrate and
// applies none.
func TestReconcileCommand_DryRunMigratesNothing(t *testing.T) {
	t.Parallel()
	e := newReconcileEnv(t)
	e.env["DATABASE_URL"] = unmigratedDatabaseURL(t)
	_, _, err := e.reconcile(t, "-dry-run", "-since", "24h")
	if err == nil || !strings.Contains(err.Error(), "run hookd migrate first") {
		t.Fatalf("dry run on an unmigrated database: err = %v, want one saying to run hookd migrate", err)
	}
	if tables := countIn(t, e.env["DATABASE_URL"], `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`); tables != 0 {
		t.Errorf("the dry run left %d tables in the database, want none", tables)
	}
}
