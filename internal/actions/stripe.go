package actions

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
)

// StripeTimeout bounds one fetch of an object from Stripe, its wait for
// the API budget included.
const StripeTimeout = 15 * time.Second

var (
	// ErrNoStripeObject is the answer for an event whose payload names no
	// object hookd can fetch from Stripe.
	ErrNoStripeObject = errors.New("this event names no object hookd can fetch from Stripe")
	// ErrStripeOff is the answer when hookd has no STRIPE_API_KEY.
	ErrStripeOff = errors.New("hookd has no STRIPE_API_KEY, so it cannot read Stripe's API")
)

// InStripe is the object an event is about as it is now in Stripe
// (Current, the JSON Stripe's API sent), beside the event's snapshot of it
// (Snapshot; nil for a thin event, which carries none).
type InStripe struct {
	Event    queue.Event
	Object   stripeapi.ObjectRef
	Snapshot json.RawMessage
	Current  []byte
}

// EventInStripe reads the event id names and fetches from Stripe's API
// the object it is about. It only reads, though it spends the API budget
// hookd shares with reconciliation.
func (a *Actions) EventInStripe(ctx context.Context, id string) (InStripe, error) {
	e, err := a.eventOf(ctx, a.reads, id)
	if err != nil {
		return InStripe{}, err
	}
	return a.ObjectInStripe(ctx, e)
}

// ObjectInStripe fetches from Stripe's API the object e is about. It is
// ErrNoStripeObject when e names none, ErrStripeOff without an API key,
// and Stripe's error (a *stripeapi.APIError) when Stripe gave none.
func (a *Actions) ObjectInStripe(ctx context.Context, e queue.Event) (InStripe, error) {
	ref, snapshot, ok := stripeapi.EventObject([]byte(e.Payload))
	s := InStripe{Event: e, Object: ref, Snapshot: snapshot}
	switch {
	case !ok:
		return s, ErrNoStripeObject
	case a.stripe == nil:
		return s, ErrStripeOff
	}
	ctx, cancel := context.WithTimeout(ctx, StripeTimeout)
	defer cancel()
	var err error
	s.Current, err = a.stripe.Object(ctx, ref)
	return s, err
}
