package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

// The production-sized queue the dashboard must stay fast on: 10 million
// dedup markers, 100,000 pending events and 10,000 dead ones, and 8 days of
// two replicas' chart counts (written afresh by each run, see
// refreshActivity).
const (
	benchMarkers = 10_000_000
	benchPending = 100_000
	benchDead    = 10_000
)

// populateBench fills a database with the production-sized queue. Markers
// are written in processed_at order, as the receiver writes them; payloads
// are about 1 KB, like a small Stripe event.
func populateBench(ctx context.Context, pool *pgxpool.Pool) error {
	steps := []struct {
		sql string
		n   int
	}{
		{`INSERT INTO processed_webhook_events (event_id, processed_at)
		  SELECT 'evt_bench_' || lpad(g::text, 9, '0'), now() - interval '60 days' + g * (interval '60 days' / $1)
		  FROM generate_series(1, $1) g`, benchMarkers},
		{`INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts,
		                              last_error, next_retry_at, created_at, last_attempt_at)
		  SELECT 'stripe', 'evt_pending_' || g, (ARRAY['invoice.paid', 'customer.updated', 'charge.refunded'])[1 + g % 3],
		         '{"id":"evt_pending_' || g || '","object":"event","data":{"object":{"filler":"' || repeat('x', 900) || '"}}}',
		         CASE WHEN g % 2 = 0 THEN 'failed' ELSE 'retrying' END, CASE WHEN g % 2 = 0 THEN 0 ELSE 1 + g % 4 END,
		         'downstream returned 503: upstream connect error #' || g % 97,
		         now() + (g % 1440 - 60) * interval '1 minute',
		         now() - (g % 4320) * interval '1 minute', now() - (g % 60) * interval '1 minute'
		  FROM generate_series(1, $1) g`, benchPending},
		{`INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts,
		                              last_error, created_at, last_attempt_at)
		  SELECT 'stripe', 'evt_dead_' || g, (ARRAY['invoice.paid', 'customer.updated', 'charge.refunded'])[1 + g % 3],
		         '{"id":"evt_dead_' || g || '","object":"event","data":{"object":{"filler":"' || repeat('y', 900) || '"}}}',
		         'dead', 5, 'downstream returned 500: handler panicked at step ' || g % 13,
		         now() - g * interval '4 minutes', now() - g * interval '3 minutes'
		  FROM generate_series(1, $1) g`, benchDead},
	}
	for _, s := range steps {
		if _, err := pool.Exec(ctx, s.sql, s.n); err != nil {
			return err
		}
	}
	_, err := pool.Exec(ctx, `VACUUM ANALYZE`)
	return err
}

// refreshActivity gives the database two replicas' chart counts for every
// minute of the 8 days the pruner keeps, up to now: the most the overview's
// 7-day chart ever reads. They are written at each run, since counts left
// by an earlier run would have aged out of the charts.
func refreshActivity(ctx context.Context, pool *pgxpool.Pool) error {
	for _, sql := range []string{
		`DELETE FROM activity_minutes`,
		`DELETE FROM activity_hours`,
		`INSERT INTO activity_minutes (minute, replica, received, processed, queued, retried, dead, rejected, bad_signature)
		 SELECT date_trunc('minute', now()) - (g / 2) * interval '1 minute', 'replica-' || g % 2,
		        20 + g % 7, 18 + g % 5, g % 3, g % 4, (g % 97 = 0)::int, (g % 31 = 0)::int, (g % 62 = 0)::int
		 FROM generate_series(0, 2 * 8 * 24 * 60 - 1) g`,
		`INSERT INTO activity_hours (hour, replica, received, processed, queued, retried, dead, rejected, bad_signature)
		 SELECT date_bin('1 hour', minute, timestamptz 'epoch'), replica, sum(received), sum(processed), sum(queued),
		        sum(retried), sum(dead), sum(rejected), sum(bad_signature)
		 FROM activity_minutes GROUP BY 1, 2`,
		`VACUUM ANALYZE activity_minutes`,
		`VACUUM ANALYZE activity_hours`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// benchServer serves the dashboard on the production-sized database and
// returns it with a signed-in admin's session cookie.
func benchServer(b *testing.B) (http.Handler, *http.Cookie) {
	b.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, queuetest.PopulatedDatabaseURL(b, "dashboard", populateBench))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if err := refreshActivity(ctx, pool); err != nil {
		b.Fatal(err)
	}
	store := queue.New(pool)
	if _, _, err := accounts.New(pool).EnsureAdmin(ctx, "bench@example.com", testPassword); err != nil {
		b.Fatal(err)
	}
	h := web.NewServer(web.Options{Stores: storesOn(store, pool), Gatherer: prometheus.NewRegistry(),
		Sessions: pgxstore.NewWithCleanupInterval(pool, 0)})

	srv := httptest.NewServer(h)
	defer srv.Close()
	c := (&testBundle{srv: srv, store: store, pool: pool}).client(b)
	login := c.get("/login")
	if login.status != http.StatusOK {
		b.Fatalf("GET /login: %d", login.status)
	}
	r := c.post("/login", url.Values{"email": {"bench@example.com"}, "password": {testPassword}})
	if r.status != http.StatusSeeOther {
		b.Fatalf("sign in: %d", r.status)
	}
	u, _ := url.Parse(srv.URL)
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == "hookd_session" {
			return h, ck
		}
	}
	b.Fatal("no session cookie after sign-in")
	return nil, nil
}

// benchPage renders path through the real handler, timing each render, and
// reports the median as well as the mean.
func benchPage(b *testing.B, path string) {
	h, cookie := benchServer(b)
	var times []time.Duration
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		times = append(times, time.Since(start))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body)
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
}

func BenchmarkOverview(b *testing.B) { benchPage(b, "/") }

// BenchmarkOverviewWeek is the overview with the 7-day charts, which sum
// every activity row the database keeps.
func BenchmarkOverviewWeek(b *testing.B) { benchPage(b, "/?activity=week") }

func BenchmarkOverviewStats(b *testing.B) { benchPage(b, "/overview/stats") }

func BenchmarkDeadEventsPage(b *testing.B) { benchPage(b, "/events?status=dead") }

func BenchmarkPendingEventsPage(b *testing.B) { benchPage(b, "/events?status=pending") }
