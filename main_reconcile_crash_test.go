package main

import (
	"testing"
	"time"

	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// A crash in a reconcile run is charged only to the event that caused it:
// hookd serve reconciles at start, with default settings, 20 events Stripe's
// Events API lists and hookd never saw, four at a time, oldest first. The
// oldest kills hookd whenever it reaches the app (the test SIGKILLs the
// process then, and starts another), and the app answers the others in
// 300 ms, so at the first kill other recovered events are in the app beside
// it. That kill charges nobody: each run it cut short becomes a suspect,
// and the next run of the schedule queues it instead of running it again
// beside others. The poison is then charged each kill it causes alone and
// is dead after MaxAttempts of them; the other 19 are processed, none dead,
// none charged an attempt for the interruptions.
func TestLeases_PoisonInAReconcileRunTakesNoOtherEvent(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	api := stripetest.NewServer(t)
	ep := api.AddEndpoint(stripetest.Endpoint{})
	now := time.Now()
	poison, _ := api.AddEvent(stripetest.Event{Created: now.Add(-2 * time.Hour)})
	others := make([]string, 19)
	for i := range others {
		others[i], _ = api.AddEvent(stripetest.Event{Created: now.Add(-time.Hour + time.Duration(i)*time.Second)})
	}
	app, arrived := poisonApp(t, poison, 300*time.Millisecond)
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		"STRIPE_API_KEY=" + api.Key(),
		"STRIPE_WEBHOOK_ENDPOINT_ID=" + ep.ID,
		"HOOKD_STRIPE_API_URL=" + api.URL,
	})
	p, kills := rig.killOnEachArrival(rig.start(), arrived, func() bool {
		status, _ := statusOf(t, bundle, poison)
		return status == string(queue.StatusDead)
	}, time.Now().Add(5*time.Minute))
	queuetest.WaitFor(t, 2*time.Minute, "the other 19 processed", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`,
			others) == int64(len(others))
	})
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}

	if status, attempts := statusOf(t, bundle, poison); status != string(queue.StatusDead) || attempts != queue.MaxAttempts {
		t.Errorf("poison: %s after %d attempts, want dead after %d", status, attempts, queue.MaxAttempts)
	}
	calls := app.calls()
	// The first kill cut the reconcile run short; each after it, the
	// poison alone.
	if kills != queue.MaxAttempts+1 || calls[poison] != queue.MaxAttempts+1 {
		t.Errorf("the poison reached the app %d times in %d kills, want %d", calls[poison], kills, queue.MaxAttempts+1)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1
		AND error LIKE '%crashed hookd%' AND path = 'retry'`, poison); n != queue.MaxAttempts {
		t.Errorf("%d attempts of the poison say it crashed hookd running alone, want %d", n, queue.MaxAttempts)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1
		AND path = 'reconcile'`, poison); n != 0 {
		t.Errorf("the poison's reconcile run was charged: %d attempts with path reconcile, want none", n)
	}
	cut := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id <> $1 AND path = 'reconcile'`,
		poison)
	if cut == 0 {
		t.Errorf("no other event was cut short by the first kill: the test proves nothing")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id <> $1
		AND (cleared_at IS NULL OR crashes <> 0)`, poison); n != 0 {
		t.Errorf("%d other events still suspects or charged a crash, want none", n)
	}
	t.Logf("recovered events cut short by the first kill and run alone after it: %d", cut)
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id <> $1`, poison); n != 0 {
		t.Errorf("%d of the other events still on the queue (dead or not), want none", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id <> $1 AND outcome <> 'succeeded'`,
		poison); n != 0 {
		t.Errorf("%d failed attempts recorded for the other events, want none", n)
	}
	// Each other event reached the app once, or twice when the kill cut
	// its run short after its call had gone out (a run is started, and
	// cut short, from the moment its lease is taken to run it, a moment
	// before the call).
	for _, id := range others {
		cutShort := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = $1`, id) == 1
		if n := calls[id]; n != 1 && (n != 2 || !cutShort) {
			t.Errorf("%s reached the app %d times (cut short by a kill: %t), want once, or twice if cut short", id, n, cutShort)
		}
	}
}
