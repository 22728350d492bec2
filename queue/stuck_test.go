package queue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// A claim counts, an outcome clears the count, a claim handed back at
// shutdown takes itself back, and a second claim without an outcome (its
// claimer died and its lease expired) makes the event stuck.
func TestClaims_CountUntilAnOutcome(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_claims"})
	claims := func() int {
		t.Helper()
		got, err := s.Event(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Claims
	}
	expire := func() {
		t.Helper()
		if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET next_retry_at = now() WHERE id = $1`, e.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_leases SET expires_at = now() - interval '1 second'`); err != nil {
			t.Fatal(err)
		}
	}
	claimOne := func() queue.Claimed {
		t.Helper()
		got, err := s.ClaimAttempts(ctx, 10, time.Minute)
		if err != nil || len(got.Claimed) != 1 {
			t.Fatalf("claim: %v, %v; want the one event", got.Claimed, err)
		}
		return got.Claimed[0]
	}

	claimed := claimOne()
	if claimed.Event.Claims != 1 || claims() != 1 {
		t.Fatalf("after one claim: %d (returned %d), want 1", claims(), claimed.Event.Claims)
	}
	if _, err := s.SettleAttempts(ctx, []queue.Settled{{Claimed: claimed, Kind: queue.SettleReleased}}); err != nil {
		t.Fatal(err)
	}
	if got := claims(); got != 0 {
		t.Errorf("after the claim was handed back: %d, want 0", got)
	}

	claimOne()
	expire()
	claimed = claimOne()
	if got := claims(); got != 2 || !claimed.Event.Stuck(time.Now(), time.Hour, queue.WaitUnexplained) {
		t.Errorf("claimed twice without an outcome: claims %d, stuck %v; want 2 and stuck", got, claimed.Event.Stuck(time.Now(), time.Hour, queue.WaitUnexplained))
	}
	if n, err := s.CountStuck(ctx, time.Hour, queue.WaitUnexplained); err != nil || n != 1 {
		t.Errorf("CountStuck: %d, %v; want 1", n, err)
	}

	if _, err := s.SettleAttempts(ctx, []queue.Settled{{Claimed: claimed, Kind: queue.SettleFailed, Attempt: &queue.NewAttempt{
		Source: queue.SourceStripe, EventID: claimed.Event.EventID, Path: queue.PathRetry, Number: claimed.Event.Attempts, Error: "boom"}}}); err != nil {
		t.Fatal(err)
	}
	if got := claims(); got != 0 {
		t.Errorf("after a failed attempt was recorded: %d, want 0", got)
	}
	if n, err := s.CountStuck(ctx, time.Hour, queue.WaitUnexplained); err != nil || n != 0 {
		t.Errorf("CountStuck after the outcome: %d, %v; want 0", n, err)
	}
}

func TestCountStuck_OverdueBeyondTheClaimWindow(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{DueIn: -10 * time.Minute})                                 // stuck
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{DueIn: -30 * time.Second})                                 // due, not yet stuck
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{DueIn: time.Hour})                                         // waiting
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, DueIn: -time.Hour}) // dead
	n, err := s.CountStuck(t.Context(), 2*time.Minute, queue.WaitUnexplained)
	if err != nil || n != 1 {
		t.Fatalf("CountStuck: %d, %v; want 1", n, err)
	}
	page, err := s.Events(t.Context(), queue.EventFilter{Status: queue.StatusPending, StuckAfter: 2 * time.Minute})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("stuck filter: %d events, %v; want 1", len(page.Events), err)
	}
}

func TestRetryLoopStall(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	if stalled, _, _, err := s.RetryLoopStall(ctx, time.Minute); err != nil || stalled {
		t.Errorf("no loop ever ran and nothing waits: stalled %v, %v; want false", stalled, err)
	}
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})
	if stalled, last, _, err := s.RetryLoopStall(ctx, time.Minute); err != nil || !stalled || last != nil {
		t.Errorf("no loop ever ran and an event waits: stalled %v, last %v, %v; want stalled, no last", stalled, last, err)
	}
	if err := s.RecordRetrierTick(ctx); err != nil {
		t.Fatal(err)
	}
	if stalled, _, _, err := s.RetryLoopStall(ctx, time.Minute); err != nil || stalled {
		t.Errorf("just ticked: stalled %v, %v; want false", stalled, err)
	}
	if _, err := bundle.pool.Exec(ctx, `UPDATE worker_status SET last_run_at = now() - interval '5 minutes' WHERE component = 'retrier'`); err != nil {
		t.Fatal(err)
	}
	if stalled, last, _, err := s.RetryLoopStall(ctx, time.Minute); err != nil || !stalled || last == nil {
		t.Errorf("ticked 5 minutes ago: stalled %v, last %v, %v; want stalled", stalled, last, err)
	}
}

