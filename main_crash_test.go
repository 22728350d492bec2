package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// These tests kill the real binary (SIGKILL: it records nothing) while its
// processors run, and prove what leases promise across the crash: a crash
// counts the attempts that had started and no other, an event that kills
// hookd on every attempt ends dead, and a killed replica's events are free
// within seconds.

// crashRig runs hookd processes one after another over one database and
// kills each on demand, logging them all when the test fails.
type crashRig struct {
	t     *testing.T
	bin   string
	env   []string
	procs []*hookdProcess
	// base is the running hookd's address: each listens on a port of its
	// own.
	base atomic.Pointer[string]
}

func newCrashRig(t *testing.T, env []string) *crashRig {
	r := &crashRig{t: t, bin: buildHookdBinary(t), env: env}
	t.Cleanup(func() {
		for i, p := range r.procs {
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
	return r
}

func (r *crashRig) start() *hookdProcess {
	p := startHookdProcess(r.t, r.bin, r.env)
	r.procs = append(r.procs, p)
	r.base.Store(&p.base)
	return p
}

// poisonApp is an app that answers every event at once but poison, which
// it holds until hookd is killed, saying on arrived when it has it.
func poisonApp(t *testing.T, poison string, latency time.Duration) (*leaseApp, chan struct{}) {
	arrived := make(chan struct{}, 1)
	var others atomic.Int32
	app := newLeaseApp(t, func(r *http.Request) int {
		if r.Header.Get("Hookd-Event-Id") != poison {
			others.Add(1)
			defer others.Add(-1)
			select {
			case <-time.After(latency):
				return http.StatusOK
			case <-r.Context().Done():
				return http.StatusServiceUnavailable
			}
		}
		// With a slow app, the kill waits (a moment at most) until other
		// events are in the app beside the poison, when any are coming.
		for wait := time.Now().Add(latency / 2); latency > 0 && others.Load() == 0 && time.Now().Before(wait); {
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		return http.StatusInternalServerError
	})
	return app, arrived
}

// statusOf reads an event's queue status ("" when it has no queue row) and
// attempts.
func statusOf(t *testing.T, bundle *testBundle, id string) (string, int) {
	t.Helper()
	var status string
	var attempts int
	err := bundle.pool.QueryRow(context.Background(),
		`SELECT status, attempts FROM webhook_events WHERE event_id = $1`, id).Scan(&status, &attempts)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("read %s: %v", id, err)
	}
	return status, attempts
}

// deliverUntil2xx delivers event id as Stripe does, to whichever hookd of
// the rig runs, until one answers 2xx or two minutes pass, pausing between
// deliveries as Stripe does. It returns the sender, and the function that
// waits until it is done.
func (r *crashRig) deliverUntil2xx(id string) (*stripeSender, func()) {
	sender := &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
	client := &http.Client{Timeout: 40 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer client.CloseIdleConnections()
		deadline := time.Now().Add(2 * time.Minute)
		for sender.answered.IsZero() && time.Now().Before(deadline) {
			sender.deliver(client, *r.base.Load(), time.Now(), time.Millisecond)
			if sender.answered.IsZero() {
				time.Sleep(500 * time.Millisecond) // Stripe's pause between deliveries
			}
		}
	})
	return sender, wg.Wait
}

// killOnEachArrival kills the running hookd each time the poison reaches
// the app and starts another, until done says so or the deadline passes,
// and returns how many times it killed.
func (r *crashRig) killOnEachArrival(p *hookdProcess, arrived chan struct{}, done func() bool, deadline time.Time) (*hookdProcess, int) {
	kills := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-arrived:
			p.kill()
			kills++
			p = r.start()
		case <-tick.C:
			if time.Now().After(deadline) {
				r.t.Fatalf("not done after %d kills", kills)
			}
		}
	}
	return p, kills
}

