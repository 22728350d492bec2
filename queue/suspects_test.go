package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// cutShort makes suspects of n events: a replica claims and starts them
// all, and dies; beats reaps it, each replica's beat at the same moment.
func cutShort(t *testing.T, pool *pgxpool.Pool, n int, beats []*queue.Store) {
	t.Helper()
	for i := range n {
		queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: fmt.Sprintf("evt_%02d", i)})
	}
	dying := replica(t, pool)
	claim, err := dying.ClaimAttempts(t.Context(), n, time.Hour)
	if err != nil || len(claim.Claimed) != n {
		t.Fatalf("claim: %d, %v", len(claim.Claimed), err)
	}
	if ok, err := dying.StartAttempts(t.Context(), claim.Claimed); err != nil || len(ok) != n {
		t.Fatalf("start: %v, %v", ok, err)
	}
	silence(t, pool, dying)
	var wg sync.WaitGroup
	for _, b := range beats {
		wg.Go(func() {
			if _, err := b.Beat(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// Replicas beating at the same moment all find the dead one: each of its
// started runs becomes a suspect once, with one interruption, uncharged.
func TestBeat_RacingBeatsRecordEachCutShortRunOnce(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	beats := make([]*queue.Store, 8)
	for i := range beats {
		beats[i] = replica(t, bundle.pool)
	}
	cutShort(t, bundle.pool, 20, beats)
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects
		WHERE interruptions = 1 AND crashes = 0 AND cleared_at IS NULL`); n != 20 {
		t.Errorf("%d suspects with one uncharged interruption, want 20", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE attempts = 0 AND next_retry_at <= now()`); n != 20 {
		t.Errorf("%d events due with no attempt charged, want 20", n)
	}
	counts, err := beats[0].Suspects(t.Context())
	if err != nil || counts.Open != 20 || counts.Crashes != 0 {
		t.Errorf("suspect counts: %+v, %v", counts, err)
	}
}

// Claims racing from several replicas take each suspect once, one at a
// time, and never one a live holder has.
func TestClaimSuspect_RacingClaimsTakeEachOnce(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	stores := make([]*queue.Store, 8)
	for i := range stores {
		stores[i] = replica(t, bundle.pool)
	}
	cutShort(t, bundle.pool, 20, stores[:1])
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Go(func() {
			for {
				c, _, ok, err := s.ClaimSuspect(t.Context(), time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				claimed[c.Event.EventID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != 20 {
		t.Errorf("%d suspects claimed, want 20", len(claimed))
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("%s claimed %d times", id, n)
		}
	}
	if waiting, err := stores[0].SuspectsWaiting(t.Context(), true); err != nil || waiting {
		t.Errorf("suspects waiting with all leased: %v, %v", waiting, err)
	}
}

// The suspect slot is held by one replica at a time: of replicas racing
// for it, one wins each round; a holder that hands it on lets the next take
// it, and one that goes silent loses it.
func TestSuspectSlot_OneReplicaAtATime(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	stores := make([]*queue.Store, 8)
	for i := range stores {
		stores[i] = replica(t, bundle.pool)
	}
	for round := range 20 {
		var won atomic.Int32
		var slot atomic.Pointer[queue.SuspectSlot]
		var wg sync.WaitGroup
		for _, s := range stores {
			wg.Go(func() {
				sl, err := s.TakeSuspectSlot(t.Context(), time.Minute)
				switch {
				case errors.Is(err, queue.ErrEventLocked):
				case err != nil:
					t.Error(err)
				default:
					won.Add(1)
					slot.Store(sl)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("round %d: %d replicas hold the slot, want 1", round, won.Load())
		}
		if err := slot.Load().Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	holder := stores[0]
	if _, err := holder.TakeSuspectSlot(t.Context(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[1].TakeSuspectSlot(t.Context(), time.Hour); !errors.Is(err, queue.ErrEventLocked) {
		t.Fatalf("the slot taken from a live holder: %v", err)
	}
	silence(t, bundle.pool, holder)
	if _, err := stores[1].Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[1].TakeSuspectSlot(t.Context(), time.Hour); err != nil {
		t.Errorf("the slot of a silent holder: %v, want it taken", err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects`); n != 0 {
		t.Errorf("%d suspects made of the slot's lease, want none", n)
	}
}

// A suspect whose run alone completes is cleared, whether it succeeded or
// failed as usual (and that failure is charged): it is a suspect no longer,
// and its record says it ran alone after a crash.
func TestSettleAttempts_ClearsASuspectThatCompletes(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	b := replica(t, bundle.pool)
	cutShort(t, bundle.pool, 2, []*queue.Store{b})
	for _, succeed := range []bool{true, false} {
		c, _, ok, err := b.ClaimSuspect(t.Context(), time.Hour)
		if err != nil || !ok {
			t.Fatalf("claim: %v, %v", ok, err)
		}
		if ok, err := b.StartAttempts(t.Context(), []queue.Claimed{c}); err != nil || !ok[0] {
			t.Fatalf("start: %v, %v", ok, err)
		}
		kind := queue.SettleDone
		if !succeed {
			kind = queue.SettleFailed
		}
		a := &queue.NewAttempt{Source: queue.SourceStripe, EventID: c.Event.EventID, Succeeded: succeed,
			Path: queue.PathRetry, Number: c.Event.Attempts, HTTPStatus: 500}
		if !succeed {
			a.Error = "app answered 500"
		}
		if st, err := b.SettleAttempts(t.Context(), []queue.Settled{{Claimed: c, Kind: kind, Attempt: a}}); err != nil ||
			!st[0].Written {
			t.Fatalf("settle: %v, %v", st, err)
		}
		sp, err := s.SuspectOf(t.Context(), c.Event.EventID)
		if err != nil || sp == nil || sp.ClearedAt == nil || sp.RanAloneAt == nil {
			t.Errorf("%s after its run alone (success %v): %+v, %v; want cleared", c.Event.EventID, succeed, sp, err)
		}
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE attempts = 1 AND status = 'retrying'`); n != 1 {
		t.Errorf("the failed one: want its ordinary failure charged (attempt 1, retrying)")
	}
	if counts, err := s.Suspects(t.Context()); err != nil || counts.Open != 0 {
		t.Errorf("open suspects: %+v, %v; want none", counts, err)
	}
	// A cleared event is claimed by batches again.
	if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now()`); err != nil {
		t.Fatal(err)
	}
	if claim, err := s.ClaimAttempts(t.Context(), 10, time.Hour); err != nil || len(claim.Claimed) != 1 {
		t.Errorf("claim after clearing: %d, %v; want the failed one", len(claim.Claimed), err)
	}
}

// A delivery whose take of a lease waits on a beat that is reaping that
// lease (its replica went silent with the run started) finds the event a
// suspect once the beat commits, though its own snapshot predates it: the
// event is queued, never run inline again.
func TestTakeDeliveries_FindsASuspectMadeWhileItWaited(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	s := replica(t, bundle.pool)
	d := take(t, s, "evt_reaped")
	if d.States[0] != queue.DeliveryNew {
		t.Fatalf("first take: %v", d.States)
	}
	// The holder dies; a beat is reaping its lease, in a transaction not
	// yet committed.
	if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_leases SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	tx, err := bundle.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `DELETE FROM webhook_leases WHERE event_id = 'evt_reaped';
		INSERT INTO webhook_suspects (event_id, path, interruptions) VALUES ('evt_reaped', 'inline', 1)`); err != nil {
		t.Fatal(err)
	}
	got := make(chan queue.Deliveries, 1)
	go func() {
		d, err := s.TakeDeliveries(context.Background(), queue.SourceStripe,
			[]queue.Delivery{{EventID: "evt_reaped", Path: queue.PathInline, Runs: true}}, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	queuetest.WaitFor(t, 10*time.Second, "the take to wait on the reaped lease", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	})
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	d = <-got
	if d.States[0] != queue.DeliveryNew || d.Interrupted[0] != queue.PathInline {
		t.Errorf("the take after the reap: %v, interrupted %q; want the lease, the event a suspect of an inline run",
			d.States, d.Interrupted[0])
	}
}

// A replay's members cut short by a dead process: the replay's claim
// leaves them to run alone and takes the others; each runs alone as the
// replay's delivery (ClaimReplaySuspect); one whose process dies while it
// runs alone is charged a crash, in the history under the replay's path,
// and after MaxAttempts of them it is given up, failed in the replay with
// the crash as its error and still a suspect; one that completes is
// cleared.
func TestClaimReplaySuspect_RunsAloneAndIsChargedOnlyAlone(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	const poison, mate, idle = "evt_a_poison", "evt_b_mate", "evt_c_idle"
	queuetest.InsertLogged(t, bundle.pool, []queuetest.LoggedOpts{{EventID: poison}, {EventID: mate}, {EventID: idle}})
	r, err := s.StartReplay(t.Context(), "crash", queue.ReplayFilter{From: time.Now().Add(-time.Hour),
		To: time.Now().Add(time.Hour), Processed: true}, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	dying := replica(t, bundle.pool)
	claim, err := dying.ClaimReplayed(t.Context(), r.ID, 10, time.Hour)
	if err != nil || len(claim.Members) != 3 {
		t.Fatalf("claim: %d, %v", len(claim.Members), err)
	}
	for _, id := range []string{poison, mate} {
		if ok, err := dying.StartReplayed(t.Context(), claim.Owner, id); err != nil || !ok {
			t.Fatalf("start %s: %v, %v", id, ok, err)
		}
	}
	silence(t, bundle.pool, dying)
	alive := replica(t, bundle.pool)
	if _, err := alive.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE path = 'replay' AND interruptions = 1
		AND crashes = 0 AND cleared_at IS NULL`); n != 2 {
		t.Fatalf("%d members made suspects with one uncharged interruption, want the 2 started", n)
	}
	again, err := alive.ClaimReplayed(t.Context(), r.ID, 10, time.Hour)
	if err != nil || len(again.Members) != 1 || again.Members[0].EventID != idle {
		t.Fatalf("the replay's claim after the crash: %+v, %v; want %s alone, the suspects left", again.Members, err, idle)
	}
	if waiting, err := alive.SuspectsWaiting(t.Context(), false); err != nil || waiting {
		t.Errorf("without replays: suspects waiting %v, %v; want none", waiting, err)
	}
	if waiting, err := alive.SuspectsWaiting(t.Context(), true); err != nil || !waiting {
		t.Errorf("with replays: suspects waiting %v, %v; want some", waiting, err)
	}

	// The poison (first by id) crashes hookd each time it runs alone.
	for crash := 1; crash <= queue.MaxAttempts; crash++ {
		c, ok, err := alive.ClaimReplaySuspect(t.Context(), time.Hour)
		if err != nil || !ok || c.Member.EventID != poison || c.GivenUp || c.Replay.ID != r.ID {
			t.Fatalf("run alone %d: %+v, %v, %v; want %s", crash, c, ok, err, poison)
		}
		if ok, err := alive.StartReplayed(t.Context(), c.Owner, poison); err != nil || !ok {
			t.Fatalf("start alone %d: %v, %v", crash, ok, err)
		}
		// It dies; a new process takes over: every other crash is found by
		// the next claim, the others by a beat.
		silence(t, bundle.pool, alive)
		alive = replica(t, bundle.pool)
		if crash%2 == 0 {
			if _, err := alive.Beat(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, ok, err := alive.ClaimReplaySuspect(t.Context(), time.Hour)
	crashed := queuetest.CrashedError(queue.MaxAttempts)
	if err != nil || !ok || c.Member.EventID != poison || !c.GivenUp || c.Error != crashed {
		t.Fatalf("after %d crashes: %+v, %v, %v; want %s given up with %q", queue.MaxAttempts, c, ok, err, poison, crashed)
	}
	if w, err := alive.SettleReplayed(t.Context(), r.ID, c.Owner, []queue.ReplaySettled{{EventID: poison,
		Kind: queue.ReplaySettleCrashed, Error: c.Error}}); err != nil || !w[0] {
		t.Fatalf("settle the given up member: %v, %v", w, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM replay_events WHERE event_id = $1 AND state = 'failed'
		AND error = $2`, poison, crashed); n != 1 {
		t.Errorf("the poison is not failed in the replay with %q", crashed)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = $1 AND crashes = $2
		AND interruptions = 1 AND cleared_at IS NULL`, poison, queue.MaxAttempts); n != 1 {
		t.Errorf("the poison is not a suspect charged %d crashes", queue.MaxAttempts)
	}
	for i := 1; i <= queue.MaxAttempts; i++ {
		if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1 AND path = 'replay'
			AND outcome = 'failed' AND attempt = $2 AND error = $3`, poison, i, queuetest.CrashedError(i)); n != 1 {
			t.Errorf("crash %d of the poison: %d attempts recorded, want 1", i, n)
		}
	}

	// The mate runs alone and is delivered: cleared, charged nothing.
	c, ok, err = alive.ClaimReplaySuspect(t.Context(), time.Hour)
	if err != nil || !ok || c.Member.EventID != mate || c.GivenUp {
		t.Fatalf("the mate's run alone: %+v, %v, %v", c, ok, err)
	}
	if ok, err := alive.StartReplayed(t.Context(), c.Owner, mate); err != nil || !ok {
		t.Fatalf("start the mate: %v, %v", ok, err)
	}
	if w, err := alive.SettleReplayed(t.Context(), r.ID, c.Owner, []queue.ReplaySettled{{EventID: mate,
		Kind: queue.ReplaySettleDelivered, Payload: c.Member.Payload, Attempt: &queue.NewAttempt{Source: queue.SourceStripe,
			EventID: mate, Succeeded: true, HTTPStatus: 200, Path: queue.PathReplay}}}); err != nil || !w[0] {
		t.Fatalf("settle the mate: %v, %v", w, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = $1 AND crashes = 0
		AND cleared_at IS NOT NULL AND ran_alone_at IS NOT NULL`, mate); n != 1 {
		t.Errorf("the mate is not cleared after its run alone, uncharged")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1 AND outcome <> 'succeeded'`,
		mate); n != 0 {
		t.Errorf("%d failed attempts of the mate, want none", n)
	}
	if _, ok, err := alive.ClaimReplaySuspect(t.Context(), time.Hour); err != nil || ok {
		t.Errorf("a suspect left to run: %v, %v", ok, err)
	}
}
