package stripeevent

import "time"

// GenerationFailureType is the type of Stripe's notice that it failed to
// generate an event.
const GenerationFailureType = "v2.core.health.event_generation_failure.resolved"

// GenerationFailure returns an event-generation-failure notice, created
// now, as delivered: thin, without what it says of the lost event, which
// Stripe's API gives when the notice is read there.
func GenerationFailure(id string) []byte {
	return ThinEvent{ID: id, Type: GenerationFailureType, Created: time.Now()}.JSON()
}

// SamplePing returns a ping of the event destination destinationID
// (ed_...), created now, with a fresh id, and that id.
func SamplePing(destinationID string) (payload []byte, id string) {
	id = NewID("evt")
	return Ping(id, destinationID), id
}

// SampleThin returns the thin form of a Sample event of eventType (type
// v1.<eventType>), about an object of the type Sample renders, in the
// connected account account ("" for the account's own), and its id.
func SampleThin(eventType, account string, now time.Time) (payload []byte, id string) {
	f := newFixture(now, "")
	object, _ := f.object(eventType)
	objectID, _ := object["id"].(string)
	objectType, _ := object["object"].(string)
	t := ThinEvent{ID: NewID("evt"), Type: "v1." + eventType, Created: now, Context: account,
		Related:   RelatedObject{ID: objectID, Type: objectType, URL: ObjectPaths[objectType] + objectID},
		RequestID: NewID("req")}
	return t.JSON(), t.ID
}

// ObjectPaths are the API collections of the objects events are about, by
// object type: where GET /v1/<collection>/<id> reads one, and what a thin
// event's related_object.url starts with.
var ObjectPaths = map[string]string{
	"invoice":          "/v1/invoices/",
	"customer":         "/v1/customers/",
	"subscription":     "/v1/subscriptions/",
	"payment_intent":   "/v1/payment_intents/",
	"charge":           "/v1/charges/",
	"refund":           "/v1/refunds/",
	"dispute":          "/v1/disputes/",
	"payout":           "/v1/payouts/",
	"product":          "/v1/products/",
	"price":            "/v1/prices/",
	"setup_intent":     "/v1/setup_intents/",
	"payment_method":   "/v1/payment_methods/",
	"checkout.session": "/v1/checkout/sessions/",
	"billing.meter":    "/v1/billing/meters/",
}
