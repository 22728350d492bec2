package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// FailureGroup is the queued deliveries to one destination whose last
// errors are the same once their variable parts (ids, numbers, timestamps,
// hex) are masked: one failure, however many events and event types it
// hits. The masking is the database's webhook_error_group, stored with
// each row as error_group. One error at two destinations is two groups:
// two apps failing alike are two failures, each fixed, and retried, on
// its own.
type FailureGroup struct {
	// Destination is the destination whose deliveries failed; "" (as a
	// request to retry a group) is every destination's.
	Destination string
	// EventType, when set, narrows the group to the events of one type
	// (the failures page's type filter); "" is every type the error hit.
	EventType string
	// ErrorGroup is the masked error, e.g. "timeout after <n>s for <id>";
	// "no error recorded" for events without one, so it is never empty.
	ErrorGroup string
	// Types are the event types of the group's events, with how many of
	// each, most first.
	Types    []TypeCount
	Failed   int64
	Retrying int64
	Dead     int64
	// FirstSeen is when the group's oldest event was received, LastSeen
	// when one of its events last failed.
	FirstSeen time.Time
	LastSeen  time.Time
}

// TypeCount is how many of a failure group's events are of one type.
type TypeCount struct {
	EventType string
	Count     int64
}

// Pending is the number of the group's events waiting for a retry.
func (g FailureGroup) Pending() int64 { return g.Failed + g.Retrying }

// Total is the number of the group's events on the queue.
func (g FailureGroup) Total() int64 { return g.Failed + g.Retrying + g.Dead }

// Filter selects the group's events in the given status (StatusPending for
// both pending statuses), of every type it hit unless EventType narrows it.
func (g FailureGroup) Filter(status Status) EventFilter {
	return EventFilter{Status: status, EventType: g.EventType, ErrorGroup: g.ErrorGroup, Destination: g.Destination}
}

// FailureGroups returns up to limit failure groups of the queue, the
// largest first, and how many groups there are in all. One outage of one
// destination is one group whatever event types it hit; eventType, when
// not "", keeps only the events of that type, and destination, when not
// "", the deliveries to that destination.
func (s *Store) FailureGroups(ctx context.Context, limit int, eventType, destination string) ([]FailureGroup, int64, error) {
	// One pass over the queue: the masked error is a stored column, so
	// grouping costs what a count by type would. The types of a group
	// are counted first, then gathered into its row.
	rows, err := s.db.Query(ctx, `
		WITH by_type AS (
			SELECT destination, error_group, event_type, count(*) AS events,
			       count(*) FILTER (WHERE status = 'failed')   AS failed,
			       count(*) FILTER (WHERE status = 'retrying') AS retrying,
			       count(*) FILTER (WHERE status = 'dead')     AS dead,
			       min(created_at) AS first_seen,
			       max(coalesce(last_attempt_at, created_at)) AS last_seen
			FROM webhook_events
			WHERE ($2 = '' OR event_type = $2) AND ($3 = '' OR destination = $3)
			GROUP BY destination, error_group, event_type
		)
		SELECT destination, error_group,
		       array_agg(event_type ORDER BY events DESC, event_type) AS types,
		       array_agg(events::bigint ORDER BY events DESC, event_type) AS type_counts,
		       sum(failed)::bigint, sum(retrying)::bigint, sum(dead)::bigint,
		       min(first_seen) AS first_seen, max(last_seen) AS last_seen,
		       count(*) OVER () AS groups
		FROM by_type
		GROUP BY destination, error_group
		ORDER BY sum(events) DESC, max(last_seen) DESC, error_group, destination
		LIMIT $1`, limit, eventType, destination)
	if err != nil {
		return nil, 0, fmt.Errorf("group failures: %w", err)
	}
	var total int64
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FailureGroup, error) {
		g := FailureGroup{EventType: eventType}
		var types []string
		var counts []int64
		err := row.Scan(&g.Destination, &g.ErrorGroup, &types, &counts, &g.Failed, &g.Retrying, &g.Dead,
			&g.FirstSeen, &g.LastSeen, &total)
		for i := range types {
			g.Types = append(g.Types, TypeCount{EventType: types[i], Count: counts[i]})
		}
		return g, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("group failures: %w", err)
	}
	return groups, total, nil
}
