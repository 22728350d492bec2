package doctor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/doctor"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// testBundle is a fresh, migrated database of the test's own for the
// checks to read: its URL, as the checks take it, and a pool on it for the
// changes a test makes first.
type testBundle struct {
	url  string
	pool *pgxpool.Pool
}

// setup returns the bundle of a test on a fresh database. Every test of the
// package that needs a database starts with it.
func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{url: queuetest.NewDatabaseURL(t)}
	var err error
	if b.pool, err = pgxpool.New(context.Background(), b.url); err != nil {
		t.Fatal(err)
	}
	// Registered after the database's own cleanup, so it runs first.
	t.Cleanup(b.pool.Close)
	return b
}

// expect fails t unless r has the status and its detail holds every want.
func expect(t *testing.T, r doctor.Result, status doctor.Status, want ...string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: %s %q, want %s", r.Check, r.Status, r.Detail, status)
		return
	}
	for _, w := range want {
		if !strings.Contains(r.Detail, w) {
			t.Errorf("%s: %q lacks %q", r.Check, r.Detail, w)
		}
	}
}

func TestDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t.Run("ok", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Database(ctx, setup(t).url), doctor.OK, "schema up to date")
	})
	// A database changed with SQL the way each state arises.
	changed := func(t *testing.T, sql string) string {
		b := setup(t)
		if _, err := b.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
		return b.url
	}
	t.Run("warn pending", func(t *testing.T) {
		t.Parallel()
		u := changed(t, `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`)
		expect(t, doctor.Database(ctx, u), doctor.Warn, "1 migrations pending", "hookd migrate")
	})
	t.Run("warn never migrated", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Database(ctx, changed(t, `DROP TABLE goose_db_version`)), doctor.Warn, "not migrated yet")
	})
	t.Run("warn newer schema", func(t *testing.T) {
		t.Parallel()
		u := changed(t, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`)
		expect(t, doctor.Database(ctx, u), doctor.Warn, "versions [99999]", "a newer hookd")
	})
	t.Run("fail unreachable", func(t *testing.T) {
		t.Parallel()
		// Nothing listens on port 1.
		expect(t, doctor.Database(ctx, "postgres://hookd@127.0.0.1:1/hookd?connect_timeout=5"), doctor.Fail,
			"cannot connect to 127.0.0.1:1/hookd as hookd", "check DATABASE_URL")
	})
	t.Run("fail unparsable", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Database(ctx, "postgres://%zz"), doctor.Fail, "DATABASE_URL does not parse")
	})
}

func TestSessionTimeouts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// withSettings is a fresh database with ALTER statements run on it
	// before anyone connects, so every session starts with them; %s is the
	// database's name.
	withSettings := func(t *testing.T, alters ...string) string {
		b := setup(t)
		name := pgx.Identifier{b.pool.Config().ConnConfig.Database}.Sanitize()
		for _, a := range alters {
			if _, err := b.pool.Exec(ctx, fmt.Sprintf(a, name)); err != nil {
				t.Fatal(err)
			}
		}
		return b.url
	}

	t.Run("ok off", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.SessionTimeouts(ctx, withSettings(t)), doctor.OK,
			"statement_timeout off, idle_in_transaction_session_timeout off", "they need 30s")
	})
	t.Run("ok long enough", func(t *testing.T) {
		t.Parallel()
		u := withSettings(t, `ALTER DATABASE %s SET statement_timeout = '30s'`,
			`ALTER DATABASE %s SET idle_in_transaction_session_timeout = '1min'`)
		expect(t, doctor.SessionTimeouts(ctx, u), doctor.OK, "statement_timeout 30s, idle_in_transaction_session_timeout 1min")
	})
	t.Run("warn statement timeout", func(t *testing.T) {
		t.Parallel()
		u := withSettings(t, `ALTER DATABASE %s SET statement_timeout = '1s'`)
		expect(t, doctor.SessionTimeouts(ctx, u), doctor.Warn,
			"statement_timeout 1s (set with ALTER DATABASE), shorter than the 30s", "idle_in_transaction_session_timeout off",
			`ALTER ROLE "postgres" IN DATABASE "hookd_test_`, `SET statement_timeout = '30s'`)
	})
	t.Run("warn idle in transaction timeout", func(t *testing.T) {
		t.Parallel()
		u := withSettings(t, `ALTER DATABASE %s SET statement_timeout = '2min'`,
			`ALTER ROLE CURRENT_USER IN DATABASE %s SET idle_in_transaction_session_timeout = '500ms'`)
		r := doctor.SessionTimeouts(ctx, u)
		expect(t, r, doctor.Warn, "statement_timeout 2min",
			"idle_in_transaction_session_timeout 500ms (set with ALTER ROLE ... IN DATABASE), shorter than the 5s",
			"SET idle_in_transaction_session_timeout = '5s'")
		if strings.Contains(r.Detail, "SET statement_timeout") {
			t.Errorf("%q suggests changing statement_timeout, which is long enough", r.Detail)
		}
	})
	t.Run("warn both", func(t *testing.T) {
		t.Parallel()
		u := withSettings(t, `ALTER DATABASE %s SET statement_timeout = '10s'`,
			`ALTER DATABASE %s SET idle_in_transaction_session_timeout = '1s'`)
		expect(t, doctor.SessionTimeouts(ctx, u), doctor.Warn, "statement_timeout 10s", "idle_in_transaction_session_timeout 1s",
			"SET statement_timeout = '30s'", "SET idle_in_transaction_session_timeout = '5s'")
	})
	t.Run("warn through PgBouncer", func(t *testing.T) {
		t.Parallel()
		// What hookd's sessions get behind the pooler: the server
		// connections PgBouncer opens for hookd's role and database.
		u := queuetest.PgBouncerURL(t, withSettings(t, `ALTER DATABASE %s SET statement_timeout = '1s'`))
		expect(t, doctor.SessionTimeouts(ctx, u), doctor.Warn, "statement_timeout 1s", "idle_in_transaction_session_timeout off")
	})
	t.Run("skip unreachable", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.SessionTimeouts(ctx, "postgres://hookd@127.0.0.1:1/hookd?connect_timeout=5"), doctor.Skip, "does not answer")
	})
}

