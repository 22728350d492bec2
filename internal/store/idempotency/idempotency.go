// Package idempotency keeps the answers of /api/v1's POSTs that carried an
// Idempotency-Key, per token for TTL, in a table every replica shares, so
// that a request sent again gets the first one's answer instead of a
// second action.
package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// TTL is how long a key's answer is kept.
const TTL = 24 * time.Hour

// Abandoned is how long a request may hold its key unanswered before the
// same key may run again: longer than any request runs (the HTTP server's
// write timeout), so only a replica that died mid-request leaves a key
// held that long.
const Abandoned = 5 * time.Minute

// pruneBatch bounds the expired keys each claim deletes, which keeps the
// table at about a day of keys without a loop of its own.
const pruneBatch = 100

var (
	// ErrRunning: a request with the key is still running.
	ErrRunning = errors.New("a request with this Idempotency-Key is still running")
	// ErrMismatch: the key was used for another request.
	ErrMismatch = errors.New("this Idempotency-Key was used for another request")
)

// Answer is a kept answer: its status, content type and body.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

// keptRow is a key's row as Claim reads it: Status is nil while its
// request runs.
type keptRow struct {
	Hash        []byte `db:"request_hash"`
	Status      *int   `db:"status"`
	ContentType string `db:"content_type"`
	Body        []byte `db:"body"`
}

// Store keeps the keys.
type Store struct {
	db store.DBTX
}

// New returns a Store over db.
func New(db store.DBTX) *Store {
	return &Store{db: db}
}

// Claim takes key of token for the request whose hash is hash. It returns
// nil, nil when the caller holds the key now and must Finish or Release
// it; the kept answer when the same request was answered; ErrRunning while
// the same request runs; ErrMismatch when the key was used for another
// request. Of many claims of one key at once, exactly one holds it.
func (s *Store) Claim(ctx context.Context, token int64, key string, hash []byte) (*Answer, error) {
	for range 3 {
		var held bool
		err := s.db.QueryRow(ctx, `
			INSERT INTO api_idempotency (token_id, key, request_hash) VALUES ($1, $2, $3)
			ON CONFLICT (token_id, key) DO UPDATE
			SET request_hash = EXCLUDED.request_hash, created_at = now(), status = NULL, content_type = NULL, body = NULL
			WHERE api_idempotency.created_at < now() - make_interval(secs => $4)
			   OR (api_idempotency.status IS NULL AND api_idempotency.created_at < now() - make_interval(secs => $5))
			RETURNING true`, token, key, hash, TTL.Seconds(), Abandoned.Seconds()).Scan(&held)
		switch {
		case err == nil:
			return nil, s.prune(ctx)
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("claim idempotency key: %w", err)
		}
		kept, found, err := store.QueryOne[keptRow](ctx, s.db, `
			SELECT request_hash, status, coalesce(content_type, '') AS content_type, body
			FROM api_idempotency WHERE token_id = $1 AND key = $2`, token, key)
		switch {
		case err != nil:
			return nil, fmt.Errorf("read idempotency key: %w", err)
		case !found:
			continue // released between the two statements: claim again
		case !bytes.Equal(kept.Hash, hash):
			return nil, ErrMismatch
		case kept.Status == nil:
			return nil, ErrRunning
		}
		return &Answer{Status: *kept.Status, ContentType: kept.ContentType, Body: kept.Body}, nil
	}
	return nil, ErrRunning
}

// prune deletes a batch of expired keys.
func (s *Store) prune(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `
		DELETE FROM api_idempotency WHERE (token_id, key) IN (
			SELECT token_id, key FROM api_idempotency WHERE created_at < now() - make_interval(secs => $1)
			LIMIT $2 FOR UPDATE SKIP LOCKED)`, TTL.Seconds(), pruneBatch)
	if err != nil {
		return fmt.Errorf("prune idempotency keys: %w", err)
	}
	return nil
}

// Finish keeps a as the answer of the key the caller holds.
func (s *Store) Finish(ctx context.Context, token int64, key string, a Answer) error {
	_, err := s.db.Exec(ctx, `
		UPDATE api_idempotency SET status = $3, content_type = $4, body = $5
		WHERE token_id = $1 AND key = $2 AND status IS NULL`, token, key, a.Status, a.ContentType, a.Body)
	if err != nil {
		return fmt.Errorf("keep idempotent answer: %w", err)
	}
	return nil
}

// Release lets go of the key the caller holds without an answer (the
// request failed on hookd's side), so that the same key may run again.
func (s *Store) Release(ctx context.Context, token int64, key string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM api_idempotency WHERE token_id = $1 AND key = $2 AND status IS NULL`, token, key)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}
