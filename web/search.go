package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/eventjson"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// handleSearch answers "where is this event?" for a Stripe event id: on the
// queue, processed, or never seen. A queue row's uuid, as shown on its
// detail page, finds it too. An object or customer id (isObjectID) shows
// its history from the event log instead.
func (d *dashboard) handleSearch() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		s := views.SearchPage{Query: strings.TrimSpace(c.QueryParam("q")), RetentionDays: max(1, int(d.opts.MarkerRetention/(24*time.Hour))),
			PayloadRetentionDays: max(1, int(d.opts.PayloadRetention/(24*time.Hour))), CanPull: d.opts.Reconciler != nil,
			PullAccount: d.opts.Reconciler != nil && d.opts.Reconciler.PullsConnect()}
		status := http.StatusOK
		switch {
		case s.Query == "":
		case eventjson.CheckID(s.Query) != nil:
			// No event the receiver accepted breaks the rule, so such a
			// query can match nothing (a queue id passes it too).
			s.Problem = fmt.Sprintf("An event id has at most %d characters, all printable; Stripe's look like evt_1Q2w3E4r5T6y7U8i.",
				eventjson.MaxIDLen)
			status = http.StatusBadRequest
		case isObjectID(s.Query):
			history, err := d.reads.History(ctx, s.Query)
			if err != nil {
				return err
			}
			s.HistoryOf, s.History = s.Query, history
		default:
			if err := d.findForSearch(ctx, &s); err != nil {
				return err
			}
		}
		return render(c, status, views.Search(d.page(c, "Find an event", "search"), s))
	}
}

// findForSearch fills s with where the event s.Query names stands: its
// queue row or marker, a processed one's payload, whether a delivery holds
// it now, the replays it was part of and the event it is a pair of. A
// queue row's uuid names the event of that row.
func (d *dashboard) findForSearch(ctx context.Context, s *views.SearchPage) error {
	eventID := s.Query
	if id, err := uuid.Parse(s.Query); err == nil {
		e, err := d.reads.Event(ctx, id)
		switch {
		case err == nil:
			eventID = e.EventID
		case !errors.Is(err, queue.ErrNotFound):
			return err
		}
	}
	found, err := d.reads.FindEvent(ctx, eventID)
	if err != nil {
		return err
	}
	s.Found = &found
	if l := found.Log; l != nil && l.ProcessedAt != nil && l.HasPayload {
		// A processed event's facts are this answer: a thin one's
		// related object, context and reason are in its payload.
		switch payload, err := d.reads.LoggedPayload(ctx, eventID); {
		case err == nil:
			s.Payload = string(payload)
		case !errors.Is(err, queue.ErrNotFound) && !errors.Is(err, queue.ErrPayloadGone):
			return err
		}
	}
	if s.InFlight, err = d.reads.EventInFlight(ctx, eventID); err != nil {
		return err
	}
	if s.Replays, err = d.reads.ReplaysOfEvent(ctx, eventID); err != nil {
		return err
	}
	switch pair, err := d.reads.PairOf(ctx, eventID); {
	case err == nil:
		s.Pair = &pair
	case !errors.Is(err, queue.ErrNotFound):
		return err
	}
	return nil
}
