package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TryLockEvents takes, without waiting, the per-event lock of each of
// eventIDs in one statement and one transaction, and returns that transaction
// with the ids it locked, in their order. The ids another delivery holds are
// left out; the caller leaves them for a later batch. The locks are the same
// as TryLockEvent's, so a batch and a single delivery of one event exclude
// each other. The Tx is returned even when it locked nothing; roll it back.
//
// Every lock held takes a slot in the server's shared lock table, sized
// max_locks_per_transaction × max_connections (6,400 with PostgreSQL's
// defaults), so batches stay well below that.
func (s *Store) TryLockEvents(ctx context.Context, eventIDs []string) (*Tx, []string, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("begin batch lock: %w", err)
	}
	rows, err := tx.Query(ctx, tryLockEventsSQL, eventIDs)
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, nil, fmt.Errorf("lock events: %w", err)
	}
	locked := make([]string, 0, len(eventIDs))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			_ = tx.Rollback(ctx)
			return nil, nil, fmt.Errorf("lock events: %w", err)
		}
		locked = append(locked, id)
	}
	if err := rows.Err(); err != nil {
		_ = tx.Rollback(ctx)
		return nil, nil, fmt.Errorf("lock events: %w", err)
	}
	return s.newTx(tx), locked, nil
}

// ClaimState is where a claimed event stands once its lock is held.
type ClaimState int

const (
	// ClaimHeld: the row is still as the claim left it; process the event.
	ClaimHeld ClaimState = iota
	// ClaimProcessed: the event has a dedup marker, so it was processed
	// since it was queued; only its queue row is left to delete.
	ClaimProcessed
	// ClaimLost: the row is gone, or was claimed again after this claim's
	// window passed; whoever holds it now finishes it.
	ClaimLost
	// ClaimBusy: another delivery or retry holds the event's lock; the row
	// stays claimed and is due again once the claim window has passed.
	ClaimBusy
)

const claimStatesSQL = `
	SELECT CASE
	         WHEN EXISTS (SELECT 1 FROM processed_webhook_events m WHERE m.event_id = c.event_id) THEN $4::int
	         WHEN EXISTS (SELECT 1 FROM webhook_events e
	                      WHERE e.id = c.id AND e.next_retry_at = c.claimed_until
	                        AND ` + pending + `) THEN $5::int
	         ELSE $6::int
	       END
	FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS c(id, event_id, claimed_until, ord)
	ORDER BY c.ord`

// claimColumns returns the arguments of claimStatesSQL for claimed.
func claimColumns(claimed []Event) []any {
	ids := make([]string, len(claimed))
	eventIDs := make([]string, len(claimed))
	until := make([]time.Time, len(claimed))
	for i, e := range claimed {
		ids[i], eventIDs[i], until[i] = e.ID.String(), e.EventID, e.NextRetryAt
	}
	return []any{ids, eventIDs, until, int(ClaimProcessed), int(ClaimHeld), int(ClaimLost)}
}

