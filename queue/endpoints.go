package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// DefaultEndpoint is the endpoint label of an event that came through the
// one endpoint STRIPE_WEBHOOK_SECRET configures (internal/endpoint's
// DefaultLabel), and of the rows queued before endpoints had labels: the
// webhook_events.endpoint column's default.
const DefaultEndpoint = "default"

// Seen is an endpoint bringing an event, of a connected account or ("")
// of the endpoint's own account, thin or snapshot: what arrived, which an
// endpoint that declares nothing learns its settings from.
type Seen struct {
	Endpoint string
	Account  string
	Thin     bool
}

// activityColumns are the Seen of a group of outcomes, each once.
type activityColumns struct {
	endpoint, account []string
	thin              []bool
}

func (c *activityColumns) add(s Seen) {
	for i := range c.endpoint {
		if c.endpoint[i] == s.Endpoint && c.account[i] == s.Account && c.thin[i] == s.Thin {
			return
		}
	}
	c.endpoint = append(c.endpoint, s.Endpoint)
	c.account = append(c.account, s.Account)
	c.thin = append(c.thin, s.Thin)
}

// upsertActivitySQL moves the last event of the endpoints $1 and accounts
// $2, and their last thin ($3) or snapshot event, to now, in the order of
// the primary key, so that two transactions never wait on each other's
// rows in opposite orders. A thin and a snapshot event of one endpoint and
// account in one group are one row: a row is updated once per statement.
const upsertActivitySQL = `-- hookd.endpoint_activity
	INSERT INTO endpoint_activity AS a (endpoint, account, last_event_at, last_thin_at, last_snapshot_at)
	SELECT endpoint, account, now(),
	       CASE WHEN bool_or(thin) THEN now() END, CASE WHEN bool_or(NOT thin) THEN now() END
	FROM unnest($1::text[], $2::text[], $3::bool[]) AS s(endpoint, account, thin)
	GROUP BY endpoint, account
	ORDER BY endpoint, account
	ON CONFLICT (endpoint, account) DO UPDATE SET last_event_at = excluded.last_event_at,
		last_thin_at = coalesce(excluded.last_thin_at, a.last_thin_at),
		last_snapshot_at = coalesce(excluded.last_snapshot_at, a.last_snapshot_at)
	WHERE a.last_event_at IS NULL OR a.last_event_at < excluded.last_event_at`

func (c *activityColumns) queue(b *pgx.Batch) {
	if len(c.endpoint) > 0 {
		b.Queue(upsertActivitySQL, c.endpoint, c.account, c.thin)
	}
}

func (c *activityColumns) read(br pgx.BatchResults) error {
	if len(c.endpoint) == 0 {
		return nil
	}
	_, err := br.Exec()
	return err
}

// Forwarded says which of a pair reached the app.
type Forwarded string

const (
	// ForwardedBoth: HOOKD_SNAPSHOT_ALIAS=forward-both, each on its own.
	ForwardedBoth Forwarded = "both"
	// ForwardedThin: the thin event came first; the snapshot event was
	// answered as its duplicate.
	ForwardedThin Forwarded = "thin"
	// ForwardedSnapshot: the snapshot event came first; the thin event was
	// answered as its duplicate.
	ForwardedSnapshot Forwarded = "snapshot"
)

// Pair is a thin v1.* event and the snapshot event it mirrors.
type Pair struct {
	ThinEventID     string    `db:"thin_event_id"`
	SnapshotEventID string    `db:"snapshot_event_id"`
	Endpoint        string    `db:"endpoint"`
	Forwarded       Forwarded `db:"forwarded"`
	LinkedAt        time.Time `db:"linked_at"`
}

// pairColumns are the pairs of a group of outcomes.
type pairColumns struct {
	thin, snapshot, endpoint, forwarded []string
}

func (c *pairColumns) add(p Pair) {
	c.thin = append(c.thin, p.ThinEventID)
	c.snapshot = append(c.snapshot, p.SnapshotEventID)
	c.endpoint = append(c.endpoint, p.Endpoint)
	c.forwarded = append(c.forwarded, string(p.Forwarded))
}

// linkPairsSQL links the thin events $1 to the snapshot events $2, through
// the endpoints $3, with $4 saying which was forwarded. A pair linked
// already stays as its first link says: a redelivery changes nothing.
const linkPairsSQL = `-- hookd.link_pairs
	INSERT INTO event_pairs (thin_event_id, snapshot_event_id, endpoint, forwarded)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
	ON CONFLICT (thin_event_id) DO NOTHING`

func (c *pairColumns) queue(b *pgx.Batch) {
	if len(c.thin) > 0 {
		b.Queue(linkPairsSQL, c.thin, c.snapshot, c.endpoint, c.forwarded)
	}
}

func (c *pairColumns) read(br pgx.BatchResults) error {
	if len(c.thin) == 0 {
		return nil
	}
	_, err := br.Exec()
	return err
}

// LinkPair links a thin event to its snapshot event on its own, for a
// thin event answered as the duplicate of the snapshot event that came
// first (a delivery that wrote no outcome to carry the link).
func (s *Store) LinkPair(ctx context.Context, p Pair) error {
	var c pairColumns
	c.add(p)
	if _, err := s.db.Exec(ctx, linkPairsSQL, c.thin, c.snapshot, c.endpoint, c.forwarded); err != nil {
		return fmt.Errorf("link %s to %s: %w", p.ThinEventID, p.SnapshotEventID, err)
	}
	return nil
}

