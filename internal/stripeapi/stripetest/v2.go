package stripetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/stripeevent"
)

// Destination is an event destination as the fake serves it.
type Destination struct {
	ID  string // default: a fresh ed_... id
	URL string // default: https://hooks.example.com/webhooks/stripe
	// EventPayload is "thin" (default) or "snapshot".
	EventPayload string
	// SnapshotAPIVersion is the version a snapshot destination's events
	// are rendered in; default: APIVersion for a snapshot destination.
	SnapshotAPIVersion string
	// EnabledEvents are the types it receives. Default: ["*"].
	EnabledEvents []string
	Status        string // "enabled" (default) or "disabled"
	// EventsFrom is ["self"] (default) or ["other_accounts"] for a
	// Connect destination.
	EventsFrom []string
}

// AddDestination adds an event destination and returns it with its
// defaults.
func (s *Server) AddDestination(d Destination) Destination {
	if d.ID == "" {
		d.ID = "ed_test_" + randomID()
	}
	if d.URL == "" {
		d.URL = "https://hooks.example.com" + stripeevent.ReceiverPath
	}
	if d.EventPayload == "" {
		d.EventPayload = "thin"
	}
	if d.EventPayload == "snapshot" && d.SnapshotAPIVersion == "" {
		d.SnapshotAPIVersion = APIVersion
	}
	if d.EnabledEvents == nil {
		d.EnabledEvents = []string{"*"}
	}
	if d.Status == "" {
		d.Status = "enabled"
	}
	if d.EventsFrom == nil {
		d.EventsFrom = []string{"self"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.destinations[d.ID] = d
	return d
}

// SetDestinationStatus enables or disables the event destination id.
func (s *Server) SetDestinationStatus(id, status string) {
	s.UpdateDestination(id, func(d *Destination) { d.Status = status })
}

// UpdateEndpoint changes the webhook endpoint id as a person would on its
// page in Stripe's dashboard (or as Stripe does when it disables it), by
// change.
func (s *Server) UpdateEndpoint(id string, change func(*Endpoint)) {
	update(s, s.endpoints, "endpoint", id, change)
}

// UpdateDestination changes the event destination id by change.
func (s *Server) UpdateDestination(id string, change func(*Destination)) {
	update(s, s.destinations, "event destination", id, change)
}

// update changes the item id of items, one of s's maps, by change, under
// s's lock. An id never added panics: it is a mistake in the test, and
// changing a zero item would hide it.
func update[T any](s *Server, items map[string]T, kind, id string, change func(*T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	item, ok := items[id]
	if !ok {
		panic("stripetest: no " + kind + " " + id)
	}
	change(&item)
	items[id] = item
}

// ThinEvent is a thin event as the fake serves it from /v2/core/events.
type ThinEvent struct {
	ID      string    // default: a fresh evt_test_... id
	Type    string    // default: v1.invoice.paid
	Created time.Time // default: ten minutes ago
	// Context is the connected account it happened in; /v2/core/events
	// lists it only with that Stripe-Context.
	Context string
	// Related is the object it is about; default: a new invoice, which
	// the fake then serves at its URL. A zero URL gets the object's path.
	Related stripeevent.RelatedObject
	// SnapshotEvent is the classic event a thin v1.* event mirrors.
	SnapshotEvent string
}

type storedThin struct {
	id, typ, context, objectID string
	created                    time.Time
	seq                        int
	raw                        []byte
}

// AddThinEvent adds a thin event and returns its id and the exact JSON the
// API serves for it.
func (s *Server) AddThinEvent(e ThinEvent) (id string, raw []byte) {
	fillEvent(&e.ID, &e.Type, &e.Created, "evt_test_", "v1.invoice.paid")
	var object map[string]any
	if e.Related.ID == "" {
		object = newInvoice()
		e.Related = stripeevent.RelatedObject{ID: object["id"].(string), Type: "invoice"}
	}
	if e.Related.URL == "" {
		e.Related.URL = ObjectURL(e.Related.Type, e.Related.ID)
	}
	raw = stripeevent.ThinEvent{ID: e.ID, Type: e.Type, Created: e.Created, Context: e.Context, Related: e.Related,
		SnapshotEvent: e.SnapshotEvent, RequestID: "req_" + randomID()}.JSON()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.thin = append(s.thin, storedThin{id: e.ID, typ: e.Type, context: e.Context, objectID: e.Related.ID,
		created: e.Created, seq: len(s.thin), raw: raw})
	s.thinSorted = false
	if object != nil {
		b, _ := json.Marshal(object)
		s.putObjectLocked(e.Context, object, b, false)
	}
	return e.ID, raw
}

// pageState is where a page token of /v2/core/events resumes: the filters
// of the first request, and the position after the last event served.
type pageState struct {
	query   url.Values
	context string
	start   int
}

// v2PageSize bounds a v2 list's page, as limit does.
const (
	v2DefaultLimit = 20
	v2MaxLimit     = 100
)

func (s *Server) serveV2(w http.ResponseWriter, r *http.Request, rest string) {
	switch {
	case rest == "events":
		s.listThin(w, r.URL.Query(), r.Header.Get("Stripe-Context"))
	case strings.HasPrefix(rest, "events/"):
		id := strings.TrimPrefix(rest, "events/")
		for _, e := range s.thin {
			if e.id == id {
				_, _ = w.Write(e.raw)
				return
			}
		}
		writeV2Error(w, http.StatusNotFound, "not_found", "resource_missing", fmt.Sprintf("No such event: '%s'", id))
	case rest == "event_destinations":
		s.listDestinations(w, r.URL.Query())
	case strings.HasPrefix(rest, "event_destinations/"):
		id := strings.TrimPrefix(rest, "event_destinations/")
		d, ok := s.destinations[id]
		if !ok {
			writeV2Error(w, http.StatusNotFound, "not_found", "resource_missing",
				fmt.Sprintf("No such event destination: '%s'", id))
			return
		}
		writeJSON(w, destinationJSON(d, includes(r.URL.Query())["webhook_endpoint.url"]))
	default:
		writeV2Error(w, http.StatusNotFound, "not_found", "", "Unrecognized request URL (GET: "+r.URL.Path+").")
	}
}

// listThin answers GET /v2/core/events: the thin events of context ("" for
// the account's own), newest first, filtered on created (gt, gte, lt, lte
// as ISO-8601 timestamps), types and object_id, limit at a time (1 to 100,
// default 20), each next page named by a page token in next_page_url.
func (s *Server) listThin(w http.ResponseWriter, q url.Values, context string) {
	start := 0
	if token := q.Get("page"); token != "" {
		st, ok := s.pages[token]
		if !ok {
			writeV2Error(w, http.StatusBadRequest, "invalid_request_error", "invalid_page", "The page token is not valid.")
			return
		}
		q, context, start = st.query, st.context, st.start
	}
	limit := v2DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > v2MaxLimit {
			writeV2Error(w, http.StatusBadRequest, "invalid_request_error", "invalid_limit",
				fmt.Sprintf("limit must be between 1 and %d, got %q.", v2MaxLimit, v))
			return
		}
		limit = n
	}
	f := thinFilter{context: context, types: listParam(q, "types"), objectID: q.Get("object_id")}
	for i, op := range createdOps {
		v := cmp.Or(q.Get("created["+op+"]"), q.Get("created."+op))
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeV2Error(w, http.StatusBadRequest, "invalid_request_error", "invalid_timestamp",
				fmt.Sprintf("created.%s must be an ISO-8601 timestamp, got %q.", op, v))
			return
		}
		f.created[i] = &t
	}
	data, next := s.thinPage(f, start, limit)
	var nextURL any
	if next >= 0 {
		token := "page_" + randomID()
		s.pages[token] = pageState{query: q, context: context, start: next}
		nextURL = "/v2/core/events?page=" + token
	}
	writeJSON(w, map[string]any{"data": data, "next_page_url": nextURL, "previous_page_url": nil})
}

// createdOps are the bounds a list of thin events takes on created, in
// thinFilter.created's order.
var createdOps = [4]string{"gte", "gt", "lte", "lt"}

// thinFilter is what a list of thin events asks for.
type thinFilter struct {
	context  string
	types    []string
	objectID string
	created  [4]*time.Time // gte, gt, lte, lt; nil for no bound
}

func (f thinFilter) matches(e storedThin) bool {
	gte, gt, lte, lt := f.created[0], f.created[1], f.created[2], f.created[3]
	return e.context == f.context && (len(f.types) == 0 || slices.Contains(f.types, e.typ)) &&
		(f.objectID == "" || e.objectID == f.objectID) &&
		(gte == nil || !e.created.Before(*gte)) && (gt == nil || e.created.After(*gt)) &&
		(lte == nil || !e.created.After(*lte)) && (lt == nil || e.created.Before(*lt))
}

// thinPage returns the first limit thin events f matches from start on,
// newest first, and where the next page starts: -1 when none is left.
func (s *Server) thinPage(f thinFilter, start, limit int) (data []json.RawMessage, next int) {
	if !s.thinSorted {
		slices.SortStableFunc(s.thin, func(a, b storedThin) int {
			if c := b.created.Compare(a.created); c != 0 {
				return c
			}
			return b.seq - a.seq
		})
		s.thinSorted = true
	}
	data = []json.RawMessage{}
	for i := start; i < len(s.thin); i++ {
		if !f.matches(s.thin[i]) {
			continue
		}
		if len(data) == limit {
			return data, i
		}
		data = append(data, s.thin[i].raw)
	}
	return data, -1
}

// listParam reads an array parameter however it is written: types=a&types=b,
// types[]=a, or types[0]=a&types[1]=b as stripe-go's form encoder writes it.
func listParam(q url.Values, name string) []string {
	var out []string
	out = append(out, q[name]...)
	out = append(out, q[name+"[]"]...)
	for i := 0; ; i++ {
		v, ok := q[name+"["+strconv.Itoa(i)+"]"]
		if !ok {
			return out
		}
		out = append(out, v...)
	}
}

func includes(q url.Values) map[string]bool {
	m := map[string]bool{}
	for _, v := range listParam(q, "include") {
		m[v] = true
	}
	return m
}

// listDestinations answers GET /v2/core/event_destinations, on one page.
func (s *Server) listDestinations(w http.ResponseWriter, q url.Values) {
	withURL := includes(q)["webhook_endpoint.url"]
	data := []any{}
	ids := make([]string, 0, len(s.destinations))
	for id := range s.destinations {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		data = append(data, destinationJSON(s.destinations[id], withURL))
	}
	writeJSON(w, map[string]any{"data": data, "next_page_url": nil, "previous_page_url": nil})
}

// destinationJSON is an event destination in Stripe's shape. Its webhook
// URL is shown only when asked for with include=webhook_endpoint.url, as
// Stripe does.
func destinationJSON(d Destination, withURL bool) map[string]any {
	var endpointURL any
	if withURL {
		endpointURL = d.URL
	}
	var version any
	if d.EventPayload == "snapshot" {
		version = d.SnapshotAPIVersion
	}
	var details any
	if d.Status == "disabled" {
		details = map[string]any{"disabled": map[string]any{"reason": "user"}}
	}
	created := time.Now().Add(-90 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
	return map[string]any{
		"id":                   d.ID,
		"object":               "v2.core.event_destination",
		"created":              created,
		"description":          "hookd",
		"enabled_events":       d.EnabledEvents,
		"event_payload":        d.EventPayload,
		"events_from":          d.EventsFrom,
		"livemode":             false,
		"metadata":             map[string]string{},
		"name":                 "hookd",
		"snapshot_api_version": version,
		"status":               d.Status,
		"status_details":       details,
		"type":                 "webhook_endpoint",
		"updated":              created,
		"webhook_endpoint":     map[string]any{"signing_secret": nil, "url": endpointURL},
	}
}
