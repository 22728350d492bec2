package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AuditAction names what a person did on the dashboard.
type AuditAction string

const (
	AuditLogin    AuditAction = "login"
	AuditLogout   AuditAction = "logout"
	AuditRetry    AuditAction = "retry"     // one dead event sent back to the queue
	AuditRetryAll AuditAction = "retry_all" // every dead event matching a filter
	AuditRetryNow AuditAction = "retry_now" // one pending event made due at once
	AuditPrune    AuditAction = "prune"

	AuditRetryGroup AuditAction = "retry_group" // every event of a failure group, for an attempt now

	AuditAccountAdd    AuditAction = "account_add"    // an admin added an account
	AuditAccountRole   AuditAction = "account_role"   // an admin changed an account's role
	AuditAccountRemove AuditAction = "account_remove" // an admin removed an account
)

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID     int64       `db:"id"`
	At     time.Time   `db:"at"`
	Email  string      `db:"user_email"`
	Action AuditAction `db:"action"`
	// Target says what was acted on: an event id, a filter, a retention.
	Target string `db:"target"`
	// Count is how many events or markers the action changed.
	Count int64 `db:"count"`
}

// AuditPage is one page of the audit log and the number of entries in all.
type AuditPage struct {
	Entries []AuditEntry
	Total   int64
}

// Audit appends an entry to the audit log. Call it on the Tx of the action
// it records, so there is never an action without its entry or an entry
// without its action.
func (s *Store) Audit(ctx context.Context, email string, action AuditAction, target string, count int64) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO audit_log (user_email, action, target, count) VALUES ($1, $2, $3, $4)`,
		email, action, target, count)
	if err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	return nil
}

// AuditLog returns a page of the audit log, newest first.
func (s *Store) AuditLog(ctx context.Context, limit, offset int) (AuditPage, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, at, user_email, action, target, count FROM audit_log
		ORDER BY at DESC, id DESC LIMIT $1 OFFSET $2`, limit, max(offset, 0))
	if err != nil {
		return AuditPage{}, fmt.Errorf("read audit log: %w", err)
	}
	entries, err := pgx.CollectRows(rows, pgx.RowToStructByName[AuditEntry])
	if err != nil {
		return AuditPage{}, fmt.Errorf("read audit log: %w", err)
	}
	page := AuditPage{Entries: entries}
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&page.Total); err != nil {
		return AuditPage{}, fmt.Errorf("count audit log: %w", err)
	}
	return page, nil
}
