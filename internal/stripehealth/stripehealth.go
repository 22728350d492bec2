// Package stripehealth takes the notices Stripe sends hookd about Stripe
// itself rather than about the account's objects: an
// event-generation-failure notice (v2.core.health.event_generation_failure.resolved)
// says Stripe failed to create an event, which therefore reached no
// endpoint and is in no list.
//
// hookd keeps such a notice (internal/store/ungenerated), alerts on it and lists it
// on /failures, and never forwards it: the app has no object to fetch and
// nothing to do that a person should not decide, and an app written for
// the account's events would fail it and send it to the retry queue.
package stripehealth

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hookd/hookd/internal/store/ungenerated"
	"github.com/hookd/hookd/worker"
)

// Processor returns a processor that keeps the event-generation-failure
// notices in store and hands every other event to next. It runs where next
// would, under the event's lease, so a notice is kept before its marker is
// written, exactly once however often Stripe delivers it.
func Processor(next worker.Processor, store *ungenerated.Store) worker.Processor {
	return noticeKeeper{next: next, store: store}
}

type noticeKeeper struct {
	next  worker.Processor
	store *ungenerated.Store
}

func (p noticeKeeper) Process(ctx context.Context, d worker.Delivery) worker.Result {
	if d.EventType != ungenerated.NoticeType {
		return p.next.Process(ctx, d)
	}
	n, err := Parse(d.Payload)
	if err != nil {
		return worker.Result{Err: err}
	}
	if err := p.store.Record(ctx, n); err != nil {
		return worker.Result{Err: err}
	}
	return worker.Result{}
}

// Skips is next's answer for every event but a notice, which is kept.
func (p noticeKeeper) Skips(eventType string) bool {
	return eventType != ungenerated.NoticeType && worker.Skips(p.next, eventType)
}

// Parse reads a notice: its id and mode, and, when it carries its data (a
// notice read from Stripe's API does; the thin notice delivered does not),
// what it says of the lost event.
func Parse(payload []byte) (ungenerated.Notice, error) {
	var e struct {
		ID       string `json:"id"`
		Livemode bool   `json:"livemode"`
		Data     struct {
			Summary string `json:"summary"`
			Impact  struct {
				EventType       string `json:"event_type"`
				RelatedObjectID string `json:"related_object_id"`
				RelatedObject   struct {
					ID string `json:"id"`
				} `json:"related_object"`
			} `json:"impact"`
		} `json:"data"`
	}
	if err := json.Unmarshal(payload, &e); err != nil {
		return ungenerated.Notice{}, fmt.Errorf("read the event-generation-failure notice: %w", err)
	}
	object := e.Data.Impact.RelatedObject.ID
	if object == "" {
		object = e.Data.Impact.RelatedObjectID
	}
	return ungenerated.Notice{EventID: e.ID, Livemode: e.Livemode, LostType: e.Data.Impact.EventType,
		ObjectID: object, Summary: e.Data.Summary}, nil
}
