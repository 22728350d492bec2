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

	"github.com/stripe/stripe-go/v82"
)

// Destination is an event destination (ed_...) as Stripe describes it.
type Destination struct {
	ID string
	// URL is where it sends events, for a webhook destination; "" for an
	// Amazon EventBridge one.
	URL string
	// Status is "enabled" or "disabled"; DisabledReason says why when
	// Stripe gives a reason ("user": someone disabled it).
	Status         string
	DisabledReason string
	// Thin: it sends thin events; otherwise snapshot events, rendered in
	// APIVersion.
	Thin       bool
	APIVersion string
	// Connect: it sends the events of connected accounts (events_from
	// other_accounts).
	Connect       bool
	EnabledEvents []string
}

// Destination reads the event destination id (ed_...) from
// /v2/core/event_destinations, with its webhook URL.
func (c *Client) Destination(ctx context.Context, id string) (Destination, error) {
	var ed stripe.V2EventDestination
	err := c.call(ctx, func() error {
		ed = stripe.V2EventDestination{}
		return c.getV2(ctx, "/v2/core/event_destinations/"+url.PathEscape(id)+"?include=webhook_endpoint.url", &ed)
	})
	if err != nil {
		return Destination{}, describe(err, "event destination "+id,
			"check the label's stripe_id in HOOKD_ENDPOINTS, and that the key belongs to the same account and mode (live or test)",
			"Event Destinations")
	}
	d := Destination{ID: ed.ID, Status: string(ed.Status), Thin: ed.EventPayload == stripe.V2EventDestinationEventPayloadThin,
		APIVersion: ed.SnapshotAPIVersion, EnabledEvents: ed.EnabledEvents,
		Connect: slices.Contains(ed.EventsFrom, stripe.V2EventDestinationEventsFromOtherAccounts)}
	if ed.WebhookEndpoint != nil {
		d.URL = ed.WebhookEndpoint.URL
	}
	if ed.StatusDetails != nil && ed.StatusDetails.Disabled != nil {
		d.DisabledReason = string(ed.StatusDetails.Disabled.Reason)
	}
	return d, nil
}

// getV2 reads path from the v2 API into v. A v2 error answer becomes a
// *stripe.Error with its status, as stripe-go gives the v1 API's, so that
// call backs off a 429 and describe says what to do.
func (c *Client) getV2(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.cfg.URL, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Stripe-Version", stripe.APIVersion)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return &stripe.Error{HTTPStatusCode: resp.StatusCode, Msg: msg, Code: stripe.ErrorCode(e.Error.Code)}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("stripe sent %s that is not JSON: %w", path, err)
	}
	return nil
}
