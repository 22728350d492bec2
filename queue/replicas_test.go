package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// replica returns a Store of its own replica over pool, registered.
func replica(t *testing.T, pool *pgxpool.Pool) *queue.Store {
	t.Helper()
	s := queue.New(pool, queue.WithReplica(uuid.New()))
	if err := s.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// silence moves a replica's last beat back past ReplicaSilence, as if it
// had been killed that long ago.
func silence(t *testing.T, pool *pgxpool.Pool, s *queue.Store) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `UPDATE hookd_replicas SET beat_at = now() - $2::interval WHERE id = $1`,
		s.Replica(), fmt.Sprintf("%d milliseconds", (queue.ReplicaSilence+time.Second).Milliseconds())); err != nil {
		t.Fatal(err)
	}
}

// tableWrites is how many rows every table of the database has had
// inserted, updated or deleted, as the statistics count them once the
// backends have reported (pool's connections report when told to).
func tableWrites(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	// Each connection's counts reach the shared statistics at its next
	// transaction's end once forced.
	var conns []*pgxpool.Conn
	for range pool.Stat().TotalConns() {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		if _, err := c.Exec(t.Context(), `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(t.Context(), `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		c.Release()
	}
	return queuetest.Count(t, pool, `SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables`)
}

// A redelivery of an event that is processed, or queued, is answered from
// its state with nothing written (no lease, no transaction id, no WAL),
// even while another path holds the event's lease.
func TestTakeDeliveries_RedeliveryOfAHandledEventWritesNothing(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t, withOneConnection())
	if err := queuetest.NewSeed(s).MarkProcessed(t.Context(), "evt_done"); err != nil {
		t.Fatal(err)
	}
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_queued"})
	// The retry loop runs the queued event now, and a reconciliation the
	// processed one: both leases are live.
	if _, err := bundle.pool.Exec(t.Context(), `
		INSERT INTO webhook_leases (event_id, owner, path, expires_at)
		VALUES ('evt_queued', gen_random_uuid(), 'retry', now() + interval '1 minute'),
		       ('evt_done', gen_random_uuid(), 'reconcile', now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}

	before := tableWrites(t, bundle.pool)
	for range 20 {
		d := take(t, s, "evt_done", "evt_queued")
		if d.States[0] != queue.DeliveryProcessed || d.States[1] != queue.DeliveryQueued {
			t.Fatalf("states %v, want processed and queued though both are leased", d.States)
		}
	}
	if after := tableWrites(t, bundle.pool); after != before {
		t.Errorf("20 redeliveries of handled events wrote %d rows, want none", after-before)
	}
	// The reads ran in transactions that took no transaction id: they
	// wrote no commit record, and so no WAL.
	var xid *int64
	if err := bundle.pool.QueryRow(t.Context(), `SELECT pg_current_xact_id_if_assigned()::text::bigint`).Scan(&xid); err != nil || xid != nil {
		t.Errorf("a read-only statement took transaction id %v, %v", xid, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases`); n != 2 {
		t.Errorf("%d leases, want the two live ones untouched", n)
	}
}

// A replica that stops beating lets its leases go ReplicaSilence later,
// whatever their expiry, while a beating replica's leases hold; a lease of
// no replica is judged by its expiry alone.
func TestLeases_ASilentReplicaLetsGo(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	a, b := replica(t, bundle.pool), replica(t, bundle.pool)

	if d := take(t, a, "evt_a"); d.States[0] != queue.DeliveryNew {
		t.Fatalf("replica a: %v, want the lease", d.States)
	}
	if d := take(t, b, "evt_a"); d.States[0] != queue.DeliveryBusy {
		t.Fatalf("replica b while a beats: %v, want busy", d.States)
	}
	silence(t, bundle.pool, a)
	d := take(t, b, "evt_a")
	if d.States[0] != queue.DeliveryNew || d.Interrupted[0] != queue.PathInline {
		t.Fatalf("replica b once a is silent: %v (interrupted %q), want the lease, a's inline run interrupted",
			d.States, d.Interrupted[0])
	}
	// A silent replica is granted nothing: it could not fence itself in
	// time.
	if d := take(t, a, "evt_other"); d.States[0] != queue.DeliveryUngranted {
		t.Errorf("the silent replica: %v, want no lease granted", d.States)
	}
}

