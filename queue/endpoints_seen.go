package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AccountsSeen returns the connected accounts (acct_...) hookd received
// events from through the endpoint labelled endpoint since since, from
// endpoint_activity: the accounts reconciliation lists a Connect
// endpoint's events for, one by one.
func (s *Store) AccountsSeen(ctx context.Context, endpoint string, since time.Time) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		SELECT account FROM endpoint_activity
		WHERE endpoint = $1 AND account <> '' AND last_event_at >= $2
		ORDER BY account`, endpoint, since)
	if err != nil {
		return nil, fmt.Errorf("read the accounts seen on endpoint %q: %w", endpoint, err)
	}
	accounts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the accounts seen on endpoint %q: %w", endpoint, err)
	}
	return accounts, nil
}
