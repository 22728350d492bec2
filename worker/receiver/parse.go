package receiver

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/hookd/hookd/internal/eventjson"
)

// event is the part of a Stripe event the pipeline reads.
type event struct {
	ID   string
	Type string
}

// parseEvent reads the id and type of a Stripe event. The payload itself is
// never re-encoded: processors and the queue get the exact bytes.
func parseEvent(payload []byte) (event, error) {
	if !utf8.Valid(payload) {
		return event{}, fmt.Errorf("%w: body is not valid UTF-8", ErrNotJSON)
	}
	id, typ, isObject, valid := eventjson.Scan(payload)
	if !valid || !isObject {
		return event{}, fmt.Errorf("%w: body is not a JSON object", ErrNotJSON)
	}
	var ev event
	if err := stringField(id, "id", ErrBadEventID, &ev.ID); err != nil {
		return event{}, err
	}
	if err := stringField(typ, "type", ErrBadEventType, &ev.Type); err != nil {
		return event{}, err
	}
	return ev, nil
}

// stringField sets dst to raw's text, when it is a string that passes the
// event id rule (eventjson.CheckID), which an event's type is held to too.
func stringField(raw json.RawMessage, name string, bad error, dst *string) error {
	if len(raw) == 0 {
		return fmt.Errorf("%w: no %q field", bad, name)
	}
	s, ok := eventjson.String(raw)
	if !ok {
		return fmt.Errorf("%w: %q is not a string", bad, name)
	}
	if err := eventjson.CheckID(s); err != nil {
		return fmt.Errorf("%w: %q %v", bad, name, err)
	}
	*dst = s
	return nil
}