// A beat lets go of what silent replicas held: their claimed retries are
// due at once and their leases gone; a run that had started was cut short
// by a dead process, so its event is a suspect, charged nothing.
func TestBeat_FreesTheClaimsOfSilentReplicas(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	dead, alive := replica(t, bundle.pool), replica(t, bundle.pool)
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: id})
	}
	claim, err := dead.ClaimAttempts(t.Context(), 10, time.Hour)
	if err != nil || len(claim.Claimed) != 3 {
		t.Fatalf("claim: %v, %v", claim.Claimed, err)
	}
	var first queue.Claimed
	for _, c := range claim.Claimed {
		if c.Event.EventID == "evt_1" {
			first = c
		}
	}
	if ok, err := dead.StartAttempts(t.Context(), []queue.Claimed{first}); err != nil || !ok[0] {
		t.Fatalf("start: %v, %v", ok, err)
	}
	silence(t, bundle.pool, dead)
	if registered, err := alive.Beat(t.Context()); err != nil || !registered {
		t.Fatalf("beat: %v, %v", registered, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE next_retry_at <= now()`); n != 3 {
		t.Errorf("%d of the silent replica's 3 claimed events due, want all", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases`); n != 0 {
		t.Errorf("%d leases left, want none", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects
		WHERE event_id = 'evt_1' AND interruptions = 1 AND crashes = 0 AND path = 'retry'`); n != 1 {
		t.Errorf("evt_1, whose run started, is not a suspect with one uncharged interruption")
	}
	if registered, err := dead.Beat(t.Context()); err != nil || registered {
		t.Errorf("the silent replica's own beat: registered %v, %v; want its row gone", registered, err)
	}

	again, err := alive.ClaimAttempts(t.Context(), 10, time.Hour)
	if err != nil || len(again.Claimed) != 2 {
		t.Fatalf("claim after the beat: %v, %v; want evt_2 and evt_3", again.Claimed, err)
	}
	for _, c := range again.Claimed {
		if c.Event.EventID == "evt_1" || c.Event.Attempts != 1 {
			t.Errorf("%s: attempt %d now, want evt_2 and evt_3 at attempt 1", c.Event.EventID, c.Event.Attempts)
		}
	}
	c, _, ok, err := alive.ClaimSuspect(t.Context(), time.Hour)
	if err != nil || !ok || c.Event.EventID != "evt_1" || c.Event.Attempts != 1 {
		t.Errorf("suspect claim: %+v, %v, %v; want evt_1 at attempt 1, nothing charged", c, ok, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts`); n != 0 {
		t.Errorf("%d attempts recorded, want none: the interruption is charged to no one", n)
	}
}

// When the database loses its leases (crash recovery empties the unlogged
// tables; a promoted standby has none), no lease is granted for LeaseGrace:
// by then every holder from before has cancelled its processors, so no
// event runs twice at once across the loss.
func TestLeases_NoneGrantedForTheGraceAfterTheDatabaseLostThem(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	s := replica(t, bundle.pool)
	// What crash recovery does to the unlogged tables.
	if _, err := bundle.pool.Exec(t.Context(), `TRUNCATE webhook_leases, hookd_replicas, lease_epoch`); err != nil {
		t.Fatal(err)
	}
	if d := take(t, s, "evt_a"); d.States[0] != queue.DeliveryUngranted {
		t.Fatalf("a take with the leases lost: %v, want none granted", d.States)
	}
	// The first beat after finds its replica gone and writes the epoch
	// again; the replica registers again.
	if registered, err := s.Beat(t.Context()); err != nil || registered {
		t.Fatalf("beat: registered %v, %v; want the row gone", registered, err)
	}
	if err := s.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := take(t, s, "evt_a"); d.States[0] != queue.DeliveryUngranted {
		t.Fatalf("a take within the grace: %v, want none granted", d.States)
	}
	if _, err := s.ClaimAttempts(t.Context(), 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The grace passes.
	if _, err := bundle.pool.Exec(t.Context(), `UPDATE lease_epoch SET began_at = began_at - $1::interval`,
		fmt.Sprintf("%d milliseconds", queue.LeaseGrace.Milliseconds())); err != nil {
		t.Fatal(err)
	}
	if d := take(t, s, "evt_a"); d.States[0] != queue.DeliveryNew {
		t.Fatalf("a take after the grace: %v, want the lease", d.States)
	}
}

// A crash charges only the event that caused it: a claimer that dies with
// two runs of a batch of ten started charges no one, and makes those two
// suspects; each then runs alone, through the suspect claim, on replicas
// that die whenever they run evt_0. evt_0 is charged each crash alone and
// is dead after MaxAttempts; evt_1, run alone once and done, is cleared;
// the other eight are claimed again with no attempt spent.
func TestStartAttempts_ACrashChargesOnlyTheSuspectAlone(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	a, b := replica(t, bundle.pool), replica(t, bundle.pool)
	for i := range 10 {
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: fmt.Sprintf("evt_%d", i)})
	}
	claim, err := a.ClaimAttempts(context.Background(), 10, time.Hour)
	if err != nil || len(claim.Claimed) != 10 {
		t.Fatalf("claim %d, %v", len(claim.Claimed), err)
	}
	var running []queue.Claimed
	for _, c := range claim.Claimed {
		if c.Event.EventID == "evt_0" || c.Event.EventID == "evt_1" {
			running = append(running, c)
		}
	}
	if _, err := a.StartAttempts(t.Context(), running); err != nil {
		t.Fatal(err)
	}
	kill := func() {
		// a is killed mid-run: b's beat finds it silent; a starts again,
		// a replica of a new id.
		silence(t, bundle.pool, a)
		if _, err := b.Beat(t.Context()); err != nil {
			t.Fatal(err)
		}
		a = replica(t, bundle.pool)
	}
	kill()
	for crashes := 0; ; {
		c, _, ok, err := a.ClaimSuspect(t.Context(), time.Hour)
		if err != nil || (!ok && crashes < queue.MaxAttempts) || c.Dead {
			t.Fatalf("suspect claim after %d crashes: %+v, %v, %v", crashes, c, ok, err)
		}
		if !ok {
			// The beat that found the fifth crash made evt_0 dead.
			break
		}
		if ok, err := a.StartAttempts(t.Context(), []queue.Claimed{c}); err != nil || !ok[0] {
			t.Fatalf("start: %v, %v", ok, err)
		}
		if c.Event.EventID == "evt_1" {
			states, err := a.SettleAttempts(t.Context(), []queue.Settled{{Claimed: c, Kind: queue.SettleDone,
				Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: "evt_1", Succeeded: true, Path: queue.PathRetry,
					Number: c.Event.Attempts}}})
			if err != nil || !states[0].Written {
				t.Fatalf("settle evt_1: %v, %v", states, err)
			}
			continue
		}
		crashes++
		kill()
		if crashes > queue.MaxAttempts {
			t.Fatalf("evt_0 ran alone %d times", crashes)
		}
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_0' AND status = 'dead'
		AND attempts = $1 AND last_error = $2`, queue.MaxAttempts, queuetest.CrashedError(queue.MaxAttempts)); n != 1 {
		t.Errorf("the event whose runs alone all crashed is not dead after %d attempts", queue.MaxAttempts)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = 'evt_1'`); n != 1 {
		t.Errorf("evt_1, run alone, not processed")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = 'evt_1'
		AND cleared_at IS NOT NULL AND crashes = 0`); n != 1 {
		t.Errorf("evt_1 not cleared as a suspect")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id NOT IN ('evt_0', 'evt_1')
		AND attempts = 0 AND status <> 'dead'`); n != 8 {
		t.Errorf("%d of the 8 batch-mates with no attempt spent and alive, want 8", n)
	}
	again, err := a.ClaimAttempts(context.Background(), 10, time.Hour)
	if err != nil || len(again.Claimed) != 8 {
		t.Errorf("the 8 batch-mates claimed again: %d, %v", len(again.Claimed), err)
	}
}