// PairOf returns the pair eventID belongs to, as its thin or its snapshot
// event; ErrNotFound when it belongs to none. A snapshot event mirrored by
// several thin events (one per destination) gives the first linked.
func (s *Store) PairOf(ctx context.Context, eventID string) (Pair, error) {
	return oneRow[Pair](ctx, s.db, "read the pair of "+eventID, `
		SELECT thin_event_id, snapshot_event_id, endpoint, forwarded, linked_at FROM event_pairs
		WHERE thin_event_id = $1 OR snapshot_event_id = $1
		ORDER BY linked_at LIMIT 1`, eventID)
}

// PrunePairs deletes the links older than olderThan, the markers'
// retention: past it neither event of a pair is deduplicated any more.
func (s *Store) PrunePairs(ctx context.Context, olderThan time.Duration) (int64, error) {
	return store.Delete(ctx, s.db, "prune event pairs",
		`DELETE FROM event_pairs WHERE linked_at < now() - make_interval(secs => $1)`, olderThan.Seconds())
}

// RecordPing notes that Stripe pinged endpoint now
// (v2.core.event_destination.ping).
func (s *Store) RecordPing(ctx context.Context, endpoint string) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO endpoint_activity (endpoint, account, last_ping_at) VALUES ($1, '', now())
		ON CONFLICT (endpoint, account) DO UPDATE SET last_ping_at = excluded.last_ping_at`, endpoint)
	if err != nil {
		return fmt.Errorf("record a ping of endpoint %s: %w", endpoint, err)
	}
	return nil
}

// AccountsSeen returns the connected accounts endpoint brought events of
// since since, in order: the accounts reconciliation lists one by one.
func (s *Store) AccountsSeen(ctx context.Context, endpoint string, since time.Time) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		SELECT account FROM endpoint_activity
		WHERE endpoint = $1 AND account <> '' AND last_event_at >= $2
		ORDER BY account`, endpoint, since)
	if err != nil {
		return nil, fmt.Errorf("read the accounts endpoint %s saw: %w", endpoint, err)
	}
	accounts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the accounts endpoint %s saw: %w", endpoint, err)
	}
	return accounts, nil
}

// LastEventAt returns when endpoint last brought an event, of any account;
// false when it never has. The receiver writes it at most about a second
// late.
func (s *Store) LastEventAt(ctx context.Context, endpoint string) (time.Time, bool, error) {
	var at *time.Time
	if err := s.db.QueryRow(ctx, `SELECT max(last_event_at) FROM endpoint_activity WHERE endpoint = $1`,
		endpoint).Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("read endpoint %s's last event: %w", endpoint, err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return *at, true, nil
}

// EndpointArrived is what came through one endpoint since a time: thin
// events, snapshot events, events of connected accounts.
type EndpointArrived struct {
	Endpoint string `db:"endpoint"`
	Thin     bool   `db:"thin"`
	Snapshot bool   `db:"snapshot"`
	Connect  bool   `db:"connect"`
}

// EndpointsArrived returns what came through each endpoint within the
// last within, by the database's clock, by label; an endpoint that brought
// no event within it is absent. Activity
// written before thin and snapshot events were told apart counts as
// neither.
func (s *Store) EndpointsArrived(ctx context.Context, within time.Duration) ([]EndpointArrived, error) {
	out, err := store.QueryAll[EndpointArrived](ctx, s.db, `
		WITH since AS (SELECT now() - make_interval(secs => $1) AS at)
		SELECT endpoint,
		       coalesce(bool_or(last_thin_at >= since.at), false) AS thin,
		       coalesce(bool_or(last_snapshot_at >= since.at), false) AS snapshot,
		       coalesce(bool_or(account <> ''), false) AS connect
		FROM endpoint_activity, since WHERE last_event_at >= since.at
		GROUP BY endpoint ORDER BY endpoint`, within.Seconds())
	if err != nil {
		return nil, fmt.Errorf("read what came through the endpoints: %w", err)
	}
	return out, nil
}

// EndpointActivity is what the overview shows of one endpoint.
type EndpointActivity struct {
	Endpoint    string     `db:"endpoint"`
	LastEventAt *time.Time `db:"last_event_at"`
	LastPingAt  *time.Time `db:"last_ping_at"`
	// Accounts is how many connected accounts it brought events of.
	Accounts int64 `db:"accounts"`
}

// EndpointsActivity returns, for each endpoint that brought an event or a
// ping, when it last did, by label.
func (s *Store) EndpointsActivity(ctx context.Context) ([]EndpointActivity, error) {
	out, err := store.QueryAll[EndpointActivity](ctx, s.db, `
		SELECT endpoint, max(last_event_at) AS last_event_at, max(last_ping_at) AS last_ping_at,
		       count(*) FILTER (WHERE account <> '') AS accounts
		FROM endpoint_activity GROUP BY endpoint ORDER BY endpoint`)
	if err != nil {
		return nil, fmt.Errorf("read endpoints' activity: %w", err)
	}
	return out, nil
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
