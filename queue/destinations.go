package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// Destination sources: where a destination's configuration came from.
const (
	SourceDestinationsFile = "file"
	SourceForwardURL       = "forward_url"
)

// AppliedDestination is a destination as a replica applies it: what the
// destinations table keeps of its configuration.
type AppliedDestination struct {
	Name        string
	URL         string
	Route       any // marshalled to JSON: types, livemode, accounts, endpoints, filter
	Source      string
	Concurrency int
	Timeout     time.Duration
}

// Applied is what ApplyDestinations did.
type Applied struct {
	// Retired names the destinations taken out of the configuration that
	// still have queued or dead deliveries: kept, retired, for support to
	// move or drop them.
	Retired []string
	// Removed names those taken out with nothing left on the queue.
	Removed []string
}

// ApplyDestinations records, in one transaction, the destinations this
// replica applies and the hash of their configuration (on its replica's
// row): each one's configuration is written, keeping its pause and
// breaker; one that was retired and is configured again is retired no
// more. A destination no longer configured is retired while deliveries to
// it wait on the queue (dead ones included), and deleted otherwise. Every
// replica applies what it read at start or on SIGHUP; they agree when
// their hashes do (ReplicaDestinationHashes). The dashboard's destinations
// (source dashboard) are their actions' to write: left out of ds, and
// left alone unless a file is applied, which is then the truth.
func (s *Store) ApplyDestinations(ctx context.Context, ds []AppliedDestination, hash string) (Applied, error) {
	ds, spareDashboard := withoutDashboard(ds)
	names := make([]string, len(ds))
	urls, sources := make([]string, len(ds)), make([]string, len(ds))
	routes := make([]string, len(ds))
	concurrency, timeouts := make([]*int, len(ds)), make([]*float64, len(ds))
	for i, d := range ds {
		names[i], urls[i], sources[i] = d.Name, d.URL, d.Source
		b, err := json.Marshal(d.Route)
		if err != nil {
			return Applied{}, fmt.Errorf("apply destinations: route of %s: %w", d.Name, err)
		}
		routes[i] = string(b)
		if d.Concurrency > 0 {
			concurrency[i] = &d.Concurrency
		}
		if d.Timeout > 0 {
			t := d.Timeout.Seconds()
			timeouts[i] = &t
		}
	}
	var out Applied
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, applyDestinationsSQL, names, urls, routes, sources, concurrency, timeouts); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, unconfiguredSQL, names, spareDashboard)
		if err != nil {
			return err
		}
		type gone struct {
			Name    string
			Retired bool
		}
		all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[gone])
		if err != nil {
			return err
		}
		for _, g := range all {
			if g.Retired {
				out.Retired = append(out.Retired, g.Name)
			} else {
				out.Removed = append(out.Removed, g.Name)
			}
		}
		if s.replica != nil {
			_, err = tx.Exec(ctx, `UPDATE hookd_replicas SET destinations_hash = $2 WHERE id = $1`, s.replica.arg(), hash)
		}
		return err
	})
	if err != nil {
		return Applied{}, fmt.Errorf("apply destinations: %w", err)
	}
	return out, nil
}

// applyDestinationsSQL writes the destinations $1 (urls $2, routes $3,
// sources $4, concurrency $5, timeouts $6), keeping each one's pause and
// breaker, and brings back a retired one.
const applyDestinationsSQL = `-- hookd.apply_destinations
	INSERT INTO destinations AS d (name, url, route, source, concurrency, timeout_seconds)
	SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::int[], $6::float8[])
	ON CONFLICT (name) DO UPDATE
	SET url = excluded.url, route = excluded.route, source = excluded.source, concurrency = excluded.concurrency,
	    timeout_seconds = excluded.timeout_seconds, applied_at = now(), retired_at = NULL,
	    signing_secrets_sealed = NULL, headers_sealed = NULL`

