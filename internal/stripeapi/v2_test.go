package stripeapi_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
)

// stripeGo is stripe-go's own client pointed at the fake.
func stripeGo(api *stripetest.Server) *stripe.Client {
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{URL: stripe.String(api.URL)})
	return stripe.NewClient(api.Key(), stripe.WithBackends(&stripe.Backends{API: backend}))
}

func TestFakeShapesDecodeWithStripeGo(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	sc := stripeGo(api)
	ctx := t.Context()

	t.Run("ThinEvents", func(t *testing.T) {
		var want []string
		for i := range 25 {
			id, _ := api.AddThinEvent(stripetest.ThinEvent{Created: time.Now().Add(-time.Duration(i) * time.Minute),
				SnapshotEvent: "evt_snapshot" + string(rune('a'+i))})
			want = append(want, id)
		}
		var got []string
		for ev, err := range sc.V2CoreEvents.List(ctx, &stripe.V2CoreEventListParams{Limit: stripe.Int64(10)}) {
			if err != nil {
				t.Fatal(err)
			}
			raw, ok := ev.(*stripe.V2RawEvent)
			if !ok {
				t.Fatalf("a v1.invoice.paid thin event decoded as %T", ev)
			}
			if raw.Object != "v2.core.event" || raw.Created.IsZero() || raw.RelatedObject == nil ||
				raw.RelatedObject.Type != "invoice" || !strings.HasPrefix(raw.RelatedObject.URL, "/v1/invoices/in_") ||
				raw.Reason == nil || raw.Reason.Request == nil {
				t.Errorf("decoded %+v", raw)
			}
			got = append(got, raw.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("listed %d events over 3 pages, want the 25 newest first: %v", len(got), got)
		}
		if n := api.Requests("/v2/core/events"); n != 3 {
			t.Errorf("pages requested: %d, want 3", n)
		}
		ev, err := sc.V2CoreEvents.Retrieve(ctx, want[0], nil)
		if err != nil || ev.(*stripe.V2RawEvent).ID != want[0] {
			t.Errorf("retrieve: %v, %v", ev, err)
		}
	})

	t.Run("Destination", func(t *testing.T) {
		d := api.AddDestination(stripetest.Destination{Status: "disabled", EventsFrom: []string{"other_accounts"}})
		got, err := sc.V2CoreEventDestinations.Retrieve(ctx, d.ID, &stripe.V2CoreEventDestinationRetrieveParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != d.ID || got.Status != stripe.V2EventDestinationStatusDisabled || got.EventPayload != stripe.V2EventDestinationEventPayloadThin ||
			got.StatusDetails == nil || got.StatusDetails.Disabled == nil || got.Created.IsZero() ||
			!slices.Equal(got.EventsFrom, []stripe.V2EventDestinationEventsFrom{"other_accounts"}) || got.WebhookEndpoint == nil {
			t.Errorf("decoded %+v", got)
		}
		n := 0
		for d, err := range sc.V2CoreEventDestinations.List(ctx, nil) {
			if err != nil || d.Object != "v2.core.event_destination" {
				t.Fatalf("list: %+v, %v", d, err)
			}
			n++
		}
		if n != 1 {
			t.Errorf("listed %d destinations, want 1", n)
		}
	})

	t.Run("Objects", func(t *testing.T) {
		for _, o := range []map[string]any{
			{"id": "in_dec", "object": "invoice", "status": "paid", "amount_paid": 2000, "customer": "cus_dec"},
			{"id": "cus_dec", "object": "customer", "email": "a@example.com"},
			{"id": "sub_dec", "object": "subscription", "status": "active"},
			{"id": "pi_dec", "object": "payment_intent", "status": "succeeded", "amount": 2000},
			{"id": "ch_dec", "object": "charge", "paid": true, "amount": 2000},
		} {
			api.PutObject("", o)
		}
		in, err := sc.V1Invoices.Retrieve(ctx, "in_dec", nil)
		if err != nil || in.Status != stripe.InvoiceStatusPaid || in.Customer.ID != "cus_dec" {
			t.Errorf("invoice: %+v, %v", in, err)
		}
		cus, err := sc.V1Customers.Retrieve(ctx, "cus_dec", nil)
		if err != nil || cus.Email != "a@example.com" {
			t.Errorf("customer: %+v, %v", cus, err)
		}
		sub, err := sc.V1Subscriptions.Retrieve(ctx, "sub_dec", nil)
		if err != nil || sub.Status != stripe.SubscriptionStatusActive {
			t.Errorf("subscription: %+v, %v", sub, err)
		}
		pi, err := sc.V1PaymentIntents.Retrieve(ctx, "pi_dec", nil)
		if err != nil || pi.Amount != 2000 {
			t.Errorf("payment intent: %+v, %v", pi, err)
		}
		ch, err := sc.V1Charges.Retrieve(ctx, "ch_dec", nil)
		if err != nil || !ch.Paid {
			t.Errorf("charge: %+v, %v", ch, err)
		}
		var se *stripe.Error
		if _, err := sc.V1Invoices.Retrieve(ctx, "in_missing", nil); !errors.As(err, &se) || se.HTTPStatusCode != 404 {
			t.Errorf("missing invoice: %v", err)
		}
	})

	t.Run("ConnectEvents", func(t *testing.T) {
		id, _ := api.AddEvent(stripetest.Event{Account: "acct_1Dec"})
		params := &stripe.EventListParams{}
		params.SetStripeAccount("acct_1Dec")
		var got []*stripe.Event
		for ev, err := range sc.V1Events.List(ctx, params) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev)
		}
		if len(got) != 1 || got[0].ID != id || got[0].Account != "acct_1Dec" {
			t.Errorf("the connected account's events: %+v", got)
		}
		for ev, err := range sc.V1Events.List(ctx, &stripe.EventListParams{}) {
			if err == nil && ev.ID == id {
				t.Errorf("the account's own list holds %s, a connected account's event", id)
			}
		}
	})

	t.Run("ReversionedEndpoint", func(t *testing.T) {
		ep := api.AddEndpoint(stripetest.Endpoint{})
		api.SetEndpointStatus(ep.ID, "disabled")
		api.SetEndpointAPIVersion(ep.ID, "2024-06-20")
		we, err := sc.V1WebhookEndpoints.Retrieve(ctx, ep.ID, nil)
		if err != nil || we.Status != "disabled" || we.APIVersion != "2024-06-20" {
			t.Errorf("endpoint: %+v, %v", we, err)
		}
	})
}

