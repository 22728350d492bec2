// Package stripetest is a fake of the parts of Stripe's API hookd reads:
// GET /v1/webhook_endpoints/{id}, GET /v1/events and GET /v1/events/{id},
// each for the account itself or, with a Stripe-Account header, for one of
// its connected accounts; the objects events are about (GET
// /v1/invoices/{id}, /v1/customers/{id} and the others of objectPaths);
// and the v2 API's thin events (GET /v2/core/events, filtered on created,
// types and object_id, paged with page tokens and next_page_url, for a
// connected account with Stripe-Context) and event destinations (GET
// /v2/core/event_destinations and /v2/core/event_destinations/{id}).
// It is an httptest server answering with Stripe's own JSON shapes (list
// objects with has_more and url, v2 pages, events, webhook endpoints, event
// destinations, error objects), so a stripe-go client pointed at its URL
// cannot tell it from the real API, and stripe-go's types decode it.
//
// Tests add endpoints, destinations, events and objects, disable or
// re-version endpoints, queue failures (a 429, a 500) for the next
// requests, and count the requests the fake received.
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

	"github.com/hookd/hookd/internal/stripeevent"
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
	// Object is data.object; default: an invoice. It is also what the
	// object's own URL serves, unless PutObject has put another version.
	Object map[string]any
	// Account is the connected account the event happened in: the event
	// carries it, and /v1/events lists it only with that Stripe-Account.
	Account string
}

// Server is the fake API. Its zero value is not usable: call NewServer.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	key       string
	denied    map[string]bool // path prefixes the key may not read (403)
	denyAfter map[string]int  // path prefixes denied once this many more are answered
	endpoints map[string]Endpoint
	events    []storedEvent // newest first once sorted
	sorted    bool
	failures  []failure
	requests  map[string]int
	total     int
	queries   []url.Values
	accounts  []string // the Stripe-Account of every GET /v1/events

	destinations map[string]Destination
	thin         []storedThin // newest first once sorted
	thinSorted   bool
	pages        map[string]pageState
	objects      map[objectKey][]byte
}

type storedEvent struct {
	id      string
	account string
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
		key:       DefaultKey,
		denied:    map[string]bool{},
		denyAfter: map[string]int{},
		endpoints: map[string]Endpoint{},
		requests:  map[string]int{},

		destinations: map[string]Destination{},
		pages:        map[string]pageState{},
		objects:      map[objectKey][]byte{},
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

// DenyAfter makes the requests whose path starts with prefix answer 403,
// as Deny does, once n of them have been answered: a key whose permission
// is taken away during a run, seen by a list that was paging.
func (s *Server) DenyAfter(prefix string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denyAfter[prefix] = n
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
	fillEvent(&e.ID, &e.Type, &e.Created, "evt_", "invoice.paid")
	if e.APIVersion == "" {
		e.APIVersion = APIVersion
	}
	if e.Object == nil {
		e.Object = newInvoice()
	}
	object, err := json.Marshal(e.Object)
	if err != nil {
		panic(err) // only plain values go in
	}
	raw = stripeevent.Event{ID: e.ID, Type: e.Type, Created: e.Created, APIVersion: e.APIVersion, Object: object,
		Account: e.Account}.JSON()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, storedEvent{id: e.ID, account: e.Account, created: e.Created.Unix(), seq: len(s.events), raw: raw})
	s.sorted = false
	s.putObjectLocked(e.Account, e.Object, object, false)
	return e.ID, raw
}

// fillEvent gives an added event, classic or thin, what it leaves empty:
// a new id after prefix, typ, and a creation ten minutes ago.
func fillEvent(id, typ *string, created *time.Time, prefix, defaultType string) {
	if *id == "" {
		*id = prefix + randomID()
	}
	if *typ == "" {
		*typ = defaultType
	}
	if created.IsZero() {
		*created = time.Now().Add(-10 * time.Minute)
	}
}

// newInvoice is what an added event is about when it says nothing: a new
// paid invoice of a new customer.
func newInvoice() map[string]any {
	return map[string]any{
		"id": "in_" + randomID(), "object": "invoice", "amount_paid": 2000, "currency": "usd",
		"customer": "cus_" + randomID(), "livemode": false, "status": "paid",
	}
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

// TotalRequests returns how many requests the server received, whatever
// their path or answer.
func (s *Server) TotalRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// ListQueries returns the query of every GET /v1/events received, in order.
func (s *Server) ListQueries() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

// ListAccounts returns the Stripe-Account header of every GET /v1/events
// received, in order: "" for the account's own events.
func (s *Server) ListAccounts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.accounts)
}

// SetEndpointStatus enables or disables the webhook endpoint id, as Stripe
// does to one that keeps failing, or a person in Stripe's dashboard.
func (s *Server) SetEndpointStatus(id, status string) {
	s.UpdateEndpoint(id, func(e *Endpoint) { e.Status = status })
}

// SetEndpointAPIVersion pins the webhook endpoint id to version, as a
// person may in Stripe's dashboard; "" follows the account's default.
func (s *Server) SetEndpointAPIVersion(id, version string) {
	s.UpdateEndpoint(id, func(e *Endpoint) { e.APIVersion = version })
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_"+randomID())

	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[r.URL.Path]++
	s.total++
	if r.URL.Path == "/v1/events" {
		s.queries = append(s.queries, r.URL.Query())
		s.accounts = append(s.accounts, r.Header.Get("Stripe-Account"))
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
	for prefix, left := range s.denyAfter {
		if strings.HasPrefix(r.URL.Path, prefix) {
			if left == 0 {
				s.denied[prefix] = true
			}
			s.denyAfter[prefix] = left - 1
		}
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
	account := r.Header.Get("Stripe-Account")
	if v2, ok := strings.CutPrefix(r.URL.Path, "/v2/core/"); ok {
		s.serveV2(w, r, v2)
		return
	}
	switch rest, _ := strings.CutPrefix(r.URL.Path, "/v1/"); {
	case rest == "events":
		s.listEvents(w, r.URL.Query(), account)
	case strings.HasPrefix(rest, "events/"):
		s.event(w, strings.TrimPrefix(rest, "events/"), account)
	case strings.HasPrefix(rest, "webhook_endpoints/"):
		s.endpoint(w, strings.TrimPrefix(rest, "webhook_endpoints/"))
	default:
		s.object(w, r.URL.Path, account)
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

func (s *Server) event(w http.ResponseWriter, id, account string) {
	for _, e := range s.events {
		if e.id == id && e.account == account {
			_, _ = w.Write(e.raw)
			return
		}
	}
	writeError(w, http.StatusNotFound, "resource_missing", fmt.Sprintf("No such event: '%s'", id), "id")
}

// listEvents answers GET /v1/events as Stripe does: the events of account
// ("" for the account's own), newest first, at most limit (1 to 100,
// default 10) after starting_after, filtered on created.
func (s *Server) listEvents(w http.ResponseWriter, q url.Values, account string) {
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
		return e.account == account && (bounds[0] == nil || e.created >= *bounds[0]) && (bounds[1] == nil || e.created > *bounds[1]) &&
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

// writeV2Error answers with the v2 API's error object, whose type names
// the error (not_found, invalid_request_error...).
func writeV2Error(w http.ResponseWriter, status int, typ, code, message string) {
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"type": typ, "code": code, "message": message}})
	_, _ = w.Write(b)
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
