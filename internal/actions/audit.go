package actions

import (
	"context"
	"time"

	"github.com/hookd/hookd/internal/store/audit"
)

// AuditPage is one page of the audit log, newest first, and the cursor of
// the next ("" on the last).
type AuditPage struct {
	Entries []audit.Entry
	Next    string
}

// auditCursor is what the audit log's cursor encodes: the last entry's
// place in its order.
type auditCursor struct {
	At time.Time `json:"t"`
	ID int64     `json:"i"`
}

// Audit reads limit entries of the audit log after cursor ("" for the
// newest).
func (a *Actions) Audit(ctx context.Context, cursor string, limit int) (AuditPage, error) {
	var c auditCursor
	if cursor != "" {
		if err := decodeCursor(cursor, &c); err != nil || c.ID == 0 {
			return AuditPage{}, &InvalidError{Field: "cursor", Detail: "The cursor is not one the audit log gave: " +
				"pass the next_cursor of the previous page, or none for the first page."}
		}
	}
	entries, err := a.audit.Before(ctx, c.At, c.ID, limit)
	if err != nil {
		return AuditPage{}, err
	}
	page := AuditPage{Entries: entries}
	if n := len(entries); n > 0 && n == limit {
		page.Next = encodeCursor(auditCursor{At: entries[n-1].At, ID: entries[n-1].ID})
	}
	return page, nil
}
