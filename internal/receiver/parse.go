package receiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hookd/hookd/internal/eventjson"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
)

// pingType is the event an event destination is pinged with: answered 200,
// recorded as the endpoint's last ping, never processed.
const pingType = stripeevent.PingType

// event is the part of a Stripe event the pipeline reads. Besides the id
// and type, what it keeps are slices of the payload, read into strings
// only where they are used: the processed path reads none of them but the
// account.
type event struct {
	ID   string
	Type string
	// thin: "object": "v2.core.event".
	thin bool
	// mode is livemode: modeUnknown when the event does not say.
	mode mode
	// account is a Connect event's account, or a thin event's context;
	// snapshot is a thin v1.* event's snapshot_event. Both are "" when
	// absent, and are held to eventjson.CheckID: they go into headers and
	// lease keys.
	account, snapshot string
	f                 eventjson.Fields
}

type mode int8

const (
	modeUnknown mode = iota
	modeLive
	modeTest
)

// ping reports whether the event is a destination's ping.
func (ev *event) ping() bool { return ev.Type == pingType }

// parseEvent reads a Stripe event into ev, a zero event, in one pass. The
// payload itself is never re-encoded: processors and the queue get the
// exact bytes. (It fills ev rather than returning it: an event holds every
// slice of eventjson.Fields, and on every delivery's path neither a copy
// nor a second clearing is free.)
func parseEvent(payload []byte, ev *event) error {
	if !utf8.Valid(payload) {
		return fmt.Errorf("%w: body is not valid UTF-8", errNotJSON)
	}
	f := &ev.f
	isObject, valid := eventjson.ScanEvent(payload, f)
	if !valid || !isObject {
		return fmt.Errorf("%w: body is not a JSON object", errNotJSON)
	}
	ev.thin = bytes.Equal(f.Object, []byte(`"v2.core.event"`))
	if err := stringField(f.ID, "id", errBadEventID, &ev.ID); err != nil {
		return err
	}
	if err := stringField(f.Type, "type", errBadEventType, &ev.Type); err != nil {
		return err
	}
	switch string(f.Livemode) {
	case "true":
		ev.mode = modeLive
	case "false":
		ev.mode = modeTest
	}
	account, name := f.Account, "account"
	if ev.thin && isAbsent(account) {
		account, name = f.Context, "context"
	}
	if err := optionalField(account, name, &ev.account); err != nil {
		return err
	}
	if ev.thin {
		return optionalField(f.SnapshotEvent, "snapshot_event", &ev.snapshot)
	}
	return nil
}

func isAbsent(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

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

// optionalField is stringField for a member that may be absent or null.
func optionalField(raw json.RawMessage, name string, dst *string) error {
	if isAbsent(raw) {
		return nil
	}
	return stringField(raw, name, errBadField, dst)
}

// text is raw's text when it is a string; "" otherwise.
func text(raw json.RawMessage) *string {
	if s, ok := eventjson.String(raw); ok && len(raw) > 0 && raw[0] == '"' && s != "" {
		return &s
	}
	return nil
}

// meta is what the queue row keeps of ev, come through label.
func (ev *event) meta(label string) queue.EventMeta {
	m := queue.EventMeta{Endpoint: label, Livemode: ev.livemode(), APIVersion: text(ev.f.APIVersion)}
	if ev.account != "" {
		m.Account = &ev.account
	}
	if ev.snapshot != "" {
		m.SnapshotEvent = &ev.snapshot
	}
	f := ev.f
	if ev.thin {
		m.ObjectID, m.ObjectType = text(f.RelatedID), text(f.RelatedType)
	} else {
		m.ObjectID, m.ObjectType = text(f.DataObjectID), text(f.DataObjectType)
	}
	switch {
	case text(f.DataObjectCustomer) != nil:
		m.Customer = text(f.DataObjectCustomer)
	case m.ObjectType != nil && *m.ObjectType == "customer":
		m.Customer = m.ObjectID
	}
	return m
}

// created is Stripe's created; nil when the event did not say.
func (ev *event) created() *time.Time { return ev.f.CreatedTime() }

var live, test = true, false

// livemode is ev's mode as the processor and the queue take it: shared
// values, so that it costs no allocation.
func (ev *event) livemode() *bool {
	switch ev.mode {
	case modeLive:
		return &live
	case modeTest:
		return &test
	}
	return nil
}