// A crash takes no batch-mate with it: the retry loop claims a batch of
// 100 whose first event kills hookd on every attempt, at the default
// concurrency, with the app answering the others in 300 ms, so at the
// first kill dozens of them are in flight beside the poison. That kill
// charges nobody: every run it cut short becomes a suspect and runs again
// alone. The poison is then charged each kill it causes alone and is dead
// after MaxAttempts of them; the other 99 are processed, none dead, none
// charged an attempt for the interruption.
func TestLeases_PoisonInARetryBatchTakesNoBatchMate(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	poison, others := stripeevent.NewID("evt"), newEventIDs(99)
	app, arrived := poisonApp(t, poison, 300*time.Millisecond)
	insertDue(t, bundle.pool, others)
	// The poison is the batch's first.
	insertDue(t, bundle.pool, []string{poison})
	if _, err := bundle.pool.Exec(context.Background(),
		`UPDATE webhook_events SET next_retry_at = now() - interval '1 hour' WHERE event_id = $1`, poison); err != nil {
		t.Fatal(err)
	}
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		// hookd never gives up on the poison before it is killed.
		"HOOKD_FORWARD_TIMEOUT=30s",
		"HOOKD_RETRY_BATCH=100",
		"HOOKD_RETRY_INTERVAL=100ms",
	})
	p, kills := rig.killOnEachArrival(rig.start(), arrived, func() bool {
		status, _ := statusOf(t, bundle, poison)
		return status == string(queue.StatusDead)
	}, time.Now().Add(4*time.Minute))
	queuetest.WaitFor(t, 2*time.Minute, "the other 99 processed", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`, others) == 99
	})
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}

	if status, attempts := statusOf(t, bundle, poison); status != string(queue.StatusDead) || attempts != queue.MaxAttempts {
		t.Errorf("poison: %s after %d attempts, want dead after %d", status, attempts, queue.MaxAttempts)
	}
	calls := app.calls()
	// The first kill cut the batch short; each after it, the poison alone.
	if kills != queue.MaxAttempts+1 || calls[poison] != queue.MaxAttempts+1 {
		t.Errorf("the poison reached the app %d times in %d kills, want %d", calls[poison], kills, queue.MaxAttempts+1)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1
		AND error LIKE '%crashed hookd%'`, poison); n != queue.MaxAttempts {
		t.Errorf("%d attempts of the poison say it crashed hookd, want %d", n, queue.MaxAttempts)
	}
	cut := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id <> $1`, poison)
	if cut == 0 {
		t.Errorf("no batch-mate was cut short by the first kill: the test proves nothing")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id <> $1
		AND (cleared_at IS NULL OR crashes <> 0)`, poison); n != 0 {
		t.Errorf("%d batch-mates still suspects or charged a crash, want none", n)
	}
	t.Logf("batch-mates cut short by the first kill and run alone after it: %d", cut)
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id <> $1`, poison); n != 0 {
		t.Errorf("%d of the other events still on the queue (dead or not), want none", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id <> $1 AND outcome <> 'succeeded'`,
		poison); n != 0 {
		t.Errorf("%d failed attempts recorded for the other events, want none", n)
	}
}

