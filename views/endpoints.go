package views

import (
	"bytes"
	"encoding/json"

	"github.com/hookd/hookd/queue"
)

// thinEvent is what a thin event's page shows of it besides its queue
// row: the object it is about (which it does not carry), the account it
// happened in, and why it happened.
type thinEvent struct {
	RelatedID, RelatedType, RelatedURL string
	Context                            string
	// Reason is the reason member, indented; "" when it has none.
	Reason string
}

// readThinEvent reads payload as a thin event ("object": "v2.core.event");
// false when it is another kind, or not JSON.
func readThinEvent(payload string) (thinEvent, bool) {
	var ev struct {
		Object        string          `json:"object"`
		Context       string          `json:"context"`
		Reason        json.RawMessage `json:"reason"`
		RelatedObject struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"related_object"`
	}
	if json.Unmarshal([]byte(payload), &ev) != nil || ev.Object != "v2.core.event" {
		return thinEvent{}, false
	}
	t := thinEvent{RelatedID: ev.RelatedObject.ID, RelatedType: ev.RelatedObject.Type, RelatedURL: ev.RelatedObject.URL,
		Context: ev.Context}
	var buf bytes.Buffer
	if len(ev.Reason) > 0 && string(ev.Reason) != "null" && json.Indent(&buf, ev.Reason, "", "  ") == nil {
		t.Reason = buf.String()
	}
	return t, true
}

// pairOther is the event of p that is not eventID, and what it is.
func pairOther(p queue.Pair, eventID string) (id, kind string) {
	if p.ThinEventID == eventID {
		return p.SnapshotEventID, "snapshot event"
	}
	return p.ThinEventID, "thin event"
}

// pairForwarded says which of the pair reached the app.
func pairForwarded(p queue.Pair) string {
	switch p.Forwarded {
	case queue.ForwardedBoth:
		return "both were forwarded (HOOKD_SNAPSHOT_ALIAS=forward-both)"
	case queue.ForwardedThin:
		return "the thin event came first and was forwarded; the snapshot event was answered as its duplicate"
	case queue.ForwardedSnapshot:
		return "the snapshot event came first and was forwarded; the thin event was answered as its duplicate"
	}
	return string(p.Forwarded)
}
