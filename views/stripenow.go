package views

import (
	"bytes"
	"encoding/json"

	"github.com/hookd/hookd/internal/jsondiff"
)

// StripeNow is "Show it in Stripe now" on an event's page: the object the
// event is about as Stripe holds it now, beside the snapshot the event
// carried, with the fields that changed since.
type StripeNow struct {
	// Configured is false without STRIPE_API_KEY; the panel then says
	// what to set.
	Configured bool
	// Object names the object the button fetches ("invoice in_...");
	// empty when the event names none hookd can fetch.
	Object string
	// Fetched is true once the button was pressed and Stripe answered.
	Fetched bool
	// Snapshot is the event's data.object, indented; empty for a thin
	// event, which carries none. Current is the object now, indented.
	Snapshot, Current string
	// Diff is what changed from Snapshot to Current.
	Diff jsondiff.Result
	// Error is why the fetch failed, for a person.
	Error string
}

// WithObject returns s with the object Stripe returned, compared with the
// event's snapshot when it carried one.
func (s StripeNow) WithObject(snapshot, current []byte) StripeNow {
	s.Fetched = true
	s.Current = indent(current)
	if len(snapshot) > 0 {
		s.Snapshot = indent(snapshot)
		if d, err := jsondiff.Diff(snapshot, current); err == nil {
			s.Diff = d
		}
	}
	return s
}

// indent indents JSON for reading; text that is not JSON stays as it is.
func indent(raw []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}