// LockClaims does what TryLockEvents and then ClaimStates do, in one round
// trip: BEGIN, the locks of the claimed events and the read of their states
// go out in one pipeline, the read in a statement after the locks'. It
// returns the transaction holding the locks and each claimed event's state,
// in order; ClaimBusy for the events whose lock is held elsewhere. End the
// Tx with CommitSettled or Rollback.
func (s *Store) LockClaims(ctx context.Context, claimed []Event) (*Tx, []ClaimState, error) {
	if s.pool == nil {
		return nil, nil, errors.New("queue: LockClaims needs a Store over a pool, not a transaction")
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("begin batch lock: %w", err)
	}
	t := &pipelinedTx{Conn: conn}
	eventIDs := make([]string, len(claimed))
	for i, e := range claimed {
		eventIDs[i] = e.EventID
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(tryLockEventsSQL, eventIDs)
	b.Queue(claimStatesSQL, claimColumns(claimed)...)
	br := conn.SendBatch(ctx, b)
	var lockedIDs []string
	var stateNumbers []int
	_, err = br.Exec()
	if err == nil {
		lockedIDs, err = collect(br, pgx.RowTo[string])
	}
	if err == nil {
		stateNumbers, err = collect(br, pgx.RowTo[int])
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = t.Rollback(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("lock claimed events: %w", err)
	}
	locked := make(map[string]bool, len(lockedIDs))
	for _, id := range lockedIDs {
		locked[id] = true
	}
	states := make([]ClaimState, len(claimed))
	for i, id := range eventIDs {
		states[i] = ClaimState(stateNumbers[i])
		if !locked[id] {
			states[i] = ClaimBusy
		}
	}
	return &Tx{Store: s.on(t), tx: t}, states, nil
}

// collect reads the rows of a batch's next query.
func collect[T any](br pgx.BatchResults, fn pgx.RowToFunc[T]) ([]T, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, fn)
}

// ClaimStates returns the state of each claimed event, in order. Call it
// with the events' locks held, in a statement after the one that took them:
// a statement sees only what was committed when it started, so a marker
// committed by the delivery that held the lock just before would be missed
// by a check in the locking statement itself.
//
// A row counts as still claimed when its next_retry_at is the one ClaimDue
// returned: every claim and every outcome moves it.
func (s *Store) ClaimStates(ctx context.Context, claimed []Event) ([]ClaimState, error) {
	rows, err := s.db.Query(ctx, claimStatesSQL, claimColumns(claimed)...)
	if err != nil {
		return nil, fmt.Errorf("check claims: %w", err)
	}
	defer rows.Close()
	states := make([]ClaimState, 0, len(claimed))
	for rows.Next() {
		var st int
		if err := rows.Scan(&st); err != nil {
			return nil, fmt.Errorf("check claims: %w", err)
		}
		states = append(states, ClaimState(st))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check claims: %w", err)
	}
	return states, nil
}

// Settled is a claimed event after its attempt, as ResolveBatch and
// RescheduleBatch take it.
type Settled struct {
	Event Event
	// Attempt is the attempt to record; nil for an event resolved without
	// one (it had a marker already).
	Attempt *NewAttempt
}

// ResolveBatch finishes claimed events in one statement: it deletes their
// queue rows, writes their dedup markers and records their successful
// attempts. As with Resolve, there is never a moment with neither a row nor
// a marker, nor with both. It returns how many rows it deleted.
func (s *Store) ResolveBatch(ctx context.Context, done []Settled) (int64, error) {
	if len(done) == 0 {
		return 0, nil
	}
	var deleted int64
	if err := s.db.QueryRow(ctx, resolveBatchSQL, resolveBatchArgs(done)...).Scan(&deleted); err != nil {
		return 0, fmt.Errorf("resolve batch: %w", err)
	}
	return deleted, nil
}

// resolveBatchSQL deletes the queue rows $1 and writes the marker of each
// row it deleted: a row is only ever deleted here, under its event's lock,
// so its marker goes with it.
var resolveBatchSQL = `
	WITH resolved AS (
		DELETE FROM webhook_events WHERE id = ANY ($1::uuid[]) RETURNING event_id
	), marked AS (
		INSERT INTO processed_webhook_events (event_id)
		SELECT event_id FROM resolved
		ON CONFLICT DO NOTHING
	), recorded AS (` + insertAttemptsSQL(2) + `
	)
	SELECT count(*) FROM resolved`

func resolveBatchArgs(done []Settled) []any {
	var c attemptColumns
	ids := make([]string, len(done))
	for i, d := range done {
		ids[i] = d.Event.ID.String()
		if d.Attempt != nil {
			c.add(*d.Attempt)
		}
	}
	return append([]any{ids}, c.args()...)
}

// RescheduleBatch records failed attempts of claimed events in one
// statement: each event's attempts become its Attempt's Number, and it
// becomes what afterFailure says, retrying or dead. It returns the new
// status of each event, in order.
func (s *Store) RescheduleBatch(ctx context.Context, failed []Settled) ([]Status, error) {
	if len(failed) == 0 {
		return nil, nil
	}
	statuses, args := s.rescheduleBatchArgs(failed)
	if _, err := s.db.Exec(ctx, rescheduleBatchSQL, args...); err != nil {
		return nil, fmt.Errorf("reschedule batch: %w", err)
	}
	return statuses, nil
}

// rescheduleBatchSQL writes the outcome of failed retries: $1 the rows, $2
// their new status, $3 the seconds until their next retry (NULL for none:
// the row keeps its next_retry_at), $4 their attempts and $5 their last
// error; then the attempts to record, from $6 on. It returns how many rows
// it changed.
var rescheduleBatchSQL = `
	WITH f AS (
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::float8[], $4::int[], $5::text[])
		       AS f(id, status, wait, attempts, error)
	), rescheduled AS (
		UPDATE webhook_events e
		SET status = f.status, attempts = f.attempts, last_error = f.error,
		    last_attempt_at = now(), manual_retry = false, claims = 0,
		    next_retry_at = coalesce(now() + make_interval(secs => f.wait), e.next_retry_at)
		FROM f
		WHERE e.id = f.id
		RETURNING e.id
	), recorded AS (` + insertAttemptsSQL(6) + `
	)
	SELECT count(*) FROM rescheduled`

// failedRetry is one row of rescheduleBatchSQL: the queue row id, the
// attempts its failure brings it to and the failure's error.
type failedRetry struct {
	id       string
	attempts int
	error    string
}

// rescheduleArgs returns the arguments of rescheduleBatchSQL for rows, and
// attempts to record with them, and each row's new status.
func (s *Store) rescheduleArgs(rows []failedRetry, attempts attemptColumns) ([]Status, []any) {
	ids := make([]string, len(rows))
	statuses := make([]Status, len(rows))
	statusText := make([]string, len(rows))
	waits := make([]*float64, len(rows))
	numbers := make([]int, len(rows))
	errs := make([]string, len(rows))
	for i, r := range rows {
		statuses[i], waits[i] = s.afterFailure(r.attempts)
		ids[i], statusText[i], numbers[i], errs[i] = r.id, string(statuses[i]), r.attempts, r.error
	}
	return statuses, append([]any{ids, statusText, waits, numbers, errs}, attempts.args()...)
}

// rescheduleBatchArgs returns the arguments of rescheduleBatchSQL for
// failed, whose Attempts are recorded, and each event's new status.
func (s *Store) rescheduleBatchArgs(failed []Settled) ([]Status, []any) {
	var c attemptColumns
	rows := make([]failedRetry, len(failed))
	for i, f := range failed {
		c.add(*f.Attempt)
		rows[i] = failedRetry{id: f.Event.ID.String(), attempts: f.Attempt.Number, error: f.Attempt.Error}
	}
	return s.rescheduleArgs(rows, c)
}

// ReleaseBatch hands claimed events back to the queue, due at once, with
// their status, attempts and last error as they were: their attempts were cut
// short by a shutdown, which says nothing about the event, so they are not
// counted, no attempt is recorded and the claim is taken back. It returns
// how many rows it released.
func (s *Store) ReleaseBatch(ctx context.Context, released []Event) (int64, error) {
	if len(released) == 0 {
		return 0, nil
	}
	tag, err := s.db.Exec(ctx, releaseBatchSQL, eventRowIDs(released))
	if err != nil {
		return 0, fmt.Errorf("release batch: %w", err)
	}
	return tag.RowsAffected(), nil
}

const releaseBatchSQL = `
	UPDATE webhook_events SET next_retry_at = now(), claims = greatest(claims - 1, 0)
	WHERE id = ANY ($1::uuid[]) AND ` + pending

func eventRowIDs(events []Event) []string {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID.String()
	}
	return ids
}

