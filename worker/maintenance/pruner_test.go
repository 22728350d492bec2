package maintenance_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker/maintenance"
)

func TestPruner(t *testing.T) {
	t.Parallel()

	t.Run("DeletesOldMarkersAndResolvedHistoryOnly", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		dead := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts, Age: 60 * 24 * time.Hour})
		if _, err := bundle.pool.Exec(t.Context(), `
			INSERT INTO processed_webhook_events (event_id, processed_at) VALUES
			  ('evt_old', now() - interval '31 days'), ('evt_new', now() - interval '29 days');
			INSERT INTO webhook_attempts (source, event_id, attempted_at, duration_ms, outcome, path, attempt) VALUES
			  ('stripe', 'evt_old', now() - interval '31 days', 1, 'succeeded', 'inline', 0),
			  ('stripe', 'evt_new', now() - interval '29 days', 1, 'succeeded', 'inline', 0),
			  ('stripe', '`+dead.EventID+`', now() - interval '60 days', 1, 'failed', 'inline', 0)`); err != nil {
			t.Fatal(err)
		}
		p := maintenance.NewPruner(bundle.store, bundle.accounts, bundle.activity, bundle.rejections, discardLogger, maintenance.PrunerConfig{Retention: 30 * 24 * time.Hour})
		removed, err := p.RunOnce(t.Context())
		if err != nil || removed != 1 {
			t.Fatalf("run: removed %d, %v; want 1", removed, err)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = 'evt_new'`); got != 1 || queuetest.Markers(t, bundle.pool) != 1 {
			t.Errorf("markers left: want only evt_new")
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = 'evt_old'`); got != 0 {
			t.Errorf("old resolved attempts left: got %d, want 0", got)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1`, dead.EventID); got != 1 {
			t.Errorf("dead event's attempts: got %d, want 1 (never pruned)", got)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE status = 'dead'`); got != 1 {
			t.Errorf("dead rows: got %d, want 1", got)
		}
		ws, err := bundle.store.WorkerStatus(t.Context())
		if err != nil || ws.PrunerRun == nil || ws.PrunerRemoved != 1 {
			t.Errorf("worker status: got %+v, %v; want a prune that removed 1", ws, err)
		}
	})

	t.Run("ClearsEventLogPayloadsThenRows", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		if _, err := bundle.pool.Exec(t.Context(), `
			INSERT INTO processed_webhook_events (event_id, event_type, endpoint, received_at, processed_at, processed_how, payload) VALUES
			  ('evt_today', 'invoice.paid', 'default', now(), now(), 'inline', '{}'),
			  ('evt_3d', 'invoice.paid', 'default', now() - interval '3 days', now() - interval '3 days', 'inline', '{}'),
			  ('evt_5d', 'invoice.paid', 'default', now() - interval '5 days', now() - interval '5 days', 'inline', '{}'),
			  ('evt_31d', 'invoice.paid', 'default', now() - interval '31 days', now() - interval '31 days', 'inline', '{}')`); err != nil {
			t.Fatal(err)
		}
		p := maintenance.NewPruner(bundle.store, bundle.accounts, bundle.activity, bundle.rejections, discardLogger,
			maintenance.PrunerConfig{Retention: 30 * 24 * time.Hour, PayloadRetention: 4 * 24 * time.Hour})
		if _, err := p.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_log WHERE payload IS NOT NULL AND event_id IN ('evt_today', 'evt_3d')`); got != 2 {
			t.Errorf("%d young payloads kept, want 2", got)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_log WHERE payload IS NULL AND event_id = 'evt_5d'`); got != 1 {
			t.Errorf("evt_5d's payload kept past the payload retention")
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_log`); got != 3 {
			t.Errorf("%d event log entries, want 3: evt_31d's goes with its marker", got)
		}
	})

	// A suspect's row goes with the rest of its event: once the event is
	// off the queue, a row cleared a retention ago, or one never cleared
	// whose event hookd no longer has at all (Stripe's redelivery never
	// came), is deleted, in batches; the others stay.
	t.Run("DeletesSuspectsOfEventsGone", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_cleared_dead", Status: queue.StatusDead,
			Attempts: queue.MaxAttempts, Age: 60 * 24 * time.Hour})
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_open_queued", Age: 60 * 24 * time.Hour})
		// More cleared rows than one batch deletes, so the prune goes on
		// past a full batch.
		bulk := store.PruneBatchSize + 5
		if _, err := bundle.pool.Exec(t.Context(), `
			INSERT INTO processed_webhook_events (event_id, processed_at) VALUES
			  ('evt_cleared_old', now() - interval '31 days'), ('evt_open_marked', now() - interval '1 day');
			INSERT INTO webhook_suspects (event_id, path, interruptions, since, cleared_at) VALUES
			  ('evt_cleared_old', 'retry', 1, now() - interval '40 days', now() - interval '31 days'),
			  ('evt_cleared_new', 'inline', 1, now() - interval '40 days', now() - interval '29 days'),
			  ('evt_cleared_dead', 'retry', 1, now() - interval '40 days', now() - interval '31 days'),
			  ('evt_open_gone', 'inline', 1, now() - interval '31 days', NULL),
			  ('evt_open_new', 'reconcile', 1, now() - interval '29 days', NULL),
			  ('evt_open_marked', 'replay', 1, now() - interval '31 days', NULL),
			  ('evt_open_queued', 'retry', 1, now() - interval '31 days', NULL);
			INSERT INTO webhook_suspects (event_id, path, interruptions, since, cleared_at)
			SELECT 'evt_bulk_' || i, 'retry', 1, now() - interval '32 days', now() - interval '31 days'
			FROM generate_series(1, `+strconv.Itoa(bulk)+`) AS i`); err != nil {
			t.Fatal(err)
		}
		p := maintenance.NewPruner(bundle.store, bundle.accounts, bundle.activity, bundle.rejections, discardLogger,
			maintenance.PrunerConfig{Retention: 30 * 24 * time.Hour})
		if _, err := p.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		rows, err := bundle.pool.Query(t.Context(), `SELECT event_id FROM webhook_suspects ORDER BY event_id`)
		if err != nil {
			t.Fatal(err)
		}
		left, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"evt_cleared_dead", "evt_cleared_new", "evt_open_marked", "evt_open_new", "evt_open_queued"}
		if !slices.Equal(left, want) {
			if len(left) > 10 {
				left = append(left[:10], fmt.Sprintf("... %d in all", len(left)))
			}
			t.Errorf("suspects left: %v, want %v", left, want)
		}
	})

	t.Run("DeletesExpiredSessionsAndStaleLoginCounts", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		if _, err := bundle.pool.Exec(t.Context(), `
			INSERT INTO sessions (token, data, expiry) VALUES
			  ('expired', '\x00', now() - interval '1 minute'),
			  ('live', '\x00', now() + interval '1 hour');
			INSERT INTO login_failures (key, failures, last_failed_at) VALUES
			  ('ip:192.0.2.1', 40, now() - interval '61 minutes'),
			  ('ip:192.0.2.2', 40, now() - interval '59 minutes')`); err != nil {
			t.Fatal(err)
		}
		p := maintenance.NewPruner(bundle.store, bundle.accounts, bundle.activity, bundle.rejections, discardLogger, maintenance.PrunerConfig{})
		if _, err := p.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM sessions WHERE token = 'live'`); got != 1 || queuetest.Count(t, bundle.pool, `SELECT count(*) FROM sessions`) != 1 {
			t.Errorf("sessions left: want only the live one")
		}
		// A count an hour old starts over at the next attempt: nothing
		// is lost by deleting it, and every address leaves one.
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM login_failures WHERE key = 'ip:192.0.2.2'`); got != 1 ||
			queuetest.Count(t, bundle.pool, `SELECT count(*) FROM login_failures`) != 1 {
			t.Errorf("sign-in counts left: want only the recent one")
		}
	})

	t.Run("RunPrunesAtStartAndStopsOnCancel", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		if _, err := bundle.pool.Exec(t.Context(),
			`INSERT INTO processed_webhook_events (event_id, processed_at) VALUES ('evt_old', now() - interval '31 days')`); err != nil {
			t.Fatal(err)
		}
		p := maintenance.NewPruner(bundle.store, bundle.accounts, bundle.activity, bundle.rejections, discardLogger, maintenance.PrunerConfig{Retention: 30 * 24 * time.Hour, Interval: time.Hour})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		queuetest.WaitFor(t, 5*time.Second, "the first prune", func() bool { return queuetest.Markers(t, bundle.pool) == 0 })
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: got %v, want nil", err)
		}
	})
}
