package stripetest

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/hookd/hookd/worker/stripeevent"
)

// Destination is an event destination (GET
// /v2/core/event_destinations/{id}) as the fake serves it.
type Destination struct {
	ID  string // default: a fresh ed_... id
	URL string // default: https://hooks.example.com/webhooks/stripe
	// EventPayload is "thin" (default) or "snapshot".
	EventPayload string
	// SnapshotAPIVersion is the version snapshot events are rendered in;
	// empty for a thin destination.
	SnapshotAPIVersion string
	// EventsFrom is "self", "other_accounts" (Connect) or both. Default:
	// ["self"].
	EventsFrom    []string
	EnabledEvents []string // default: ["*"]
	Status        string   // "enabled" (default) or "disabled"
}

// AddDestination adds an event destination and returns it with its
// defaults.
func (s *Server) AddDestination(d Destination) Destination {
	if d.ID == "" {
		d.ID = "ed_" + randomID()
	}
	if d.URL == "" {
		d.URL = "https://hooks.example.com" + stripeevent.ReceiverPath
	}
	if d.EventPayload == "" {
		d.EventPayload = "thin"
	}
	if d.EventsFrom == nil {
		d.EventsFrom = []string{"self"}
	}
	if d.EnabledEvents == nil {
		d.EnabledEvents = []string{"*"}
	}
	if d.Status == "" {
		d.Status = "enabled"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.destinations[d.ID] = d
	return d
}

// UpdateEndpoint changes the webhook endpoint id as a person would on its
// page in Stripe's dashboard (or as Stripe does when it disables it), by
// change.
func (s *Server) UpdateEndpoint(id string, change func(*Endpoint)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.endpoints[id]
	if !ok {
		panic("stripetest: no endpoint " + id)
	}
	change(&e)
	s.endpoints[id] = e
}

// UpdateDestination changes the event destination id by change.
func (s *Server) UpdateDestination(id string, change func(*Destination)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.destinations[id]
	if !ok {
		panic("stripetest: no event destination " + id)
	}
	change(&d)
	s.destinations[id] = d
}

// destination answers GET /v2/core/event_destinations/{id} in the v2
// shapes: RFC 3339 times, and the webhook endpoint's URL only when asked
// for with include=webhook_endpoint.url.
func (s *Server) destination(w http.ResponseWriter, id string, q url.Values) {
	d, ok := s.destinations[id]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		writeJSON(w, map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "resource_missing",
			"message": fmt.Sprintf("No such EventDestination: '%s'", id)}})
		return
	}
	webhook := map[string]any{"signing_secret": nil, "url": nil}
	if slices.Contains(q["include"], "webhook_endpoint.url") || slices.Contains(q["include[0]"], "webhook_endpoint.url") {
		webhook["url"] = d.URL
	}
	var version, details any
	if d.SnapshotAPIVersion != "" {
		version = d.SnapshotAPIVersion
	}
	if d.Status == "disabled" {
		details = map[string]any{"disabled": map[string]any{"reason": "user"}}
	}
	created := time.Now().Add(-90 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
	writeJSON(w, map[string]any{
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
		"webhook_endpoint":     webhook,
	})
}
