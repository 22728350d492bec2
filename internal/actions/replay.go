package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// replayFieldOf names the input at fault in a replay filter's refusal
// (queue.ReplayFilter.Check), as the API calls it.
func replayFieldOf(f queue.ReplayFilter) string {
	switch {
	case f.From.IsZero() || f.To.IsZero() || !f.From.Before(f.To):
		return "from"
	case !f.Processed && !f.Pending && !f.Dead:
		return "statuses"
	}
	return "types"
}

// checkReplayFilter refuses a filter a replay cannot take, saying why.
func checkReplayFilter(f queue.ReplayFilter) error {
	if err := f.Check(); err != nil {
		return &InvalidError{Field: replayFieldOf(f), Detail: "Nothing started: " + err.Error() + "."}
	}
	return nil
}

// checkReplayDestination refuses a replay to a destination there is no
// call to: none of that name, or a retired one.
func (a *Actions) checkReplayDestination(ctx context.Context, f queue.ReplayFilter) error {
	if f.Destination == "" {
		return nil
	}
	d, err := a.reads.Destination(ctx, f.Destination)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return &InvalidError{Field: "destination", Detail: "Nothing started: there is no destination " + f.Destination + "."}
	case err != nil:
		return err
	case d.Retired():
		return &InvalidError{Field: "destination", Detail: "Nothing started: destination " + f.Destination +
			" is retired, so nothing is delivered to it; move its deliveries to another destination instead."}
	}
	return nil
}

// PreviewReplay says how many events a replay of f would deliver, how
// many it must skip, and shows a few of them.
func (a *Actions) PreviewReplay(ctx context.Context, f queue.ReplayFilter) (queue.ReplayPreview, error) {
	if err := checkReplayFilter(f); err != nil {
		return queue.ReplayPreview{}, err
	}
	if err := a.checkReplayDestination(ctx, f); err != nil {
		return queue.ReplayPreview{}, err
	}
	return a.reads.PreviewReplay(ctx, f)
}

// StartReplay starts a replay named name of the events f matches, audited,
// and wakes this replica's runner of replays; the replay's deliveries run
// on the server, at the delivery rate. A filter that matches no event with
// a payload left is queue.ErrNothingToReplay.
func (a *Actions) StartReplay(ctx context.Context, who Actor, name string, f queue.ReplayFilter) (queue.Replay, error) {
	name = strings.TrimSpace(name)
	if err := queue.CheckReplayName(name); err != nil {
		return queue.Replay{}, &InvalidError{Field: "name", Detail: "Nothing started: " + err.Error() + "."}
	}
	if err := checkReplayFilter(f); err != nil {
		return queue.Replay{}, err
	}
	if err := a.checkReplayDestination(ctx, f); err != nil {
		return queue.Replay{}, err
	}
	var r queue.Replay
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if r, err = tx.StartReplay(ctx, name, f, who.Name()); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.ReplayStart,
			fmt.Sprintf("replay %d %q: %s", r.ID, r.Name, r.Summary), r.Total)
	})
	if err != nil {
		return queue.Replay{}, err
	}
	if a.replayer != nil {
		a.replayer.Wake()
	}
	return r, nil
}

// ErrNoReplay is the answer for a replay id that names none: never made,
// or pruned with the events it replayed.
var ErrNoReplay = errors.New("no such replay: it may have been pruned with the events it replayed")

// Replay reads replay id and its progress.
func (a *Actions) Replay(ctx context.Context, id int64) (queue.Replay, error) {
	r, err := a.reads.Replay(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		return queue.Replay{}, ErrNoReplay
	}
	return r, err
}
