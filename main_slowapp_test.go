package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// slowApp is the user's app when it is slow: it holds every event it gets
// until hold returns, and counts the deliveries of each event.
type slowApp struct {
	srv  *httptest.Server
	hold func(*http.Request)

	mu    sync.Mutex
	calls map[string]int
	// inlineHeld is how many deliveries made while Stripe waited
	// (Hookd-Attempt 0) the app holds right now.
	inlineHeld atomic.Int64
}

func newSlowApp(t testing.TB, hold func(*http.Request)) *slowApp {
	app := &slowApp{hold: hold, calls: map[string]int{}}
	app.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		app.mu.Lock()
		app.calls[r.Header.Get("Hookd-Event-Id")]++
		app.mu.Unlock()
		if r.Header.Get("Hookd-Attempt") == "0" {
			app.inlineHeld.Add(1)
			defer app.inlineHeld.Add(-1)
		}
		app.hold(r)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(app.srv.Close)
	return app
}

func (app *slowApp) callsOf() map[string]int {
	app.mu.Lock()
	defer app.mu.Unlock()
	return maps.Clone(app.calls)
}

// delivery is hookd's answer to one signed event of a burst.
type delivery struct {
	id     string
	status int
	body   string
	took   time.Duration
	err    error
}

// burst posts n distinct, correctly signed Stripe events to hookd at once
// and sends each answer on the returned channel as it comes.
func burst(base string, n int) ([]string, <-chan delivery) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = stripeevent.NewID("evt")
	}
	answers := make(chan delivery, n)
	for _, id := range ids {
		go func() {
			body := stripeevent.Minimal(id, "invoice.paid")
			req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Stripe-Signature", stripeevent.Sign(body, testSecret, time.Now()))
			start := time.Now()
			resp, err := client.Do(req)
			d := delivery{id: id, err: err}
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				d.status, d.body = resp.StatusCode, strings.TrimSpace(string(b))
			}
			d.took = time.Since(start)
			answers <- d
		}()
	}
	return ids, answers
}

func getStatus(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestSlowAppDefersPastTheInlineBound: the app holds every event, and 100
// distinct events arrive at once. Only HOOKD_INLINE_CONCURRENCY of them (15
// here) wait for the app; the rest are queued at once and answered 200, and
// /readyz and the dashboard keep answering. Once the app answers again,
// each event reaches it exactly once.
func TestSlowAppDefersPastTheInlineBound(t *testing.T) {
	t.Parallel()
	const events, inline = 100, 15
	fast := make(chan struct{})
	// The app is slow until the test has checked everything it wants to
	// check while it is: then it answers at once.
	app := newSlowApp(t, func(r *http.Request) {
		select {
		case <-fast:
		case <-r.Context().Done():
		}
	})
	env := map[string]string{
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL":     app.srv.URL,
		// Long enough that no delivery times out while the test holds it,
		// which would make the app see it twice.
		"HOOKD_FORWARD_TIMEOUT":    "90s",
		"HOOKD_RETRY_INTERVAL":     "100ms",
		"HOOKD_INLINE_CONCURRENCY": "15",
	}
	base, stop, stderr := startServe(t, env)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, stderr)
		}
	}()
	var once sync.Once
	appIsFast := func() { once.Do(func() { close(fast) }) }
	// Should the test stop early, the app lets go, so hookd can stop.
	defer appIsFast()

	ids, answers := burst(base, events)
	var got []delivery
	queuetest.WaitFor(t, 30*time.Second, "every event answered or held by the app", func() bool {
		for {
			select {
			case d := <-answers:
				got = append(got, d)
				continue
			default:
			}
			return len(got)+int(app.inlineHeld.Load()) == events && app.inlineHeld.Load() == inline
		}
	})
	for _, d := range got {
		if d.err != nil || d.status != http.StatusOK || d.body != "deferred" {
			t.Errorf("%s while the app was busy: got %d %q, %v; want 200 deferred", d.id, d.status, d.body, d.err)
		}
	}
	if len(got) != events-inline {
		t.Errorf("%d answered while the app held %d, want %d", len(got), inline, events-inline)
	}
	// With every inline slot held by the app, hookd still answers.
	for range 3 {
		for _, path := range []string{"/readyz", "/login", "/healthz"} {
			if status, err := getStatus(base + path); err != nil || status != http.StatusOK {
				t.Errorf("GET %s while the app was busy: got %d, %v; want 200", path, status, err)
			}
		}
	}
	if n := app.inlineHeld.Load(); n != inline {
		t.Fatalf("the app held %d inline deliveries after the checks, want still %d", n, inline)
	}

	appIsFast()
	for len(got) < events {
		d := <-answers
		if d.err != nil || d.status != http.StatusOK || d.body != "processed" {
			t.Errorf("%s held by the app: got %d %q, %v; want 200 processed", d.id, d.status, d.body, d.err)
		}
		got = append(got, d)
	}

	pool, err := pgxpool.New(t.Context(), env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	queuetest.WaitFor(t, 30*time.Second, "the retry loop to deliver every deferred event", func() bool {
		var markers, rows int
		err := pool.QueryRow(context.Background(), `
			SELECT (SELECT count(*) FROM processed_webhook_events), (SELECT count(*) FROM webhook_events)`).Scan(&markers, &rows)
		return err == nil && markers == events && rows == 0
	})
	calls := app.callsOf()
	for _, id := range ids {
		if calls[id] != 1 {
			t.Errorf("%s reached the app %d times, want exactly 1", id, calls[id])
		}
	}
	if len(calls) != events {
		t.Errorf("the app saw %d distinct events, want %d", len(calls), events)
	}
}

