package stripeapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
)

func TestDestination_StatusReasonMissingKeyAndRateLimit(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	thin := api.AddDestination(stripetest.Destination{Status: "disabled"})
	connect := api.AddDestination(stripetest.Destination{EventPayload: "snapshot", SnapshotAPIVersion: "2025-03-31.basil",
		EventsFrom: []string{"other_accounts"}, EnabledEvents: []string{"invoice.paid"}})
	c := newClient(api, api.Key())

	got, err := c.Destination(t.Context(), thin.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != thin.ID || got.URL != thin.URL || got.Status != "disabled" || got.DisabledReason != "user" || !got.Thin ||
		got.APIVersion != "" || got.Connect {
		t.Errorf("thin destination: got %+v", got)
	}
	got, err = c.Destination(t.Context(), connect.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "enabled" || got.Thin || got.APIVersion != "2025-03-31.basil" || !got.Connect ||
		len(got.EnabledEvents) != 1 {
		t.Errorf("Connect snapshot destination: got %+v", got)
	}

	_, err = c.Destination(t.Context(), "ed_missing")
	if !errors.Is(err, stripeapi.ErrNotFound) || !strings.Contains(err.Error(), "no event destination ed_missing (404") {
		t.Errorf("missing destination: %v", err)
	}
	_, err = newClient(api, "rk_test_wrong").Destination(t.Context(), thin.ID)
	if err == nil || !strings.Contains(err.Error(), "Stripe rejected STRIPE_API_KEY (401") {
		t.Errorf("rejected key: %v", err)
	}
	api.RateLimitNext(2)
	if _, err := c.Destination(t.Context(), thin.ID); err != nil {
		t.Errorf("a rate-limited read is not waited out: %v", err)
	}
	if n := api.Requests("/v2/core/event_destinations/" + thin.ID); n != 5 {
		t.Errorf("%d requests for the destination, want 5 (two reads, the refused key's, two 429s and the one that worked)", n)
	}
}
