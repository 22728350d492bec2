package queue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func take(t *testing.T, s *queue.Store, ids ...string) queue.Deliveries {
	t.Helper()
	batch := make([]queue.Delivery, len(ids))
	for i, id := range ids {
		batch[i] = queue.Delivery{EventID: id, Path: queue.PathInline, Runs: true}
	}
	d, err := s.TakeDeliveries(t.Context(), queue.SourceStripe, batch, time.Minute)
	if err != nil {
		t.Fatalf("take %v: %v", ids, err)
	}
	return d
}

// expireLeases makes every lease of the database expired, as if its holder
// had died long enough ago.
func expireLeases(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `UPDATE webhook_leases SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
}

// A lease is taken, committed, and keeps every other taker off the event
// until it is released with the outcome; its states say where each event
// stands, and only new events stay leased.
func TestTakeDeliveries_LeasesNewEventsAndReadsStates(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	if err := queuetest.NewSeed(s).MarkProcessed(t.Context(), "evt_done"); err != nil {
		t.Fatal(err)
	}
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_queued"})

	d := take(t, s, "evt_new", "evt_done", "evt_queued", "evt_new")
	want := []queue.DeliveryState{queue.DeliveryNew, queue.DeliveryProcessed, queue.DeliveryQueued, queue.DeliveryBusy}
	if fmt.Sprint(d.States) != fmt.Sprint(want) {
		t.Fatalf("states %v, want %v", d.States, want)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases`); n != 1 {
		t.Errorf("%d leases held, want only the new event's", n)
	}
	// The lease is committed: no transaction is open while it is held.
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`); n != 0 {
		t.Errorf("%d sessions idle in transaction while a lease is held", n)
	}
	if again := take(t, s, "evt_new"); again.States[0] != queue.DeliveryBusy {
		t.Errorf("a second taker while the lease lives: %v, want busy", again.States[0])
	}

	written, err := s.SettleDeliveries(t.Context(), []queue.Received{{EventID: "evt_new", Owner: d.Owner}})
	if err != nil || !written[0] {
		t.Fatalf("settle: %v, %v", written, err)
	}
	if after := take(t, s, "evt_new"); after.States[0] != queue.DeliveryProcessed {
		t.Errorf("after the outcome: %v, want processed", after.States[0])
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases`); n != 0 {
		t.Errorf("%d leases left after the outcome", n)
	}
}

// An expired lease is taken over, and its old holder's outcome is then
// refused whole: it writes neither the marker nor the attempt, so the new
// holder's outcome is the one that stands.
func TestSettleDeliveries_FencedByTheOwner(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	old := take(t, s, "evt_slow")
	expireLeases(t, bundle.pool)
	taker := take(t, s, "evt_slow")
	if taker.States[0] != queue.DeliveryNew {
		t.Fatalf("taking over an expired lease: %v, want new", taker.States[0])
	}

	failed := &queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_slow", EventType: "invoice.paid",
		Payload: []byte(`{}`), Error: "app said 500"}
	written, err := s.SettleDeliveries(t.Context(), []queue.Received{{EventID: "evt_slow", Owner: old.Owner, Queue: failed,
		Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: "evt_slow", Path: queue.PathInline, Error: "app said 500"}}})
	if err != nil || written[0] {
		t.Fatalf("the old holder's outcome: written %v, %v; want refused", written, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events`) +
		queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts`); n != 0 {
		t.Errorf("the refused outcome wrote %d rows", n)
	}
	written, err = s.SettleDeliveries(t.Context(), []queue.Received{{EventID: "evt_slow", Owner: taker.Owner}})
	if err != nil || !written[0] {
		t.Fatalf("the new holder's outcome: %v, %v", written, err)
	}
	if n := queuetest.Markers(t, bundle.pool); n != 1 {
		t.Errorf("markers %d, want 1", n)
	}
}

