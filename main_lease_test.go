package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// These tests prove the claims of issue 18 about leases (SPEC.md,
// "Leases") against a running hookd, a real PostgreSQL and a real app
// over HTTP.

// leaseApp is the user's app in the lease tests: hookd forwards events to
// it, handle decides each answer, and the app keeps, per event id, when
// each request arrived and how many arrived while another request for the
// same event was still in it.
type leaseApp struct {
	srv    *httptest.Server
	handle func(*http.Request) int

	mu       sync.Mutex
	inFlight map[string]int
	overlaps map[string]int
	arrivals map[string][]time.Time
}

func newLeaseApp(t testing.TB, handle func(*http.Request) int) *leaseApp {
	app := &leaseApp{handle: handle, inFlight: map[string]int{}, overlaps: map[string]int{}, arrivals: map[string][]time.Time{}}
	app.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookd-Event-Id")
		app.mu.Lock()
		app.arrivals[id] = append(app.arrivals[id], time.Now())
		app.inFlight[id]++
		if app.inFlight[id] > 1 {
			app.overlaps[id]++
		}
		app.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		status := app.handle(r)
		// The request leaves the app before hookd can read its answer.
		app.mu.Lock()
		app.inFlight[id]--
		app.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(app.srv.Close)
	return app
}

// calls returns how many requests each event id brought to the app.
func (app *leaseApp) calls() map[string]int {
	app.mu.Lock()
	defer app.mu.Unlock()
	out := make(map[string]int, len(app.arrivals))
	for id, at := range app.arrivals {
		out[id] = len(at)
	}
	return out
}

// seen returns, per event id, the arrival times of its requests and how
// many arrived while another of the event was in the app.
func (app *leaseApp) seen() (arrivals map[string][]time.Time, overlaps map[string]int) {
	app.mu.Lock()
	defer app.mu.Unlock()
	arrivals = make(map[string][]time.Time, len(app.arrivals))
	for id, at := range app.arrivals {
		arrivals[id] = slices.Clone(at)
	}
	overlaps = make(map[string]int, len(app.overlaps))
	for id, n := range app.overlaps {
		overlaps[id] = n
	}
	return arrivals, overlaps
}

// hold keeps r in the app for d, as a slow app does, or until hookd gives
// up on it.
func hold(r *http.Request, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
	}
}

// newEventIDs returns n fresh Stripe event ids.
func newEventIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = stripeevent.NewID("evt")
	}
	return ids
}

// insertDue puts the events ids on the retry queue, due now, as failed
// inline deliveries, in one statement, so one claim can take them all.
func insertDue(t testing.TB, pool *pgxpool.Pool, ids []string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts, last_error, next_retry_at)
		SELECT 'stripe', id, 'invoice.paid', '{"id":"' || id || '","object":"event","type":"invoice.paid"}',
		       'failed', 0, 'downstream returned 500', now() - interval '1 minute'
		FROM unnest($1::text[]) AS id`, ids)
	if err != nil {
		t.Fatalf("queue %d due events: %v", len(ids), err)
	}
}

// connectServer opens a connection to the test server's own database, not
// the test's: it survives the terminations and is left out of the samples
// of the test's database.
func connectServer(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), queuetest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func databaseName(t testing.TB, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// queueState reads how many dedup markers and queue rows the database
// holds; ok is false when it could not be read.
func queueState(pool *pgxpool.Pool) (markers, rows int, ok bool) {
	err := pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM processed_webhook_events), (SELECT count(*) FROM webhook_events)`).Scan(&markers, &rows)
	return markers, rows, err == nil
}

// stopOnce makes a startServe stop function safe to call from a defer and
// from the test's end: the first call stops hookd, later ones return its
// error again.
func stopOnce(stop func() error) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { err = stop() })
		return err
	}
}

// xminAgeBound bounds how far back hookd's sessions hold the xmin horizon,
// in transactions: age(backend_xmin), and age(backend_xid) for a session
// whose transaction has an id. Without a transaction open across an app
// call, a session holds either only while a statement or a short
// transaction runs, milliseconds (a few hundred at worst on a loaded
// machine), over which the churner below (at most 1,000 transactions a
// second) and the rest of the shared server advance the counter by tens to
// hundreds. Holding one across a 3 s app call would age it by about 3,000
// at the churner's rate. 1000 sits between the two.
const xminAgeBound = 1000