// An event that kills hookd whenever it reaches the app, delivered by
// Stripe: its redelivery after the crash finds it a suspect, charged
// nothing for the inline run, and queues it (answered 200) instead of
// running it inline again; it then runs alone, each run alone that kills
// hookd is charged, and after MaxAttempts of them it is dead instead of
// crashing hookd forever.
func TestLeases_InlineCrashLoopEndsDead(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	poison := stripeevent.NewID("evt")
	app, arrived := poisonApp(t, poison, 0)
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		"HOOKD_FORWARD_TIMEOUT=30s",
		"HOOKD_DEMO_BACKOFF=true",
		"HOOKD_RETRY_INTERVAL=100ms",
	})
	p := rig.start()

	sender, delivered := rig.deliverUntil2xx(poison)
	p, kills := rig.killOnEachArrival(p, arrived, func() bool {
		status, _ := statusOf(t, bundle, poison)
		return status == string(queue.StatusDead)
	}, time.Now().Add(3*time.Minute))
	delivered()
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}

	if sender.answered.IsZero() || sender.body != receiver.Queued.String() {
		t.Errorf("Stripe's deliveries: %d posts, answers %v, last %q (%v); want one answered %q", sender.posts,
			sender.statuses, sender.body, sender.err, receiver.Queued)
	}
	if status, attempts := statusOf(t, bundle, poison); status != string(queue.StatusDead) || attempts != queue.MaxAttempts {
		t.Errorf("poison: %s after %d retries, want dead after %d", status, attempts, queue.MaxAttempts)
	}
	if calls := app.calls()[poison]; kills != queue.MaxAttempts+1 || calls != kills {
		t.Errorf("the poison reached the app %d times in %d kills, want the inline run and %d retries", calls, kills, queue.MaxAttempts)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = $1
		AND path IN ('inline', 'retry') AND crashes = $2 AND cleared_at IS NULL`, poison, queue.MaxAttempts); n != 1 {
		t.Errorf("the poison is not a suspect charged %d crashes", queue.MaxAttempts)
	}
	paths := map[string]int{}
	rows, err := bundle.pool.Query(context.Background(),
		`SELECT path FROM webhook_attempts WHERE event_id = $1 AND error LIKE '%crashed hookd%'`, poison)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var path string
		if err := rows.Scan(&path); err != nil {
			t.Fatal(err)
		}
		paths[path]++
	}
	if paths["inline"] != 0 || paths["retry"] != queue.MaxAttempts {
		t.Errorf("attempts that crashed hookd by path: %v; want %d retry, the inline run charged nothing", paths, queue.MaxAttempts)
	}
}

// A replica killed with deliveries and a drain in flight lets its events
// go within seconds: after a restart, Stripe's redeliveries (every 500 ms)
// are all answered 200, and every event the dead replica had claimed is
// due again and processed, within 10 s.
func TestLeases_KilledReplicaLetsGoWithinSeconds(t *testing.T) {
	t.Parallel()
	const delivered, drained = 20, 20
	bundle := setup(t)
	var mu sync.Mutex
	down := true
	app := newLeaseApp(t, func(r *http.Request) int {
		mu.Lock()
		holdIt := down
		mu.Unlock()
		if holdIt {
			<-r.Context().Done()
		}
		return http.StatusOK
	})
	claimed := newEventIDs(drained)
	insertDue(t, bundle.pool, claimed)
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		"HOOKD_FORWARD_TIMEOUT=60s",
		"HOOKD_RETRY_INTERVAL=100ms",
		"HOOKD_RETRY_BATCH=20",
		"HOOKD_RETRY_CONCURRENCY=20",
	})
	p := rig.start()
	client := &http.Client{Timeout: 70 * time.Second}
	defer client.CloseIdleConnections()
	ids := newEventIDs(delivered)
	for _, id := range ids {
		go func() {
			s := &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
			s.deliver(client, p.base, time.Now(), time.Second)
		}()
	}
	queuetest.WaitFor(t, 30*time.Second, "every delivery and every claimed event in the app", func() bool {
		calls := app.calls()
		return len(calls) == delivered+drained
	})
	p.kill()
	mu.Lock()
	down = false
	mu.Unlock()

	p = rig.start()
	restarted := time.Now()
	senders := make([]*stripeSender, delivered)
	var wg sync.WaitGroup
	for i, id := range ids {
		senders[i] = &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")}
		wg.Go(func() { senders[i].deliver(client, p.base, restarted.Add(10*time.Second), 500*time.Millisecond) })
	}
	wg.Wait()
	var slowest time.Duration
	for _, s := range senders {
		if s.answered.IsZero() {
			t.Errorf("%s: no 200 within 10 s of the restart (%d posts, answers %v, last %v)", s.id, s.posts, s.statuses, s.err)
			continue
		}
		slowest = max(slowest, s.answered.Sub(restarted))
	}
	queuetest.WaitFor(t, 10*time.Second-time.Since(restarted), "the dead replica's claimed events processed", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`,
			claimed) == drained
	})
	t.Logf("slowest redelivery answered 200 %s after the restart; claimed events processed %s after it",
		slowest.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}
}

