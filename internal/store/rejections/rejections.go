// Package rejections holds the rejection log: the deliveries the receiver
// refused with a 4xx, why, and what their bodies and signatures claimed,
// for the people who find out why a webhook never arrived.
//
// Its guarantee: the log stays bounded. Its writer adds a few rows a second
// at most (each beyond those adding up the rest, with a count), and Prune
// keeps it within a retention and MaxRows.
package rejections

import (
	"context"
	"fmt"
	"time"

	"github.com/hookd/hookd/internal/store"
)

// Store reads and writes the rejection log.
type Store struct{ db store.DBTX }

// New returns a Store over db: the pool, or a transaction (a pgx.Tx) whose
// other reads its own belong with.
func New(db store.DBTX) *Store {
	return &Store{db: db}
}

// Reason says why the receiver refused a delivery with a 4xx.
type Reason string

const (
	TooLarge           Reason = "too_large"          // 413: body over HOOKD_MAX_BODY
	UnreadableBody     Reason = "unreadable_body"    // 400: the body could not be read
	MethodNotAllowed   Reason = "method_not_allowed" // 405: not a POST
	NoSignature        Reason = "no_signature"       // 400: no Stripe-Signature header
	MalformedSignature Reason = "malformed_signature"
	StaleSignature     Reason = "stale_signature" // 400: older than the tolerance
	WrongSignature     Reason = "wrong_signature" // 400: matches no configured secret
	BadJSON            Reason = "bad_json"        // 400: not a JSON object, or not UTF-8
	BadID              Reason = "bad_id"          // 400: no usable string "id"
	BadType            Reason = "bad_type"        // 400: no usable string "type"
	// WrongEndpoint: 400, the body's shape contradicted the endpoint whose
	// secret signed it. No delivery is refused for it any more (a signed
	// event is accepted whatever its endpoint declares); the rows of the
	// deliveries refused before keep their reason and its label.
	WrongEndpoint Reason = "wrong_endpoint"
)

// SignatureVerified reports whether a refusal for r came with a signature
// made with a configured secret: the receiver reads the body only once its
// signature verified, so a body refused as no Stripe event was signed. Every
// other refusal's body is unverified, and the event id it claims anyone's.
func (r Reason) SignatureVerified() bool {
	switch r {
	case BadJSON, BadID, BadType, WrongEndpoint:
		return true
	}
	return false
}

// Rejection is one refused delivery, or, with Count above 1, the refusals
// of one reason beyond what the receiver records one by one in a second.
type Rejection struct {
	ID         int64     `db:"id"`
	At         time.Time `db:"at"`
	Reason     Reason    `db:"reason"`
	HTTPStatus int       `db:"http_status"`
	// Detail is the reason as the sender was told it.
	Detail     string `db:"detail"`
	RemoteAddr string `db:"remote_addr"`
	// ClaimedEventID is the id the body claimed; unverified, since the
	// delivery was refused. Nil when it claimed none.
	ClaimedEventID *string `db:"claimed_event_id"`
	// SignedAt is the Stripe-Signature header's timestamp, when it had one.
	SignedAt *time.Time `db:"signed_at"`
	// SignatureMatches is, for a stale signature, whether it matches a
	// configured secret once its age is ignored.
	SignatureMatches *bool `db:"signature_matches"`
	Count            int64 `db:"count"`
}

// SignatureSkew is how far the signature's timestamp was behind the
// refusing replica's clock (negative: ahead of it); false without one.
func (r Rejection) SignatureSkew() (time.Duration, bool) {
	if r.SignedAt == nil {
		return 0, false
	}
	return r.At.Sub(*r.SignedAt), true
}

const rejectionColumns = `id, at, reason, http_status, detail, remote_addr, claimed_event_id, signed_at,
	signature_matches, count`

