package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// fanoutEvent is one of the fan-out test's events: its payload, and the
// destinations that take it.
type fanoutEvent struct {
	id, typ string
	amount  int // -1: the event's object has no amount
	payload []byte
}

// fanoutEvents makes n events of three types, with amounts on each side of
// 1000 and some with none, and says which of billing (invoice.*), big (an
// amount of at least 1000) and all (every event) takes each.
func fanoutEvents(n int) []fanoutEvent {
	types := []string{"invoice.paid", "customer.created", "charge.succeeded"}
	out := make([]fanoutEvent, n)
	for i := range out {
		e := fanoutEvent{id: stripeevent.NewID("evt"), typ: types[i%len(types)], amount: -1}
		object := `{"id":"obj_` + fmt.Sprint(i) + `","object":"thing"}`
		if i%5 != 0 {
			e.amount = (i * 37) % 2000
			object = fmt.Sprintf(`{"id":"obj_%d","object":"thing","amount":%d,"currency":"usd"}`, i, e.amount)
		}
		e.payload = fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"livemode":false,"created":%d,`+
			`"api_version":"2024-06-20","data":{"object":%s}}`, e.id, e.typ, time.Now().Unix(), object)
		out[i] = e
	}
	return out
}

// takes says whether the fan-out test's destination name takes e.
func (e fanoutEvent) takes(name string) bool {
	switch name {
	case "billing":
		return strings.HasPrefix(e.typ, "invoice.")
	case "big":
		return e.amount >= 1000
	}
	return true
}

// TestFanout_EachAppGetsItsEventsWhileOneFails proves issue 43's first
// claim against a running hookd: three destinations (billing takes
// invoice.*, big a CEL filter on the amount, all every event), the big
// one failing every call for its first 12 s, and 300 signed events sent
// as Stripe sends them. Each app gets exactly the events its route takes,
// each call naming its destination; every event ends processed; the calls
// to the healthy apps arrive while Stripe waits, within 1 s of hookd's
// answer; and no app has one event twice at once.
func TestFanout_EachAppGetsItsEventsWhileOneFails(t *testing.T) {
	names := []string{"billing", "big", "all"}
	apps := map[string]*leaseApp{}
	var mu sync.Mutex
	var firstBig time.Time
	wrongHeader := map[string]int{}
	for _, name := range names {
		apps[name] = newLeaseApp(t, func(r *http.Request) int {
			mu.Lock()
			defer mu.Unlock()
			if got := r.Header.Get("Hookd-Destination"); got != name {
				wrongHeader[name+" got "+got]++
			}
			if name != "big" {
				return http.StatusOK
			}
			if firstBig.IsZero() {
				firstBig = time.Now()
			}
			if time.Since(firstBig) < 12*time.Second {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
	}
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	yaml := fmt.Sprintf(`destinations:
  - name: billing
    url: %s
    types: ["invoice.*"]
  - name: big
    url: %s
    filter: "data.object.amount >= 1000 && data.object.currency == \"usd\""
  - name: all
    url: %s
`, apps["billing"].srv.URL, apps["big"].srv.URL, apps["all"].srv.URL)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	b := setup(t)
	// The retry loop looks every 6 s: the big app's deliveries then fail
	// at most four times in its 12 s of failures, and the fifth, 24 s of
	// the demo's backoff later, is never needed to be the last.
	base, stop, stderr := startServe(t, map[string]string{"DATABASE_URL": b.dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_DESTINATIONS_FILE": file, "HOOKD_DEMO_BACKOFF": "true", "HOOKD_RETRY_INTERVAL": "6s"})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, stderr)
		}
	}()

	events := fanoutEvents(300)
	senders := make([]*stripeSender, len(events))
	var wg sync.WaitGroup
	work := make(chan int)
	client := &http.Client{Timeout: 30 * time.Second}
	for range 16 {
		wg.Go(func() {
			for i := range work {
				senders[i] = &stripeSender{id: events[i].id, payload: events[i].payload}
				senders[i].deliver(client, base, time.Now().Add(30*time.Second), 100*time.Millisecond)
			}
		})
	}
	for i := range events {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, s := range senders {
		if s.err != nil || s.answered.IsZero() {
			t.Fatalf("%s: no 2xx: %v (statuses %v)", s.id, s.err, s.statuses)
		}
	}

	queuetest.WaitFor(t, 90*time.Second, "every event processed and the queue empty", func() bool {
		markers, rows, ok := queueState(b.pool)
		return ok && markers == len(events) && rows == 0
	})

	for _, name := range names {
		arrivals, overlaps := apps[name].seen()
		if len(overlaps) > 0 {
			t.Errorf("%s: events in the app twice at once: %v", name, overlaps)
		}
		var want []string
		for i, e := range events {
			if !e.takes(name) {
				continue
			}
			want = append(want, e.id)
			if name == "big" {
				continue
			}
			// A healthy destination is called while Stripe waits.
			at := arrivals[e.id]
			if len(at) != 1 {
				t.Errorf("%s: %s arrived %d times, want once", name, e.id, len(at))
				continue
			}
			if gap := senders[i].answered.Sub(at[0]); gap < 0 || gap > time.Second {
				t.Errorf("%s: %s arrived %v before hookd's 200", name, e.id, gap)
			}
		}
		got := slices.Sorted(maps.Keys(arrivals))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s got %d events, want %d (its route's): extra or missing: %v", name, len(got), len(want),
				symmetricDifference(got, want))
		}
	}
	if len(wrongHeader) > 0 {
		t.Errorf("calls without their destination's Hookd-Destination: %v", wrongHeader)
	}
	// An event without an amount fails big's filter: a recorded non-match.
	for _, e := range events {
		want := int64(0)
		if e.amount < 0 {
			want = 1
		}
		if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_route_misses
			WHERE event_id = '`+e.id+`' AND destination = 'big' AND error LIKE '%amount%'`); n != want {
			t.Errorf("%s (amount %d): %d route misses of big recorded, want %d", e.id, e.amount, n, want)
		}
	}
	var failedBig int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_attempts
		WHERE destination = 'big' AND outcome = 'failed'`).Scan(&failedBig); err != nil {
		t.Fatal(err)
	}
	if failedBig == 0 {
		t.Error("no attempt to big failed: its 12 s of failures were not exercised")
	}
	t.Logf("big: %d failed attempts before every delivery succeeded", failedBig)
}

// symmetricDifference is what is in one of a and b, sorted, and not in
// the other.
func symmetricDifference(a, b []string) []string {
	in := map[string]int{}
	for _, x := range a {
		in[x]++
	}
	for _, x := range b {
		in[x]--
	}
	var out []string
	for x, n := range in {
		if n != 0 {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

// TestFanout_AFilterThatDoesNotCompileIsRefusedAtStart proves that hookd
// serve refuses a destinations file whose filter does not compile, with
// one line naming the destination and the field, and applies nothing.
func TestFanout_AFilterThatDoesNotCompileIsRefusedAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	if err := os.WriteFile(file, []byte(`destinations:
  - name: billing
    url: http://127.0.0.1:1/stripe
  - name: big
    url: http://127.0.0.1:1/stripe
    filter: "data.object.amount >= "