// waitingInDatabase says whether a session that pg_stat_activity shows
// waiting on wait (wait_event_type:wait_event) is held up inside the
// database: on its own I/O (a commit's WAL flush, a page read), on an
// internal lock, on another backend's part of a group commit (IPC), or on a
// lock another session holds. Such a session is not in an app call,
// whatever its transaction's age: on a loaded machine a commit's fsync can
// stall for over a second, while the churner, whose commits flush nothing,
// runs on. A session in an app call is idle in its transaction, waiting on
// its client (Client:ClientRead), which the 100 ms bound catches; so is a
// lock's holder, which is sampled on its own.
func waitingInDatabase(wait string) bool {
	kind, _, _ := strings.Cut(wait, ":")
	switch kind {
	case "IO", "LWLock", "Lock", "IPC", "BufferPin":
		return true
	}
	return false
}

// txSampler samples pg_stat_activity for one database, from a connection to
// another, every 50 ms, while a churner consumes transaction ids so that a
// held snapshot ages visibly.
type txSampler struct {
	cancel context.CancelFunc
	done   sync.WaitGroup

	// Read after stop.
	samples     int
	maxIdleInTx time.Duration
	longIdle    []string // sessions idle in a transaction for over 100 ms
	maxXminAge  int64    // age(backend_xmin) of the database's sessions
	maxXidAge   int64    // age(backend_xid) of the database's sessions
	oldXmin     []string // sessions holding the horizon back over the bound
	// Samples of a snapshot over the bound while a transaction of another
	// database's was as old, and the oldest such transaction.
	excusedXmin  int
	maxOthersAge int64
	// Samples over the bound of sessions waiting inside the database,
	// by what they waited on.
	waitingInDB map[string]int
	churned     int64 // transaction ids the churner consumed
	sampleErr   error
	churnErr    error
}

