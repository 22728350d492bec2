// Package audit holds the audit log: who did what on the dashboard, written
// in the same transaction as the action it records (an operator's action on
// the queue, an admin's account change, a sign-in), so there is never an
// action without its entry or an entry without its action.
package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// Action names what a person did on the dashboard.
type Action string

const (
	Login    Action = "login"
	Logout   Action = "logout"
	Retry    Action = "retry"     // one dead event sent back to the queue
	RetryAll Action = "retry_all" // every dead event matching a filter
	RetryNow Action = "retry_now" // one pending event made due at once
	Prune    Action = "prune"

	RetryGroup Action = "retry_group" // every event of a failure group, for an attempt now

	AccountAdd    Action = "account_add"    // an admin added an account
	AccountRole   Action = "account_role"   // an admin changed an account's role
	AccountRemove Action = "account_remove" // an admin removed an account

	Reconcile Action = "reconcile" // an operator reconciled with Stripe's Events API
	Pull      Action = "pull"      // an operator pulled one event from Stripe

	KeyRotate Action = "key_rotate" // `hookd keys rotate` replaced the sign-in form key

	DeliveryPause  Action = "delivery_pause"  // an operator paused delivery to the app, with a reason
	DeliveryResume Action = "delivery_resume" // an operator resumed it, or closed the circuit breaker

	Erase Action = "erase" // an admin, or `hookd erase`, erased the payloads of every event about a customer

	ReplayStart  Action = "replay_start"  // an operator started a named replay of the events a filter matched
	ReplayCancel Action = "replay_cancel" // an operator cancelled a running replay

	Failover Action = "failover" // hookd noticed the database failed over (its WAL timeline changed)

	OIDCLogin   Action = "oidc_login"   // someone signed in through the identity provider, with the role its groups gave
	OIDCRefused Action = "oidc_refused" // the identity provider vouched for someone hookd refused: no role, or an unverified email
	SessionsEnd Action = "sessions_end" // an admin ended every session of an account

	AccessRevoked  Action = "access_revoked"  // the identity provider refused a known person: their sessions ended, their role gone
	EmergencyLogin Action = "emergency_login" // the emergency admin (HOOKD_EMERGENCY_ADMIN) signed in with a password

	TokenCreate Action = "token_create" // an admin, or `hookd tokens create`, made an API token
	TokenRevoke Action = "token_revoke" // an admin, or `hookd tokens revoke`, revoked an API token

	DestinationPause  Action = "destination_pause"  // an operator paused one destination, with a reason
	DestinationResume Action = "destination_resume" // an operator resumed one, or closed its circuit breaker
	DestinationMove   Action = "destination_move"   // an operator moved a retired destination's deliveries to another
	DestinationDrop   Action = "destination_drop"   // an operator dropped a retired destination's deliveries

	OrderRelease Action = "order_release" // an operator let an ordered destination's key go on past its dead events
)

// Account names who acted: the email the pages show, and, so the entry
// names one account whatever that email becomes, the account's id and, for
// an account of the identity provider, its issuer and subject. Zero ID for
// an actor with no account (a command line). TokenID and TokenName name
// the API token that acted for the account; zero for the dashboard.
type Account struct {
	ID        int64
	Email     string
	Issuer    string
	Subject   string
	TokenID   int64
	TokenName string
}

// String writes the account as the audit page shows it beside the email,
// "" when it has no id.
func (a Account) String() string {
	if a.ID == 0 {
		return ""
	}
	s := fmt.Sprintf("account %d", a.ID)
	if a.Issuer != "" {
		s += fmt.Sprintf(", issuer %s, subject %s", a.Issuer, a.Subject)
	}
	return s
}