// A crash takes no member of a replay with it: a replay of 32 queued
// events, at the replays' default batch and concurrency, whose first
// member kills hookd whenever it reaches the app, the app answering the
// others in 300 ms, so at the first kill several members are in flight
// beside the poison and the rest of the batch is claimed, not started.
// That kill charges nobody: the members it cut short become suspects and
// run alone, as the replay's deliveries; those it never started are
// delivered as usual. The poison is charged each kill it causes alone and
// is dead after MaxAttempts of them, failed in the replay with the crash
// as its error; the other 31 are delivered and processed, none dead, none
// charged an attempt.
func TestLeases_PoisonInAReplayTakesNoMember(t *testing.T) {
	t.Parallel()
	const members, name = 32, "after the crash fix"
	bundle := setup(t)
	// The poison's id sorts first: the replay delivers oldest first, and
	// all 32 are received at one moment.
	poison := "evt_replay_poison_00"
	events := make([]queuetest.LoggedOpts, members)
	others := make([]string, 0, members-1)
	for i := range events {
		id := poison
		if i > 0 {
			id = fmt.Sprintf("evt_replay_poison_%02d", i)
			others = append(others, id)
		}
		events[i] = queuetest.LoggedOpts{EventID: id, Queued: true}
	}
	queuetest.InsertLogged(t, bundle.pool, events)
	store := queue.New(bundle.pool)
	replay, err := store.StartReplay(t.Context(), name, queue.ReplayFilter{From: time.Now().Add(-time.Hour),
		To: time.Now().Add(time.Hour), Pending: true}, "ops@example.com")
	if err != nil || replay.Total != members {
		t.Fatalf("start the replay: %d members, %v", replay.Total, err)
	}
	app, arrived := poisonApp(t, poison, 300*time.Millisecond)
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		// hookd never gives up on the poison before it is killed.
		"HOOKD_FORWARD_TIMEOUT=30s",
	})
	progress := func() queue.Replay {
		r, err := store.Replay(context.Background(), replay.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	p, kills := rig.killOnEachArrival(rig.start(), arrived, func() bool {
		return progress().State != queue.ReplayRunning
	}, time.Now().Add(4*time.Minute))
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}

	end := progress()
	if end.State != queue.ReplayDone || end.Delivered != members-1 || end.Failed != 1 || end.Skipped != 0 {
		t.Errorf("the replay ended %s: %d delivered, %d failed, %d skipped; want done, %d delivered, 1 failed",
			end.State, end.Delivered, end.Failed, end.Skipped, members-1)
	}
	crashed := queuetest.CrashedError(queue.MaxAttempts)
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM replay_events WHERE replay_id = $1 AND event_id = $2
		AND state = 'failed' AND error = $3`, replay.ID, poison, crashed); n != 1 {
		t.Errorf("the poison is not failed in the replay with %q", crashed)
	}
	var e queue.Event
	if err := bundle.pool.QueryRow(context.Background(), `SELECT status, attempts, last_error FROM webhook_events
		WHERE event_id = $1`, poison).Scan(&e.Status, &e.Attempts, &e.LastError); err != nil {
		t.Fatal(err)
	}
	if e.Status != queue.StatusDead || e.Attempts != queue.MaxAttempts || deref(e.LastError) != crashed {
		t.Errorf("poison: %s after %d attempts, last_error %q; want dead after %d, %q",
			e.Status, e.Attempts, deref(e.LastError), queue.MaxAttempts, crashed)
	}
	// The first kill cut the replay's deliveries short; each after it,
	// the poison alone.
	if calls := app.calls(); kills != queue.MaxAttempts+1 || calls[poison] != queue.MaxAttempts+1 {
		t.Errorf("the poison reached the app %d times in %d kills, want %d", calls[poison], kills, queue.MaxAttempts+1)
	}
	history, err := store.Attempts(context.Background(), queue.SourceStripe, poison)
	if err != nil {
		t.Fatal(err)
	}
	var charged []queue.Attempt
	for _, a := range history {
		if a.Path == queue.PathReplay {
			charged = append(charged, a)
		}
	}
	if len(charged) != queue.MaxAttempts {
		t.Errorf("the poison's history holds %d replay attempts, want %d, one per kill alone", len(charged), queue.MaxAttempts)
	}
	for i, a := range charged {
		if want := queuetest.CrashedError(i + 1); a.Number != i+1 || a.Succeeded || deref(a.Error) != want {
			t.Errorf("poison's replay attempt %d: number %d, succeeded %v, error %q; want number %d, failed, %q",
				i, a.Number, a.Succeeded, deref(a.Error), i+1, want)
		}
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = $1
		AND path = 'replay' AND crashes = $2 AND cleared_at IS NULL`, poison, queue.MaxAttempts); n != 1 {
		t.Errorf("the poison is not a suspect charged %d crashes", queue.MaxAttempts)
	}

	// The others: delivered by the replay, processed, charged nothing.
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM replay_events WHERE replay_id = $1 AND event_id = ANY ($2)
		AND state = 'delivered'`, replay.ID, others); n != members-1 {
		t.Errorf("%d of the other %d members delivered, want all", n, members-1)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`,
		others); n != members-1 {
		t.Errorf("%d of the other %d processed, want all", n, members-1)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id = ANY ($1)`, others); n != 0 {
		t.Errorf("%d of the other events still on the queue (dead or not), want none", n)
	}
	cut := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = ANY ($1)`, others)
	if cut == 0 {
		t.Errorf("no member was cut short beside the poison by the first kill: the test proves nothing")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = ANY ($1)
		AND (cleared_at IS NULL OR crashes <> 0 OR interruptions <> 1 OR path <> 'replay')`, others); n != 0 {
		t.Errorf("%d members cut short are still suspects, were charged a crash, or were cut short more than once", n)
	}
	// Each other member's history: the inline delivery that queued it,
	// and the replay's delivery that succeeded; nothing for a crash,
	// whether it was cut short or never started.
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = ANY ($1)
		AND path <> 'inline' AND (path <> 'replay' OR outcome <> 'succeeded')`, others); n != 0 {
		t.Errorf("%d attempts of the other members other than their replay's success, want none", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = ANY ($1)
		AND path = 'replay'`, others); n != members-1 {
		t.Errorf("%d replay attempts recorded for the other %d members, want one each", n, members-1)
	}
	notStarted := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM unnest($1::text[]) AS id
		WHERE NOT EXISTS (SELECT 1 FROM webhook_suspects s WHERE s.event_id = id)`, others)
	t.Logf("%d kills; members cut short by the first kill and run alone after it: %d; never cut short: %d", kills, cut, notStarted)
}