// unconfiguredSQL retires each destination not among $1 that still has a
// delivery on the queue, deletes the others, and returns each with
// whether it was retired; the dashboard's are left alone when $2.
const unconfiguredSQL = `-- hookd.unconfigured_destinations
	WITH gone AS (
		SELECT d.name, EXISTS (SELECT 1 FROM webhook_events e WHERE e.destination = d.name) AS waiting
		FROM destinations d WHERE d.name <> ALL ($1::text[]) AND NOT ($2::boolean AND d.source = 'dashboard')
	), retired AS (
		UPDATE destinations d SET retired_at = coalesce(d.retired_at, now())
		FROM gone g WHERE g.name = d.name AND g.waiting
	), removed AS (
		DELETE FROM destinations d USING gone g WHERE g.name = d.name AND NOT g.waiting
	)
	SELECT name, waiting FROM gone ORDER BY name`

// DestinationState is a destination's row: its configuration as last
// applied, and its own pause and circuit breaker.
type DestinationState struct {
	Name        string     `db:"name"`
	URL         string     `db:"url"`
	Route       []byte     `db:"route"`
	Source      string     `db:"source"`
	Concurrency *int       `db:"concurrency"`
	Timeout     *float64   `db:"timeout_seconds"`
	AddedAt     time.Time  `db:"added_at"`
	AppliedAt   time.Time  `db:"applied_at"`
	RetiredAt   *time.Time `db:"retired_at"`
	// PausedAt, PausedBy and PausedReason: a person's pause of this
	// destination; nil and empty while it is not paused.
	PausedAt        *time.Time `db:"paused_at"`
	PausedBy        *string    `db:"paused_by"`
	PausedReason    *string    `db:"paused_reason"`
	BreakerFailures int        `db:"breaker_failures"`
	BreakerOpenedAt *time.Time `db:"breaker_opened_at"`
	BreakerError    *string    `db:"breaker_error"`
	ProbeDueAt      *time.Time `db:"probe_due_at"`
	// RetriesNarrowedAt is when its retry loop last found every retry of
	// a turn failed (MarkRetriesNarrowed); nil once one succeeded.
	RetriesNarrowedAt *time.Time `db:"retries_narrowed_at"`
}

// Paused says whether a person paused the destination.
func (d DestinationState) Paused() bool { return d.PausedAt != nil }

// BreakerOpen says whether the destination's circuit breaker is open.
func (d DestinationState) BreakerOpen() bool { return d.BreakerOpenedAt != nil }

// Held says whether the destination's deliveries wait: paused, or its
// breaker open.
func (d DestinationState) Held() bool { return d.Paused() || d.BreakerOpen() }

// RetriesNarrowed says whether, at now, the destination's retry loop
// retries one delivery at a time because every retry failed: it said so
// within OverdueAfter (a loop that stopped saying so stopped narrowing).
func (d DestinationState) RetriesNarrowed(now time.Time) bool {
	return d.RetriesNarrowedAt != nil && now.Sub(*d.RetriesNarrowedAt) < OverdueAfter
}

// MarkRetriesNarrowed records that destination's retry loop narrowed its
// claims after a turn whose every retry failed (narrowed), or claims whole
// batches again after a success.
func (s *Store) MarkRetriesNarrowed(ctx context.Context, destination string, narrowed bool) error {
	_, err := s.db.Exec(ctx, `
		UPDATE destinations SET retries_narrowed_at = CASE WHEN $2 THEN now() END
		WHERE name = $1 AND ($2 OR retries_narrowed_at IS NOT NULL)`,
		cmp.Or(destination, DefaultDestination), narrowed)
	if err != nil {
		return fmt.Errorf("mark retries of %s narrowed: %w", destination, err)
	}
	return nil
}

