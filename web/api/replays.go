package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hookd/hookd/queue"
)

func (s *server) ListReplays(ctx context.Context, req ListReplaysRequestObject) (ListReplaysResponseObject, error) {
	page, err := s.opts.Actions.Replays(ctx, deref(req.Params.Cursor, ""), deref(req.Params.Limit, 50))
	if err != nil {
		return nil, err
	}
	out := ListReplays200JSONResponse{Replays: make([]Replay, len(page.Replays))}
	for i, r := range page.Replays {
		out.Replays[i] = replayOf(r)
	}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	return out, nil
}

func (s *server) CancelReplay(ctx context.Context, req CancelReplayRequestObject) (CancelReplayResponseObject, error) {
	r, err := s.opts.Actions.CancelReplay(ctx, actor(ctx), req.Id)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return nil, problem(http.StatusNotFound, "", fmt.Sprintf("There is no replay %d: it may have been pruned with the events it replayed.", req.Id))
	case errors.Is(err, queue.ErrReplayNotRunning):
		return nil, problem(http.StatusConflict, typeNotApplicable, fmt.Sprintf("Nothing was changed: replay %d had ended already.", req.Id))
	case err != nil:
		return nil, err
	}
	return CancelReplay200JSONResponse(replayOf(r)), nil
}