func TestSigningSecret(t *testing.T) {
	t.Parallel()
	dashboard := "whsec_" + strings.Repeat("aB3", 10) + "xy"
	cli := "whsec_" + strings.Repeat("0f", 32)
	expect(t, doctor.SigningSecret([]string{dashboard}), doctor.OK, "shaped like Stripe's")
	expect(t, doctor.SigningSecret([]string{cli, dashboard}), doctor.OK, "2 secrets", "remove the old one")
	expect(t, doctor.SigningSecret([]string{dashboard, "whsec_abc"}), doctor.Warn, "secret 2 of 2", "copy it again")
	expect(t, doctor.SigningSecret([]string{`whsec_` + strings.Repeat("a", 32) + `"`}), doctor.Warn, "not shaped like Stripe's")
	expect(t, doctor.SigningSecret(nil), doctor.Fail, "answers 503", "STRIPE_WEBHOOK_SECRET")
}

// fakeApp is the user's app: it answers what the test tells it, and keeps
// the last request it got.
type fakeApp struct {
	srv  *httptest.Server
	last atomic.Pointer[http.Request]
	body atomic.Pointer[[]byte]
}

func newFakeApp(t *testing.T, answer http.HandlerFunc) *fakeApp {
	a := &fakeApp{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.last.Store(r)
		a.body.Store(&b)
		answer(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

const forwardSecret = "whsec_ZG9jdG9yLXRlc3Qta2V5"

func TestForward(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := func(url string) doctor.Config {
		return doctor.Config{ForwardURL: url, ForwardSecret: forwardSecret, ForwardTimeout: 2 * time.Second}
	}

	t.Run("ok", func(t *testing.T) {
		t.Parallel()
		app := newFakeApp(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
		expect(t, doctor.Forward(ctx, cfg(app.srv.URL+"/stripe")), doctor.OK, "answered a signed hookd.ping with 204")
		r := app.last.Load()
		if r.Header.Get("Hookd-Event-Type") != doctor.PingType || !strings.HasPrefix(r.Header.Get("webhook-signature"), "v1,") {
			t.Errorf("the app got type %q, signature %q; want a signed %s", r.Header.Get("Hookd-Event-Type"),
				r.Header.Get("webhook-signature"), doctor.PingType)
		}
		var event struct{ ID, Type string }
		if err := json.Unmarshal(*app.body.Load(), &event); err != nil || event.Type != doctor.PingType ||
			event.ID != r.Header.Get("Hookd-Event-Id") {
			t.Errorf("the ping's body is %s (%v); want an event of type %s with the header's id", *app.body.Load(), err, doctor.PingType)
		}
	})
	t.Run("secrets in the URL are not shown", func(t *testing.T) {
		t.Parallel()
		app := newFakeApp(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
		secretURL := strings.Replace(app.srv.URL, "http://", "http://hookd:s3cr3t-pass@", 1) + "/stripe?token=s3cr3t-token#frag"
		r := doctor.Forward(ctx, cfg(secretURL))
		expect(t, r, doctor.OK, app.srv.URL+"/stripe answered")
		for _, secret := range []string{"s3cr3t", "hookd:", "token", "frag"} {
			if strings.Contains(r.Detail, secret) {
				t.Errorf("doctor shows %q: %s", secret, r.Detail)
			}
		}
	})
	t.Run("warn slow", func(t *testing.T) {
		t.Parallel()
		// Slower than half the timeout, by design of this app.
		app := newFakeApp(t, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(1200 * time.Millisecond)
		})
		expect(t, doctor.Forward(ctx, cfg(app.srv.URL)), doctor.Warn, "answered 200, but took", "answer first")
	})
	t.Run("warn discard", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Forward(ctx, doctor.Config{Discard: true}), doctor.Warn, "HOOKD_PROCESSOR=discard")
	})
	t.Run("fail error answer", func(t *testing.T) {
		t.Parallel()
		app := newFakeApp(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "unknown event type hookd.ping", http.StatusBadRequest)
		})
		expect(t, doctor.Forward(ctx, cfg(app.srv.URL)), doctor.Fail, "downstream answered 400: unknown event type hookd.ping",
			"make the app answer 2xx to hookd.ping")
	})
	t.Run("fail redirect", func(t *testing.T) {
		t.Parallel()
		app := newFakeApp(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://app.example.com/stripe", http.StatusMovedPermanently)
		})
		expect(t, doctor.Forward(ctx, cfg(app.srv.URL)), doctor.Fail, "redirects", "https://app.example.com/stripe",
			"set HOOKD_FORWARD_URL to the final URL")
	})
	t.Run("fail no answer", func(t *testing.T) {
		t.Parallel()
		app := newFakeApp(t, func(http.ResponseWriter, *http.Request) {})
		app.srv.Close()
		expect(t, doctor.Forward(ctx, cfg(app.srv.URL)), doctor.Fail, "no answer from downstream")
	})
	t.Run("fail no url", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Forward(ctx, doctor.Config{}), doctor.Fail, "HOOKD_FORWARD_URL is not set")
	})
}