func startTxSampler(t testing.TB, dbName string) *txSampler {
	t.Helper()
	sampleConn, churnConn := connectServer(t), connectServer(t)
	// The churner's commits need no flush: it writes nothing, and only
	// its transaction ids matter.
	if _, err := churnConn.Exec(context.Background(), `SET synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &txSampler{cancel: cancel, waitingInDB: map[string]int{}}
	s.done.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// Ten transactions, each with an id, in one round trip.
			_, err := churnConn.Exec(ctx, `DO $$ BEGIN
				FOR i IN 1..10 LOOP PERFORM txid_current(); COMMIT; END LOOP; END $$`)
			if err != nil {
				if ctx.Err() == nil {
					s.churnErr = err
				}
				return
			}
			s.churned += 10
		}
	})
	s.done.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := s.sample(ctx, sampleConn, dbName); err != nil {
				if ctx.Err() == nil {
					s.sampleErr = err
				}
				return
			}
		}
	})
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *txSampler) sample(ctx context.Context, conn *pgx.Conn, dbName string) error {
	rows, err := conn.Query(ctx, `
		SELECT a.pid, coalesce(a.state, ''), a.backend_type, coalesce(a.wait_event_type || ':' || a.wait_event, ''),
		       coalesce(extract(epoch FROM now() - a.state_change), 0)::float8,
		       coalesce(age(a.backend_xmin), 0)::int8, coalesce(age(a.backend_xid), 0)::int8, left(a.query, 160),
		       (SELECT coalesce(max(age(o.backend_xid)), 0)::int8
		        FROM pg_stat_activity o
		        WHERE o.datname IS DISTINCT FROM $1 AND o.pid <> pg_backend_pid())
		FROM pg_stat_activity a
		WHERE a.datname = $1 AND a.pid <> pg_backend_pid()`, dbName)
	if err != nil {
		return err
	}
	defer rows.Close()
	s.samples++
	for rows.Next() {
		var pid int32
		var state, backendType, wait, query string
		var idle float64
		var xminAge, xidAge, othersAge int64
		if err := rows.Scan(&pid, &state, &backendType, &wait, &idle, &xminAge, &xidAge, &query, &othersAge); err != nil {
			return err
		}
		if strings.HasPrefix(state, "idle in transaction") {
			d := time.Duration(idle * float64(time.Second))
			s.maxIdleInTx = max(s.maxIdleInTx, d)
			if d > 100*time.Millisecond {
				s.longIdle = append(s.longIdle, fmt.Sprintf("pid %d %s for %s after %q", pid, state, d.Round(time.Millisecond), query))
			}
		}
		if backendType != "client backend" {
			continue
		}
		s.maxXminAge, s.maxXidAge = max(s.maxXminAge, xminAge), max(s.maxXidAge, xidAge)
		if (xidAge > xminAgeBound || xminAge > xminAgeBound) && waitingInDatabase(wait) {
			s.waitingInDB[wait]++
			continue
		}
		// A session holds vacuum back by its own transaction's id, which
		// every later snapshot must treat as running, and by its snapshot.
		if xidAge > xminAgeBound {
			s.oldXmin = append(s.oldXmin, fmt.Sprintf("pid %d (%s, waiting on %q) has held its transaction id for %d transactions, running %q",
				pid, state, wait, xidAge, query))
		}
		if xminAge > xminAgeBound {
			// A snapshot's xmin is the oldest transaction id running
			// anywhere on the server: one of another database's holds it
			// back too. (Other databases' snapshots say nothing: hookd's
			// transactions hold them back as well.)
			if xminAge <= othersAge {
				s.excusedXmin++
				s.maxOthersAge = max(s.maxOthersAge, othersAge)
				continue
			}
			s.oldXmin = append(s.oldXmin, fmt.Sprintf("pid %d (%s, waiting on %q) has a snapshot %d transactions old, running %q",
				pid, state, wait, xminAge, query))
		}
	}
	return rows.Err()
}

// stop ends the sampling and the churn and waits for both.
func (s *txSampler) stop() {
	s.cancel()
	s.done.Wait()
}

// TestLeases_NoTransactionOpenDuringAppCalls proves that hookd holds no
// transaction open, and so neither a snapshot nor a pooled connection in a
// transaction, while the app has an event: 100 deliveries at once to an app
// that takes 3 s each, then a drain of 100 due events by the retry loop at
// a concurrency of 100, while pg_stat_activity is sampled every 50 ms. No
// session of hookd's database is ever seen idle in a transaction for more
// than 100 ms, the xmin horizon of its sessions stays within xminAgeBound
// transactions, and every event reaches the app exactly once.
func TestLeases_NoTransactionOpenDuringAppCalls(t *testing.T) {
	t.Parallel()
	const events = 100
	app := newLeaseApp(t, func(r *http.Request) int {
		hold(r, 3*time.Second)
		return http.StatusOK
	})
	bundle := setup(t)
	base, stopServe, stderr := startServe(t, map[string]string{
		"DATABASE_URL":            bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET":   testSecret,
		"HOOKD_FORWARD_URL":       app.srv.URL,
		"HOOKD_RETRY_CONCURRENCY": "100",
		"HOOKD_RETRY_INTERVAL":    "100ms",
	})
	stop := stopOnce(stopServe)
	defer stop()
	sampler := startTxSampler(t, databaseName(t, bundle.dbURL))

	delivered, answers := burst(base, events)
	bodies := map[string]int{}
	timeout := time.After(60 * time.Second)
	for range events {
		select {
		case d := <-answers:
			bodies[fmt.Sprintf("%d %s", d.status, d.body)]++
			if d.err != nil || d.status != http.StatusOK || d.body != "processed" {
				t.Errorf("delivery of %s: got %d %q, %v; want 200 processed", d.id, d.status, d.body, d.err)
			}
		case <-timeout:
			t.Fatalf("not every delivery answered within 60 s; answers so far: %v", bodies)
		}
	}

	drained := newEventIDs(events)
	insertDue(t, bundle.pool, drained)
	queuetest.WaitFor(t, 60*time.Second, "every event processed and the queue empty", func() bool {
		markers, rows, ok := queueState(bundle.pool)
		return ok && markers == 2*events && rows == 0
	})
	sampler.stop()

	calls := app.calls()
	for _, id := range slices.Concat(delivered, drained) {
		if calls[id] != 1 {
			t.Errorf("%s reached the app %d times, want exactly 1", id, calls[id])
		}
	}
	if len(calls) != 2*events {
		t.Errorf("the app saw %d distinct events, want %d", len(calls), 2*events)
	}
	if sampler.sampleErr != nil || sampler.churnErr != nil {
		t.Fatalf("sampling: %v; churning: %v", sampler.sampleErr, sampler.churnErr)
	}
	if sampler.samples < 20 {
		t.Fatalf("only %d samples of pg_stat_activity, too few to say anything", sampler.samples)
	}
	for _, s := range sampler.longIdle {
		t.Errorf("idle in a transaction for over 100 ms: %s", s)
	}
	for _, s := range sampler.oldXmin {
		t.Errorf("xmin horizon held over %d transactions back: %s", xminAgeBound, s)
	}
	t.Logf("answers %v; %d samples: longest idle in transaction %s, max xmin age %d, max xid age %d "+
		"(%d samples over %d excused by another database's transaction, up to %d old); churner consumed %d ids",
		bodies, sampler.samples, sampler.maxIdleInTx, sampler.maxXminAge, sampler.maxXidAge,
		sampler.excusedXmin, xminAgeBound, sampler.maxOthersAge, sampler.churned)
	if len(sampler.waitingInDB) > 0 {
		t.Logf("samples over %d of sessions waiting inside the database, by wait: %v", xminAgeBound, sampler.waitingInDB)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v\n%s", err, stderr)
	}
}

// stripeSender delivers one event as Stripe does: the same payload, signed
// anew each time, posted again after any answer but a 2xx.
type stripeSender struct {
	id      string
	payload []byte

	// Set once it is done.
	posts    int
	statuses map[int]int
	body     string    // the 2xx's body
	answered time.Time // when the 2xx came
	err      error     // the last error, when no 2xx came before the deadline
}

// deliver posts until a 2xx or until the deadline, waiting pause between
// posts.
func (s *stripeSender) deliver(client *http.Client, base string, deadline time.Time, pause time.Duration) {
	s.statuses = map[int]int{}
	tick := time.NewTicker(pause)
	defer tick.Stop()
	for {
		req, err := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(s.payload))
		if err != nil {
			s.err = err
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", stripeevent.Sign(s.payload, testSecret, time.Now()))
		s.posts++
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			s.statuses[resp.StatusCode]++
			if resp.StatusCode/100 == 2 {
				s.body, s.answered, s.err = strings.TrimSpace(string(b)), time.Now(), nil
				return
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		}
		s.err = err
		if time.Now().After(deadline) {
			return
		}
		<-tick.C
	}
}

// TestLeases_SessionLossNeverRunsAnEventTwiceAtOnce proves that losing
// database sessions never lets two processors run one event at once, nor
// runs an event again once a delivery was answered "processed": while the
// retry loop drains 40 events and 40 others are delivered Stripe-style to
// an app that takes 2 s each, every session of hookd's database is
// terminated every 500 ms, and the database ends any session idle in a
// transaction for 1 s (what would have ended a transaction-scoped lock
// held across the app call). Once the terminations stop, every event ends
// processed and the queue empty.
func TestLeases_SessionLossNeverRunsAnEventTwiceAtOnce(t *testing.T) {
	t.Parallel()
	const (
		drainedEvents   = 40
		deliveredEvents = 40
		killRounds      = 16
	)
	app := newLeaseApp(t, func(r *http.Request) int {
		hold(r, 2*time.Second)
		return http.StatusOK
	})
	bundle := setup(t)
	dbName := databaseName(t, bundle.dbURL)
	admin := connectServer(t)
	if _, err := admin.Exec(context.Background(), fmt.Sprintf(`ALTER DATABASE %s SET idle_in_transaction_session_timeout = '1s'`,
		pgx.Identifier{dbName}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	base, stopServe, stderr := startServe(t, map[string]string{
		"DATABASE_URL":          bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL":     app.srv.URL,
		// Longer than the app takes, so that every run ends with the app's
		// answer, not hookd's timeout.
		"HOOKD_FORWARD_TIMEOUT": "4s",
		"HOOKD_RETRY_INTERVAL":  "100ms",
		// One round of 4 s per claim, and one more for the other batch in
		// flight, whose runs share the 40: leases of 13 s, so an outcome
		// lost with its session is retried within the test.
		"HOOKD_RETRY_BATCH":       "40",
		"HOOKD_RETRY_CONCURRENCY": "40",
		// A loaded machine can still hold an inline run past the forward
		// timeout, which queues its event for a retry a minute later, past
		// the wait below; with demo backoff it comes a second later.
		"HOOKD_DEMO_BACKOFF": "true",
	})
	stop := stopOnce(stopServe)
	defer stop()
	var timeout string
	if err := bundle.pool.QueryRow(context.Background(), `SHOW idle_in_transaction_session_timeout`).Scan(&timeout); err != nil || timeout != "1s" {
		t.Fatalf("idle_in_transaction_session_timeout of a new session: %q, %v; want 1s", timeout, err)
	}

	drained := newEventIDs(drainedEvents)
	insertDue(t, bundle.pool, drained)

	// The killer ends every session of hookd's database every 500 ms.
	var terminated atomic.Int64
	killerDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for range killRounds {
			var n int64
			if err := admin.QueryRow(context.Background(), `
				SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
				FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName).Scan(&n); err != nil {
				killerDone <- err
				return
			}
			terminated.Add(n)
			<-tick.C
		}
		killerDone <- nil
	}()

	senders := make([]*stripeSender, deliveredEvents)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: deliveredEvents}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(50 * time.Second)
	var wg sync.WaitGroup
	for i := range senders {
		id := stripeevent.NewID("evt")
		senders[i] = &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		wg.Go(func() { senders[i].deliver(client, base, deadline, 200*time.Millisecond) })
	}
	if err := <-killerDone; err != nil {
		t.Fatalf("terminate sessions: %v", err)
	}
	wg.Wait()

	var delivered []string
	bodies, statuses := map[string]int{}, map[int]int{}
	for _, s := range senders {
		delivered = append(delivered, s.id)
		for status, n := range s.statuses {
			statuses[status] += n
		}
		if s.answered.IsZero() {
			t.Errorf("%s: no 2xx after %d posts; last: %v", s.id, s.posts, s.err)
			continue
		}
		bodies[s.body]++
	}
	queuetest.WaitFor(t, 45*time.Second, "every event processed and the queue empty once the terminations stopped", func() bool {
		markers, rows, ok := queueState(bundle.pool)
		return ok && markers == drainedEvents+deliveredEvents && rows == 0
	})

	arrivals, overlaps := app.seen()
	for id, n := range overlaps {
		t.Errorf("%s: %d requests reached the app while another of the event was in it", id, n)
	}
	for _, s := range senders {
		// "processed" and "duplicate" both mean the marker was committed
		// before the answer.
		if s.body != "processed" && s.body != "duplicate" {
			continue
		}
		for _, at := range arrivals[s.id] {
			if at.After(s.answered) {
				t.Errorf("%s reached the app %s after its delivery was answered %q", s.id, at.Sub(s.answered), s.body)
			}
		}
	}
	reruns := 0
	for _, id := range slices.Concat(drained, delivered) {
		switch n := len(arrivals[id]); {
		case n == 0:
			t.Errorf("%s never reached the app", id)
		case n > 1:
			reruns++
		}
	}
	var interrupted int
	if err := bundle.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_attempts WHERE error LIKE '%was interrupted%'`).Scan(&interrupted); err != nil {
		t.Errorf("count interrupted attempts: %v", err)
	}
	t.Logf("%d kill rounds ended %d sessions; delivery answers %v, final 2xx bodies %v; "+
		"%d of %d events reached the app more than once (outcome lost with a session, no marker yet); %d interrupted attempts recorded",
		killRounds, terminated.Load(), statuses, bodies, reruns, drainedEvents+deliveredEvents, interrupted)
	if err := stop(); err != nil {
		t.Errorf("stop: %v\n%s", err, stderr)
	}
}

// hookdProcess is hookd's real binary running as a child process, which a
// test may SIGKILL.
type hookdProcess struct {
	cmd  *exec.Cmd
	base string
	log  *e2etest.SyncBuffer
	done chan struct{} // closed once the process has exited
	err  error         // its exit, once done is closed
}

// buildHookdBinary builds hookd as it ships (static, CGO off) into a
// directory of t's.
func buildHookdBinary(t testing.TB) string {
	t.Helper()
	bin := t.TempDir() + "/hookd"
	cmd := exec.Command("go", "build", "-o", bin, "github.com/hookd/hookd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hookd: %v\n%s", err, out)
	}
	return bin
}

// startHookdProcess starts bin serving with env (NAME=value) on a free
// port and waits until /readyz answers 200. A port taken by someone else
// between freeAddr and hookd's listen makes hookd exit at once; another is
// tried then.
func startHookdProcess(t testing.TB, bin string, env []string) *hookdProcess {
	t.Helper()
	for try := 1; ; try++ {
		addr := freeAddr(t)
		p := &hookdProcess{base: "http://" + addr, log: &e2etest.SyncBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(bin, "serve")
		for _, kv := range os.Environ() {
			// A developer's own settings never reach the hookd under test.
			if !strings.HasPrefix(kv, "HOOKD_") && !strings.HasPrefix(kv, "STRIPE_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
				p.cmd.Env = append(p.cmd.Env, kv)
			}
		}
		// The default metrics address is one port for every hookd of the
		// tests running at once; env may name another.
		p.cmd.Env = append(append(p.cmd.Env, "HOOKD_METRICS_ADDR=127.0.0.1:0"), env...)
		p.cmd.Env = append(p.cmd.Env, "HOOKD_ADDR="+addr)
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		p.cmd.SysProcAttr = childProcAttr()
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start hookd: %v", err)
		}
		go func() {
			p.err = p.cmd.Wait()
			close(p.done)
		}()
		err := p.waitReady(30 * time.Second)
		if err == nil {
			return p
		}
		p.kill()
		if !strings.Contains(p.log.String(), "address already in use") || try == 3 {
			t.Fatalf("start hookd: %v\n%s", err, p.log)
		}
	}
}

func (p *hookdProcess) waitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return fmt.Errorf("hookd exited before it was ready: %v", p.err)
		case <-deadline:
			return fmt.Errorf("/readyz not 200 after %s", timeout)
		case <-tick.C:
		}
		if resp, err := client.Get(p.base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
}

// kill SIGKILLs the process, which then has no chance to record anything,
// and waits for it to exit.
func (p *hookdProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// terminate stops the process as systemd does, with SIGTERM, and returns
// its exit: nil for a clean one.
func (p *hookdProcess) terminate() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(20 * time.Second):
	}
	// SIGQUIT makes the Go runtime print every goroutine's stack to the
	// log before it exits: what the stop waits on.
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.kill()
	}
	return errors.New("still running 20 s after SIGTERM; stopped by SIGQUIT, its goroutines are in its log")
}

// TestLeases_CrashLoopMakesThePoisonEventDead proves that a crash is
// charged to the event that caused it: an event whose every attempt kills
// hookd (here the test SIGKILLs the real binary each time the app gets the
// event) is charged nothing for the first kill, which cut its batch's run
// short, then runs alone, is charged each kill alone and is made dead after
// MaxAttempts of them, its last_error and its history saying each crashed
// hookd, instead of crashing hookd forever; and the events claimed in the
// same batch reach the app exactly once and are processed.
func TestLeases_CrashLoopMakesThePoisonEventDead(t *testing.T) {
	t.Parallel()
	bin := buildHookdBinary(t)
	bundle := setup(t)
	poison, others := stripeevent.NewID("evt"), newEventIDs(5)

	arrived := make(chan struct{}, 1)
	app := newLeaseApp(t, func(r *http.Request) int {
		if r.Header.Get("Hookd-Event-Id") != poison {
			return http.StatusOK
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		// Never answers: hookd is killed first, which ends the request.
		<-r.Context().Done()
		return http.StatusInternalServerError
	})
	// One claim takes all six: the batch holds ten.
	insertDue(t, bundle.pool, append(slices.Clone(others), poison))

	env := []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		// Leases of 5 + 5 s: after each kill the poison is due again then.
		// The 5 s leave the kill room on a loaded machine: it must come
		// after the batch's other outcomes are written and before hookd
		// gives up on the app by itself.
		"HOOKD_FORWARD_TIMEOUT=5s",
		"HOOKD_RETRY_BATCH=10",
		"HOOKD_RETRY_INTERVAL=100ms",
	}
	var procs []*hookdProcess
	t.Cleanup(func() {
		for i, p := range procs {
			select {
			case <-p.done:
			default:
				p.kill()
			}
			if t.Failed() {
				t.Logf("hookd run %d:\n%s", i+1, p.log)
			}
		}
	})
	start := func() *hookdProcess {
		p := startHookdProcess(t, bin, env)
		procs = append(procs, p)
		return p
	}
	othersProcessed := func() bool {
		var n int
		err := bundle.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`, others).Scan(&n)
		return err == nil && n == len(others)
	}

	p := start()
	kills, killedBeforeOthers := 0, 0
	deadline := time.Now().Add(200 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for dead := false; !dead; {
		select {
		case <-arrived:
			// The kill must cut only the poison short, and come within its
			// 5 s forward timeout: give the batch's other events, which the
			// app answered at once, up to 3 s to settle.
			settle := time.Now().Add(3 * time.Second)
			for !othersProcessed() && time.Now().Before(settle) {
				<-tick.C
			}
			if !othersProcessed() {
				killedBeforeOthers++
			}
			p.kill()
			kills++
			p = start()
		case <-tick.C:
			var status string
			var selfRecorded int
			err := bundle.pool.QueryRow(context.Background(), `
				SELECT e.status, (SELECT count(*) FROM webhook_attempts a
				                  WHERE a.event_id = e.event_id AND a.error NOT LIKE '%crashed hookd%')
				FROM webhook_events e WHERE e.event_id = $1`, poison).Scan(&status, &selfRecorded)
			if err != nil {
				t.Fatalf("read the poison event: %v", err)
			}
			if selfRecorded > 0 {
				t.Fatalf("hookd recorded an outcome of the poison's attempt itself: the kill came after its forward timeout")
			}
			dead = status == string(queue.StatusDead)
			if !dead && time.Now().After(deadline) {
				t.Fatalf("the poison event is %s after %d kills, want dead", status, kills)
			}
		}
	}
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}

	store := queue.New(bundle.pool)
	var e queue.Event
	if err := bundle.pool.QueryRow(context.Background(), `SELECT status, attempts, last_error FROM webhook_events WHERE event_id = $1`,
		poison).Scan(&e.Status, &e.Attempts, &e.LastError); err != nil {
		t.Fatal(err)
	}
	if want := queuetest.CrashedError(queue.MaxAttempts); e.Status != queue.StatusDead || e.Attempts != queue.MaxAttempts ||
		e.LastError == nil || *e.LastError != want {
		t.Errorf("poison event: %s after %d attempts, last_error %v; want dead after %d, %q",
			e.Status, e.Attempts, deref(e.LastError), queue.MaxAttempts, want)
	}
	attempts, err := store.Attempts(context.Background(), queue.SourceStripe, poison)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != queue.MaxAttempts {
		t.Errorf("the poison's history holds %d attempts, want %d", len(attempts), queue.MaxAttempts)
	}
	for i, a := range attempts {
		if want := queuetest.CrashedError(i + 1); a.Number != i+1 || a.Succeeded || a.Path != queue.PathRetry || deref(a.Error) != want {
			t.Errorf("poison attempt %d: number %d, succeeded %v, path %s, error %q; want number %d, failed, retry, %q",
				i, a.Number, a.Succeeded, a.Path, deref(a.Error), i+1, want)
		}
	}
	calls := app.calls()
	// The first kill cut the batch's run short and charged nobody; each
	// after it came while the poison ran alone.
	if kills != queue.MaxAttempts+1 || calls[poison] != queue.MaxAttempts+1 {
		t.Errorf("the poison reached the app %d times and hookd was killed %d times, want %d and %d",
			calls[poison], kills, queue.MaxAttempts+1, queue.MaxAttempts+1)
	}
	for _, id := range others {
		if calls[id] != 1 {
			t.Errorf("%s, in the poison's batch, reached the app %d times, want exactly 1", id, calls[id])
		}
	}
	if !othersProcessed() {
		t.Errorf("the other events of the poison's batch are not all processed")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id = ANY ($1)`, others); n != 0 {
		t.Errorf("%d of the other events are still queued, want 0", n)
	}
	t.Logf("%d hookd runs, %d kills (%d before the batch's other events had settled)", len(procs), kills, killedBeforeOthers)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// dashboardForm loads path with client and returns the CSRF token of its
// forms.
func dashboardForm(t testing.TB, client *http.Client, pageURL string) string {
	t.Helper()
	resp, err := client.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("GET %s: %d, want 200 with a CSRF token:\n%s", pageURL, resp.StatusCode, page)
	}
	return string(m[1])
}

// postForm posts form to pageURL with client and fails t unless hookd
// answers with a redirect, as its forms do on success.
func postForm(t testing.TB, client *http.Client, pageURL string, form url.Values) {
	t.Helper()
	resp, err := client.PostForm(pageURL, form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST %s: %d, want 303:\n%s", pageURL, resp.StatusCode, body)
	}
}

// TestLeases_RetryNowDuringAnAttemptRunsItAgainAtOnce proves that a
// person's "Retry now" on an event whose attempt is running makes the
// event due the moment that attempt fails: the retry loop runs its next
// attempt at once, recorded as manual. The loop's interval is an hour, so
// the next attempt reaching the app at all proves it was not the schedule.
func TestLeases_RetryNowDuringAnAttemptRunsItAgainAtOnce(t *testing.T) {
	t.Parallel()
	const email, password = "support@hookd.test", "lease-test-correct-horse"
	bundle := setup(t)
	ev := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})

	held, again := make(chan struct{}, 1), make(chan string, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	// Should the test stop early, the app lets go, so hookd can stop.
	defer releaseOnce.Do(func() { close(release) })
	var first atomic.Bool
	app := newLeaseApp(t, func(r *http.Request) int {
		if first.CompareAndSwap(false, true) {
			held <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return http.StatusInternalServerError
		}
		select {
		case again <- r.Header.Get("Hookd-Attempt"):
		default:
		}
		return http.StatusOK
	})
	base, stopServe, stderr := startServe(t, map[string]string{
		"DATABASE_URL":          bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL":     app.srv.URL,
		// Long enough that the held attempt ends with the app's answer.
		"HOOKD_FORWARD_TIMEOUT": "60s",
		"HOOKD_RETRY_INTERVAL":  "1h",
		"HOOKD_ADMIN_EMAIL":     email,
		"HOOKD_ADMIN_PASSWORD":  password,
	})
	stop := stopOnce(stopServe)
	defer stop()

	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("the retry loop's first attempt never reached the app")
	}

	// A person signs in and presses "Retry now" on the event's page.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	token := dashboardForm(t, client, base+"/login")
	postForm(t, client, base+"/login", url.Values{"email": {email}, "password": {password}, "_csrf": {token}})
	eventPage := base + "/events/" + ev.ID.String()
	token = dashboardForm(t, client, eventPage)
	postForm(t, client, eventPage+"/retry-now", url.Values{"_csrf": {token}, "back": {"/events/" + ev.ID.String()}})
	var manual bool
	if err := bundle.pool.QueryRow(context.Background(), `SELECT manual_retry FROM webhook_events WHERE id = $1`, ev.ID).Scan(&manual); err != nil || !manual {
		t.Fatalf("after Retry now: manual_retry %v, %v; want true", manual, err)
	}

	releaseOnce.Do(func() { close(release) })
	select {
	case attempt := <-again:
		if attempt != "2" {
			t.Errorf("the next attempt came with Hookd-Attempt %q, want 2", attempt)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the event's next attempt never reached the app: the person's retry waited for the loop's interval")
	}
	queuetest.WaitFor(t, 15*time.Second, "the event processed", func() bool {
		markers, rows, ok := queueState(bundle.pool)
		return ok && markers == 1 && rows == 0
	})
	attempts, err := queue.New(bundle.pool).Attempts(context.Background(), queue.SourceStripe, ev.EventID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range attempts {
		status := 0
		if a.HTTPStatus != nil {
			status = *a.HTTPStatus
		}
		got = append(got, fmt.Sprintf("%d %s %s %d", a.Number, a.Path, a.Outcome, status))
	}
	if want := []string{"1 retry failed 500", "2 manual succeeded 200"}; !slices.Equal(got, want) {
		t.Errorf("attempt history %q, want %q", got, want)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v\n%s", err, stderr)
	}
}
