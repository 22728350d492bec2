// Package stripeapi reads what hookd needs from Stripe's API, through
// stripe-go: the webhook endpoints and event destinations hookd serves
// (which event types they receive, whether they are enabled, their API
// version), the events Stripe created, page by page, each as the exact JSON
// the API returned (snapshot events from /v1/events, for the account or
// one of its connected accounts, and thin events from /v2/core/events), and
// the current state of the object an event is about.
//
// Every request of a process waits for one Budget, so reconciliation, the
// dashboard and doctor together stay below a rate of reads.
//
// Its errors say in one line what to fix: a rejected key, a key without the
// permission, an endpoint id that is not in the account.
package stripeapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/form"
)

// DefaultURL is Stripe's API.
const DefaultURL = "https://api.stripe.com"

// pageSize is the largest page Stripe's list endpoints return.
const pageSize = 100

var (
	// ErrNotFound means Stripe has no such object in the key's account and
	// mode: a wrong id, a key of another account, or an event older than the
	// 30 days Stripe keeps events.
	ErrNotFound = errors.New("not found in Stripe")
)

// Config configures a Client. Zero fields get the defaults below.
type Config struct {
	// Key is the secret or restricted API key (sk_... or rk_...). A
	// restricted key needs read access to Events and Webhook Endpoints.
	Key string
	// URL is the API's base URL. Default: DefaultURL.
	URL string
	// HTTPClient makes the requests. Default: a client with a 30 s timeout.
	HTTPClient *http.Client
	// MaxNetworkRetries is how often stripe-go itself retries a request
	// that failed in a way it knows to be safe to retry: a network error,
	// a 409, a 429 lock timeout, a 5xx. Default: 3.
	MaxNetworkRetries int64
	// RateLimitRetries is how often a request refused by Stripe's rate
	// limiter (429) is tried again, after RateLimitWait, then twice that,
	// and so on; stripe-go does not retry those. Default: 5.
	RateLimitRetries int
	// RateLimitWait is the first wait after a rate-limited request.
	// Default: 1 s.
	RateLimitWait time.Duration
	// PagePause is the pause between two pages of a list, so a long listing
	// leaves the account's rate limit to the app that shares it. Default:
	// 100 ms; negative means none.
	PagePause time.Duration
	// Logger receives stripe-go's own log lines, at debug level (requests,
	// retries). Default: none.
	Logger *slog.Logger
	// Budget is the rate of requests this Client shares with the others of
	// the process. Default: a budget of its own at DefaultRate.
	Budget *Budget
}

// Client reads webhook endpoints and events from Stripe's API.
type Client struct {
	sc      *stripe.Client
	backend stripe.Backend
	key     string
	cfg     Config
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	cfg.URL = cmp.Or(cfg.URL, DefaultURL)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	cfg.MaxNetworkRetries = cmp.Or(cfg.MaxNetworkRetries, 3)
	cfg.RateLimitRetries = cmp.Or(cfg.RateLimitRetries, 5)
	cfg.RateLimitWait = cmp.Or(cfg.RateLimitWait, time.Second)
	cfg.PagePause = cmp.Or(cfg.PagePause, 100*time.Millisecond)
	if cfg.Budget == nil {
		cfg.Budget = NewBudget(DefaultRate)
	}
	cfg.HTTPClient = withBudget(cfg.HTTPClient, cfg.Budget)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(cfg.URL),
		HTTPClient:        cfg.HTTPClient,
		MaxNetworkRetries: stripe.Int64(cfg.MaxNetworkRetries),
		LeveledLogger:     leveledLogger{logger.With("component", "stripe-go")},
	})
	return &Client{
		sc:      stripe.NewClient(cfg.Key, stripe.WithBackends(&stripe.Backends{API: backend})),
		backend: backend,
		key:     cfg.Key,
		cfg:     cfg,
	}
}

// Endpoint is a webhook endpoint as Stripe describes it.
type Endpoint struct {
	ID  string
	URL string
	// EnabledEvents are the event types Stripe sends it; "*" means all.
	EnabledEvents []string
	// Status is "enabled" or "disabled": Stripe disables an endpoint that
	// keeps failing, and then sends it nothing.
	Status string
	// APIVersion is the version its events are rendered in; empty when it
	// follows the account's default version.
	APIVersion string
}

// Receives reports whether Stripe sends events of eventType to e.
func (e Endpoint) Receives(eventType string) bool {
	return slices.Contains(e.EnabledEvents, "*") || slices.Contains(e.EnabledEvents, eventType)
}

