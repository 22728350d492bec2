package queue

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// Fence cuts: runs of an event its own replica's fence stopped
// (migrations/00033_fence_cuts.sql).
//
// A run the fence stops is given back uncounted, as at shutdown: most of
// the time the database, not the event, was at fault. But an event that
// starves its process of the CPU or memory its beats need would cause the
// fence each time it runs, and run again and again. So each such stop is
// counted per event, in the transaction that gives the run back, and the
// second makes the event a suspect (suspects.go): it runs alone next. A
// suspect whose run alone the fence stops was the only thing running: it
// is charged one attempt (FencedFormat), as a suspect that crashes hookd
// alone is, so five of them make it dead instead of looping.

// FencedFormat is the last_error, for PostgreSQL's format() with the
// attempt's number, of a suspect whose run alone its replica's fence
// stopped: nothing else was running, so the attempt counts.
const FencedFormat = "attempt %s stalled hookd: the event ran alone after its runs were cut short, and hookd could not " +
	"keep its hold on the database while it ran, so it stopped the run; the attempt counts as failed"

// fenceCutOp counts, in a short transaction that gives runs back, those of
// them the fence stopped, before the statement that releases their leases.
type fenceCutOp struct {
	ids    []string
	owners []uuid.UUID
}

// add counts the run of eventID under owner's lease as one the fence
// stopped.
func (op *fenceCutOp) add(eventID string, owner uuid.UUID) {
	op.ids = append(op.ids, eventID)
	op.owners = append(op.owners, owner)
}

func (op *fenceCutOp) queue(b *pgx.Batch) {
	if len(op.ids) > 0 {
		b.Queue(fenceCutsSQL, op.ids, uuidArray(op.owners), MaxAttempts, FencedFormat)
	}
}

func (op *fenceCutOp) read(br pgx.BatchResults) error {
	if len(op.ids) == 0 {
		return nil
	}
	_, err := br.Exec()
	return err
}

// fenceCutsSQL counts the fence cuts of the runs of events $1 under the
// leases of owners $2 still theirs and started, and makes a suspect of
// each event cut short a second time, as suspectedSQL does. A run alone
// is charged instead, as reapSilentSQL charges one that crashed: one
// crash of the suspect, one attempt of the queue row while the event
// waits there (dead at MaxAttempts, $3), and the attempt history, with
// FencedFormat ($4). Run it before the statement that releases the leases.
var fenceCutsSQL = `-- hookd.fence_cuts
	WITH cut AS (
		SELECT l.event_id, l.path, l.alone FROM webhook_leases l
		WHERE l.event_id = ANY ($1::text[])
		  AND (l.event_id, l.owner) IN (SELECT * FROM unnest($1::text[], $2::uuid[]))
		  AND l.started_at IS NOT NULL AND NOT ` + notEventKey("l.event_id") + `
	), counted AS (
		INSERT INTO webhook_fence_cuts AS f (event_id, cuts)
		SELECT event_id, 1 FROM cut
		ON CONFLICT (event_id) DO UPDATE SET cuts = f.cuts + 1, last_at = now()
		RETURNING f.event_id, f.cuts
	), suspected AS (
		INSERT INTO webhook_suspects AS s (event_id, path, interruptions, crashes)
		SELECT c.event_id, c.path, CASE WHEN c.alone THEN 0 ELSE 1 END, CASE WHEN c.alone THEN 1 ELSE 0 END
		FROM cut c JOIN counted n USING (event_id)
		WHERE c.alone OR n.cuts >= 2
		ON CONFLICT (event_id) DO UPDATE
		SET interruptions = s.interruptions + excluded.interruptions, crashes = s.crashes + excluded.crashes,
		    path = excluded.path, cleared_at = NULL
		RETURNING s.event_id, s.crashes
	), charged AS (
		UPDATE webhook_events e
		SET attempts = e.attempts + 1,
		    status = CASE WHEN e.attempts + 1 >= $3 THEN 'dead' ELSE e.status END,
		    payload = ` + erasedPayloadSQL("e", "e.attempts + 1 >= $3") + `,
		    last_error = format($4, e.attempts + 1), last_attempt_at = now(), claims = 0
		FROM cut c
		WHERE c.alone AND e.lease_key = c.event_id AND e.` + pending + `
		RETURNING e.source, e.event_id, e.attempts, c.path, e.destination
	)
	` + insertAttemptsSQL(`
	SELECT q.source, q.event_id, 0, 'failed', NULL::int, format($4, q.attempts),
	       CASE WHEN q.path = '`+string(PathReplay)+`' THEN q.path ELSE 'retry' END, q.attempts, NULL::text, q.destination
	FROM charged q
	UNION ALL
	SELECT '`+SourceStripe+`', s.event_id, 0, 'failed', NULL::int, format($4, s.crashes), c.path, s.crashes, NULL::text,
	       '`+DefaultDestination+`'
	FROM cut c JOIN suspected s USING (event_id)
	WHERE c.alone AND c.path = '`+string(PathReplay)+`'
	  AND NOT EXISTS (SELECT 1 FROM charged q WHERE `+deliveryKeySQL("q")+` = c.event_id)`)

// PruneFenceCuts deletes the fence cuts of events last stopped more than
// olderThan ago (the markers' retention): an event still queued then has
// run since, or is long past the fence that stopped it.
func (s *Store) PruneFenceCuts(ctx context.Context, olderThan time.Duration) (int64, error) {
	return store.Delete(ctx, s.db, "prune fence cuts",
		`DELETE FROM webhook_fence_cuts WHERE last_at < now() - make_interval(secs => $1)`, olderThan.Seconds())
}
