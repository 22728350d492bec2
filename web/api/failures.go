package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/hookd/hookd/queue"
)

func (s *server) ListFailureGroups(ctx context.Context, req ListFailureGroupsRequestObject) (ListFailureGroupsResponseObject, error) {
	groups, total, err := s.opts.Actions.FailureGroups(ctx, deref(req.Params.Type, ""), "", deref(req.Params.Limit, 200))
	if err != nil {
		return nil, err
	}
	out := ListFailureGroups200JSONResponse{Groups: make([]FailureGroup, len(groups)), Total: total}
	for i, g := range groups {
		out.Groups[i] = FailureGroup{Id: GroupID(g.Destination, g.ErrorGroup), Destination: g.Destination,
			ErrorGroup: g.ErrorGroup, Types: typeCounts(g.Types),
			Failed: g.Failed, Retrying: g.Retrying, Dead: g.Dead, FirstSeen: g.FirstSeen, LastSeen: g.LastSeen}
	}
	return out, nil
}

// GroupID is a failure group's short name: the first 12 hex digits of
// the SHA-256 of its destination and masked error, the same while they
// are; of the error alone for the destination default, as before hookd
// had several.
func GroupID(destination, errorGroup string) string {
	text := errorGroup
	if destination != "" && destination != queue.DefaultDestination {
		text = destination + "\x00" + errorGroup
	}
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:6])
}

func typeCounts(ts []queue.TypeCount) []TypeCount {
	out := make([]TypeCount, len(ts))
	for i, t := range ts {
		out[i] = TypeCount{Type: t.EventType, Count: t.Count}
	}
	return out
}

func (s *server) RetryFailureGroup(ctx context.Context, req RetryFailureGroupRequestObject) (RetryFailureGroupResponseObject, error) {
	g := queue.FailureGroup{ErrorGroup: req.Body.Group, EventType: deref(req.Body.Type, ""),
		Destination: deref(req.Body.Destination, "")}
	r, err := s.opts.Actions.RetryGroup(ctx, actor(ctx), g, deref(req.Body.DryRun, false))
	if err != nil {
		return nil, err
	}
	out := RetryFailureGroup200JSONResponse{Group: r.Group.ErrorGroup, DryRun: r.DryRun, Count: r.Count()}
	if r.Group.EventType != "" {
		out.Type = &r.Group.EventType
	}
	if r.DryRun {
		types := typeCounts(r.Group.Types)
		out.Dead, out.Pending, out.Types = &r.Dead, &r.Pending, &types
		return out, nil
	}
	out.Queued, out.Erased = &r.Revived.Queued, &r.Revived.Erased
	out.DueNow, out.DueAfterAttempt = &r.Hastened.DueNow, &r.Hastened.DueAfterAttempt
	return out, nil
}
