package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// contradictions says where the declarations of the endpoints, or of the
// one labelled label when it is not "", contradict what arrived through
// them.
func (d *dashboard) contradictions(ctx context.Context, label string) ([]string, error) {
	eps := d.opts.Endpoints
	if label != "" {
		ep, err := endpoint.Find(eps, label)
		if err != nil {
			return nil, nil
		}
		eps = []endpoint.Endpoint{ep}
	}
	if !slices.ContainsFunc(eps, func(e endpoint.Endpoint) bool { return !e.Undeclared }) {
		return nil, nil
	}
	arrived, err := d.reads.EndpointsArrived(ctx, endpoint.ArrivedWindow)
	if err != nil {
		return nil, err
	}
	return endpoint.AllContradictions(eps, arrived), nil
}

// findEvent says where the Stripe event eventID is: on the queue, processed
// (it has a dedup marker), or unknown.
func (d *dashboard) findEvent(ctx context.Context, eventID string) (*views.SearchResult, error) {
	loc, err := d.reads.Locate(ctx, eventID)
	if err != nil {
		return nil, err
	}
	return &views.SearchResult{EventID: eventID, Queued: loc.Queued, Processed: loc.Queued == nil && loc.ProcessedAt != nil}, nil
}

// eventID parses the :id of the path; a malformed one is as unknown as a
// missing one.
func eventID(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return uuid.Nil, queue.ErrNotFound
	}
	return id, nil
}

func (d *dashboard) handleEvent() echo.HandlerFunc {
	return func(c echo.Context) error {
		detail, err := d.eventDetail(c)
		if err != nil {
			return err
		}
		return d.renderEvent(c, http.StatusOK, detail)
	}
}

// eventOf reads the queue row the path's :id names: by the row's own id,
// or by the Stripe event id (evt_...) support staff paste. An event has a
// queue row per destination its delivery to which waits or is dead; its
// id names the first destination's, whose page shows every delivery. An event id not on the queue is a 404 that says
// where to look: it was delivered, or never received.
func (d *dashboard) eventOf(c echo.Context) (actions.EventDetail, error) {
	param := c.Param("id")
	e, err := d.actions.Event(c.Request().Context(), param)
	var notOnQueue *actions.NotOnQueueError
	if errors.As(err, &notOnQueue) {
		return actions.EventDetail{}, echo.NewHTTPError(http.StatusNotFound, "Event "+param+" is not on the queue: it was delivered, "+
			"or hookd never received it. Find an event (/search?q="+url.QueryEscape(param)+") says which.")
	}
	return e, err
}

// eventDetail reads everything the event's page shows.
func (d *dashboard) eventDetail(c echo.Context) (views.EventDetail, error) {
	ctx := c.Request().Context()
	read, err := d.eventOf(c)
	if err != nil {
		return views.EventDetail{}, err
	}
	e, attempts := read.Event, read.Attempts
	inFlight, err := d.reads.EventInFlight(ctx, e.EventID)
	if err != nil {
		return views.EventDetail{}, err
	}
	suspect, err := d.reads.SuspectOf(ctx, e.EventID)
	if err != nil {
		return views.EventDetail{}, err
	}
	// Indented for reading; shown as received when it is not JSON.
	payload := e.Payload
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(e.Payload), "", "  ") == nil {
		payload = buf.String()
	}
	canPull := d.opts.Reconciler != nil
	// After an action the person lands on Find an event, not back here:
	// the retry loop may process the event, and delete this queue row,
	// before the browser follows the redirect, and the search follows
	// the event wherever it went.
	detail := views.EventDetail{Event: e, Payload: payload, Attempts: attempts, OverdueAfter: queue.OverdueAfter,
		InFlight: inFlight, Suspect: suspect, Back: "/search?q=" + url.QueryEscape(e.EventID),
		CanPull: canPull && (e.Account == nil || d.opts.Reconciler.PullsConnect())}
	if ref, _, ok := stripeapi.EventObject([]byte(e.Payload)); ok {
		detail.Stripe = views.StripeNow{Configured: d.opts.Stripe != nil, Object: ref.String()}
	}
	switch pair, err := d.reads.PairOf(ctx, e.EventID); {
	case err == nil:
		detail.Pair = &pair
	case !errors.Is(err, queue.ErrNotFound):
		return views.EventDetail{}, err
	}
	if e.Source == queue.SourceStripe {
		if detail.Deliveries, err = d.reads.DeliveriesOf(ctx, e.EventID); err != nil {
			return views.EventDetail{}, err
		}
	}
	if detail.Replays, err = d.reads.ReplaysOfEvent(ctx, e.EventID); err != nil {
		return views.EventDetail{}, err
	}
	if e.Source == queue.SourceStripe {
		// The event log's flag, as Find an event shows it.
		switch entry, err := d.reads.LogEntry(ctx, e.EventID); {
		case err == nil:
			detail.OutOfOrder = entry.OutOfOrder
		case !errors.Is(err, queue.ErrNotFound):
			return views.EventDetail{}, err
		}
	}
	return detail, nil
}

func (d *dashboard) renderEvent(c echo.Context, status int, detail views.EventDetail) error {
	nav := "pending"
	if detail.Event.Status == queue.StatusDead {
		nav = "dead"
	}
	delivery := d.opts.Control.State()
	if detail.Event.Status != queue.StatusDead {
		var err error
		if detail.Wait, err = d.actions.DueWait(c.Request().Context()); err != nil {
			return err
		}
	}
	return render(c, status, views.EventDetailPage(d.pageWith(c, detail.Event.EventID, nav, delivery), detail))
}