// TestLeases_AFanoutCrashIsChargedToItsDestination proves that a crash in
// a fan-out is charged only to its cause: an event routed to two
// destinations, whose call to one of them kills hookd each time (the test
// SIGKILLs the real binary when that app gets it), is charged nothing for
// the inline kill; its delivery to each destination then runs alone, the
// poisoned one is charged each kill and made dead after MaxAttempts, and
// the other is delivered and processed, charged nothing.
func TestLeases_AFanoutCrashIsChargedToItsDestination(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	poison := stripeevent.NewID("evt")
	killer, arrived := poisonApp(t, poison, 0)
	calm := newLeaseApp(t, func(*http.Request) int { return http.StatusOK })
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, "destinations:\n  - name: calm\n    url: %s\n  - name: killer\n    url: %s\n",
		calm.srv.URL, killer.srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_DESTINATIONS_FILE=" + file,
		"HOOKD_FORWARD_TIMEOUT=30s",
		"HOOKD_DEMO_BACKOFF=true",
		"HOOKD_RETRY_INTERVAL=100ms",
	})
	p := rig.start()
	_, delivered := rig.deliverUntil2xx(poison)
	deliveryOf := func(destination string) (status string, attempts int) {
		err := bundle.pool.QueryRow(context.Background(), `SELECT status, attempts FROM webhook_events
			WHERE event_id = $1 AND destination = $2`, poison, destination).Scan(&status, &attempts)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return status, attempts
	}
	p, kills := rig.killOnEachArrival(p, arrived, func() bool {
		status, _ := deliveryOf("killer")
		calmStatus, _ := deliveryOf("calm")
		return status == string(queue.StatusDead) && calmStatus == ""
	}, time.Now().Add(3*time.Minute))
	delivered()
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}
	if status, attempts := deliveryOf("killer"); status != string(queue.StatusDead) || attempts != queue.MaxAttempts {
		t.Errorf("the killer's delivery: %q after %d attempts, want dead after %d", status, attempts, queue.MaxAttempts)
	}
	if kills != queue.MaxAttempts+1 {
		t.Errorf("%d kills, want the inline run's and %d alone", kills, queue.MaxAttempts)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts
		WHERE event_id = $1 AND destination = 'calm' AND outcome = 'failed'`, poison); n != 0 {
		t.Errorf("%d attempts to calm charged, want none", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts
		WHERE event_id = $1 AND destination = 'killer' AND error LIKE '%crashed hookd%'`, poison); n != queue.MaxAttempts {
		t.Errorf("%d of the killer's attempts say they crashed hookd, want %d", n, queue.MaxAttempts)
	}
	if n := calm.calls()[poison]; n < 1 || n > 2 {
		t.Errorf("calm got the event %d times, want once after the crash (and maybe once in the inline run it cut short)", n)
	}
}
