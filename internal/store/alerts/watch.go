package alerts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/store"
)

// The kinds of condition each labelled endpoint has, named kind:label.
const (
	// StripeDisabled: Stripe disabled the endpoint or destination, or no
	// longer has it.
	StripeDisabled = "stripe_disabled"
	// StripeVersion: its API version is not the one the app has been
	// getting through it.
	StripeVersion = "stripe_version"
	// Quiet: no event came through it for its quiet period.
	Quiet = "quiet"
	// Declaration: what its declaration (HOOKD_ENDPOINTS) says it
	// receives contradicts what arrives through it.
	Declaration = "declaration"
)

// EndpointCondition is the condition of kind for the endpoint labelled
// label.
func EndpointCondition(kind, label string) Condition { return Condition(kind + ":" + label) }

// Endpoint splits an endpoint's condition into its kind and label; ok is
// false for the deployment's own conditions.
func (c Condition) Endpoint() (kind, label string, ok bool) {
	return strings.Cut(string(c), ":")
}

// Ensure adds the rows of conditions that have none yet, so Lock returns
// them. A row is added once: CreatedAt keeps when.
func Ensure(ctx context.Context, db store.DBTX, conditions []Condition) error {
	if len(conditions) == 0 {
		return nil
	}
	names := make([]string, len(conditions))
	for i, c := range conditions {
		names[i] = string(c)
	}
	_, err := db.Exec(ctx, `
		INSERT INTO alert_conditions (condition) SELECT unnest($1::text[])
		ON CONFLICT (condition) DO NOTHING`, names)
	if err != nil {
		return fmt.Errorf("add alert conditions: %w", err)
	}
	return nil
}

// Endpoint statuses a Watch records.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
	// StatusMissing: Stripe answered that it has no such endpoint.
	StatusMissing = "missing"
)

// Watch is what Stripe's API last said of one labelled endpoint.
type Watch struct {
	Endpoint string `db:"endpoint"`
	StripeID string `db:"stripe_id"`
	// ReadAt is when Stripe last answered about it; nil before the first
	// answer, when Status and APIVersion mean nothing yet.
	ReadAt *time.Time `db:"read_at"`
	Status *string    `db:"status"`
	// APIVersion is the endpoint's version at Stripe; "" when it follows
	// the account's default, or sends thin events, which have none.
	APIVersion string `db:"api_version"`
	// APIVersionSince is when APIVersion was first read.
	APIVersionSince *time.Time `db:"api_version_since"`
	// ExpectedAPIVersion is the version the app has been getting through
	// it: its own at the first read, then its events'.
	ExpectedAPIVersion string `db:"expected_api_version"`
	// ReadError is why the last read failed; "" when it worked.
	ReadError string `db:"read_error"`
}

// WatchStore keeps what Stripe said of each endpoint.
type WatchStore struct{ db store.DBTX }

// NewWatchStore returns a WatchStore over db.
func NewWatchStore(db store.DBTX) *WatchStore { return &WatchStore{db: db} }

// Claim takes the read of endpoint's Stripe object stripeID when nobody
// read it within every, so that however many replicas watch it, Stripe is
// asked once per interval. A new stripeID for a label starts the watch of
// that label over.
func (s *WatchStore) Claim(ctx context.Context, endpoint, stripeID string, every time.Duration) (bool, error) {
	tag, err := s.db.Exec(ctx, `
		INSERT INTO stripe_endpoint_watch AS w (endpoint, stripe_id, claimed_at) VALUES ($1, $2, now())
		ON CONFLICT (endpoint) DO UPDATE SET claimed_at = now(),
			stripe_id = excluded.stripe_id,
			read_at = CASE WHEN w.stripe_id = excluded.stripe_id THEN w.read_at END,
			status = CASE WHEN w.stripe_id = excluded.stripe_id THEN w.status END,
			api_version = CASE WHEN w.stripe_id = excluded.stripe_id THEN w.api_version ELSE '' END,
			api_version_since = CASE WHEN w.stripe_id = excluded.stripe_id THEN w.api_version_since END,
			expected_api_version = CASE WHEN w.stripe_id = excluded.stripe_id THEN w.expected_api_version ELSE '' END
		WHERE w.claimed_at <= now() - make_interval(secs => $3) OR w.stripe_id <> excluded.stripe_id`,
		endpoint, stripeID, every.Seconds())
	if err != nil {
		return false, fmt.Errorf("claim the watch of endpoint %s: %w", endpoint, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Read records what Stripe said of endpoint, its status and API version,
// and the version the app is now expected to get through it.
func (s *WatchStore) Read(ctx context.Context, endpoint, status, apiVersion, expected string) error {
	_, err := s.db.Exec(ctx, `
		UPDATE stripe_endpoint_watch SET read_at = now(), status = $2, read_error = '',
			api_version_since = CASE WHEN read_at IS NULL OR api_version <> $3 THEN now() ELSE api_version_since END,
			api_version = $3, expected_api_version = $4
		WHERE endpoint = $1`, endpoint, status, apiVersion, expected)
	if err != nil {
		return fmt.Errorf("record the watch of endpoint %s: %w", endpoint, err)
	}
	return nil
}

// Failed records why the read of endpoint failed; what was read before
// stands.
func (s *WatchStore) Failed(ctx context.Context, endpoint, why string) error {
	_, err := s.db.Exec(ctx, `UPDATE stripe_endpoint_watch SET read_error = $2 WHERE endpoint = $1`, endpoint, why)
	if err != nil {
		return fmt.Errorf("record the watch of endpoint %s: %w", endpoint, err)
	}
	return nil
}

// Get returns what Stripe last said of endpoint; false when it was never
// watched.
func (s *WatchStore) Get(ctx context.Context, endpoint string) (Watch, bool, error) {
	w, found, err := store.QueryOne[Watch](ctx, s.db, `
		SELECT endpoint, stripe_id, read_at, status, api_version, api_version_since, expected_api_version, read_error
		FROM stripe_endpoint_watch WHERE endpoint = $1`, endpoint)
	if err != nil {
		return Watch{}, false, fmt.Errorf("read the watch of endpoint %s: %w", endpoint, err)
	}
	return w, found, nil
}
