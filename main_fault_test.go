package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// dbProxy stands between hookd and PostgreSQL so a test can cut the
// database away: cut closes every open connection and refuses new ones
// until restore. The shared server itself is never touched.
type dbProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startDBProxy(t testing.TB, target string) *dbProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *dbProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			client.Close()
			continue
		}
		p.conns[client], p.conns[server] = true, true
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			p.mu.Lock()
			delete(p.conns, client)
			delete(p.conns, server)
			p.mu.Unlock()
			client.Close()
			server.Close()
		}
		p.wg.Go(func() { pipe(server, client) })
		p.wg.Go(func() { pipe(client, server) })
	}
}

// cut closes every connection through the proxy; until restore, new ones
// are closed as soon as they are accepted.
func (p *dbProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *dbProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// faultDelivery is one signed event posted during the fault test.
type faultDelivery struct {
	id, eventType  string
	status         int
	err            error
	sent, answered time.Time
}

// TestDatabaseOutageNeverAnswers200WithoutCommitting posts signed events
// from several clients while the database goes away: first cut at a proxy
// (every connection closed, none accepted) and restored, three times, then
// with every backend of hookd's database terminated, three times. hookd
// must answer 503, never 200, while it cannot commit, recover without a
// restart, and have every event it answered 200 durably processed or queued.
func TestDatabaseOutageNeverAnswers200WithoutCommitting(t *testing.T) {
	t.Parallel()
	// The app fails every event of one type, so both durable outcomes, the
	// marker and the queue row, are exercised.
	const failingType = "invoice.payment_failed"
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hookd-Event-Type") == failingType {
			http.Error(w, "cannot handle this one", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(app.Close)

	bundle := setup(t)
	u, err := url.Parse(bundle.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startDBProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.ln.Addr().String()
	base, stop, stderr := startServe(t, map[string]string{
		"DATABASE_URL":          viaProxy.String(),
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL":     app.URL,
		"HOOKD_RETRY_INTERVAL":  "100ms",
	})
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()

	// Senders post new events until told to stop; every answer is kept.
	var (
		mu         sync.Mutex
		deliveries []faultDelivery
		answered   atomic.Int64
		ok200      atomic.Int64
	)
	client := &http.Client{Timeout: 30 * time.Second}
	quit := make(chan struct{})
	var senders sync.WaitGroup
	for s := range 8 {
		senders.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-quit:
					return
				default:
				}
				d := faultDelivery{id: stripeevent.NewID("evt"), eventType: "invoice.paid"}
				if (s+n)%4 == 0 {
					d.eventType = failingType
				}
				body := stripeevent.Minimal(d.id, d.eventType)
				req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(body))
				req.Header.Set("Stripe-Signature", stripeevent.Sign(body, testSecret, time.Now()))
				d.sent = time.Now()
				resp, err := client.Do(req)
				d.answered, d.err = time.Now(), err
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					d.status = resp.StatusCode
				}
				mu.Lock()
				deliveries = append(deliveries, d)
				mu.Unlock()
				answered.Add(1)
				if d.status == http.StatusOK {
					ok200.Add(1)
				}
			}
		})
	}
	defer func() {
		select {
		case <-quit:
		default:
			close(quit)
		}
		senders.Wait()
	}()
	// waitAnswers waits until n more deliveries are answered, or n more are
	// answered 200 when ok is set.
	waitAnswers := func(n int64, ok bool, what string) {
		t.Helper()
		counter := &answered
		if ok {
			counter = &ok200
		}
		target := counter.Load() + n
		queuetest.WaitFor(t, 60*time.Second, what, func() bool { return counter.Load() >= target })
	}

	type window struct{ from, to time.Time }
	var cuts []window
	for round := range 3 {
		waitAnswers(30, true, "30 events answered 200 with the database up")
		proxy.cut()
		w := window{from: time.Now()}
		waitAnswers(30, false, "30 deliveries answered with the database cut away")
		if status, err := getStatus(base + "/readyz"); err != nil || status != http.StatusServiceUnavailable {
			t.Errorf("round %d: /readyz with the database cut: got %d, %v; want 503", round, status, err)
		}
		w.to = time.Now()
		proxy.restore()
		cuts = append(cuts, w)
		queuetest.WaitFor(t, 30*time.Second, "/readyz to answer 200 again, without a restart", func() bool {
			status, err := getStatus(base + "/readyz")
			return err == nil && status == http.StatusOK
		})
	}

	// The other way a database goes away: its server ends every session.
	admin, err := pgx.Connect(t.Context(), queuetest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	dbName := strings.TrimPrefix(u.Path, "/")
	for range 3 {
		waitAnswers(30, true, "30 events answered 200 between terminations")
		if _, err := admin.Exec(t.Context(),
			`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
			dbName); err != nil {
			t.Fatal(err)
		}
	}
	waitAnswers(30, true, "30 events answered 200 after the last termination")
	close(quit)
	senders.Wait()

	// Every answer: 200 or 503, never a 200 for a delivery made and
	// answered while the database was cut away.
	var during, served []faultDelivery
	var failingIDs, processedIDs []string
	for _, d := range deliveries {
		if d.err != nil || (d.status != http.StatusOK && d.status != http.StatusServiceUnavailable) {
			t.Errorf("%s: got %d, %v; want 200 or 503", d.id, d.status, d.err)
		}
		for _, w := range cuts {
			if d.sent.After(w.from) && d.answered.Before(w.to) {
				during = append(during, d)
			}
		}
		if d.status == http.StatusOK {
			served = append(served, d)
			if d.eventType == failingType {
				failingIDs = append(failingIDs, d.id)
			} else {
				processedIDs = append(processedIDs, d.id)
			}
		}
	}
	if len(during) < 3*30-3*8 {
		t.Errorf("only %d deliveries fell wholly inside the outages, want most of the 90 made then", len(during))
	}
	for _, d := range during {
		if d.status == http.StatusOK {
			t.Errorf("%s answered 200 while the database was cut away", d.id)
		}
	}

	// Every 200 is durable: the events the app takes have their marker,
	// the ones it fails their queue row, and none has both or neither.
	var marked, queued, both int
	if err := bundle.pool.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE m AND NOT q AND s.eid = ANY ($2)),
		       count(*) FILTER (WHERE q AND NOT m AND s.eid = ANY ($3)),
		       count(*) FILTER (WHERE m = q)
		FROM (SELECT u.eid,
		             EXISTS (SELECT 1 FROM processed_webhook_events p WHERE p.event_id = u.eid) AS m,
		             EXISTS (SELECT 1 FROM webhook_events e WHERE e.event_id = u.eid) AS q
		      FROM unnest($1::text[]) AS u(eid)) s`,
		append(processedIDs, failingIDs...), processedIDs, failingIDs).Scan(&marked, &queued, &both); err != nil {
		t.Fatal(err)
	}
	if marked != len(processedIDs) || queued != len(failingIDs) || both != 0 {
		t.Errorf("of %d events answered 200: %d marked of %d the app took, %d queued of %d it failed, %d with both or neither; want all, all, 0",
			len(served), marked, len(processedIDs), queued, len(failingIDs), both)
		// What the queue says of the events the app takes: why each is
		// there instead of marked.
		rows, err := bundle.pool.Query(t.Context(), `
			SELECT event_id, attempts, coalesce(last_error, '') FROM webhook_events WHERE event_id = ANY ($1)`, processedIDs)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, lastError string
			var attempts int
			if err := rows.Scan(&id, &attempts, &lastError); err != nil {
				t.Fatal(err)
			}
			t.Errorf("%s, which the app takes, is queued after %d attempts: %s", id, attempts, lastError)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("hookd's log:\n%s", stderr)
	}
	t.Logf("%d deliveries: %d answered 200, %d made and answered during the outages", len(deliveries), len(served), len(during))

	stopped = true
	if err := stop(); err != nil {
		t.Errorf("hookd stopped with %v, want a clean stop after recovering on its own\n%s", err, stderr)
	}
}
