package actions

import (
	"context"
	"fmt"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// ReplayPage is one page of the replays, newest first, and the cursor of
// the next ("" on the last).
type ReplayPage struct {
	Replays []queue.Replay
	Next    string
}

// replayCursor is what the replays' cursor encodes: the last replay's id.
type replayCursor struct {
	ID int64 `json:"i"`
}

// Replays reads limit replays (at most queue.MaxReplaysListed) after
// cursor ("" for the newest), with their progress.
func (a *Actions) Replays(ctx context.Context, cursor string, limit int) (ReplayPage, error) {
	limit = min(max(limit, 1), queue.MaxReplaysListed)
	var c replayCursor
	if cursor != "" {
		if err := decodeCursor(cursor, &c); err != nil || c.ID <= 0 {
			return ReplayPage{}, &InvalidError{Field: "cursor", Detail: "The cursor is not one the list of replays gave: " +
				"pass the next_cursor of the previous page, or none for the first page."}
		}
	}
	rs, err := a.reads.Replays(ctx, c.ID, limit)
	if err != nil {
		return ReplayPage{}, err
	}
	page := ReplayPage{Replays: rs}
	if n := len(rs); n > 0 && n == limit {
		page.Next = encodeCursor(replayCursor{ID: rs[n-1].ID})
	}
	return page, nil
}

// CancelReplay cancels the running replay id, audited: this replica's
// runner starts no delivery of it from the commit on, the others' within
// a second. A replay that ended already is queue.ErrReplayNotRunning, one
// that does not exist queue.ErrNotFound.
func (a *Actions) CancelReplay(ctx context.Context, who Actor, id int64) (queue.Replay, error) {
	var r queue.Replay
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if r, err = tx.CancelReplay(ctx, id, who.Name()); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.ReplayCancel,
			fmt.Sprintf("replay %d %q", r.ID, r.Name), r.Remaining())
	})
	if err != nil {
		return queue.Replay{}, err
	}
	if a.replayer != nil {
		a.replayer.Cancelled(id)
	}
	return r, nil
}