func TestForwardSignature(t *testing.T) {
	t.Parallel()
	expect(t, doctor.ForwardSignature(doctor.Config{ForwardURL: "http://app", ForwardSecret: forwardSecret}), doctor.OK, "webhook-signature")
	expect(t, doctor.ForwardSignature(doctor.Config{ForwardURL: "http://app"}), doctor.Warn, "HOOKD_FORWARD_SECRET is not set")
	expect(t, doctor.ForwardSignature(doctor.Config{Discard: true}), doctor.Skip, "nothing is forwarded")
}

func TestForwardTimeout(t *testing.T) {
	t.Parallel()
	limit := worker.MaxForwardTimeout
	expect(t, doctor.ForwardTimeout(10*time.Second, limit), doctor.OK, "10s, below the 2m limit")
	expect(t, doctor.ForwardTimeout(300*time.Millisecond, limit), doctor.Warn, "turns every such moment into a retry")
	expect(t, doctor.ForwardTimeout(45*time.Second, limit), doctor.Warn, "keep it at seconds")
	expect(t, doctor.ForwardTimeout(limit, limit), doctor.Fail, "is not below 2m", "a replica that dies mid-batch")
}

func TestRetention(t *testing.T) {
	t.Parallel()
	expect(t, doctor.Retention(720*time.Hour), doctor.OK, "720h, longer than Stripe's 3 days")
	expect(t, doctor.Retention(80*time.Hour), doctor.Warn, "only just outlives")
	expect(t, doctor.Retention(48*time.Hour), doctor.Fail, "processed twice", "at least 72h")
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	expect(t, doctor.Backoff(false), doctor.OK, "1m, 5m, 30m, 2h, 24h")
	expect(t, doctor.Backoff(true), doctor.Warn, "HOOKD_DEMO_BACKOFF is on")
}