// Endpoint reads the webhook endpoint id (we_...).
func (c *Client) Endpoint(ctx context.Context, id string) (Endpoint, error) {
	var we *stripe.WebhookEndpoint
	err := c.call(ctx, func() (err error) {
		we, err = c.sc.V1WebhookEndpoints.Retrieve(ctx, id, nil)
		return err
	})
	if err != nil {
		return Endpoint{}, describe(err, "webhook endpoint "+id,
			"check STRIPE_WEBHOOK_ENDPOINT_ID, and that the key belongs to the same account and mode (live or test)",
			"Webhook Endpoints")
	}
	return Endpoint{ID: we.ID, URL: we.URL, EnabledEvents: we.EnabledEvents, Status: we.Status, APIVersion: we.APIVersion}, nil
}

// Event is one Stripe event.
type Event struct {
	ID      string
	Type    string
	Created time.Time
	// APIVersion is the version data.object is rendered in: the account's
	// default version when the event was created; empty for a thin event.
	APIVersion string
	// Account is the connected account the event happened in (a snapshot
	// event's account, a thin event's context); empty for the account's
	// own.
	Account string
	// Payload is the event exactly as the API returned it.
	Payload []byte
}

// Event reads one event by id (evt_...).
func (c *Client) Event(ctx context.Context, id string) (Event, error) {
	return c.AccountEvent(ctx, "", id)
}

// AccountEvent is Event for an event of the connected account (acct_...),
// read with the Stripe-Account header, as a Connect endpoint receives it.
// An empty account reads the account's own.
func (c *Client) AccountEvent(ctx context.Context, account, id string) (Event, error) {
	params := &stripe.EventRetrieveParams{}
	what, fix := "event "+id, "Stripe keeps events for 30 days"
	if account != "" {
		params.SetStripeAccount(account)
		what += " of connected account " + account
		fix += ", under the connected account they happened in"
	}
	var ev *stripe.Event
	err := c.call(ctx, func() (err error) {
		ev, err = c.sc.V1Events.Retrieve(ctx, id, params)
		return err
	})
	if err != nil {
		return Event{}, describe(err, what, fix, "Events")
	}
	if ev.LastResponse == nil {
		return Event{}, &APIError{Message: fmt.Sprintf("read event %s: no response body", id)}
	}
	e, err := parseEvent(ev.LastResponse.RawJSON)
	if err != nil {
		return Event{}, &APIError{Message: fmt.Sprintf("read event %s: %v", id, err), err: err}
	}
	return e, nil
}

// eventPage is one page of GET /v1/events with each event kept as the bytes
// the API sent, since hookd forwards those and must not re-encode them.
type eventPage struct {
	stripe.APIResource
	stripe.ListMeta
	Data []json.RawMessage `json:"data"`
}

// Events lists every event created at or after since, newest first, and
// calls page with each page of up to 100 as it arrives. It pauses PagePause
// between pages. An error from page stops the listing and is returned.
func (c *Client) Events(ctx context.Context, since time.Time, page func([]Event) error) error {
	return c.AccountEvents(ctx, "", since, page)
}

// AccountEvents is Events for the connected account (acct_...), read with
// the Stripe-Account header: the events a Connect endpoint receives from
// it. An empty account lists the account's own events.
func (c *Client) AccountEvents(ctx context.Context, account string, since time.Time, page func([]Event) error) error {
	params := &stripe.EventListParams{
		ListParams:   stripe.ListParams{Limit: stripe.Int64(pageSize)},
		CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix()},
	}
	params.Context = ctx
	what := "events"
	if account != "" {
		params.SetStripeAccount(account)
		what = "events of connected account " + account
	}
	for n := 1; ; n++ {
		// Encoded as stripe-go's own V1Events.List encodes it (created[gte],
		// limit, starting_after), which the iterator hides page by page.
		query := &form.Values{}
		form.AppendTo(query, params)
		var p eventPage
		err := c.call(ctx, func() error {
			p = eventPage{}
			return c.backend.CallRaw(http.MethodGet, "/v1/events", c.key, []byte(query.Encode()), params.GetParams(), &p)
		})
		if err != nil {
			return describe(err, what, "", "Events")
		}
		events := make([]Event, len(p.Data))
		for i, raw := range p.Data {
			if events[i], err = parseEvent(raw); err != nil {
				return &APIError{Message: fmt.Sprintf("list events, page %d: %v", n, err), err: err}
			}
		}
		if err := page(events); err != nil {
			return err
		}
		if !p.HasMore || len(events) == 0 {
			return nil
		}
		params.StartingAfter = stripe.String(events[len(events)-1].ID)
		if err := sleep(ctx, c.cfg.PagePause); err != nil {
			return err
		}
	}
}