// Many deliveries of one event race for its lease, each in its own short
// transaction: exactly one gets it at a time, and once its outcome commits
// every later one reads the marker. The state is read after the lease is
// taken, so an outcome committed while a taker waited is never missed.
func TestTakeDeliveries_ConcurrentTakersProcessOnce(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	const racers, rounds = 16, 20
	var mu sync.Mutex
	processed := 0
	var wg sync.WaitGroup
	for range racers {
		wg.Go(func() {
			for range rounds {
				d, err := s.TakeDeliveries(context.Background(), queue.SourceStripe,
					[]queue.Delivery{{EventID: "evt_hot", Path: queue.PathInline}}, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if d.States[0] != queue.DeliveryNew {
					continue
				}
				mu.Lock()
				processed++
				mu.Unlock()
				if _, err := s.SettleDeliveries(context.Background(), []queue.Received{{EventID: "evt_hot", Owner: d.Owner}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if processed != 1 {
		t.Errorf("processed %d times, want exactly once", processed)
	}
	if n := queuetest.Markers(t, bundle.pool); n != 1 {
		t.Errorf("markers %d, want 1", n)
	}
}

// An attempt counts when its run starts, but a run cut short by a dead
// process is charged nothing: the claim that takes its lease over makes the
// event a suspect, due at once and left for its run alone. A suspect whose
// run alone dies is charged one attempt each time, and the fifth makes it
// dead with a last_error saying it crashed hookd. A claim whose run never
// started counts nothing.
func TestClaimAttempts_InterruptedRunsChargeOnlyASuspectAlone(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_crash"})
	claim, err := s.ClaimAttempts(t.Context(), 10, time.Minute)
	if err != nil || len(claim.Claimed) != 1 || claim.Claimed[0].Event.Attempts != 1 {
		t.Fatalf("claim: %+v, %v", claim.Claimed, err)
	}
	// A claimer that dies before the run starts counts nothing, and makes
	// no suspect.
	expireLeases(t, bundle.pool)
	if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now() WHERE id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	again, err := s.ClaimAttempts(t.Context(), 10, time.Minute)
	if err != nil || len(again.Claimed) != 1 || again.Claimed[0].Event.Attempts != 1 {
		t.Fatalf("the claim after an unstarted one: %+v, %v; want attempt 1 again", again.Claimed, err)
	}
	if ok, err := s.StartAttempts(t.Context(), again.Claimed); err != nil || !ok[0] {
		t.Fatalf("start: %v, %v", ok, err)
	}
	// The claimer dies mid-run: the next claim makes the event a suspect.
	expireLeases(t, bundle.pool)
	if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now() WHERE id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimAttempts(t.Context(), 10, time.Minute); err != nil || len(c.Claimed) != 0 {
		t.Fatalf("the claim after a run cut short: %+v, %v; want nothing claimed", c.Claimed, err)
	}
	if c, err := s.ClaimAttempts(t.Context(), 10, time.Minute); err != nil || len(c.Claimed) != 0 {
		t.Fatalf("a suspect claimed by a batch: %+v, %v", c.Claimed, err)
	}
	got, err := s.Event(t.Context(), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != 0 || got.LastError == nil || *got.LastError != queue.SuspectError {
		t.Errorf("the suspect's row: %d attempts, last error %v; want none charged", got.Attempts, got.LastError)
	}
	sp, err := s.SuspectOf(t.Context(), "evt_crash")
	if err != nil || sp == nil || sp.Interruptions != 1 || sp.Crashes != 0 || sp.Path != queue.PathRetry {
		t.Fatalf("suspect: %+v, %v; want one uncharged retry interruption", sp, err)
	}

	for attempt := 1; attempt <= queue.MaxAttempts; attempt++ {
		c, _, ok, err := s.ClaimSuspect(t.Context(), time.Minute)
		if err != nil || !ok || c.Dead || c.Event.Attempts != attempt {
			t.Fatalf("suspect claim %d: %+v, %v, %v", attempt, c, ok, err)
		}
		if ok, err := s.StartAttempts(t.Context(), []queue.Claimed{c}); err != nil || !ok[0] {
			t.Fatalf("start attempt %d: %v, %v", attempt, ok, err)
		}
		// It crashes hookd while it runs alone.
		expireLeases(t, bundle.pool)
		if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now() WHERE id = $1`, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	c, _, ok, err := s.ClaimSuspect(t.Context(), time.Minute)
	if err != nil || !ok || !c.Dead {
		t.Fatalf("the claim after a fifth crash alone: %+v, %v, %v; want the event made dead", c, ok, err)
	}
	got, err = s.Event(t.Context(), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != queue.StatusDead || got.Attempts != queue.MaxAttempts || got.LastError == nil ||
		*got.LastError != queuetest.CrashedError(queue.MaxAttempts) {
		t.Errorf("dead row: %s, %d attempts, last error %v", got.Status, got.Attempts, got.LastError)
	}
	attempts, err := s.Attempts(t.Context(), queue.SourceStripe, "evt_crash")
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != queue.MaxAttempts {
		t.Fatalf("%d attempts in the history, want the %d that crashed hookd alone", len(attempts), queue.MaxAttempts)
	}
	for i, a := range attempts {
		if a.Number != i+1 || a.Succeeded || a.Error == nil || !strings.Contains(*a.Error, "crashed hookd") {
			t.Errorf("attempt %d: number %d, error %v", i, a.Number, a.Error)
		}
	}
	if sp, err := s.SuspectOf(t.Context(), "evt_crash"); err != nil || sp == nil || sp.Crashes != queue.MaxAttempts ||
		sp.ClearedAt != nil {
		t.Errorf("suspect: %+v, %v; want %d crashes, still a suspect", sp, err, queue.MaxAttempts)
	}
	if _, _, ok, err := s.ClaimSuspect(t.Context(), time.Minute); err != nil || ok {
		t.Errorf("a dead suspect claimed again: %v, %v", ok, err)
	}
	if again, err := s.ClaimAttempts(t.Context(), 10, time.Minute); err != nil || len(again.Claimed) != 0 {
		t.Errorf("a dead event claimed again: %+v, %v", again.Claimed, err)
	}
}

// An event whose lease another holder has is left due, not claimed and not
// counted; a clean shutdown's release gives the attempt back.
func TestClaimAttempts_SkipsLeasedEventsAndReleaseGivesBack(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_leased"})
	free := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_free", Attempts: 2, Status: queue.StatusRetrying})
	held, err := queuetest.NewSeed(s).TryLockEvent(t.Context(), "evt_leased")
	if err != nil {
		t.Fatal(err)
	}
	claim, err := s.ClaimAttempts(t.Context(), 10, time.Minute)
	if err != nil || len(claim.Claimed) != 1 || claim.Claimed[0].Event.EventID != "evt_free" {
		t.Fatalf("claimed %+v, %v; want only evt_free", claim.Claimed, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT attempts FROM webhook_events WHERE event_id = 'evt_leased'`); n != 0 {
		t.Errorf("the leased event's attempts: %d, want 0", n)
	}
	states, err := s.SettleAttempts(t.Context(), []queue.Settled{{Claimed: claim.Claimed[0], Kind: queue.SettleReleased}})
	if err != nil || !states[0].Written {
		t.Fatalf("release: %+v, %v", states, err)
	}
	got, err := s.Event(t.Context(), free.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != 2 || got.Claims != 0 {
		t.Errorf("after the release: %d attempts, %d claims; want 2 and 0", got.Attempts, got.Claims)
	}
	_ = held.Release(t.Context())
}

// A person's retry of an event in flight does not make it due while the
// attempt runs; the attempt's failure makes it due at once and its next
// attempt manual, and a failure that would make it dead starts its attempts
// over instead, as a retry of a dead event does.
func TestRetryNow_InFlightIsDueWhenTheAttemptFails(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	mid := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_mid", Attempts: 1, Status: queue.StatusRetrying})
	last := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_last", Attempts: queue.MaxAttempts - 1, Status: queue.StatusRetrying})
	claim, err := s.ClaimAttempts(t.Context(), 10, time.Minute)
	if err != nil || len(claim.Claimed) != 2 {
		t.Fatalf("claim: %+v, %v", claim.Claimed, err)
	}
	for _, id := range []uuid.UUID{mid.ID, last.ID} {
		var due bool
		did, err := s.RetryNow(t.Context(), id)
		if err != nil || did != queue.DueAfterAttempt {
			t.Fatalf("retry now: %v, %v; want DueAfterAttempt", did, err)
		}
		if err := bundle.pool.QueryRow(t.Context(), `SELECT next_retry_at <= now() FROM webhook_events WHERE id = $1`, id).Scan(&due); err != nil {
			t.Fatal(err)
		}
		if due {
			t.Errorf("%s is due while its attempt runs", id)
		}
	}
	var settled []queue.Settled
	for _, c := range claim.Claimed {
		settled = append(settled, queue.Settled{Claimed: c, Kind: queue.SettleFailed, Attempt: &queue.NewAttempt{
			Source: c.Event.Source, EventID: c.Event.EventID, Path: c.Path, Number: c.Event.Attempts, Error: "500"}})
	}
	states, err := s.SettleAttempts(t.Context(), settled)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range states {
		if !st.Written || !st.Hastened || st.Status == queue.StatusDead {
			t.Errorf("%s: %+v; want written, hastened, not dead", claim.Claimed[i].Event.EventID, st)
		}
	}
	again, err := s.ClaimAttempts(t.Context(), 10, time.Minute)
	if err != nil || len(again.Claimed) != 2 {
		t.Fatalf("the next claim: %+v, %v; want both due at once", again.Claimed, err)
	}
	for _, c := range again.Claimed {
		if c.Path != queue.PathManual {
			t.Errorf("%s: next attempt's path %s, want manual", c.Event.EventID, c.Path)
		}
		if c.Event.EventID == "evt_last" && c.Event.Attempts != 1 {
			t.Errorf("evt_last: attempt %d, want its attempts started over", c.Event.Attempts)
		}
	}
}

// A settle that comes after its leases expired races a claim that takes
// the same events over: neither waits on the other in a cycle (no
// deadlock), and each event ends with exactly one owner's outcome: the late
// settle's, or the new claim's.
func TestSettleAttempts_LateSettleRacesATakeover(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	const events, rounds = 20, 15
	for i := range events {
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: fmt.Sprintf("evt_race_%02d", i)})
	}
	for round := range rounds {
		old, err := s.ClaimAttempts(t.Context(), events, time.Minute)
		if err != nil || len(old.Claimed) != events {
			t.Fatalf("round %d: claim %d, %v", round, len(old.Claimed), err)
		}
		expireLeases(t, bundle.pool)
		if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now()`); err != nil {
			t.Fatal(err)
		}
		var late []queue.Settled
		for _, c := range old.Claimed {
			late = append(late, queue.Settled{Claimed: c, Kind: queue.SettleFailed, Attempt: &queue.NewAttempt{
				Source: c.Event.Source, EventID: c.Event.EventID, Path: c.Path, Number: c.Event.Attempts, Error: "late"}})
		}
		var states []queue.SettledState
		var taken queue.Attempts
		var settleErr, claimErr error
		var wg sync.WaitGroup
		wg.Go(func() { states, settleErr = s.SettleAttempts(context.Background(), late) })
		wg.Go(func() { taken, claimErr = s.ClaimAttempts(context.Background(), events, time.Minute) })
		wg.Wait()
		if settleErr != nil || claimErr != nil {
			t.Fatalf("round %d: settle %v, claim %v", round, settleErr, claimErr)
		}
		takenBy := map[string]bool{}
		for _, c := range taken.Claimed {
			takenBy[c.Event.EventID] = true
		}
		for i, st := range states {
			id := old.Claimed[i].Event.EventID
			if st.Written == takenBy[id] {
				t.Fatalf("round %d: %s written by the late settle %v, taken over %v; want exactly one", round, id, st.Written, takenBy[id])
			}
		}
		// Start the next round from free, due rows.
		var rest []queue.Settled
		for _, c := range taken.Claimed {
			rest = append(rest, queue.Settled{Claimed: c, Kind: queue.SettleReleased})
		}
		if _, err := s.SettleAttempts(t.Context(), rest); err != nil {
			t.Fatal(err)
		}
		if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now(), attempts = 0, status = 'failed'`); err != nil {
			t.Fatal(err)
		}
	}
}

// Only leases that expired long ago are pruned: a live one, or one just
// expired, stays.
func TestPruneLeases_OnlyLongExpired(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	take(t, s, "evt_live", "evt_recent", "evt_old")
	if _, err := bundle.pool.Exec(t.Context(), `
		UPDATE webhook_leases SET expires_at = now() - CASE event_id
			WHEN 'evt_recent' THEN interval '1 minute' WHEN 'evt_old' THEN interval '2 hours' END
		WHERE event_id <> 'evt_live'`); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneLeases(t.Context(), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1", n, err)
	}
	if left := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases WHERE event_id IN ('evt_live', 'evt_recent')`); left != 2 {
		t.Errorf("%d of the live and the recently expired lease left, want 2", left)
	}
}

// Only fence cuts older than the retention are pruned.
func TestPruneFenceCuts_OnlyOlderThanTheRetention(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	if _, err := bundle.pool.Exec(t.Context(), `
		INSERT INTO webhook_fence_cuts (event_id, cuts, last_at)
		VALUES ('evt_recent', 1, now() - interval '1 hour'), ('evt_old', 1, now() - interval '4 days')`); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneFenceCuts(t.Context(), 72*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1", n, err)
	}
	if left := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_fence_cuts WHERE event_id = 'evt_recent'`); left != 1 {
		t.Errorf("the recent fence cut was pruned")
	}
}