// fakeStripeClock answers as Stripe's API does to a request without a key,
// with its Date header offset from this clock.
func fakeStripeClock(t *testing.T, offset time.Duration) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", time.Now().Add(offset).UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"You did not provide an API key. You need to provide your API key in the `+
			`Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",`+
			`"type":"invalid_request_error"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestClock(t *testing.T) {
	t.Parallel()
	ctx, client := t.Context(), &http.Client{Timeout: 5 * time.Second}
	expect(t, doctor.Clock(ctx, client, fakeStripeClock(t, 0)), doctor.OK, "off Stripe's")
	expect(t, doctor.Clock(ctx, client, fakeStripeClock(t, -time.Minute)), doctor.Warn, "ahead of Stripe's", "sync it with NTP")
	expect(t, doctor.Clock(ctx, client, fakeStripeClock(t, 2*time.Minute)), doctor.Warn, "behind Stripe's")
	expect(t, doctor.Clock(ctx, client, fakeStripeClock(t, -10*time.Minute)), doctor.Fail, "every signature looks older")
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	expect(t, doctor.Clock(ctx, client, gone.URL), doctor.Warn, "could not reach Stripe's API", "NTP")
}

// Run goes through every check, and Write says how many failed.
func TestRunAndWrite(t *testing.T) {
	t.Parallel()
	app := newFakeApp(t, func(w http.ResponseWriter, r *http.Request) {})
	results := doctor.Run(context.Background(), doctor.Config{
		DatabaseURL:       setup(t).url,
		AdminEmail:        "ops@example.com",
		StripeSecrets:     []string{"whsec_" + strings.Repeat("x", 32)},
		ForwardURL:        app.srv.URL,
		ForwardSecret:     forwardSecret,
		ForwardTimeout:    5 * time.Second,
		MaxForwardTimeout: worker.MaxForwardTimeout,
		MarkerRetention:   48 * time.Hour,
		StripeAPIURL:      fakeStripeClock(t, 0),
	})
	var out bytes.Buffer
	if failed := doctor.Write(&out, results); failed != 1 {
		t.Errorf("Write counted %d failed checks, want 1 (the retention):\n%s", failed, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(results)+2 || !strings.HasPrefix(lines[0], "ok    database") ||
		// The one warning is replication's: no standby streams from the
		// test server, so a commit waits for none.
		!strings.Contains(lines[len(lines)-1], "1 failed, 1 warnings") {
		t.Errorf("output:\n%s\nwant one line per check, then the counts", out.String())
	}
}

func TestAccounts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// withUsers is a fresh database holding accounts of the given roles.
	withUsers := func(t *testing.T, roles ...accounts.Role) string {
		b := setup(t)
		for i, r := range roles {
			if _, err := accounts.New(b.pool).CreateUser(ctx, fmt.Sprintf("person%d@example.com", i), "correct horse battery", r); err != nil {
				t.Fatal(err)
			}
		}
		return b.url
	}
	t.Run("ok", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Accounts(ctx, withUsers(t, accounts.RoleAdmin, accounts.RoleViewer), ""), doctor.OK, "2 accounts, 1 of them an admin")
	})
	t.Run("ok bootstrap", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Accounts(ctx, withUsers(t), "ops@example.com"), doctor.OK, "makes ops@example.com an admin at start")
	})
	t.Run("warn no admin", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Accounts(ctx, withUsers(t, accounts.RoleOperator), ""), doctor.Warn, "none of them an admin")
	})
	t.Run("fail nobody", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Accounts(ctx, withUsers(t), ""), doctor.Fail, "nobody can sign in", "hookd user add")
	})
	t.Run("skip unreachable", func(t *testing.T) {
		t.Parallel()
		expect(t, doctor.Accounts(ctx, "postgres://hookd@127.0.0.1:1/hookd?connect_timeout=5", ""), doctor.Skip, "does not answer")
	})
}

func TestStripe(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client := &http.Client{Timeout: 5 * time.Second}
	// check reads the endpoint from a fake Stripe holding it, with key.
	check := func(t *testing.T, key string, ep stripetest.Endpoint, setup func(*stripetest.Server)) (doctor.Result, doctor.Result) {
		srv := stripetest.NewServer(t)
		id := srv.AddEndpoint(ep).ID
		if setup != nil {
			setup(srv)
		}
		return doctor.Stripe(ctx, doctor.Config{StripeAPIKey: key, StripeEndpointID: id, StripeAPIURL: srv.URL, HTTPClient: client})
	}
	good := stripetest.Endpoint{URL: "https://hooks.example.com/webhooks/stripe", APIVersion: "2025-03-31.basil"}

	t.Run("ok", func(t *testing.T) {
		t.Parallel()
		key, ep := check(t, stripetest.DefaultKey, good, nil)
		expect(t, key, doctor.OK, "restricted key, test mode")
		expect(t, ep, doctor.OK, "is enabled and sends every event type to https://hooks.example.com/webhooks/stripe",
			"API version 2025-03-31.basil")
	})
	t.Run("ok account's default version", func(t *testing.T) {
		t.Parallel()
		_, ep := check(t, stripetest.DefaultKey, stripetest.Endpoint{EnabledEvents: []string{"invoice.paid", "charge.refunded"}}, nil)
		expect(t, ep, doctor.OK, "sends 2 event types", "API version the account's default")
	})
	t.Run("skip without key", func(t *testing.T) {
		t.Parallel()
		key, ep := doctor.Stripe(ctx, doctor.Config{})
		expect(t, key, doctor.Skip, "STRIPE_API_KEY is not set")
		expect(t, ep, doctor.Skip)
	})
	t.Run("warn secret key", func(t *testing.T) {
		t.Parallel()
		key, ep := check(t, "sk_test_full_access", good, func(s *stripetest.Server) { s.SetKey("sk_test_full_access") })
		expect(t, key, doctor.Warn, "secret key", "restricted key (rk_...)")
		expect(t, ep, doctor.OK)
	})
	t.Run("warn unreachable", func(t *testing.T) {
		t.Parallel()
		gone := httptest.NewServer(http.NotFoundHandler())
		gone.Close()
		key, ep := doctor.Stripe(ctx, doctor.Config{StripeAPIKey: stripetest.DefaultKey, StripeEndpointID: "we_1",
			StripeAPIURL: gone.URL, HTTPClient: client})
		expect(t, key, doctor.Warn, "could not check it")
		expect(t, ep, doctor.Skip)
	})
	t.Run("warn url elsewhere", func(t *testing.T) {
		t.Parallel()
		_, ep := check(t, stripetest.DefaultKey, stripetest.Endpoint{URL: "https://app.example.com/stripe/events"}, nil)
		expect(t, ep, doctor.Warn, "sends to https://app.example.com/stripe/events", "does not end in /webhooks/stripe")
	})
	t.Run("fail rejected key", func(t *testing.T) {
		t.Parallel()
		key, ep := check(t, "rk_test_wrong", good, nil)
		expect(t, key, doctor.Fail, "Stripe rejected STRIPE_API_KEY (401")
		expect(t, ep, doctor.Skip, "the key was refused")
	})
	t.Run("fail no permission", func(t *testing.T) {
		t.Parallel()
		key, _ := check(t, stripetest.DefaultKey, good, func(s *stripetest.Server) { s.Deny("/v1/webhook_endpoints") })
		expect(t, key, doctor.Fail, "(403)", "Webhook Endpoints")
	})
	t.Run("fail no such endpoint", func(t *testing.T) {
		t.Parallel()
		srv := stripetest.NewServer(t)
		key, ep := doctor.Stripe(ctx, doctor.Config{StripeAPIKey: stripetest.DefaultKey, StripeEndpointID: "we_missing",
			StripeAPIURL: srv.URL, HTTPClient: client})
		expect(t, key, doctor.OK)
		expect(t, ep, doctor.Fail, "no webhook endpoint we_missing (404")
	})
	t.Run("fail disabled", func(t *testing.T) {
		t.Parallel()
		_, ep := check(t, stripetest.DefaultKey, stripetest.Endpoint{Status: "disabled"}, nil)
		expect(t, ep, doctor.Fail, "is disabled", "hookd reconcile")
	})
	t.Run("fail no endpoint id", func(t *testing.T) {
		t.Parallel()
		_, ep := doctor.Stripe(ctx, doctor.Config{StripeAPIKey: stripetest.DefaultKey})
		expect(t, ep, doctor.Fail, "STRIPE_WEBHOOK_ENDPOINT_ID is not set")
	})
}

func TestCookies(t *testing.T) {
	t.Parallel()
	expect(t, doctor.Cookies("https://hookd.example.com", false), doctor.Warn, "HOOKD_SECURE_COOKIES is false")
	expect(t, doctor.Cookies("https://hookd.example.com", true), doctor.OK, "Secure")
	expect(t, doctor.Cookies("http://localhost:8080", false), doctor.OK, "plain http")
	expect(t, doctor.Cookies("", false), doctor.Skip, "HOOKD_PUBLIC_URL is not set")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	expect(t, doctor.Metrics(":8080", "127.0.0.1:9090", false), doctor.OK, "served on 127.0.0.1:9090/metrics only, not on HOOKD_ADDR")
	expect(t, doctor.Metrics(":8080", "10.0.0.5:9090", false), doctor.OK, "10.0.0.5:9090/metrics only")
	expect(t, doctor.Metrics(":8080", "127.0.0.1:9090", true), doctor.Warn, "on 127.0.0.1:9090/metrics and on HOOKD_ADDR (:8080/metrics)")
	expect(t, doctor.Metrics(":8080", "", true), doctor.Warn, "HOOKD_METRICS_PUBLIC=true")
	expect(t, doctor.Metrics(":8080", ":9090", false), doctor.Warn, "every interface")
	expect(t, doctor.Metrics(":8080", "0.0.0.0:9090", false), doctor.Warn, "every interface")
	expect(t, doctor.Metrics(":8080", "", false), doctor.OK, "not served")
}

// Write keeps its columns whatever the checks' names: every detail starts
// in the same column, a long check name (an endpoint's, with its label)
// included.
func TestWrite_ColumnsHoldOnLongCheckNames(t *testing.T) {
	t.Parallel()
	results := []doctor.Result{
		{Check: "database", Status: doctor.OK, Detail: "reachable"},
		{Check: "endpoint declaration connect_platform_eu", Status: doctor.Fail, Detail: "contradicted"},
		{Check: "stripe api key", Status: doctor.Warn, Detail: "test mode"},
	}
	var out bytes.Buffer
	doctor.Write(&out, results)
	lines := strings.Split(out.String(), "\n")[:len(results)]
	column := -1
	for i, l := range lines {
		at := strings.Index(l, results[i].Detail)
		if column == -1 {
			column = at
		}
		if at != column || !strings.Contains(l[:at], results[i].Check+" ") {
			t.Errorf("line %q: detail at column %d, want %d, after its check name and a space:\n%s", l, at, column, out.String())
		}
	}
}

// A server no standby streams from, whose commits wait for none: the
// warning names the risk and the managed services where it is expected.
// (Pairs of servers, synchronous and asynchronous, are checked by the
// failover tests of package main.)
func TestReplication_NoStandby(t *testing.T) {
	t.Parallel()
	expect(t, doctor.Replication(t.Context(), setup(t).url), doctor.Warn,
		"a commit waits for no standby", "no standby is streaming", "answered 200", "RDS Multi-AZ instances and Cloud SQL HA")
}

// Replicas that applied different destinations are a warning naming how
// many apply which; agreeing with the configuration doctor reads is ok.
func TestReplicaDestinations_WarnsWhenReplicasDiffer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const ours, theirs = "aaaa1111aaaa1111aaaa", "bbbb2222bbbb2222bbbb"
	expect(t, doctor.ReplicaDestinations(ctx, b.url, ours), doctor.OK, "no hookd serve is running")

	replica := func(hash string) {
		s := queue.New(b.pool, queue.WithReplica(uuid.New()))
		if err := s.Register(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApplyDestinations(ctx, nil, hash); err != nil {
			t.Fatal(err)
		}
	}
	replica(ours)
	replica(ours)
	expect(t, doctor.ReplicaDestinations(ctx, b.url, ours), doctor.OK,
		"2 live replicas apply destinations aaaa1111aaaa (this configuration's)")
	expect(t, doctor.ReplicaDestinations(ctx, b.url, theirs), doctor.Warn,
		"2 live replicas apply destinations aaaa1111aaaa; this configuration's are bbbb2222bbbb", "send them SIGHUP")

	replica(theirs)
	expect(t, doctor.ReplicaDestinations(ctx, b.url, ours), doctor.Warn,
		"live replicas apply different destinations: 2 live replicas apply destinations aaaa1111aaaa (this configuration's), "+
			"1 applies destinations bbbb2222bbbb",
		"give every replica the same HOOKD_DESTINATIONS_FILE", "send the ones that differ SIGHUP")
}