// The stuck rule's claims part is written three times: in Go (Reclaimed),
// in SQL (reclaimedSQL) and in the predicate of the partial index that
// finds reclaimed events, which a migration made and which stays as it was.
// The first two come from one constant; this compares the third with them,
// as PostgreSQL prints both: an index made now with the Go rule's predicate
// must read exactly like the migration's.
func TestStuckRule_MatchesTheReclaimedIndex(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	ctx := t.Context()
	if _, err := b.pool.Exec(ctx, `CREATE INDEX stuck_rule_probe ON webhook_events (next_retry_at, id)
		WHERE `+queue.ReclaimedSQL+` AND `+queue.PendingSQL); err != nil {
		t.Fatal(err)
	}
	predicate := func(index string) string {
		t.Helper()
		var def string
		if err := b.pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = $1`, index).Scan(&def); err != nil {
			t.Fatalf("read %s: %v", index, err)
		}
		_, where, ok := strings.Cut(def, " WHERE ")
		if !ok {
			t.Fatalf("%s has no predicate: %s", index, def)
		}
		return where
	}
	if got, want := predicate("webhook_events_reclaimed_idx"), predicate("stuck_rule_probe"); got != want {
		t.Errorf("the index's predicate is %s, the Go rule's %s", got, want)
	}
	if e := (queue.Event{Status: queue.StatusRetrying, Claims: 2}); !e.Reclaimed() {
		t.Error("an event claimed twice without an outcome is not reclaimed")
	}
	if e := (queue.Event{Status: queue.StatusRetrying, Claims: 1}); e.Reclaimed() {
		t.Error("an event claimed once is reclaimed")
	}
}

// TestStuck_HeldWhileDeliveryIsHeld: while a person's pause or the circuit
// breaker holds delivery, due events wait on purpose: none is overdue, each
// is held, and only a reclaimed event still counts as stuck. Once delivery
// is resumed and no loop claims them, the overdue ones are stuck again.
func TestStuck_HeldWhileDeliveryIsHeld(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	overdue := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_overdue", DueIn: -10 * time.Minute})
	later := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_later", DueIn: time.Hour})
	reclaimed := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_reclaimed", DueIn: time.Minute})
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET claims = 3 WHERE id = $1`, reclaimed.ID); err != nil {
		t.Fatal(err)
	}
	// state reads what a page reads: delivery control and the loops'
	// status, and what they make of the wait.
	state := func() (queue.DeliveryControl, queue.DueWait) {
		t.Helper()
		c, err := s.ReadDeliveryControl(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := s.WorkerStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, queue.DueWaitOf(c, ws)
	}
	stuck := func(wait queue.DueWait) []string {
		t.Helper()
		n, err := s.CountStuck(ctx, queue.OverdueAfter, wait)
		if err != nil {
			t.Fatal(err)
		}
		page, err := s.Events(ctx, queue.EventFilter{Status: queue.StatusPending, StuckAfter: queue.OverdueAfter, Wait: wait})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range page.Events {
			ids = append(ids, e.EventID)
		}
		if int64(len(ids)) != n {
			t.Errorf("CountStuck says %d, the stuck filter lists %q", n, ids)
		}
		return ids
	}

	if _, wait := state(); wait != queue.WaitUnexplained || strings.Join(stuck(wait), ",") != "evt_overdue,evt_reclaimed" {
		t.Fatalf("before the pause: wait %v, stuck %q; want unexplained, evt_overdue and evt_reclaimed", wait, stuck(wait))
	}

	hold := map[string]func() error{
		"paused": func() error { return s.PauseDelivery(ctx, "operator@example.com", "app deploy #42") },
		"breaker open": func() error {
			_, err := bundle.pool.Exec(ctx, `UPDATE delivery_control SET breaker_failures = 20, breaker_opened_at = now(),
				breaker_error = 'downstream answered 503', probe_due_at = now() + interval '30 seconds', probe_wait_seconds = 30`)
			return err
		},
	}
	for _, how := range []string{"paused", "breaker open"} {
		if err := hold[how](); err != nil {
			t.Fatal(err)
		}
		c, wait := state()
		if wait != queue.WaitHeld {
			t.Errorf("%s: wait %v, want held", how, wait)
		}
		if got := stuck(wait); strings.Join(got, ",") != "evt_reclaimed" {
			t.Errorf("%s: stuck %q, want only evt_reclaimed", how, got)
		}
		if overdue.Stuck(c.ReadAt, queue.OverdueAfter, wait) || !overdue.Held(c.ReadAt, c) {
			t.Errorf("%s: evt_overdue stuck %v, held %v; want held, not stuck", how,
				overdue.Stuck(c.ReadAt, queue.OverdueAfter, wait), overdue.Held(c.ReadAt, c))
		}
		if later.Held(c.ReadAt, c) {
			t.Errorf("%s: an event not yet due is held", how)
		}

		if err := s.ResumeDelivery(ctx); err != nil {
			t.Fatal(err)
		}
		c, wait = state()
		if wait != queue.WaitUnexplained || strings.Join(stuck(wait), ",") != "evt_overdue,evt_reclaimed" {
			t.Errorf("%s, then resumed with no loop claiming: wait %v, stuck %q; want unexplained, evt_overdue and evt_reclaimed",
				how, wait, stuck(wait))
		}
		if !overdue.Stuck(c.ReadAt, queue.OverdueAfter, wait) || overdue.Held(c.ReadAt, c) {
			t.Errorf("%s, then resumed: evt_overdue stuck %v, held %v; want stuck, not held", how,
				overdue.Stuck(c.ReadAt, queue.OverdueAfter, wait), overdue.Held(c.ReadAt, c))
		}
	}
}

// TestStuck_DueBehindTheRetryLoopsEventsWaitsItsTurn: while a retry loop
// holds events it claimed, the due events behind them are waiting their
// turn, not stuck; once it holds none (its leases expired: it died or
// hung), they are stuck again. Other paths' leases say nothing about the
// retry loop.
func TestStuck_DueBehindTheRetryLoopsEventsWaitsItsTurn(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_first", DueIn: -11 * time.Minute})
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_behind", DueIn: -10 * time.Minute})
	if _, err := bundle.pool.Exec(ctx, `INSERT INTO webhook_leases (event_id, owner, path, expires_at)
		VALUES ('evt_elsewhere', gen_random_uuid(), 'inline', now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	wait, count := stuckReads(t, s)
	if w := wait(); w != queue.WaitUnexplained || count(w) != 2 {
		t.Fatalf("with only a delivery's lease: wait %v, %d stuck; want unexplained and 2", w, count(w))
	}

	claim, err := s.ClaimAttempts(ctx, 1, time.Minute)
	if err != nil || len(claim.Claimed) != 1 || claim.Claimed[0].Event.EventID != "evt_first" {
		t.Fatalf("claim: %v, %v; want evt_first", claim.Claimed, err)
	}
	if w := wait(); w != queue.WaitInLine || count(w) != 0 {
		t.Errorf("while the loop holds evt_first: wait %v, %d stuck; want in line and none", w, count(w))
	}

	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_leases SET expires_at = now() - interval '1 second'
		WHERE event_id = 'evt_first'`); err != nil {
		t.Fatal(err)
	}
	// evt_first is due again at its lease's expiry, a minute on; evt_behind
	// has waited 10 minutes with no loop taking events.
	if w := wait(); w != queue.WaitUnexplained || count(w) != 1 {
		t.Errorf("once the loop's lease expired: wait %v, %d stuck; want unexplained and 1", w, count(w))
	}
}

// A destination whose retry loop narrowed its claims after every retry of
// a turn failed explains that its due deliveries wait, while it says so
// within OverdueAfter; a success, or its silence, ends that.
func TestStuck_DueBehindANarrowedRetryLoopWaitsItsTurn(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	queuetest.InsertDestination(t, bundle.pool, queuetest.DestinationOpts{Name: "billing"})
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_waiting", Destination: "billing", DueIn: -10 * time.Minute})
	wait, count := stuckReads(t, s)
	narrowed := func() bool {
		t.Helper()
		d, err := s.Destination(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		return d.RetriesNarrowed(time.Now())
	}
	if w := wait(); w != queue.WaitUnexplained || count(w) != 1 || narrowed() {
		t.Fatalf("before: wait %v, %d stuck, narrowed %v; want unexplained, 1, false", w, count(w), narrowed())
	}

	if err := s.MarkRetriesNarrowed(ctx, "billing", true); err != nil {
		t.Fatal(err)
	}
	if w := wait(); w != queue.WaitInLine || count(w) != 0 || !narrowed() {
		t.Errorf("narrowed: wait %v, %d stuck, narrowed %v; want in line, none, true", w, count(w), narrowed())
	}

	// A loop that stopped saying so (it died, or its replica did) explains
	// nothing once OverdueAfter has passed.
	if _, err := bundle.pool.Exec(ctx, `UPDATE destinations SET retries_narrowed_at = now() - interval '3 minutes'`); err != nil {
		t.Fatal(err)
	}
	if w := wait(); w != queue.WaitUnexplained || count(w) != 1 || narrowed() {
		t.Errorf("narrowed 3 minutes ago: wait %v, %d stuck, narrowed %v; want unexplained, 1, false", w, count(w), narrowed())
	}

	if err := s.MarkRetriesNarrowed(ctx, "billing", true); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkRetriesNarrowed(ctx, "billing", false); err != nil {
		t.Fatal(err)
	}
	if w := wait(); w != queue.WaitUnexplained || count(w) != 1 || narrowed() {
		t.Errorf("after a success: wait %v, %d stuck, narrowed %v; want unexplained, 1, false", w, count(w), narrowed())
	}
}

// stuckReads returns what a test of the stuck rule reads of s: what
// explains that due events wait, delivery not held, and how many are stuck
// under a wait.
func stuckReads(t *testing.T, s *queue.Store) (wait func() queue.DueWait, count func(queue.DueWait) int64) {
	wait = func() queue.DueWait {
		t.Helper()
		ws, err := s.WorkerStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return queue.DueWaitOf(queue.DeliveryControl{}, ws)
	}
	count = func(wait queue.DueWait) int64 {
		t.Helper()
		n, err := s.CountStuck(t.Context(), queue.OverdueAfter, wait)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return wait, count
}
