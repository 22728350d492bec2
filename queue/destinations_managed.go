package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/store"
)

// The destinations an admin manages on the dashboard, while no
// HOOKD_DESTINATIONS_FILE is set: rows of the destinations table whose
// source is dashboard, their signing secrets and headers sealed under
// HOOKD_DESTINATIONS_KEY (destinations.Seal). The runtime's set is
// HOOKD_FORWARD_URL's default, if set, and every one not retired
// (ManagedSet); ManagedVersion changes with each add, edit and removal.

// SourceDashboard is the source of a destination an admin manages on the
// dashboard.
const SourceDashboard = "dashboard"

// withoutDashboard is ds without the dashboard's destinations, which their
// actions write (ApplyDestinations never does: it would keep a URL as
// shown, and lose the sealed values), and whether the dashboard's are to
// be left alone: when no file is applied. A file is the truth while set,
// and takes their names over, retires or deletes them as any other.
func withoutDashboard(ds []AppliedDestination) ([]AppliedDestination, bool) {
	spare := !slices.ContainsFunc(ds, func(d AppliedDestination) bool { return d.Source == SourceDestinationsFile })
	return slices.DeleteFunc(slices.Clone(ds), func(d AppliedDestination) bool { return d.Source == SourceDashboard }), spare
}

// The kinds of sealed value, as their additional data names them.
const (
	sealedSecrets = "signing_secrets"
	sealedHeaders = "headers"
)

// ManagedRoute is a destination's route as the destinations table keeps
// it (route jsonb), as applyDestinations writes a file's: with its rate
// (calls a second, 0 for none) and its order_by ("" for none).
type ManagedRoute struct {
	Types     []string `json:"types"`
	Livemode  string   `json:"livemode"`
	Accounts  []string `json:"accounts"`
	Endpoints []string `json:"endpoints"`
	Filter    string   `json:"filter"`
	Rate      float64  `json:"rate"`
	OrderBy   string   `json:"order_by"`
}

// ManagedDestination is a destination's row as the dashboard's forms show
// it: its settings, and whether its signing secrets and headers are set,
// never their values.
type ManagedDestination struct {
	Name        string       `db:"name"`
	URL         string       `db:"url"`
	Route       ManagedRoute `db:"route"`
	Source      string       `db:"source"`
	Concurrency *int         `db:"concurrency"`
	Timeout     *float64     `db:"timeout_seconds"`
	// SigningSecretsSet and HeadersSet say whether sealed values are
	// kept.
	SigningSecretsSet bool       `db:"signing_secrets_set"`
	HeadersSet        bool       `db:"headers_set"`
	AddedAt           time.Time  `db:"added_at"`
	UpdatedAt         *time.Time `db:"updated_at"`
	UpdatedBy         *string    `db:"updated_by"`
	RetiredAt         *time.Time `db:"retired_at"`
}

// Entry is the row's settings as a destinations.Entry, without its
// signing secrets and headers.
func (m ManagedDestination) Entry() destinations.Entry {
	e := destinations.Entry{Name: m.Name, URL: m.URL, Types: m.Route.Types, Livemode: m.Route.Livemode,
		Accounts: m.Route.Accounts, Endpoints: m.Route.Endpoints, Filter: m.Route.Filter, Rate: m.Route.Rate,
		OrderBy: m.Route.OrderBy, Source: m.Source}
	if m.Concurrency != nil {
		e.Concurrency = *m.Concurrency
	}
	if m.Timeout != nil {
		e.Timeout = time.Duration(*m.Timeout * float64(time.Second)).String()
	}
	return e
}

const managedColumns = `name, url, route, source, concurrency, timeout_seconds,
	signing_secrets_sealed IS NOT NULL AS signing_secrets_set, headers_sealed IS NOT NULL AS headers_set,
	added_at, updated_at, updated_by, retired_at`

// ManagedDestination returns destination name's row, whatever its
// source; ErrNotFound when there is none.
func (s *Store) ManagedDestination(ctx context.Context, name string) (ManagedDestination, error) {
	return managedDestination(ctx, s.db, name, "")
}

// ManagedDestinationForUpdate is ManagedDestination, the row locked until
// the transaction ends: an edit or a removal decides on it.
func (tx *Tx) ManagedDestinationForUpdate(ctx context.Context, name string) (ManagedDestination, error) {
	return managedDestination(ctx, tx.db, name, "FOR UPDATE")
}

func managedDestination(ctx context.Context, db store.DBTX, name, lock string) (ManagedDestination, error) {
	m, found, err := store.QueryOne[ManagedDestination](ctx, db,
		`SELECT `+managedColumns+` FROM destinations WHERE name = $1 `+lock, name)
	switch {
	case err != nil:
		return ManagedDestination{}, fmt.Errorf("read destination %s: %w", name, err)
	case !found:
		return ManagedDestination{}, ErrNotFound
	}
	return m, nil
}

