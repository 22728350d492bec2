package stripeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
)

// v2PageSize is the largest page /v2/core/events returns.
const v2PageSize = 100

// ThinQuery says which thin events ThinEvents lists.
type ThinQuery struct {
	// Since is the oldest creation time listed (created.gte).
	Since time.Time
	// Types, when not empty, lists only events of these types (at most 20,
	// Stripe's bound).
	Types []string
	// Context is the connected account (acct_...) whose events to list,
	// sent as Stripe-Context; empty for the account's own.
	Context string
}

// maxTypes is how many types one /v2/core/events request may filter on.
const maxTypes = 20

// ThinEvents lists the thin events of q from /v2/core/events, newest
// first, calling page with each page as it arrives; it follows each page's
// next_page_url and pauses PagePause between pages. The events decode as
// stripe-go's V2RawEvent; each keeps the exact bytes the API sent. An
// error from page stops the listing and is returned.
func (c *Client) ThinEvents(ctx context.Context, q ThinQuery, page func([]Event) error) error {
	if len(q.Types) > maxTypes {
		return &APIError{Message: fmt.Sprintf("list thin events: at most %d types per request, got %d", maxTypes, len(q.Types))}
	}
	query := url.Values{}
	query.Set("limit", fmt.Sprint(v2PageSize))
	query.Set("created[gte]", q.Since.UTC().Format(time.RFC3339Nano))
	for i, t := range q.Types {
		query.Set(fmt.Sprintf("types[%d]", i), t)
	}
	next := "/v2/core/events?" + query.Encode()
	what := "thin events"
	if q.Context != "" {
		what = "thin events of connected account " + q.Context
	}
	for n := 1; next != ""; n++ {
		var p stripe.V2Page[json.RawMessage]
		err := c.call(ctx, func() error {
			p = stripe.V2Page[json.RawMessage]{}
			return c.getV2(ctx, next, q.Context, &p)
		})
		if err != nil {
			return describe(err, what, "", "Events")
		}
		events := make([]Event, len(p.Data))
		for i, raw := range p.Data {
			if events[i], err = parseThinEvent(raw); err != nil {
				return &APIError{Message: fmt.Sprintf("list %s, page %d: %v", what, n, err), err: err}
			}
		}
		if err := page(events); err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		next = p.NextPageURL
		if next != "" {
			if err := sleep(ctx, c.cfg.PagePause); err != nil {
				return err
			}
		}
	}
	return nil
}

// ThinEvent reads one thin event by id from /v2/core/events; with an
// account (acct_...), one of that connected account, sent as
// Stripe-Context.
func (c *Client) ThinEvent(ctx context.Context, account, id string) (Event, error) {
	what := "thin event " + id
	if account != "" {
		what += " of connected account " + account
	}
	var raw json.RawMessage
	err := c.call(ctx, func() error {
		raw = nil
		return c.getV2(ctx, "/v2/core/events/"+url.PathEscape(id), account, &raw)
	})
	if err != nil {
		return Event{}, describe(err, what, "Stripe keeps events for 30 days", "Events")
	}
	e, err := parseThinEvent(raw)
	if err != nil {
		return Event{}, &APIError{Message: fmt.Sprintf("read %s: %v", what, err), err: err}
	}
	return e, nil
}

// parseThinEvent decodes a thin event with stripe-go's own type.
func parseThinEvent(raw []byte) (Event, error) {
	var e stripe.V2RawEvent
	if err := json.Unmarshal(raw, &e); err != nil {
		return Event{}, fmt.Errorf("stripe sent a thin event that does not decode: %w", err)
	}
	if e.Object != "v2.core.event" || e.ID == "" || e.Type == "" {
		return Event{}, fmt.Errorf("stripe sent an object that is not a thin event (object %q, id %q)", e.Object, e.ID)
	}
	return Event{ID: e.ID, Type: e.Type, Created: e.Created, Account: e.Context, Payload: slices.Clone(raw)}, nil
}

// Destination is an event destination as Stripe describes it.
type Destination struct {
	ID  string
	URL string
	// EnabledEvents are the event types Stripe sends it.
	EnabledEvents []string
	// Status is "enabled" or "disabled"; DisabledReason says why when
	// Stripe gives a reason ("user": someone disabled it).
	Status         string
	DisabledReason string
	// Thin is true when it sends thin events, false for snapshot events.
	Thin bool
	// APIVersion is the version a snapshot destination's events are
	// rendered in; empty for a thin destination, whose events have none.
	APIVersion string
	// Connect is true when its events come from connected accounts
	// (events_from other_accounts).
	Connect bool
}

// Receives reports whether Stripe sends events of eventType to d.
func (d Destination) Receives(eventType string) bool {
	return slices.Contains(d.EnabledEvents, "*") || slices.Contains(d.EnabledEvents, eventType)
}

// Destination reads the event destination id (ed_...), its webhook URL
// included.
func (c *Client) Destination(ctx context.Context, id string) (Destination, error) {
	var d stripe.V2EventDestination
	path := "/v2/core/event_destinations/" + url.PathEscape(id) + "?include[0]=webhook_endpoint.url"
	err := c.call(ctx, func() error {
		d = stripe.V2EventDestination{}
		return c.getV2(ctx, path, "", &d)
	})
	if err != nil {
		return Destination{}, describe(err, "event destination "+id,
			"check the endpoint's stripe_id in HOOKD_ENDPOINTS, and that the key belongs to the same account and mode (live or test)",
			"Event Destinations")
	}
	out := Destination{ID: d.ID, EnabledEvents: d.EnabledEvents, Status: string(d.Status),
		Thin: d.EventPayload == stripe.V2EventDestinationEventPayloadThin, APIVersion: d.SnapshotAPIVersion,
		Connect: slices.Contains(d.EventsFrom, stripe.V2EventDestinationEventsFromOtherAccounts)}
	if d.WebhookEndpoint != nil {
		out.URL = d.WebhookEndpoint.URL
	}
	if d.StatusDetails != nil && d.StatusDetails.Disabled != nil {
		out.DisabledReason = string(d.StatusDetails.Disabled.Reason)
	}
	return out, nil
}

// getV2 GETs path (with its query) from the v2 API into v. stripe-go's
// backend drops a v2 error's HTTP status, which the 429 back-off and the
// errors for people need, so the request is made here, over the same
// budgeted HTTP client, and an error answer becomes the *stripe.Error a
// v1 call would return.
func (c *Client) getV2(ctx context.Context, path, stripeContext string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.cfg.URL, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Stripe-Version", stripe.APIVersion)
	req.Header.Set("User-Agent", "hookd (stripe-go/"+stripe.ClientVersion+")")
	if stripeContext != "" {
		req.Header.Set("Stripe-Context", stripeContext)
	}
	res, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 32<<20))
	if err != nil {
		return err
	}
	if res.StatusCode >= 400 {
		var e struct {
			Error stripe.V2RawError `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = http.StatusText(res.StatusCode)
		}
		return &stripe.Error{HTTPStatusCode: res.StatusCode, Msg: msg, Code: stripe.ErrorCode(e.Error.Code)}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("stripe sent a %s answer that does not decode: %w", path, err)
	}
	return nil
}