`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := setup(t)
	_, _, stderr, err := tryServe(t, map[string]string{"DATABASE_URL": b.dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_DESTINATIONS_FILE": file, "HOOKD_METRICS_ADDR": "127.0.0.1:0"})
	if err == nil {
		t.Fatal("hookd serve started with a filter that does not compile")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, `destination "big"`) || !strings.Contains(msg, "filter") {
		t.Errorf("error %q: want one line naming destination \"big\" and its filter\n%s", msg, stderr)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM hookd_replicas`); n != 0 {
		t.Errorf("a start refused for its file registered %d replicas", n)
	}
}

// TestFanout_AOneAppDatabaseUpgradesInPlace proves that a database of the
// one-URL release, with a queued and a dead event on its queue, migrates
// in place: both become deliveries to the destination "default", the
// queued one is delivered to HOOKD_FORWARD_URL's app by the retry loop,
// and the dead one is kept, dead, until a person's retry delivers it.
func TestFanout_AOneAppDatabaseUpgradesInPlace(t *testing.T) {
	dbURL := unmigratedDatabaseURL(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	// 00033 is the last migration of the one-URL release.
	if _, err := provider.UpTo(t.Context(), 33); err != nil {
		t.Fatal(err)
	}
	queued, dead := stripeevent.NewID("evt"), stripeevent.NewID("evt")
	if _, err := pool.Exec(t.Context(), `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts, last_error, next_retry_at,
		                            last_attempt_at)
		VALUES ('stripe', $1, 'invoice.paid', $3, 'retrying', 1, 'HTTP 500', now(), now()),
		       ('stripe', $2, 'invoice.paid', $4, 'dead', 5, 'HTTP 500', now(), now())`,
		queued, dead, stripeevent.Minimal(queued, "invoice.paid"), stripeevent.Minimal(dead, "invoice.paid")); err != nil {
		t.Fatal(err)
	}

	app := newLeaseApp(t, func(*http.Request) int { return http.StatusOK })
	_, stop, stderr := startServe(t, map[string]string{"DATABASE_URL": dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL": app.srv.URL, "HOOKD_RETRY_INTERVAL": "200ms"})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, stderr)
		}
	}()
	destinationOf := func(id string) string {
		var d string
		if err := pool.QueryRow(t.Context(), `SELECT coalesce(min(destination), '') FROM webhook_events WHERE event_id = $1`,
			id).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := destinationOf(dead); d != "default" {
		t.Fatalf("the dead event's delivery is to %q after the upgrade, want default", d)
	}
	queuetest.WaitFor(t, 20*time.Second, "the queued event delivered and marked", func() bool {
		return app.calls()[queued] == 1 &&
			queuetest.Count(t, pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = '`+queued+`'`) == 1
	})
	if n := app.calls()[dead]; n != 0 {
		t.Fatalf("the dead event reached the app %d times before anyone retried it", n)
	}
	var id uuid.UUID
	if err := pool.QueryRow(t.Context(), `SELECT id FROM webhook_events WHERE event_id = $1`, dead).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if ok, err := queue.New(pool).RetryDead(t.Context(), id); err != nil || !ok {
		t.Fatalf("retry the dead event: %v, %v", ok, err)
	}
	queuetest.WaitFor(t, 20*time.Second, "the dead event delivered once retried", func() bool {
		return app.calls()[dead] == 1 && destinationOf(dead) == ""
	})
	var destinations []string
	rows, err := pool.Query(t.Context(), `SELECT DISTINCT destination FROM webhook_attempts WHERE event_id IN ($1, $2)`,
		queued, dead)
	if err != nil {
		t.Fatal(err)
	}
	if destinations, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(destinations, []string{"default"}) {
		t.Errorf("attempts of the upgraded events name destinations %v, want [default]", destinations)
	}
}

// TestFanout_APausedDestinationWaitsAndNoOtherDoes proves a destination's
// own pause: while a person has paused one of two destinations, every
// event reaches the other while Stripe waits, and the paused one's
// deliveries wait on the queue with no attempt spent; once it resumes,
// each reaches it exactly once.
func TestFanout_APausedDestinationWaitsAndNoOtherDoes(t *testing.T) {
	ok := func(*http.Request) int { return http.StatusOK }
	apps := map[string]*leaseApp{"crm": newLeaseApp(t, ok), "analytics": newLeaseApp(t, ok)}
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, "destinations:\n  - name: crm\n    url: %s\n  - name: analytics\n    url: %s\n",
		apps["crm"].srv.URL, apps["analytics"].srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	b := setup(t)
	base, stop, stderr := startServe(t, map[string]string{"DATABASE_URL": b.dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_DESTINATIONS_FILE": file, "HOOKD_DEMO_BACKOFF": "true", "HOOKD_RETRY_INTERVAL": "200ms"})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, stderr)
		}
	}()
	if _, err := b.pool.Exec(t.Context(), `UPDATE destinations SET paused_at = now(), paused_by = 'ana',
		paused_reason = 'a deploy of the CRM' WHERE name = 'crm'`); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	send := func() string {
		id := stripeevent.NewID("evt")
		s := &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		s.deliver(client, base, time.Now().Add(10*time.Second), 50*time.Millisecond)
		if s.err != nil || s.answered.IsZero() {
			t.Fatalf("%s: no 2xx: %v", id, s.err)
		}
		return id
	}
	// The replicas read a pause within a second: until this one has, an
	// event may still reach the CRM.
	var sent []string
	queuetest.WaitFor(t, 10*time.Second, "the pause read", func() bool {
		id := send()
		return queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events
			WHERE event_id = '`+id+`' AND destination = 'crm' AND attempts = 0 AND last_error LIKE '%paused by ana%'`) == 1
	})
	for range 20 {
		sent = append(sent, send())
	}
	for _, id := range sent {
		if n := apps["analytics"].calls()[id]; n != 1 {
			t.Errorf("analytics got %s %d times while the CRM was paused, want once while Stripe waited", id, n)
		}
		if n := apps["crm"].calls()[id]; n != 0 {
			t.Errorf("the paused CRM got %s %d times", id, n)
		}
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts WHERE destination = 'crm' AND outcome = 'failed'`); n != 0 {
		t.Errorf("%d attempts to the paused CRM spent", n)
	}
	if _, err := b.pool.Exec(t.Context(), `UPDATE destinations SET paused_at = NULL, paused_by = NULL, paused_reason = NULL
		WHERE name = 'crm'`); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 30*time.Second, "the CRM's deliveries made once it resumed", func() bool {
		markers, rows, ok := queueState(b.pool)
		return ok && rows == 0 && markers >= len(sent)
	})
	for _, id := range sent {
		if n := apps["crm"].calls()[id]; n != 1 {
			t.Errorf("the CRM got %s %d times after it resumed, want once", id, n)
		}
	}
}

// TestFanout_SIGHUPRetiresADestinationTakenOut proves that hookd applies
// HOOKD_DESTINATIONS_FILE anew on SIGHUP, and what becomes of a destination
// taken out of it: with billing and crm configured and the CRM's app
// failing every call, the CRM's deliveries go dead; crm is then taken out
// of the file and hookd sent SIGHUP. crm is retired, not forgotten: its
// dead deliveries stay on the queue, and it gets no new event, while
// billing gets every one. A file that does not parse, sent next, changes
// nothing.
func TestFanout_SIGHUPRetiresADestinationTakenOut(t *testing.T) {
	ok := func(*http.Request) int { return http.StatusOK }
	billing := newLeaseApp(t, ok)
	crm := newLeaseApp(t, func(*http.Request) int { return http.StatusInternalServerError })
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("destinations:\n  - name: billing\n    url: %s\n  - name: crm\n    url: %s\n", billing.srv.URL, crm.srv.URL))
	b := setup(t)
	p := startHookdProcess(t, buildHookdBinary(t), []string{"DATABASE_URL=" + b.dbURL, "STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_DESTINATIONS_FILE=" + file, "HOOKD_DEMO_BACKOFF=true", "HOOKD_RETRY_INTERVAL=200ms"})
	defer func() {
		if err := p.terminate(); err != nil {
			t.Errorf("stop: %v\n%s", err, p.log)
		}
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	send := func() string {
		id := stripeevent.NewID("evt")
		s := &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		s.deliver(client, p.base, time.Now().Add(10*time.Second), 50*time.Millisecond)
		if s.err != nil || s.answered.IsZero() {
			t.Fatalf("%s: no 2xx: %v", id, s.err)
		}
		return id
	}
	before := []string{send(), send(), send()}
	queuetest.WaitFor(t, 60*time.Second, "the CRM's three deliveries dead", func() bool {
		return queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE destination = 'crm' AND status = 'dead'`) == 3
	})

	write(fmt.Sprintf("destinations:\n  - name: billing\n    url: %s\n", billing.srv.URL))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 10*time.Second, "crm retired", func() bool {
		return queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations WHERE name = 'crm' AND retired_at IS NOT NULL`) == 1
	})
	after := []string{send(), send()}
	for _, id := range after {
		if n := billing.calls()[id]; n != 1 {
			t.Errorf("billing got %s %d times, want once", id, n)
		}
		if n := crm.calls()[id]; n != 0 {
			t.Errorf("the retired crm got %s %d times", id, n)
		}
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE destination = 'crm' AND status = 'dead'`); n != 3 {
		t.Errorf("%d of the retired crm's dead deliveries left, want all 3 kept for support", n)
	}
	for _, id := range before {
		if n := billing.calls()[id]; n != 1 {
			t.Errorf("billing got %s %d times, want once", id, n)
		}
	}

	write("destinations:\n  - name: billing\n    urll: http://x\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 10*time.Second, "the bad file refused in the log", func() bool {
		return strings.Contains(p.log.String(), "HOOKD_DESTINATIONS_FILE not applied")
	})
	if id := send(); billing.calls()[id] != 1 {
		t.Errorf("billing did not get an event after a bad file was refused")
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations WHERE retired_at IS NULL`); n != 1 {
		t.Errorf("%d destinations in service after the bad file, want billing alone", n)
	}
}

// TestFanout_ADestinationDownOpensItsOwnBreaker proves each destination's
// own circuit breaker: while one of two apps answers 503 to every call,
// its breaker opens after HOOKD_BREAKER_FAILURES failures in a row, and
// from then on its deliveries wait on the queue with no attempt spent,
// while the other app gets every event while Stripe waits. Once the app
// is back, a probe closes the breaker and each waiting delivery reaches it
// exactly once.
func TestFanout_ADestinationDownOpensItsOwnBreaker(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	up := newLeaseApp(t, func(*http.Request) int { return http.StatusOK })
	flaky := newLeaseApp(t, func(*http.Request) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, "destinations:\n  - name: up\n    url: %s\n  - name: flaky\n    url: %s\n",
		up.srv.URL, flaky.srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	b := setup(t)
	base, stop, stderr := startServe(t, map[string]string{"DATABASE_URL": b.dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_DESTINATIONS_FILE": file, "HOOKD_BREAKER_FAILURES": "3", "HOOKD_BREAKER_PROBE": "1s",
		"HOOKD_DEMO_BACKOFF": "true", "HOOKD_RETRY_INTERVAL": "200ms"})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, stderr)
		}
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	var sent []string
	send := func() {
		id := stripeevent.NewID("evt")
		s := &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		s.deliver(client, base, time.Now().Add(10*time.Second), 50*time.Millisecond)
		if s.err != nil || s.answered.IsZero() {
			t.Fatalf("%s: no 2xx: %v", id, s.err)
		}
		if n := up.calls()[id]; n != 1 {
			t.Errorf("up got %s %d times by hookd's 200, want once", id, n)
		}
		sent = append(sent, id)
	}
	queuetest.WaitFor(t, 20*time.Second, "flaky's breaker open", func() bool {
		send()
		return queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations WHERE name = 'flaky' AND breaker_opened_at IS NOT NULL`) == 1
	})
	spent := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts WHERE destination = 'flaky'`)
	held := len(sent)
	for range 10 {
		send()
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts WHERE destination = 'flaky'`); n != spent {
		t.Errorf("%d attempts to flaky while its breaker was open, want none", n-spent)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations WHERE name = 'up' AND breaker_opened_at IS NOT NULL`); n != 0 {
		t.Error("up's breaker opened on flaky's failures")
	}
	down.Store(false)
	queuetest.WaitFor(t, 60*time.Second, "every delivery to flaky made once it was back", func() bool {
		markers, rows, ok := queueState(b.pool)
		return ok && rows == 0 && markers == len(sent)
	})
	for i, id := range sent {
		n := flaky.calls()[id]
		switch {
		case n < 1:
			t.Errorf("flaky never got %s", id)
		case i >= held && n != 1:
			t.Errorf("flaky got %s, sent while its breaker was open, %d times, want once", id, n)
		}
	}
	t.Logf("%d events; %d attempts to flaky before its breaker opened", len(sent), spent)
}

// TestFanout_ARateHoldsAcrossReplicas proves that a destination's rate is
// shared by the replicas: three hookd replicas on one database, each
// getting a third of 300 signed events, call a destination of rate 20
// at most 20 times (and one of tolerance) in any 1 s window, and every
// event reaches it; a destination without a rate, beside it, gets every
// event while Stripe waits. HOOKD_FORWARD_RATE, the one app's rate, is
// shared the same way (the second case, two replicas).
func TestFanout_ARateHoldsAcrossReplicas(t *testing.T) {
	for _, c := range []struct {
		name     string
		replicas int
		events   int
		oneApp   bool
	}{{"destination rate, three replicas", 3, 300, false}, {"HOOKD_FORWARD_RATE, two replicas", 2, 120, true}} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []time.Time
			paced := newLeaseApp(t, func(*http.Request) int {
				mu.Lock()
				calls = append(calls, time.Now())
				mu.Unlock()
				return http.StatusOK
			})
			free := newLeaseApp(t, func(*http.Request) int { return http.StatusOK })
			b := setup(t)
			env := map[string]string{"DATABASE_URL": b.dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
				"HOOKD_DEMO_BACKOFF": "true", "HOOKD_RETRY_INTERVAL": "200ms"}
			if c.oneApp {
				env["HOOKD_FORWARD_URL"], env["HOOKD_FORWARD_RATE"] = paced.srv.URL, "20"
			} else {
				file := filepath.Join(t.TempDir(), "destinations.yaml")
				if err := os.WriteFile(file, fmt.Appendf(nil, "destinations:\n  - name: paced\n    url: %s\n    rate: 20\n"+
					"  - name: free\n    url: %s\n", paced.srv.URL, free.srv.URL), 0o600); err != nil {
					t.Fatal(err)
				}
				env["HOOKD_DESTINATIONS_FILE"] = file
			}
			var bases []string
			for range c.replicas {
				base, stop, stderr := startServe(t, maps.Clone(env))
				defer func() {
					if err := stop(); err != nil {
						t.Errorf("stop: %v\n%s", err, stderr)
					}
				}()
				bases = append(bases, base)
			}
			events := fanoutEvents(c.events)
			var wg sync.WaitGroup
			client := &http.Client{Timeout: 30 * time.Second}
			for i, e := range events {
				wg.Go(func() {
					s := &stripeSender{id: e.id, payload: e.payload}
					s.deliver(client, bases[i%len(bases)], time.Now().Add(30*time.Second), 100*time.Millisecond)
					if s.err != nil || s.answered.IsZero() {
						t.Errorf("%s: no 2xx: %v", e.id, s.err)
					}
				})
			}
			wg.Wait()
			queuetest.WaitFor(t, 90*time.Second, "every event delivered at the rate", func() bool {
				markers, rows, ok := queueState(b.pool)
				return ok && rows == 0 && markers == len(events)
			})
			mu.Lock()
			at := slices.Clone(calls)
			mu.Unlock()
			most := mostInOneSecond(at)
			if most > 21 {
				t.Errorf("%d calls to the paced app in one 1 s window, want at most 20 and one of tolerance", most)
			}
			if len(at) != len(events) {
				t.Errorf("the paced app got %d calls, want %d", len(at), len(events))
			}
			if !c.oneApp {
				for _, e := range events {
					if n := free.calls()[e.id]; n != 1 {
						t.Errorf("the free destination got %s %d times, want once", e.id, n)
					}
				}
			}
			t.Logf("%d calls in %v, at most %d in a 1 s window", len(at), at[len(at)-1].Sub(at[0]).Round(time.Millisecond), most)
		})
	}
}

// TestFanout_ADashboardDestinationIsDeliveredToLive proves that without a
// destinations file, a destination an admin adds on the dashboard is
// delivered to beside HOOKD_FORWARD_URL's default, from the next event on
// and without a restart, once hookd started with one; and that its
// removal stops its calls.
func TestFanout_ADashboardDestinationIsDeliveredToLive(t *testing.T) {
	ok := func(*http.Request) int { return http.StatusOK }
	main, crm, analytics := newLeaseApp(t, ok), newLeaseApp(t, ok), newLeaseApp(t, ok)
	b := setup(t)
	store := queue.New(b.pool)
	add := func(name, url string) {
		t.Helper()
		d, err := destinations.CheckEntry(destinations.Entry{Name: name, URL: url, Source: destinations.SourceDashboard})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.InTx(t.Context(), func(tx *queue.Tx) error {
			return tx.AddManagedDestination(t.Context(), queue.ManagedWrite{Destination: d, By: "ana@example.com"}, nil)
		}); err != nil {
			t.Fatal(err)
		}
	}
	add("crm", crm.srv.URL)
	base, stop, stderr := startServe(t, map[string]string{"DATABASE_URL": b.dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL": main.srv.URL})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, stderr)
		}
		if t.Failed() {
			t.Logf("hookd's log:\n%s", stderr)
		}
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	send := func() string {
		id := stripeevent.NewID("evt")
		s := &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		s.deliver(client, base, time.Now().Add(10*time.Second), 50*time.Millisecond)
		if s.err != nil || s.answered.IsZero() {
			t.Fatalf("%s: no 2xx: %v", id, s.err)
		}
		return id
	}
	first := send()
	if main.calls()[first] != 1 || crm.calls()[first] != 1 {
		t.Fatalf("default got %d, crm %d calls of the first event, want one each", main.calls()[first], crm.calls()[first])
	}
	add("analytics", analytics.srv.URL)
	queuetest.WaitFor(t, 10*time.Second, "analytics delivered to once added", func() bool {
		id := send()
		return analytics.calls()[id] == 1
	})
	if err := store.InTx(t.Context(), func(tx *queue.Tx) error {
		_, err := tx.RemoveManagedDestination(t.Context(), "crm")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 10*time.Second, "crm no longer called once removed", func() bool {
		id := send()
		return crm.calls()[id] == 0 && main.calls()[id] == 1
	})
}
