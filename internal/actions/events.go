package actions

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/hookd/hookd/internal/eventjson"
	"github.com/hookd/hookd/queue"
)

// EventPage is one page of an event list: its events, how many the
// filter selects on all pages, the cursor of the next page ("" on the
// last), and what explains that due events wait (pending lists).
type EventPage struct {
	Events []queue.Event
	Total  int64
	Next   string
	Wait   queue.DueWait
}

// eventCursor is what an event list's cursor encodes: the list, and the
// last event's place in its order (queue.EventKey).
type eventCursor struct {
	Status queue.Status `json:"s"`
	At     time.Time    `json:"t"`
	ID     uuid.UUID    `json:"i"`
}

// ListEvents reads the page of the queue's list that f selects: after
// cursor when it is not "" (a page by cursor, for the API), else at
// f.Offset (the dashboard's numbered pages).
func (a *Actions) ListEvents(ctx context.Context, f queue.EventFilter, cursor string) (EventPage, error) {
	if cursor != "" {
		var c eventCursor
		if err := decodeCursor(cursor, &c); err != nil || c.Status != f.Status {
			return EventPage{}, &InvalidError{Field: "cursor", Detail: "The cursor is not one this list gave: " +
				"pass the next_cursor of the previous page, with the same filter, or none for the first page."}
		}
		f.After, f.Offset = &queue.EventKey{At: c.At, ID: c.ID}, 0
	}
	var page EventPage
	if f.Status != queue.StatusDead {
		var err error
		if f.Wait, err = a.DueWait(ctx); err != nil {
			return EventPage{}, err
		}
	}
	p, err := a.reads.Events(ctx, f)
	if err != nil {
		return EventPage{}, err
	}
	page.Events, page.Total, page.Wait = p.Events, p.Total, f.Wait
	if n := len(p.Events); n > 0 && n == f.Limit {
		key := f.Key(p.Events[n-1])
		page.Next = encodeCursor(eventCursor{Status: f.Status, At: key.At, ID: key.ID})
	}
	return page, nil
}

// DueWait says what explains that due events wait, for the stuck rule:
// delivery as this replica holds it, or a retry loop working through the
// queue (queue.DueWaitOf).
func (a *Actions) DueWait(ctx context.Context) (queue.DueWait, error) {
	ws, err := a.reads.WorkerStatus(ctx)
	if err != nil {
		return queue.WaitUnexplained, err
	}
	return queue.DueWaitOf(a.control.State(), ws), nil
}

// EventDetail is an event on the queue and its attempts.
type EventDetail struct {
	Event    queue.Event
	Attempts []queue.Attempt
}

// NotOnQueueError is the answer for an event id with no queue row: it was
// processed (Processed is when its dedup marker was written), or hookd
// never received it, or its marker is pruned.
type NotOnQueueError struct {
	EventID   string
	Processed *time.Time
}

func (e *NotOnQueueError) Error() string {
	if e.Processed != nil {
		return fmt.Sprintf("Event %s is not on the queue: it was processed at %s.", e.EventID,
			e.Processed.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("Event %s is not on the queue, and hookd has no record of processing it: "+
		"it never arrived, or its record is older than the retention.", e.EventID)
}

// Event reads the event id names, a queue row's uuid or a Stripe event id
// (evt_...), with its attempts. An id that names no event is
// queue.ErrNotFound, a Stripe id with no queue row a *NotOnQueueError.
func (a *Actions) Event(ctx context.Context, id string) (EventDetail, error) {
	e, err := a.eventOf(ctx, a.reads, id)
	if err != nil {
		return EventDetail{}, err
	}
	attempts, err := a.reads.Attempts(ctx, e.Source, e.EventID)
	if err != nil {
		return EventDetail{}, err
	}
	return EventDetail{Event: e, Attempts: attempts}, nil
}

// eventOf reads the queue row id names on s (the reader, or a
// transaction's queue).
func (a *Actions) eventOf(ctx context.Context, s interface {
	Event(context.Context, uuid.UUID) (queue.Event, error)
	EventByEventID(context.Context, string) (queue.Event, error)
	Locate(context.Context, string) (queue.Location, error)
}, id string) (queue.Event, error) {
	if u, err := uuid.Parse(id); err == nil {
		return s.Event(ctx, u)
	}
	if eventjson.CheckID(id) != nil {
		return queue.Event{}, queue.ErrNotFound
	}
	e, err := s.EventByEventID(ctx, id)
	if !errors.Is(err, queue.ErrNotFound) {
		return e, err
	}
	loc, err := s.Locate(ctx, id)
	if err != nil {
		return queue.Event{}, err
	}
	return queue.Event{}, &NotOnQueueError{EventID: id, Processed: loc.ProcessedAt}
}

func encodeCursor(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a cursor is a struct of plain fields
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