// BenchmarkSlowAppBurst measures the shape of TestSlowAppDefersPastTheInline-
// Bound with an app that takes 5 s per event: 100 distinct events
// at once, and how long each waits for its answer. It reports the 50th and
// 99th percentile, how many of the 100 were deferred to the queue and the
// slowest answer to a deferred one.
//
//	go test -run '^$' -bench SlowAppBurst -benchtime 1x .
func BenchmarkSlowAppBurst(b *testing.B) {
	const events = 100
	app := newSlowApp(b, func(*http.Request) { time.Sleep(5 * time.Second) })
	env := map[string]string{
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL":     app.srv.URL,
		"HOOKD_RETRY_INTERVAL":  "100ms",
	}
	base, stop, _ := startServe(b, env)
	defer stop()
	pool, err := pgxpool.New(b.Context(), env["DATABASE_URL"])
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()

	var took []time.Duration
	var slowestDeferred time.Duration
	deferred := 0
	b.ResetTimer()
	for range b.N {
		_, answers := burst(base, events)
		for range events {
			d := <-answers
			if d.err != nil || d.status != http.StatusOK {
				b.Fatalf("%s: got %d, %v; want 200", d.id, d.status, d.err)
			}
			took = append(took, d.took)
			if d.body == "deferred" {
				deferred++
				slowestDeferred = max(slowestDeferred, d.took)
			}
		}
		b.StopTimer()
		// The next round starts on an empty queue.
		queuetest.WaitFor(b, 2*time.Minute, "the retry loop to deliver the deferred events", func() bool {
			var rows int
			return pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_events`).Scan(&rows) == nil && rows == 0
		})
		b.StartTimer()
	}
	slices.Sort(took)
	// Nearest rank: the 50th and 99th of 100 answers.
	rank := func(p int) time.Duration { return took[(len(took)*p+99)/100-1] }
	b.ReportMetric(float64(rank(50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(rank(99).Milliseconds()), "p99-ms")
	b.ReportMetric(float64(deferred)/float64(b.N), "deferred/100")
	b.ReportMetric(float64(slowestDeferred.Milliseconds()), "deferred-max-ms")
}