// ManagedWrite is an add or an edit of a dashboard destination:
// Destination checked (destinations.CheckEntry). Its signing secrets and
// headers are written, sealed, when WriteSecrets and WriteHeaders say so
// (none clears them); otherwise those kept stay as they are.
type ManagedWrite struct {
	Destination  *destinations.Destination
	WriteSecrets bool
	WriteHeaders bool
	// By is who made the change, as the form shows it.
	By string
}

// ErrDestinationTaken is an add whose name a destination not retired has.
var ErrDestinationTaken = errors.New("the name is taken")

// sealed returns w's signing secrets and headers sealed under key (nil
// for none); a value to seal without a key is destinations.ErrNoKey.
func (w ManagedWrite) sealed(key []byte) (secrets, headers []byte, err error) {
	d := w.Destination
	if w.WriteSecrets && len(d.SigningSecrets) > 0 {
		b, _ := json.Marshal(d.SigningSecrets)
		if secrets, err = destinations.Seal(key, d.Name, sealedSecrets, b); err != nil {
			return nil, nil, err
		}
	}
	if w.WriteHeaders && len(d.Headers) > 0 {
		values := make(map[string]string, len(d.Headers))
		for name := range d.Headers {
			values[name] = d.Headers.Get(name)
		}
		b, _ := json.Marshal(values)
		if headers, err = destinations.Seal(key, d.Name, sealedHeaders, b); err != nil {
			return nil, nil, err
		}
	}
	return secrets, headers, nil
}

// managedArgs are the columns an add and an edit write, after the name:
// url, route (its rate and order_by with it), concurrency,
// timeout_seconds.
func managedArgs(d *destinations.Destination) []any {
	route, _ := json.Marshal(ManagedRoute{Types: d.Types, Livemode: d.Livemode, Accounts: d.Accounts,
		Endpoints: d.Endpoints, Filter: d.Filter, Rate: d.Rate, OrderBy: d.OrderBy})
	var concurrency *int
	if d.Concurrency > 0 {
		concurrency = &d.Concurrency
	}
	var timeout *float64
	if d.Timeout > 0 {
		t := d.Timeout.Seconds()
		timeout = &t
	}
	return []any{d.URL, string(route), concurrency, timeout}
}

// AddManagedDestination adds w's destination, managed on the dashboard.
// A retired destination of the same name (its deliveries still waiting)
// is configured again, as applying a file does, and retired no more; a
// name any other destination has is ErrDestinationTaken.
func (tx *Tx) AddManagedDestination(ctx context.Context, w ManagedWrite, key []byte) error {
	w.WriteSecrets, w.WriteHeaders = true, true
	secrets, headers, err := w.sealed(key)
	if err != nil {
		return err
	}
	args := append([]any{w.Destination.Name}, managedArgs(w.Destination)...)
	n, err := tx.db.Exec(ctx, `-- hookd.add_managed_destination
		INSERT INTO destinations AS d (name, url, route, source, concurrency, timeout_seconds,
		                               signing_secrets_sealed, headers_sealed, updated_at, updated_by)
		VALUES ($1, $2, $3::jsonb, 'dashboard', $4, $5, $6, $7, now(), $8)
		ON CONFLICT (name) DO UPDATE
		SET url = excluded.url, route = excluded.route, source = excluded.source, concurrency = excluded.concurrency,
		    timeout_seconds = excluded.timeout_seconds, signing_secrets_sealed = excluded.signing_secrets_sealed,
		    headers_sealed = excluded.headers_sealed, updated_at = now(), updated_by = excluded.updated_by,
		    applied_at = now(), retired_at = NULL
		WHERE d.retired_at IS NOT NULL`, append(args, secrets, headers, w.By)...)
	if err != nil {
		return fmt.Errorf("add destination %s: %w", w.Destination.Name, err)
	}
	if n.RowsAffected() == 0 {
		return ErrDestinationTaken
	}
	return nil
}

// EditManagedDestination writes w's destination over the dashboard
// destination of its name, not retired; ErrNotFound when there is none.
func (tx *Tx) EditManagedDestination(ctx context.Context, w ManagedWrite, key []byte) error {
	secrets, headers, err := w.sealed(key)
	if err != nil {
		return err
	}
	args := append([]any{w.Destination.Name}, managedArgs(w.Destination)...)
	n, err := tx.db.Exec(ctx, `-- hookd.edit_managed_destination
		UPDATE destinations
		SET url = $2, route = $3::jsonb, concurrency = $4, timeout_seconds = $5,
		    signing_secrets_sealed = CASE WHEN $6 THEN $7::bytea ELSE signing_secrets_sealed END,
		    headers_sealed = CASE WHEN $8 THEN $9::bytea ELSE headers_sealed END,
		    updated_at = now(), updated_by = $10
		WHERE name = $1 AND source = 'dashboard' AND retired_at IS NULL`,
		append(args, w.WriteSecrets, secrets, w.WriteHeaders, headers, w.By)...)
	if err != nil {
		return fmt.Errorf("edit destination %s: %w", w.Destination.Name, err)
	}
	if n.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// RemoveManagedDestination removes the dashboard destination name, not
// retired: retired while deliveries to it wait on the queue (dead ones
// included), for support to move or drop them, and deleted otherwise, as
// ApplyDestinations does with a file's. ErrNotFound when there is none.
func (tx *Tx) RemoveManagedDestination(ctx context.Context, name string) (retired bool, err error) {
	err = tx.db.QueryRow(ctx, `-- hookd.remove_managed_destination
		WITH gone AS (
			SELECT d.name, EXISTS (SELECT 1 FROM webhook_events e WHERE e.destination = d.name) AS waiting
			FROM destinations d WHERE d.name = $1 AND d.source = 'dashboard' AND d.retired_at IS NULL
			FOR UPDATE
		), retired AS (
			UPDATE destinations d SET retired_at = now() FROM gone g WHERE g.name = d.name AND g.waiting
		), removed AS (
			DELETE FROM destinations d USING gone g WHERE g.name = d.name AND NOT g.waiting
		)
		SELECT waiting FROM gone`, name).Scan(&retired)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("remove destination %s: %w", name, err)
	}
	return retired, nil
}

