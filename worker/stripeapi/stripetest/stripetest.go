// Package stripetest is a fake of the parts of Stripe's API hookd reads:
// GET /v1/webhook_endpoints/{id}, GET /v1/events and GET /v1/events/{id}.
// It is an httptest server answering with Stripe's own JSON shapes (list
// objects with has_more and url, events, webhook endpoints, error objects),
// paginating with limit and starting_after and filtering on created, so a
// stripe-go client pointed at its URL cannot tell it from the real API.
//
// Tests add endpoints and events, queue failures (a 429, a 500) for the
// next requests, and count the requests the fake received.
package stripetest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/worker/stripeevent"
)

// DefaultKey is the API key a new Server accepts.
const DefaultKey = "rk_test_hookd_reconcile"

// APIVersion is the version events are rendered in unless one is given:
// the version stripe-go v82 speaks.
const APIVersion = stripeevent.APIVersion

// Endpoint is a webhook endpoint as the fake serves it.
type Endpoint struct {
	ID  string // default: a fresh we_... id
	URL string // default: https://hooks.example.com/webhooks/stripe
	// EnabledEvents are the types Stripe delivers to it; "*" is all.
	// Default: ["*"].
	EnabledEvents []string
	Status        string // "enabled" (default) or "disabled"
	// APIVersion is the version the endpoint is pinned to; empty means the
	// account's default, which the API shows as null.
	APIVersion string
}

// Event is an event as the fake serves it.
type Event struct {
	ID         string    // default: a fresh evt_... id
	Type       string    // default: invoice.paid
	Created    time.Time // default: ten minutes ago
	APIVersion string    // default: APIVersion
	// Object is data.object; default: an invoice.
	Object map[string]any
}

// Server is the fake API. Its zero value is not usable: call NewServer.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	key       string
	denied    map[string]bool // path prefixes the key may not read (403)
	endpoints map[string]Endpoint
	// destinations are the event destinations (destinations.go).
	destinations map[string]Destination
	events       []storedEvent // newest first once sorted
	sorted       bool
	failures     []failure
	requests     map[string]int
	queries      []url.Values
}

type storedEvent struct {
	id      string
	created int64
	seq     int
	raw     []byte
}

type failure struct {
	status int
	body   []byte
}

// NewServer starts a fake API accepting DefaultKey and closes it when the
// test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{
		key:          DefaultKey,
		denied:       map[string]bool{},
		endpoints:    map[string]Endpoint{},
		destinations: map[string]Destination{},
		requests:     map[string]int{},
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Key is the API key the server accepts.
func (s *Server) Key() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// SetKey changes the API key the server accepts; any other gets a 401.
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// Deny makes every request whose path starts with prefix (say
// "/v1/events") answer 403, as Stripe does for a restricted key without
// that permission.
func (s *Server) Deny(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denied[prefix] = true
}

// AddEndpoint adds a webhook endpoint and returns it with its defaults.
func (s *Server) AddEndpoint(e Endpoint) Endpoint {
	if e.ID == "" {
		e.ID = "we_" + randomID()
	}
	if e.URL == "" {
		e.URL = "https://hooks.example.com" + stripeevent.ReceiverPath
	}
	if e.EnabledEvents == nil {
		e.EnabledEvents = []string{"*"}
	}
	if e.Status == "" {
		e.Status = "enabled"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints[e.ID] = e
	return e
}

// AddEvent adds an event and returns its id and the exact JSON the API
// serves for it, which is what hookd forwards when it recovers the event.
func (s *Server) AddEvent(e Event) (id string, raw []byte) {
	if e.ID == "" {
		e.ID = "evt_" + randomID()
	}
	if e.Type == "" {
		e.Type = "invoice.paid"
	}
	if e.Created.IsZero() {
		e.Created = time.Now().Add(-10 * time.Minute)
	}
	if e.APIVersion == "" {
		e.APIVersion = APIVersion
	}
	if e.Object == nil {
		e.Object = map[string]any{
			"id": "in_" + randomID(), "object": "invoice", "amount_paid": 2000, "currency": "usd",
			"customer": "cus_" + randomID(), "livemode": false, "status": "paid",
		}
	}
	object, err := json.Marshal(e.Object)
	if err != nil {
		panic(err) // only plain values go in
	}
	raw = stripeevent.Event{ID: e.ID, Type: e.Type, Created: e.Created, APIVersion: e.APIVersion, Object: object}.JSON()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, storedEvent{id: e.ID, created: e.Created.Unix(), seq: len(s.events), raw: raw})
	s.sorted = false
	return e.ID, raw
}

// FailNext makes the next n requests answer status with Stripe's error
// object carrying code and message.
func (s *Server) FailNext(n, status int, code, message string) {
	body := errorBody(code, message, "")
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, failure{status: status, body: body})
	}
}

// RateLimitNext makes the next n requests answer 429 as Stripe's rate
// limiter does.
func (s *Server) RateLimitNext(n int) {
	s.FailNext(n, http.StatusTooManyRequests, "rate_limit",
		"Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.")
}

