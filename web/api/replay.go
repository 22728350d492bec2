package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/queue"
)

// typeNothingToReplay is a replay's refusal when its filter matches no
// event with a payload left.
const typeNothingToReplay = "urn:hookd:problem:nothing-to-replay"

func (s *server) CreateReplay(ctx context.Context, req CreateReplayRequestObject) (CreateReplayResponseObject, error) {
	b := req.Body
	f := queue.ReplayFilter{From: b.From.UTC(), To: b.To.UTC(), Types: deref(b.Types, nil),
		Endpoint: strings.TrimSpace(deref(b.Endpoint, "")), Object: strings.TrimSpace(deref(b.Object, "")),
		Destination: strings.TrimSpace(deref(b.Destination, ""))}
	statuses := deref(b.Statuses, []ReplayStatus{ReplayStatusProcessed})
	for _, st := range statuses {
		switch st {
		case ReplayStatusProcessed:
			f.Processed = true
		case ReplayStatusPending:
			f.Pending = true
		case ReplayStatusDead:
			f.Dead = true
		}
	}
	if deref(b.DryRun, false) {
		p, err := s.opts.Actions.PreviewReplay(ctx, f)
		if err != nil {
			return nil, err
		}
		return previewOf(p), nil
	}
	r, err := s.opts.Actions.StartReplay(ctx, actor(ctx), deref(b.Name, ""), f)
	if errors.Is(err, queue.ErrNothingToReplay) {
		return nil, problem(http.StatusUnprocessableEntity, typeNothingToReplay, "Nothing started: "+err.Error()+
			"; widen the time range, the types or the statuses (dry_run shows what a filter matches).")
	}
	if err != nil {
		return nil, err
	}
	out := replayOf(r)
	return CreateReplay202JSONResponse{Body: out, Headers: CreateReplay202ResponseHeaders{Location: &out.ProgressUrl}}, nil
}

func previewOf(p queue.ReplayPreview) CreateReplay200JSONResponse {
	out := CreateReplay200JSONResponse{Matching: p.Matching, Unreplayable: p.Unreplayable, Replayable: p.Replayable(),
		Sample: make([]ReplaySample, len(p.Sample))}
	for i, e := range p.Sample {
		out.Sample[i] = ReplaySample{Id: e.EventID, Type: e.EventType, ReceivedAt: e.ReceivedAt,
			Status: ReplayStatus(e.Status), Replayable: e.Replayable}
	}
	return out
}

func (s *server) GetReplay(ctx context.Context, req GetReplayRequestObject) (GetReplayResponseObject, error) {
	r, err := s.opts.Actions.Replay(ctx, req.Id)
	if errors.Is(err, actions.ErrNoReplay) {
		return nil, problem(http.StatusNotFound, "", "No replay "+strconv.FormatInt(req.Id, 10)+": "+err.Error()+".")
	}
	if err != nil {
		return nil, err
	}
	return GetReplay200JSONResponse(replayOf(r)), nil
}

// replayOf is a replay as the API answers it.
func replayOf(r queue.Replay) Replay {
	out := Replay{Id: r.ID, Name: r.Name, Summary: r.Summary, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt,
		State: ReplayState(r.State), FinishedAt: r.FinishedAt, CancelledBy: r.CancelledBy, Total: r.Total,
		Delivered: r.Delivered, Failed: r.Failed, Skipped: r.Skipped, Unreplayable: r.Unreplayable,
		Remaining: r.Remaining(), Rate: float32(r.Rate()), ProgressUrl: Prefix + "/replays/" + strconv.FormatInt(r.ID, 10),
		Destination: r.Destination}
	if eta := r.ETA(); eta > 0 {
		secs := int64(eta.Seconds() + 0.5)
		out.EtaSeconds = &secs
	}
	return out
}
