package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// FailureGroup is the queued events of one type whose last errors are the
// same once their variable parts (ids, numbers, timestamps, hex) are masked:
// one failure, however many events it hits. The masking is the database's
// webhook_error_group, stored with each row as error_group.
type FailureGroup struct {
	EventType string `db:"event_type"`
	// ErrorGroup is the masked error, e.g. "timeout after <n>s for <id>";
	// "no error recorded" for events without one, so it is never empty.
	ErrorGroup string `db:"error_group"`
	Failed     int64  `db:"failed"`
	Retrying   int64  `db:"retrying"`
	Dead       int64  `db:"dead"`
	// FirstSeen is when the group's oldest event was received, LastSeen
	// when one of its events last failed.
	FirstSeen time.Time `db:"first_seen"`
	LastSeen  time.Time `db:"last_seen"`
}

// Pending is the number of the group's events waiting for a retry.
func (g FailureGroup) Pending() int64 { return g.Failed + g.Retrying }

// Total is the number of the group's events on the queue.
func (g FailureGroup) Total() int64 { return g.Failed + g.Retrying + g.Dead }

// Filter selects the group's events in the given status (StatusPending for
// both pending statuses).
func (g FailureGroup) Filter(status Status) EventFilter {
	return EventFilter{Status: status, EventType: g.EventType, ErrorGroup: g.ErrorGroup}
}

// FailureGroups returns up to limit failure groups of the queue, the
// largest first, and how many groups there are in all.
func (s *Store) FailureGroups(ctx context.Context, limit int) ([]FailureGroup, int64, error) {
	// One pass over the queue: the masked error is a stored column, so
	// grouping costs what a count by type would.
	rows, err := s.db.Query(ctx, `
		SELECT event_type, error_group,
		       count(*) FILTER (WHERE status = 'failed')   AS failed,
		       count(*) FILTER (WHERE status = 'retrying') AS retrying,
		       count(*) FILTER (WHERE status = 'dead')     AS dead,
		       min(created_at) AS first_seen,
		       max(coalesce(last_attempt_at, created_at)) AS last_seen,
		       count(*) OVER () AS groups
		FROM webhook_events
		GROUP BY event_type, error_group
		ORDER BY count(*) DESC, last_seen DESC, event_type, error_group
		LIMIT $1`, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("group failures: %w", err)
	}
	var total int64
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FailureGroup, error) {
		var g FailureGroup
		err := row.Scan(&g.EventType, &g.ErrorGroup, &g.Failed, &g.Retrying, &g.Dead,
			&g.FirstSeen, &g.LastSeen, &total)
		return g, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("group failures: %w", err)
	}
	return groups, total, nil
}