// maxWaitingCount bounds the count DeliveriesWaiting makes.
const maxWaitingCount = 100_000

// DeliveriesWaiting counts the deliveries to destination name on the
// queue, dead ones included, up to 100,000: what a removal would keep it
// retired for.
func (s *Store) DeliveriesWaiting(ctx context.Context, name string) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM webhook_events WHERE destination = $1 LIMIT $2) w`,
		name, maxWaitingCount).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count deliveries to %s: %w", name, err)
	}
	return n, nil
}

// managedRow is a dashboard destination's row as ManagedSet reads it: its
// settings, and its sealed values.
type managedRow struct {
	ManagedDestination
	SecretsSealed []byte `db:"signing_secrets_sealed"`
	HeadersSealed []byte `db:"headers_sealed"`
}

// ManagedSet is the set of destinations hookd delivers to without a
// file: HOOKD_FORWARD_URL's default first, when forwardURL is set, then
// every dashboard destination not retired, oldest first, their secrets
// and headers opened with key, each checked and its filter compiled as a
// file's destination is. Its Source is SourceDashboard, or
// SourceForwardURL when default is its one destination (its Hash then
// destinations.Single's); with neither it has no destination.
func (s *Store) ManagedSet(ctx context.Context, forwardURL string, key []byte) (*destinations.Set, error) {
	rows, err := store.QueryAll[managedRow](ctx, s.db, `SELECT `+managedColumns+`, signing_secrets_sealed, headers_sealed
		FROM destinations WHERE source = 'dashboard' AND retired_at IS NULL ORDER BY added_at, name`)
	if err != nil {
		return nil, fmt.Errorf("read the dashboard's destinations: %w", err)
	}
	var entries []destinations.Entry
	if forwardURL != "" {
		entries = append(entries, destinations.Entry{Name: destinations.DefaultName, URL: forwardURL,
			Source: destinations.SourceForwardURL})
	}
	for _, r := range rows {
		e, err := r.open(key)
		if err != nil {
			return nil, fmt.Errorf("the dashboard's destinations: %w", err)
		}
		entries = append(entries, e)
	}
	source := destinations.SourceDashboard
	if len(rows) == 0 && forwardURL != "" {
		source = destinations.SourceForwardURL
	}
	set, err := destinations.FromEntries(entries, source)
	if err != nil {
		return nil, fmt.Errorf("the dashboard's destinations: %w", err)
	}
	return set, nil
}

// open is the row's Entry with its secrets and headers opened with key.
func (r managedRow) open(key []byte) (destinations.Entry, error) {
	e := r.Entry()
	if r.SecretsSealed != nil {
		b, err := destinations.Open(key, r.Name, sealedSecrets, r.SecretsSealed)
		if err == nil {
			err = json.Unmarshal(b, &e.SigningSecrets)
		}
		if err != nil {
			return e, err
		}
	}
	if r.HeadersSealed != nil {
		b, err := destinations.Open(key, r.Name, sealedHeaders, r.HeadersSealed)
		if err == nil {
			err = json.Unmarshal(b, &e.Headers)
		}
		if err != nil {
			return e, err
		}
	}
	return e, nil
}

// ManagedVersion is a value that changes whenever a dashboard destination
// is added, edited or removed: the count and a digest of their names and
// times of change. It reads the small destinations table alone, cheap
// enough to poll every second; a change means ManagedSet is to be read
// again.
func (s *Store) ManagedVersion(ctx context.Context) (string, error) {
	var n int64
	var digest string
	err := s.db.QueryRow(ctx, `-- hookd.managed_version
		SELECT count(*), coalesce(md5(string_agg(name || '|' || coalesce(updated_at::text, '') || '|' ||
		                                         coalesce(retired_at::text, ''), ',' ORDER BY name)), '')
		FROM destinations WHERE source = 'dashboard'`).Scan(&n, &digest)
	if err != nil {
		return "", fmt.Errorf("read the dashboard's destinations' version: %w", err)
	}
	return strconv.FormatInt(n, 10) + "-" + digest, nil
}
