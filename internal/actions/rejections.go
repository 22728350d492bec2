package actions

import (
	"context"
	"strconv"
	"time"

	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/views"
)

// RejectionPage is one page of the rejection log, newest first: how many
// refusals the filter selects on all pages, and the cursor of the next
// page ("" on the last).
type RejectionPage struct {
	rejections.Page
	Next string
}

// rejectionCursor is what the rejection log's cursor encodes: the last
// refusal's place in its order.
type rejectionCursor struct {
	At time.Time `json:"t"`
	ID int64     `json:"i"`
}

// Rejections reads the page of the rejection log f selects: after cursor
// when it is not "" (a page by cursor, for the API), else at f.Offset
// (the dashboard's numbered pages). A reason hookd never refuses for is
// an *InvalidError.
func (a *Actions) Rejections(ctx context.Context, f rejections.Filter, cursor string) (RejectionPage, error) {
	if f.Reason != "" && !views.KnownRejectReason(f.Reason) {
		return RejectionPage{}, &InvalidError{Field: "reason", Detail: "There is no refusal reason " + strconv.Quote(string(f.Reason)) + "."}
	}
	if cursor != "" {
		var c rejectionCursor
		if err := decodeCursor(cursor, &c); err != nil || c.ID <= 0 {
			return RejectionPage{}, &InvalidError{Field: "cursor", Detail: "The cursor is not one the rejection log gave: " +
				"pass the next_cursor of the previous page, or none for the first page."}
		}
		f.After, f.Offset = &rejections.Key{At: c.At, ID: c.ID}, 0
	}
	p, err := a.rejections.List(ctx, f)
	if err != nil {
		return RejectionPage{}, err
	}
	page := RejectionPage{Page: p}
	if n := len(p.Rejections); n > 0 && n == f.Limit {
		last := p.Rejections[n-1]
		page.Next = encodeCursor(rejectionCursor{At: last.At, ID: last.ID})
	}
	return page, nil
}