// DestinationStates returns every destination's row, retired ones
// included, by name.
func (s *Store) DestinationStates(ctx context.Context) ([]DestinationState, error) {
	states, err := store.QueryAll[DestinationState](ctx, s.db, `
		SELECT name, url, route, source, concurrency, timeout_seconds, added_at, applied_at, retired_at,
		       paused_at, paused_by, paused_reason, breaker_failures, breaker_opened_at, breaker_error, probe_due_at,
		       retries_narrowed_at
		FROM destinations ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read destinations: %w", err)
	}
	return states, nil
}

// ReplicaDestinationHashes returns, for each live replica (one that beat
// within ReplicaSilence), the hash of the destinations it applied ("" for
// one that has applied none: a replica just starting, or a hookd
// reconcile run, which delivers through no destination of its own).
func (s *Store) ReplicaDestinationHashes(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.Query(ctx, `SELECT id::text, coalesce(destinations_hash, '') FROM hookd_replicas
		WHERE beat_at > now() - `+intervalSQL(ReplicaSilence))
	if err != nil {
		return nil, fmt.Errorf("read replicas' destinations: %w", err)
	}
	out := map[string]string{}
	var id, hash string
	_, err = pgx.ForEachRow(rows, []any{&id, &hash}, func() error {
		out[id] = hash
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read replicas' destinations: %w", err)
	}
	return out, nil
}

// HashGroup is how many live replicas apply the destinations of one hash.
type HashGroup struct {
	Hash     string
	Replicas int
}

// GroupDestinationHashes groups the replicas of hashes (as
// ReplicaDestinationHashes returns them) by the hash they applied, most
// replicas first, then by hash; unapplied counts those that applied none,
// left out of the groups. More than one group: the replicas differ.
func GroupDestinationHashes(hashes map[string]string) (groups []HashGroup, unapplied int) {
	count := map[string]int{}
	for _, h := range hashes {
		if h == "" {
			unapplied++
			continue
		}
		count[h]++
	}
	for h, n := range count {
		groups = append(groups, HashGroup{Hash: h, Replicas: n})
	}
	slices.SortFunc(groups, func(a, b HashGroup) int {
		return cmp.Or(cmp.Compare(b.Replicas, a.Replicas), strings.Compare(a.Hash, b.Hash))
	})
	return groups, unapplied
}

// ShortHash is the first 12 hex digits of a destinations hash, as pages
// and messages show it.
func ShortHash(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// DestinationStat is one destination's part of the queue: its deliveries
// by status, when the oldest pending one was received, and how many of its
// keys a dead event holds (order_by; HeldKeys lists them).
type DestinationStat struct {
	Destination string     `db:"destination"`
	Failed      int64      `db:"failed"`
	Retrying    int64      `db:"retrying"`
	Dead        int64      `db:"dead"`
	Oldest      *time.Time `db:"oldest_pending"`
	HeldKeys    int64      `db:"held_keys"`
}

// DestinationStats returns each destination's part of the queue, by name:
// every destination of the destinations table (retired ones included), at
// zero when nothing of it is queued, and any other a queue row names. The
// names are configured ones, so they are few. It reads the whole queue in
// one pass, grouped by destination; the metrics read it at most every few
// seconds.
func (s *Store) DestinationStats(ctx context.Context) ([]DestinationStat, error) {
	stats, err := store.QueryAll[DestinationStat](ctx, s.db, `
		WITH q AS (
			SELECT destination,
			       count(*) FILTER (WHERE status = 'failed')   AS failed,
			       count(*) FILTER (WHERE status = 'retrying') AS retrying,
			       count(*) FILTER (WHERE status = 'dead')     AS dead,
			       min(created_at) FILTER (WHERE `+pending+`) AS oldest_pending,
			       count(DISTINCT order_key) FILTER (WHERE status = 'dead') AS held_keys
			FROM webhook_events GROUP BY destination
		)
		SELECT coalesce(q.destination, d.name) AS destination, coalesce(q.failed, 0) AS failed,
		       coalesce(q.retrying, 0) AS retrying, coalesce(q.dead, 0) AS dead, q.oldest_pending,
		       coalesce(q.held_keys, 0) AS held_keys
		FROM q FULL JOIN destinations d ON d.name = q.destination
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("queue stats by destination: %w", err)
	}
	return stats, nil
}