func TestThinEventsFilterAndPage(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	now := time.Now()
	raws := map[string]string{}
	for i := range 230 {
		typ := "v1.invoice.paid"
		if i%2 == 1 {
			typ = "v1.customer.updated"
		}
		id, raw := api.AddThinEvent(stripetest.ThinEvent{Type: typ, Created: now.Add(-time.Duration(i) * time.Minute)})
		raws[id] = string(raw)
	}
	api.AddThinEvent(stripetest.ThinEvent{Created: now.Add(-48 * time.Hour)})        // before the window
	api.AddThinEvent(stripetest.ThinEvent{Context: "acct_1Other", Created: now})     // another account's
	api.AddThinEvent(stripetest.ThinEvent{Type: "v1.charge.refunded", Created: now}) // another type

	var sizes []int
	seen := map[string]bool{}
	err := newClient(api, api.Key()).ThinEvents(t.Context(),
		stripeapi.ThinQuery{Since: now.Add(-24 * time.Hour), Types: []string{"v1.invoice.paid", "v1.customer.updated"}},
		func(page []stripeapi.Event) error {
			sizes = append(sizes, len(page))
			for _, e := range page {
				if string(e.Payload) != raws[e.ID] || seen[e.ID] || e.Created.IsZero() {
					t.Errorf("%s: payload differs from the API's, seen twice, or no created", e.ID)
				}
				seen[e.ID] = true
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{100, 100, 30}) || len(seen) != 230 {
		t.Errorf("pages %v with %d events, want 100, 100, 30 with 230", sizes, len(seen))
	}

	var theirs []string
	err = newClient(api, api.Key()).ThinEvents(t.Context(), stripeapi.ThinQuery{Since: now.Add(-time.Hour), Context: "acct_1Other"},
		func(page []stripeapi.Event) error {
			for _, e := range page {
				if e.Account != "acct_1Other" {
					t.Errorf("%s has context %q", e.ID, e.Account)
				}
				theirs = append(theirs, e.ID)
			}
			return nil
		})
	if err != nil || len(theirs) != 1 {
		t.Errorf("the connected account's thin events: %v, %v", theirs, err)
	}
}

func TestDestination(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	want := api.AddDestination(stripetest.Destination{EnabledEvents: []string{"v1.invoice.paid"}, EventsFrom: []string{"other_accounts"}})
	snap := api.AddDestination(stripetest.Destination{EventPayload: "snapshot", SnapshotAPIVersion: "2024-06-20", Status: "disabled"})
	c := newClient(api, api.Key())
	got, err := c.Destination(t.Context(), want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.URL != want.URL || !got.Thin || !got.Connect || got.Status != "enabled" || got.APIVersion != "" ||
		!got.Receives("v1.invoice.paid") || got.Receives("v1.charge.refunded") {
		t.Errorf("thin destination: got %+v", got)
	}
	got, err = c.Destination(t.Context(), snap.ID)
	if err != nil || got.Thin || got.Connect || got.Status != "disabled" || got.APIVersion != "2024-06-20" {
		t.Errorf("snapshot destination: got %+v, %v", got, err)
	}
	_, err = c.Destination(t.Context(), "ed_missing")
	var ae *stripeapi.APIError
	if !errors.Is(err, stripeapi.ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 ||
		!strings.Contains(err.Error(), "Stripe has no event destination ed_missing") {
		t.Errorf("unknown destination: got %v", err)
	}
}

func TestAccountEventsSendStripeAccount(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	mine, _ := api.AddEvent(stripetest.Event{})
	theirs, raw := api.AddEvent(stripetest.Event{Account: "acct_1Connected"})
	c := newClient(api, api.Key())
	list := func(account string) (ids []string) {
		err := c.AccountEvents(t.Context(), account, time.Now().Add(-time.Hour), func(page []stripeapi.Event) error {
			for _, e := range page {
				ids = append(ids, e.ID)
				if e.ID == theirs && (e.Account != "acct_1Connected" || string(e.Payload) != string(raw)) {
					t.Errorf("%s: account %q, or payload differs", e.ID, e.Account)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := list(""); !slices.Equal(got, []string{mine}) {
		t.Errorf("the account's own events: %v", got)
	}
	if got := list("acct_1Connected"); !slices.Equal(got, []string{theirs}) {
		t.Errorf("the connected account's events: %v", got)
	}
	if got := api.ListAccounts(); !slices.Equal(got, []string{"", "acct_1Connected"}) {
		t.Errorf("Stripe-Account headers sent: %q", got)
	}
}

func TestObjectByTypeAndByURL(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	api.PutObject("", map[string]any{"id": "in_now", "object": "invoice", "status": "paid"})
	api.PutObject("acct_1Conn", map[string]any{"id": "ch_conn", "object": "charge", "paid": true})
	_, thin := api.AddThinEvent(stripetest.ThinEvent{})
	c := newClient(api, api.Key())

	raw, err := c.Object(t.Context(), stripeapi.ObjectRef{Type: "invoice", ID: "in_now"})
	if err != nil || !strings.Contains(string(raw), `"status":"paid"`) {
		t.Errorf("by type and id: %s, %v", raw, err)
	}
	raw, err = c.Object(t.Context(), stripeapi.ObjectRef{Type: "charge", ID: "ch_conn", Account: "acct_1Conn"})
	if err != nil || !strings.Contains(string(raw), `"ch_conn"`) {
		t.Errorf("in a connected account: %s, %v", raw, err)
	}
	var ev stripe.V2RawEvent
	if err := json.Unmarshal(thin, &ev); err != nil {
		t.Fatal(err)
	}
	raw, err = c.Object(t.Context(), stripeapi.ObjectRef{URL: ev.RelatedObject.URL})
	if err != nil || !strings.Contains(string(raw), ev.RelatedObject.ID) {
		t.Errorf("by related_object.url: %s, %v", raw, err)
	}
	if _, err := c.Object(t.Context(), stripeapi.ObjectRef{Type: "invoice", ID: "in_gone"}); !errors.Is(err, stripeapi.ErrNotFound) {
		t.Errorf("missing object: %v", err)
	}
	for _, bad := range []stripeapi.ObjectRef{{URL: "https://evil.example/v1/x"}, {URL: "/v1/../admin"}, {Type: "mystery", ID: "x_1"}} {
		if _, err := c.Object(t.Context(), bad); err == nil {
			t.Errorf("%+v: fetched", bad)
		}
	}
	if n := api.TotalRequests(); n != 4 {
		t.Errorf("requests: %d, want 4 (a refused reference costs none)", n)
	}
}

// TestBudgetIsSharedByEveryClient: two clients on one budget, reading at
// once, never make more requests than the budget allows over the time they
// took, counted by the fake.
func TestBudgetIsSharedByEveryClient(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	ep := api.AddEndpoint(stripetest.Endpoint{})
	const perSecond = 40
	budget := stripeapi.NewBudget(perSecond)
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		c := stripeapi.New(stripeapi.Config{Key: api.Key(), URL: api.URL, Budget: budget, PagePause: -1})
		wg.Go(func() {
			for range 10 {
				if _, err := c.Endpoint(t.Context(), ep.ID); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := api.TotalRequests()
	if n != 20 {
		t.Fatalf("requests: %d, want 20", n)
	}
	if allowed := 1 + int(perSecond*elapsed.Seconds()); n > allowed {
		t.Errorf("%d requests in %s: more than the budget's %d", n, elapsed, allowed)
	}
}
