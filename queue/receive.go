package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const (
	eventStateSQL = `
		SELECT EXISTS (SELECT 1 FROM processed_webhook_events WHERE event_id = $2),
		       EXISTS (SELECT 1 FROM webhook_events WHERE source = $1 AND event_id = $2)`
	markProcessedSQL = `INSERT INTO processed_webhook_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING`
)

// BeginEvent starts the transaction that handles one delivery of eventID
// and returns it with the event's state: whether it has a dedup marker, and
// whether it has a row on the retry queue (in any status). BEGIN, the lock
// and the state read go out in one pipeline, one round trip; with
// Tx.CommitProcessed, a delivery processed at once costs two.
//
// The lock is TryLockEvent's, with the same rules: it never waits, and
// ErrEventLocked means another delivery holds it. The state is read by a
// statement after the lock's, so it sees whatever the previous holder
// committed, and it cannot change before this transaction ends.
func (s *Store) BeginEvent(ctx context.Context, source, eventID string) (tx *Tx, processed, queued bool, err error) {
	if s.pool == nil {
		return nil, false, false, errors.New("queue: BeginEvent needs a Store over a pool, not a transaction")
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, false, fmt.Errorf("begin event lock: %w", err)
	}
	t := &pipelinedTx{Conn: conn}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(tryLockEventSQL, eventID)
	b.Queue(eventStateSQL, source, eventID)
	br := conn.SendBatch(ctx, b)
	var acquired bool
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&acquired)
	}
	if err == nil {
		err = br.QueryRow().Scan(&processed, &queued)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || !acquired {
		_ = t.Rollback(context.WithoutCancel(ctx))
		if err != nil {
			return nil, false, false, fmt.Errorf("lock event and read its state: %w", err)
		}
		return nil, false, false, ErrEventLocked
	}
	return &Tx{Store: s.on(t), tx: t}, processed, queued, nil
}

// CommitProcessed writes the dedup marker of an event processed on its
// first delivery and commits, in one round trip when the Tx came from
// BeginEvent.
//
// The marker is all such an event leaves: attempt history is kept for the
// events that failed at least once (their failed attempt, then every later
// one, each recorded with its outcome), so a marker with no attempts means
// "processed on its first delivery". Like MarkProcessed it is idempotent.
func (t *Tx) CommitProcessed(ctx context.Context, eventID string) error {
	b := &pgx.Batch{}
	b.Queue(markProcessedSQL, eventID)
	if err := t.tx.commitWith(ctx, b); err != nil {
		return fmt.Errorf("commit processed %s: %w", eventID, err)
	}
	return nil
}

// EventState reports whether eventID has a dedup marker and whether it has a
// row on the retry queue (in any status), in one round trip. Call it with the
// event's lock held, so the answer cannot change before the outcome commits.
func (s *Store) EventState(ctx context.Context, source, eventID string) (processed, queued bool, err error) {
	err = s.db.QueryRow(ctx, eventStateSQL, source, eventID).Scan(&processed, &queued)
	if err != nil {
		return false, false, fmt.Errorf("read event state: %w", err)
	}
	return processed, queued, nil
}

// RecordProcessed writes the dedup marker of a successfully processed event
// and its successful attempt in one statement, for the paths that keep an
// event's history. Like MarkProcessed it is idempotent.
func (s *Store) RecordProcessed(ctx context.Context, a NewAttempt) error {
	a.Succeeded = true
	var c attemptColumns
	c.add(a)
	if _, err := s.db.Exec(ctx, recordProcessedSQL, append([]any{a.EventID}, c.args()...)...); err != nil {
		return fmt.Errorf("record processed %s: %w", a.EventID, err)
	}
	return nil
}

// recordProcessedSQL writes the marker of the event $1 and the attempts
// from $2 on.
var recordProcessedSQL = `WITH marked AS (` + markProcessedSQL + `)` + insertAttemptsSQL(2)