// CommitSettled writes a batch's outcomes as ResolveBatch, RescheduleBatch
// and ReleaseBatch do, and commits, in one round trip when the Tx came from
// LockClaims. It returns the new status of each failed event, in order.
func (t *Tx) CommitSettled(ctx context.Context, done, failed []Settled, released []Event) ([]Status, error) {
	b := &pgx.Batch{}
	if len(done) > 0 {
		b.Queue(resolveBatchSQL, resolveBatchArgs(done)...)
	}
	var statuses []Status
	if len(failed) > 0 {
		var args []any
		statuses, args = t.rescheduleBatchArgs(failed)
		b.Queue(rescheduleBatchSQL, args...)
	}
	if len(released) > 0 {
		b.Queue(releaseBatchSQL, eventRowIDs(released))
	}
	if err := t.tx.commitWith(ctx, b); err != nil {
		return nil, fmt.Errorf("settle batch: %w", err)
	}
	return statuses, nil
}

// insertAttemptsSQL is the one statement that appends to the attempt
// history: the attempts given column by column, as attemptColumns.args
// orders them, in the parameters from $first on.
func insertAttemptsSQL(first int) string {
	return fmt.Sprintf(`
		INSERT INTO webhook_attempts (source, event_id, duration_ms, outcome, http_status, error, path, attempt)
		SELECT a.source, a.event_id, a.duration_ms, a.outcome, NULLIF(a.http_status, 0), NULLIF(a.error, ''), a.path, a.attempt
		FROM unnest($%d::text[], $%d::text[], $%d::float8[], $%d::text[], $%d::int[], $%d::text[], $%d::text[], $%d::int[])
		     AS a(source, event_id, duration_ms, outcome, http_status, error, path, attempt)`,
		first, first+1, first+2, first+3, first+4, first+5, first+6, first+7)
}

