package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// fillQueue puts n rows on the retry queue in one statement: seven in ten
// dead, the rest retrying and due in a day (so the retry loop leaves them
// alone), with ~600-byte payloads and errors that fall into a few dozen
// failure groups.
func fillQueue(t testing.TB, pool *pgxpool.Pool, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts,
		                            last_error, next_retry_at, created_at, last_attempt_at)
		SELECT 'stripe', 'evt_load_' || i, 'type.' || (i % 12),
		       '{"id":"evt_load_' || i || '","object":"event","data":"' || repeat('p', 560) || '"}',
		       CASE WHEN i % 10 < 7 THEN 'dead' ELSE 'retrying' END, CASE WHEN i % 10 < 7 THEN 6 ELSE 2 END,
		       CASE i % 3
		           WHEN 0 THEN 'timeout after ' || (i % 30) || 's for evt_' || md5(i::text)
		           WHEN 1 THEN 'downstream answered 50' || (i % 4) || ': upstream ref=' || i
		           ELSE 'dial tcp 10.0.' || (i % 250) || '.7:443: connection refused' END,
		       now() + interval '1 day', now() - make_interval(secs => i), now() - make_interval(secs => i / 2)
		FROM generate_series(1, $1) AS i`, n)
	if err != nil {
		t.Fatalf("fill the queue: %v", err)
	}
	if _, err := pool.Exec(context.Background(), `ANALYZE webhook_events`); err != nil {
		t.Fatal(err)
	}
}

var csrfInput = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// signInClient signs email in on base and returns a client holding its
// session.
func signInClient(t testing.TB, base, email string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfInput.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the sign-in page:\n%s", page)
	}
	resp, err = hc.PostForm(base+"/login", url.Values{"_csrf": {string(m[1])}, "email": {email}, "password": {"correct horse battery"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in as %s: status %d, want 303", email, resp.StatusCode)
	}
	return hc
}

// TestRunServeDashboardViewersLeaveTheReceiverAlone: with 100,000 events
// on the queue, 30 signed-in viewers load /failures and /events?error=x
// over and over, each as soon as the last answer came, while a stream of
// signed deliveries arrives. Every delivery is answered 200 while every
// viewer is still at it; each viewer page is either shown or refused with
// the timeout's message. The latencies are logged, not asserted.
func TestRunServeDashboardViewersLeaveTheReceiverAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a queue of 100,000 events")
	}
	t.Parallel()
	// The deliveries go on until at least minDeliveries were answered and
	// the viewers were shown minPages pages meanwhile, so they overlap.
	const rows, viewers, senders, minDeliveries, maxDeliveries = 100_000, 30, 4, 200, 20_000
	const minPages = 2 * viewers

	bundle := setup(t)
	fillQueue(t, bundle.pool, rows)
	if _, err := accounts.New(bundle.pool).CreateUser(t.Context(), "viewer@example.com", "correct horse battery", accounts.RoleViewer); err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer app.Close()
	base, stop, stderr := startServe(t, map[string]string{
		"DATABASE_URL":          bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL":     app.URL,
	})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, stderr)
		}
	}()

	clients := make([]*http.Client, viewers)
	for i := range clients {
		// One at a time: sign-ins beyond the password checks running at
		// once are turned away.
		clients[i] = signInClient(t, base, "viewer@example.com")
	}

	var (
		stopViewers      = make(chan struct{})
		viewing          sync.WaitGroup
		running, started atomic.Int64
		pagesShown       atomic.Int64
		mu               sync.Mutex
		pageStatus       = map[string]int{}
		badPages         []string
	)
	for i, hc := range clients {
		viewing.Add(1)
		running.Add(1)
		go func() {
			defer viewing.Done()
			defer running.Add(-1)
			paths := []string{"/failures", "/events?error=x"}
			for n := i; ; n++ {
				select {
				case <-stopViewers:
					return
				default:
				}
				path := paths[n%2]
				started.Add(1)
				resp, err := hc.Get(base + path)
				if err != nil {
					mu.Lock()
					badPages = append(badPages, fmt.Sprintf("GET %s: %v", path, err))
					mu.Unlock()
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				pagesShown.Add(1)
				mu.Lock()
				pageStatus[fmt.Sprintf("%s %d", path, resp.StatusCode)]++
				ok := resp.StatusCode == http.StatusOK ||
					resp.StatusCode == http.StatusServiceUnavailable && bytes.Contains(body, []byte("narrow"))
				if !ok {
					badPages = append(badPages, fmt.Sprintf("GET %s: %d %.300s", path, resp.StatusCode, body))
				}
				mu.Unlock()
			}
		}()
	}
	defer func() { close(stopViewers); viewing.Wait() }()
	queuetest.WaitFor(t, 30*time.Second, "every viewer to load a page", func() bool { return started.Load() >= viewers })
	pagesBefore := pagesShown.Load()

	sender := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	var took []time.Duration
	var failed []string
	var sending sync.WaitGroup
	var sent atomic.Int64
	for range senders {
		sending.Add(1)
		go func() {
			defer sending.Done()
			for sent.Load() < minDeliveries || pagesShown.Load()-pagesBefore < minPages {
				if sent.Add(1) > maxDeliveries {
					return
				}
				id := stripeevent.NewID("evt")
				body := stripeevent.Minimal(id, "invoice.paid")
				req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Stripe-Signature", stripeevent.Sign(body, testSecret, time.Now()))
				start := time.Now()
				resp, err := sender.Do(req)
				d := time.Since(start)
				status := 0
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				mu.Lock()
				took = append(took, d)
				if status != http.StatusOK {
					failed = append(failed, fmt.Sprintf("%s: %d %v", id, status, err))
				}
				mu.Unlock()
			}
		}()
	}
	sending.Wait()
	stillViewing := running.Load()
	pagesDuring := pagesShown.Load() - pagesBefore

	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("%d of %d deliveries not answered 200 under the viewers: %v", len(failed), len(took), failed)
	}
	if pagesDuring < minPages {
		t.Errorf("the viewers were shown %d pages during %d deliveries, want at least %d", pagesDuring, len(took), minPages)
	}
	if stillViewing != viewers {
		t.Errorf("%d viewers were still loading pages when the last delivery was answered, want all %d", stillViewing, viewers)
	}
	for _, p := range badPages {
		t.Errorf("viewer: %s", p)
	}
	slices.Sort(took)
	pct := func(p float64) time.Duration { return took[min(len(took)-1, int(p*float64(len(took))))] }
	t.Logf("deliveries under %d viewers over %d queued events: n=%d p50=%s p99=%s max=%s; %d viewer pages meanwhile, all told: %v",
		viewers, rows, len(took), pct(0.50), pct(0.99), took[len(took)-1], pagesDuring, pageStatus)
}