// Entry is one line of the audit log.
type Entry struct {
	ID     int64     `db:"id"`
	At     time.Time `db:"at"`
	Email  string    `db:"user_email"`
	Action Action    `db:"action"`
	// Target says what was acted on: an event id, a filter, a retention.
	Target string `db:"target"`
	// Count is how many events or markers the action changed.
	Count int64 `db:"count"`
	// Account is who acted, beside Email; zero for entries that name an
	// email alone.
	AccountID      int64  `db:"account_id"`
	AccountIssuer  string `db:"account_issuer"`
	AccountSubject string `db:"account_subject"`
	// TokenID and TokenName are the API token that acted; zero and ""
	// for the dashboard and the command line.
	TokenID   int64  `db:"token_id"`
	TokenName string `db:"token_name"`
}

// Account returns the entry's actor.
func (e Entry) Account() Account {
	return Account{ID: e.AccountID, Email: e.Email, Issuer: e.AccountIssuer, Subject: e.AccountSubject,
		TokenID: e.TokenID, TokenName: e.TokenName}
}

// Token writes the API token that acted as the audit page shows it, ""
// when none did.
func (e Entry) Token() string {
	if e.TokenID == 0 {
		return ""
	}
	return fmt.Sprintf("%s (token %d)", e.TokenName, e.TokenID)
}

// Page is one page of the audit log and the number of entries in all.
type Page struct {
	Entries []Entry
	Total   int64
}

// Record appends an entry to the audit log in tx, the transaction of the
// action it records (queue.Tx and accounts.Tx give theirs with PgxTx), so
// the entry commits or rolls back with the action.
func Record(ctx context.Context, tx pgx.Tx, email string, action Action, target string, count int64) error {
	return RecordAccount(ctx, tx, Account{Email: email}, action, target, count)
}

// RecordAccount is Record naming the account that acted, not its email
// alone.
func RecordAccount(ctx context.Context, tx pgx.Tx, who Account, action Action, target string, count int64) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO audit_log (user_email, action, target, count, account_id, account_issuer, account_subject,
		                       token_id, token_name)
		VALUES ($1, $2, $3, $4, nullif($5, 0), nullif($6, ''), nullif($7, ''), nullif($8, 0), nullif($9, ''))`,
		who.Email, action, target, count, who.ID, who.Issuer, who.Subject, who.TokenID, who.TokenName)
	if err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	return nil
}

// Log reads the audit log.
type Log struct {
	db store.DBTX
}

// New returns a Log over db: the dashboard's reads (queue.TimedReads), so
// that its page is bounded in time like every other page, or a pool.
func New(db store.DBTX) *Log {
	return &Log{db: db}
}

// entryColumns are Entry's columns.
const entryColumns = `id, at, user_email, action, target, count, coalesce(account_id, 0) AS account_id,
	coalesce(account_issuer, '') AS account_issuer, coalesce(account_subject, '') AS account_subject,
	coalesce(token_id, 0) AS token_id, coalesce(token_name, '') AS token_name`

// Read returns a page of the audit log, newest first.
func (l *Log) Read(ctx context.Context, limit, offset int) (Page, error) {
	entries, err := store.QueryAll[Entry](ctx, l.db, `
		SELECT `+entryColumns+`
		FROM audit_log
		ORDER BY at DESC, id DESC LIMIT $1 OFFSET $2`, limit, max(offset, 0))
	if err != nil {
		return Page{}, fmt.Errorf("read audit log: %w", err)
	}
	page := Page{Entries: entries}
	if err := l.db.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&page.Total); err != nil {
		return Page{}, fmt.Errorf("count audit log: %w", err)
	}
	return page, nil
}

// Before returns at most limit entries of the log, newest first, that
// come after the entry at and id in that order; the newest when id is
// zero. It pages by the entries' sort key, so an entry written meanwhile
// neither repeats nor hides one on the next page.
func (l *Log) Before(ctx context.Context, at time.Time, id int64, limit int) ([]Entry, error) {
	entries, err := store.QueryAll[Entry](ctx, l.db, `
		SELECT `+entryColumns+`
		FROM audit_log
		WHERE $1::bigint = 0 OR (at, id) < ($2, $1)
		ORDER BY at DESC, id DESC LIMIT $3`, id, at, limit)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return entries, nil
}