// Record appends refused deliveries to the rejection log in one
// statement.
func (s *Store) Record(ctx context.Context, rs []Rejection) error {
	if len(rs) == 0 {
		return nil
	}
	var (
		at       = make([]time.Time, len(rs))
		reason   = make([]string, len(rs))
		status   = make([]int, len(rs))
		detail   = make([]string, len(rs))
		remote   = make([]string, len(rs))
		claimed  = make([]*string, len(rs))
		signedAt = make([]*time.Time, len(rs))
		matches  = make([]*bool, len(rs))
		count    = make([]int64, len(rs))
	)
	for i, r := range rs {
		at[i], reason[i], status[i], detail[i], remote[i] = r.At, string(r.Reason), r.HTTPStatus, r.Detail, r.RemoteAddr
		claimed[i], signedAt[i], matches[i], count[i] = r.ClaimedEventID, r.SignedAt, r.SignatureMatches, max(r.Count, 1)
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO webhook_rejections (at, reason, http_status, detail, remote_addr, claimed_event_id, signed_at,
		                                signature_matches, count)
		SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[],
		                     $7::timestamptz[], $8::bool[], $9::bigint[])`,
		at, reason, status, detail, remote, claimed, signedAt, matches, count)
	if err != nil {
		return fmt.Errorf("record rejections: %w", err)
	}
	return nil
}

// Filter selects a page of the rejection log.
type Filter struct {
	// Reason, when set, keeps only refusals for it.
	Reason Reason
	// ClaimedEventID, when set, keeps only refusals of deliveries that
	// claimed this event id.
	ClaimedEventID string
	Limit, Offset  int
	// After, when set, starts the page after this refusal in the order
	// (a page by cursor), in place of Offset.
	After *Key
}

// Key is a refusal's place in the log's order, newest first.
type Key struct {
	At time.Time
	ID int64
}

// Page is one page of the rejection log, newest first, and the
// number of rows matching its filter.
type Page struct {
	Rejections []Rejection
	Total      int64
}

// List returns a page of the rejection log, newest first.
func (s *Store) List(ctx context.Context, f Filter) (Page, error) {
	where, args := "true", []any{}
	if f.Reason != "" {
		args = append(args, f.Reason)
		where += fmt.Sprintf(" AND reason = $%d", len(args))
	}
	if f.ClaimedEventID != "" {
		args = append(args, f.ClaimedEventID)
		where += fmt.Sprintf(" AND claimed_event_id = $%d", len(args))
	}
	var page Page
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM webhook_rejections WHERE `+where, args...).
		Scan(&page.Total); err != nil {
		return Page{}, fmt.Errorf("count rejections: %w", err)
	}
	if f.After != nil {
		args = append(args, f.After.At, f.After.ID)
		where += fmt.Sprintf(" AND (at, id) < ($%d, $%d)", len(args)-1, len(args))
		f.Offset = 0
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	args = append(args, limit, max(f.Offset, 0))
	list := fmt.Sprintf(`SELECT %s FROM webhook_rejections WHERE %s
		ORDER BY at DESC, id DESC LIMIT $%d OFFSET $%d`, rejectionColumns, where, len(args)-1, len(args))
	rejections, err := store.QueryAll[Rejection](ctx, s.db, list, args...)
	if err != nil {
		return Page{}, fmt.Errorf("list rejections: %w", err)
	}
	page.Rejections = rejections
	return page, nil
}

// ReasonCount is how many deliveries were refused for one reason.
type ReasonCount struct {
	Reason Reason `db:"reason"`
	Count  int64  `db:"count"`
}

// ByReason counts the deliveries refused in the last window, by
// reason, most frequent first.
func (s *Store) ByReason(ctx context.Context, window time.Duration) ([]ReasonCount, error) {
	counts, err := store.QueryAll[ReasonCount](ctx, s.db, `
		SELECT reason, sum(count)::bigint AS count FROM webhook_rejections
		WHERE at > now() - make_interval(secs => $1)
		GROUP BY reason ORDER BY count DESC, reason`, window.Seconds())
	if err != nil {
		return nil, fmt.Errorf("count rejections by reason: %w", err)
	}
	return counts, nil
}

// MaxRows is how many rows the rejection log keeps at most. At the
// receiver's bound of a few rows a second per replica, it is hours of a
// flood and months of ordinary refusals.
const MaxRows = 100_000

// Prune deletes the rejection log's rows older than olderThan,
// then all but the newest keep, and returns how many it deleted. It deletes
// in batches of store.PruneBatchSize, as the queue's prunes do, so no prune holds
// a long lock.
func (s *Store) Prune(ctx context.Context, olderThan time.Duration, keep int) (int64, error) {
	// Beyond the newest keep: at or before the row ranked keep+1.
	return store.DeleteInBatches(ctx, s.db, "rejections", `
		DELETE FROM webhook_rejections
		WHERE id = ANY (ARRAY(
			SELECT id FROM webhook_rejections
			WHERE at < now() - make_interval(secs => $1)
			   OR (at, id) <= (SELECT at, id FROM webhook_rejections ORDER BY at DESC, id DESC OFFSET $2 LIMIT 1)
			LIMIT $3))`,
		olderThan.Seconds(), keep)
}
