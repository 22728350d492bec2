package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LastEventAt returns when the last event came through endpoint, whatever
// its account; false when none has yet. Pings do not count: they prove the
// way in works, not that Stripe sends events.
func (s *Store) LastEventAt(ctx context.Context, endpoint string) (time.Time, bool, error) {
	var at *time.Time
	err := s.db.QueryRow(ctx, `SELECT max(last_event_at) FROM endpoint_activity WHERE endpoint = $1`, endpoint).Scan(&at)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("last event of endpoint %s: %w", endpoint, err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return *at, true, nil
}

// AccountsSeen returns the connected accounts events came from through
// endpoint since since, in order.
func (s *Store) AccountsSeen(ctx context.Context, endpoint string, since time.Time) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		SELECT account FROM endpoint_activity
		WHERE endpoint = $1 AND account <> '' AND last_event_at >= $2
		ORDER BY account`, endpoint, since)
	if err != nil {
		return nil, fmt.Errorf("accounts seen on endpoint %s: %w", endpoint, err)
	}
	accounts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("accounts seen on endpoint %s: %w", endpoint, err)
	}
	return accounts, nil
}

// RecentAPIVersion returns the API version of the newest event received
// through endpoint since since whose version hookd keeps; false when there
// is none. It is what the app has been getting through that endpoint.
func (s *Store) RecentAPIVersion(ctx context.Context, endpoint string, since time.Time) (string, bool, error) {
	var version string
	err := s.db.QueryRow(ctx, `
		SELECT api_version FROM webhook_events
		WHERE endpoint = $1 AND api_version IS NOT NULL AND api_version <> '' AND created_at >= $2
		ORDER BY created_at DESC
		LIMIT 1`, endpoint, since).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("API version of endpoint %s's recent events: %w", endpoint, err)
	}
	return version, true, nil
}
