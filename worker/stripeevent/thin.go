package stripeevent

import (
	"fmt"
	"time"
)

// Thin is a thin event, as an event destination sending thin events posts
// it: object "v2.core.event", created as an RFC 3339 string, no data, and
// the object it is about named by related_object, to be fetched.
type Thin struct {
	ID      string // evt_...
	Type    string // e.g. v1.invoice.paid, v2.core.event_destination.ping
	Created time.Time
	// Livemode is false for a test-mode event.
	Livemode bool
	// Context is the connected account the event happened in (acct_...);
	// "" for the account's own.
	Context string
	// Related is the object the event is about; nil for none.
	Related *RelatedObject
	// SnapshotEvent, for the thin form of a v1 event (type v1.*), is the
	// id of the snapshot event it mirrors.
	SnapshotEvent string
	// Reason is the request that caused the event ("" for none): its id.
	ReasonRequest string
}

// RelatedObject names the object a thin event is about.
type RelatedObject struct {
	ID, Type, URL string
}

// JSON returns the thin event compact, its fields in Stripe's order.
func (t Thin) JSON() []byte {
	b := fmt.Appendf(nil, `{"id":%s,"object":"v2.core.event","type":%s,"livemode":%t,"created":%s`,
		jsonString(t.ID), jsonString(t.Type), t.Livemode, jsonString(t.Created.UTC().Format("2006-01-02T15:04:05.000Z")))
	if t.Context != "" {
		b = fmt.Appendf(b, `,"context":%s`, jsonString(t.Context))
	}
	if t.Related != nil {
		b = fmt.Appendf(b, `,"related_object":{"id":%s,"type":%s,"url":%s}`,
			jsonString(t.Related.ID), jsonString(t.Related.Type), jsonString(t.Related.URL))
	}
	if t.SnapshotEvent != "" {
		b = fmt.Appendf(b, `,"snapshot_event":%s`, jsonString(t.SnapshotEvent))
	}
	if t.ReasonRequest != "" {
		b = fmt.Appendf(b, `,"reason":{"type":"request","request":{"id":%s,"idempotency_key":null}}`, jsonString(t.ReasonRequest))
	}
	return append(b, '}')
}

// PingType is the type of the ping Stripe sends an event destination to
// check it answers.
const PingType = "v2.core.event_destination.ping"

// Ping returns the ping Stripe sends the event destination destinationID
// (ed_...), created now, and its id.
func Ping(destinationID string) (payload []byte, id string) {
	t := Thin{ID: NewID("evt"), Type: PingType, Created: time.Now(),
		Related: &RelatedObject{ID: destinationID, Type: "v2.core.event_destination",
			URL: "/v2/core/event_destinations/" + destinationID}}
	return t.JSON(), t.ID
}

// GenerationFailureType is the type of Stripe's notice that it failed to
// generate an event.
const GenerationFailureType = "v2.core.health.event_generation_failure.resolved"

// GenerationFailure returns an event-generation-failure notice, created
// now, as delivered: thin, without what it says of the lost event, which
// Stripe's API gives when the notice is read there.
func GenerationFailure(id string) []byte {
	return Thin{ID: id, Type: GenerationFailureType, Created: time.Now()}.JSON()
}

// SampleThin returns the thin form of a Sample event of eventType (type
// v1.<eventType>), about an object of the type Sample renders, in the
// connected account account ("" for the account's own), and its id.
func SampleThin(eventType, account string, now time.Time) (payload []byte, id string) {
	f := newFixture(now, "")
	object, _ := f.object(eventType)
	objectID, _ := object["id"].(string)
	objectType, _ := object["object"].(string)
	t := Thin{ID: NewID("evt"), Type: "v1." + eventType, Created: now, Context: account,
		Related:       &RelatedObject{ID: objectID, Type: objectType, URL: "/v1/" + plural(objectType) + "/" + objectID},
		ReasonRequest: NewID("req")}
	return t.JSON(), t.ID
}

// plural is the collection of an object type in Stripe's API paths.
func plural(objectType string) string {
	switch objectType {
	case "checkout.session":
		return "checkout/sessions"
	case "customer.subscription", "subscription":
		return "subscriptions"
	}
	return objectType + "s"
}