// attemptColumns holds attempts column by column, for insertAttemptsSQL.
type attemptColumns struct {
	source, eventID, outcome, errors, path []string
	durationMS                             []float64
	httpStatus, number                     []int
}

func (c *attemptColumns) add(a NewAttempt) {
	outcome := "failed"
	if a.Succeeded {
		outcome = "succeeded"
	}
	c.source = append(c.source, a.Source)
	c.eventID = append(c.eventID, a.EventID)
	c.durationMS = append(c.durationMS, float64(a.Duration)/float64(time.Millisecond))
	c.outcome = append(c.outcome, outcome)
	c.httpStatus = append(c.httpStatus, a.HTTPStatus)
	c.errors = append(c.errors, a.Error)
	c.path = append(c.path, string(a.Path))
	c.number = append(c.number, a.Number)
}

// args returns the columns in insertAttemptsSQL's order, with empty arrays
// rather than NULLs.
func (c *attemptColumns) args() []any {
	return []any{
		nonNil(c.source), nonNil(c.eventID), nonNil(c.durationMS), nonNil(c.outcome),
		nonNil(c.httpStatus), nonNil(c.errors), nonNil(c.path), nonNil(c.number),
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// PruneAttempts deletes the attempt history older than olderThan of events
// that are no longer on the queue, i.e. resolved ones, and returns how many
// attempts it deleted. The history of an event still queued, dead ones
// included, is kept whatever its age: a person may still need it. It deletes
// in batches, as PruneProcessed does.
func (s *Store) PruneAttempts(ctx context.Context, olderThan time.Duration) (int64, error) {
	var total int64
	for {
		tag, err := s.db.Exec(ctx, `
			DELETE FROM webhook_attempts
			WHERE id = ANY (ARRAY(
				SELECT a.id FROM webhook_attempts a
				WHERE a.attempted_at < now() - make_interval(secs => $1)
				  AND NOT EXISTS (SELECT 1 FROM webhook_events e
				                  WHERE e.source = a.source AND e.event_id = a.event_id)
				LIMIT $2))`,
			olderThan.Seconds(), pruneBatchSize)
		if err != nil {
			return total, fmt.Errorf("prune attempts: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatchSize {
			return total, nil
		}
	}
}