func parseEvent(raw []byte) (Event, error) {
	var e struct {
		ID         string `json:"id"`
		Object     string `json:"object"`
		Type       string `json:"type"`
		Created    int64  `json:"created"`
		APIVersion string `json:"api_version"`
		Account    string `json:"account"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return Event{}, fmt.Errorf("stripe sent an event that is not JSON: %w", err)
	}
	if e.Object != "event" || e.ID == "" || e.Type == "" {
		return Event{}, fmt.Errorf("stripe sent an object that is not an event (object %q, id %q)", e.Object, e.ID)
	}
	return Event{ID: e.ID, Type: e.Type, Created: time.Unix(e.Created, 0), APIVersion: e.APIVersion,
		Account: e.Account, Payload: slices.Clone(raw)}, nil
}

// call runs do, and runs it again after a growing wait while Stripe's rate
// limiter refuses it. stripe-go retries only the 429s that are lock
// timeouts; a rate-limited request is one its docs ask to back off from.
func (c *Client) call(ctx context.Context, do func() error) error {
	wait := c.cfg.RateLimitWait
	for try := 0; ; try++ {
		err := do()
		var se *stripe.Error
		if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusTooManyRequests || try == c.cfg.RateLimitRetries {
			return err
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait *= 2
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// APIError is a failure to read from Stripe's API (an error answer, or no
// answer), described for a person. Every error of a Client but a cancelled
// context is one.
type APIError struct {
	// Status is the HTTP status Stripe answered; 0 when it did not answer.
	Status int
	// Message says what went wrong and what to do.
	Message string
	err     error
}

func (e *APIError) Error() string { return e.Message }

// Unwrap returns ErrNotFound for a 404, and stripe-go's error otherwise.
func (e *APIError) Unwrap() error { return e.err }

// describe turns stripe-go's error for reading what into one line saying
// what to do: perm is the restricted key's permission that reads it, hint
// what a 404 most likely means.
func describe(err error, what, hint, perm string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *stripe.Error
	if !errors.As(err, &se) {
		// No answer from Stripe. net/http's error repeats the request's
		// URL, whose query and user (an egress proxy's, in
		// HOOKD_STRIPE_API_URL) the dashboard must not show; what went
		// wrong is in the error it wraps, which names the host.
		cause := err
		if uerr, ok := errors.AsType[*url.Error](err); ok {
			cause = uerr.Err
		}
		return &APIError{Message: fmt.Sprintf("read %s from Stripe: %v", what, cause), err: err}
	}
	msg := se.Msg
	var out string
	switch se.HTTPStatusCode {
	case http.StatusUnauthorized:
		out = fmt.Sprintf("Stripe rejected STRIPE_API_KEY (401: %s)", msg)
	case http.StatusForbidden:
		out = fmt.Sprintf("STRIPE_API_KEY may not read %s (403): give the restricted key Read access to %s (%s)", what, perm, msg)
	case http.StatusNotFound:
		out = fmt.Sprintf("Stripe has no %s (404: %s)", what, msg)
		if hint != "" {
			out += ": " + hint
		}
		return &APIError{Status: se.HTTPStatusCode, Message: out, err: ErrNotFound}
	case http.StatusTooManyRequests:
		out = fmt.Sprintf("Stripe kept rate-limiting the requests for %s (429: %s); try again later", what, msg)
	default:
		out = fmt.Sprintf("Stripe answered %d reading %s: %s", se.HTTPStatusCode, what, msg)
	}
	return &APIError{Status: se.HTTPStatusCode, Message: out, err: err}
}

// leveledLogger passes stripe-go's log lines to slog at debug level: hookd
// reports the errors they are about once, where it handles them.
type leveledLogger struct{ l *slog.Logger }

func (l leveledLogger) Debugf(format string, v ...any) { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l leveledLogger) Infof(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l leveledLogger) Warnf(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l leveledLogger) Errorf(format string, v ...any) { l.l.Debug(fmt.Sprintf(format, v...)) }