// Requests returns how many requests the server received for path, such
// as "/v1/events" (the list) or "/v1/webhook_endpoints/we_123".
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// ListQueries returns the query of every GET /v1/events received, in order.
func (s *Server) ListQueries() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_"+randomID())

	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[r.URL.Path]++
	if r.URL.Path == "/v1/events" {
		s.queries = append(s.queries, r.URL.Query())
	}
	if len(s.failures) > 0 {
		f := s.failures[0]
		s.failures = s.failures[1:]
		w.WriteHeader(f.status)
		_, _ = w.Write(f.body)
		return
	}
	if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || key != s.key {
		writeError(w, http.StatusUnauthorized, "", "Invalid API Key provided: "+maskKey(key), "")
		return
	}
	for prefix := range s.denied {
		if strings.HasPrefix(r.URL.Path, prefix) {
			writeError(w, http.StatusForbidden, "", fmt.Sprintf("The provided key '%s' does not have the required "+
				"permissions for this endpoint on account 'acct_1HookdTest'. Having the 'rak_read' permission "+
				"would allow this request to continue.", maskKey(s.key)), "")
			return
		}
	}
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+").", "")
		return
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/v2/core/event_destinations/"); ok {
		s.destination(w, id, r.URL.Query())
		return
	}
	switch rest, _ := strings.CutPrefix(r.URL.Path, "/v1/"); {
	case rest == "events":
		s.listEvents(w, r.URL.Query())
	case strings.HasPrefix(rest, "events/"):
		s.event(w, strings.TrimPrefix(rest, "events/"))
	case strings.HasPrefix(rest, "webhook_endpoints/"):
		s.endpoint(w, strings.TrimPrefix(rest, "webhook_endpoints/"))
	default:
		writeError(w, http.StatusNotFound, "", "Unrecognized request URL (GET: "+r.URL.Path+").", "")
	}
}

func (s *Server) endpoint(w http.ResponseWriter, id string) {
	e, ok := s.endpoints[id]
	if !ok {
		writeError(w, http.StatusNotFound, "resource_missing", fmt.Sprintf("No such webhook endpoint: '%s'", id), "id")
		return
	}
	var version any
	if e.APIVersion != "" {
		version = e.APIVersion
	}
	writeJSON(w, map[string]any{
		"id":             e.ID,
		"object":         "webhook_endpoint",
		"api_version":    version,
		"application":    nil,
		"created":        time.Now().Add(-90 * 24 * time.Hour).Unix(),
		"description":    "hookd",
		"enabled_events": e.EnabledEvents,
		"livemode":       false,
		"metadata":       map[string]string{},
		"status":         e.Status,
		"url":            e.URL,
	})
}

func (s *Server) event(w http.ResponseWriter, id string) {
	for _, e := range s.events {
		if e.id == id {
			_, _ = w.Write(e.raw)
			return
		}
	}
	writeError(w, http.StatusNotFound, "resource_missing", fmt.Sprintf("No such event: '%s'", id), "id")
}

// listEvents answers GET /v1/events as Stripe does: newest first, at most
// limit (1 to 100, default 10) after starting_after, filtered on created.
func (s *Server) listEvents(w http.ResponseWriter, q url.Values) {
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, "parameter_invalid_integer",
				"Invalid integer: "+v+"; limit must be between 1 and 100.", "limit")
			return
		}
		limit = n
	}
	var bounds [4]*int64 // gte, gt, lte, lt
	for i, op := range []string{"gte", "gt", "lte", "lt"} {
		if v := q.Get("created[" + op + "]"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, "parameter_invalid_integer", "Invalid integer: "+v, "created["+op+"]")
				return
			}
			bounds[i] = &n
		}
	}
	if !s.sorted {
		slices.SortStableFunc(s.events, func(a, b storedEvent) int {
			if a.created != b.created {
				return int(b.created - a.created)
			}
			return b.seq - a.seq
		})
		s.sorted = true
	}
	start := 0
	if after := q.Get("starting_after"); after != "" {
		i := slices.IndexFunc(s.events, func(e storedEvent) bool { return e.id == after })
		if i < 0 {
			writeError(w, http.StatusBadRequest, "resource_missing", fmt.Sprintf("No such event: '%s'", after), "starting_after")
			return
		}
		start = i + 1
	}
	in := func(e storedEvent) bool {
		return (bounds[0] == nil || e.created >= *bounds[0]) && (bounds[1] == nil || e.created > *bounds[1]) &&
			(bounds[2] == nil || e.created <= *bounds[2]) && (bounds[3] == nil || e.created < *bounds[3])
	}
	data := []json.RawMessage{}
	hasMore := false
	for _, e := range s.events[start:] {
		if !in(e) {
			continue
		}
		if len(data) == limit {
			hasMore = true
			break
		}
		data = append(data, e.raw)
	}
	writeJSON(w, map[string]any{"object": "list", "data": data, "has_more": hasMore, "url": "/v1/events"})
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, code, message, param string) {
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(code, message, param))
}

// errorBody is Stripe's error object.
func errorBody(code, message, param string) []byte {
	e := map[string]any{"message": message, "type": "invalid_request_error"}
	if code != "" {
		e["code"] = code
		e["doc_url"] = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(code, "_", "-")
	}
	if param != "" {
		e["param"] = param
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return b
}

// maskKey shows a key as Stripe's errors do: its prefix and last four
// characters.
func maskKey(key string) string {
	if len(key) <= 12 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
