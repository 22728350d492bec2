package stripeevent

import (
	"fmt"
	"time"
)

// ThinObjectType is the object of a thin event, which an event destination
// sending thin payloads posts and /v2/core/events lists.
const ThinObjectType = "v2.core.event"

// RelatedObject is what a thin event is about: the object to fetch for its
// current state.
type RelatedObject struct {
	ID   string // e.g. in_...
	Type string // e.g. invoice
	// URL is its path in Stripe's API, e.g. /v1/invoices/in_...
	URL string
}

// Thin is a thin event: no data.object, a related object to fetch instead,
// created as an ISO-8601 timestamp.
type Thin struct {
	ID      string // evt_...
	Type    string // e.g. v1.invoice.paid
	Created time.Time
	// Livemode is false for a sandbox's or test mode's event.
	Livemode bool
	// Context is the account the event happened in (acct_...) for an event
	// of a connected account; empty for the account's own.
	Context string
	// Related is the object the event is about; a zero ID sends none.
	Related RelatedObject
	// SnapshotEvent names the classic event (evt_...) a thin v1.* event
	// mirrors; empty for the others.
	SnapshotEvent string
	// RequestID names the API request that caused the event; empty for an
	// event no request caused.
	RequestID string
}

// JSON returns the thin event compact, its fields in Stripe's order.
func (e Thin) JSON() []byte {
	b := fmt.Appendf(nil, `{"id":%s,"object":%s,"type":%s,"livemode":%t,"created":%s`,
		jsonString(e.ID), jsonString(ThinObjectType), jsonString(e.Type), e.Livemode,
		jsonString(e.Created.UTC().Format("2006-01-02T15:04:05.000Z")))
	if e.Context != "" {
		b = fmt.Appendf(b, `,"context":%s`, jsonString(e.Context))
	}
	if e.Related.ID != "" {
		b = fmt.Appendf(b, `,"related_object":{"id":%s,"type":%s,"url":%s}`,
			jsonString(e.Related.ID), jsonString(e.Related.Type), jsonString(e.Related.URL))
	}
	if e.SnapshotEvent != "" {
		b = fmt.Appendf(b, `,"snapshot_event":%s`, jsonString(e.SnapshotEvent))
	}
	if e.RequestID != "" {
		b = fmt.Appendf(b, `,"reason":{"type":"request","request":{"id":%s,"idempotency_key":null}}`, jsonString(e.RequestID))
	}
	return append(b, '}')
}
