package stripeapi_test

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
)

func newClient(api *stripetest.Server, key string) *stripeapi.Client {
	return stripeapi.New(stripeapi.Config{Key: key, URL: api.URL, PagePause: -1, RateLimitWait: time.Millisecond})
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	want := api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}, APIVersion: "2024-06-20", Status: "disabled"})
	got, err := newClient(api, api.Key()).Endpoint(t.Context(), want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.URL != want.URL || got.Status != "disabled" || got.APIVersion != "2024-06-20" ||
		!slices.Equal(got.EnabledEvents, want.EnabledEvents) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if !got.Receives("invoice.paid") || got.Receives("charge.succeeded") {
		t.Errorf("Receives does not follow enabled_events %v", got.EnabledEvents)
	}
	if all := (stripeapi.Endpoint{EnabledEvents: []string{"*"}}); !all.Receives("charge.succeeded") {
		t.Error(`"*" does not receive every type`)
	}
}

func TestErrorsSayWhatToFix(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	ep := api.AddEndpoint(stripetest.Endpoint{})
	for _, tc := range []struct {
		name   string
		key    string
		id     string
		deny   string
		status int
		want   string
	}{
		{"RejectedKey", "rk_test_wrong_key_1234", ep.ID, "", 401, "Stripe rejected STRIPE_API_KEY (401: Invalid API Key provided: rk_test_**********1234)"},
		{"UnknownEndpoint", "", "we_missing", "", 404, "Stripe has no webhook endpoint we_missing (404: No such webhook endpoint: 'we_missing'): check STRIPE_WEBHOOK_ENDPOINT_ID"},
		{"NoPermission", "", ep.ID, "/v1/webhook_endpoints", 403, "give the restricted key Read access to Webhook Endpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := stripetest.NewServer(t)
			api.AddEndpoint(ep)
			if tc.deny != "" {
				api.Deny(tc.deny)
			}
			key := tc.key
			if key == "" {
				key = api.Key()
			}
			_, err := newClient(api, key).Endpoint(t.Context(), tc.id)
			var ae *stripeapi.APIError
			if !errors.As(err, &ae) || ae.Status != tc.status || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a %d containing %q", err, tc.status, tc.want)
			}
			if tc.status == 404 && !errors.Is(err, stripeapi.ErrNotFound) {
				t.Errorf("a 404 is not ErrNotFound: %v", err)
			}
		})
	}
}

// With no answer from Stripe, the error says what failed without the
// request's URL: its query, and the user of an egress proxy in
// HOOKD_STRIPE_API_URL, would reach the dashboard's pages.
func TestNoAnswerErrorShowsNoURL(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there now
	c := stripeapi.New(stripeapi.Config{Key: "rk_test_abc", URL: "http://egress-user:egress-pass@" + addr,
		PagePause: -1, RateLimitWait: time.Millisecond})
	err = c.Events(t.Context(), time.Now().Add(-time.Hour), func([]stripeapi.Event) error { return nil })
	if err == nil {
		t.Fatal("no error from an address nothing answers")
	}
	if !strings.Contains(err.Error(), "read events from Stripe") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("the error %q does not say what failed", err)
	}
	for _, leak := range []string{"egress-user", "egress-pass", "limit=", "created"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("the error %q shows %q", err, leak)
		}
	}
}

func TestEventsPagesNewestFirstWithTheAPIsBytes(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	raws := map[string]string{}
	for i := range 205 {
		id, raw := api.AddEvent(stripetest.Event{Created: time.Now().Add(-time.Duration(i) * time.Minute)})
		raws[id] = string(raw)
	}
	api.AddEvent(stripetest.Event{Created: time.Now().Add(-48 * time.Hour)}) // before the window

	var sizes []int
	var last time.Time
	seen := map[string]bool{}
	err := newClient(api, api.Key()).Events(t.Context(), time.Now().Add(-24*time.Hour), func(page []stripeapi.Event) error {
		sizes = append(sizes, len(page))
		for _, e := range page {
			if !last.IsZero() && e.Created.After(last) {
				t.Errorf("%s is newer than the event before it", e.ID)
			}
			last = e.Created
			if string(e.Payload) != raws[e.ID] || seen[e.ID] {
				t.Errorf("%s: payload differs from the API's, or seen twice", e.ID)
			}
			seen[e.ID] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{100, 100, 5}) || len(seen) != 205 {
		t.Errorf("pages %v with %d events, want 100, 100, 5 with 205", sizes, len(seen))
	}
}

func TestEventReadsOneEvent(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	id, raw := api.AddEvent(stripetest.Event{Type: "customer.subscription.deleted", APIVersion: "2023-10-16"})
	e, err := newClient(api, api.Key()).Event(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != id || e.Type != "customer.subscription.deleted" || e.APIVersion != "2023-10-16" || string(e.Payload) != string(raw) {
		t.Errorf("got %+v", e)
	}
	if _, err := newClient(api, api.Key()).Event(t.Context(), "evt_gone"); !errors.Is(err, stripeapi.ErrNotFound) ||
		!strings.Contains(err.Error(), "Stripe keeps events for 30 days") {
		t.Errorf("unknown event: got %v", err)
	}
}

// A connected account's event is read under its Stripe-Account, and only
// there: Stripe answers 404 for it on the platform's own account.
func TestAccountEventReadsAConnectedAccountsEvent(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	id, raw := api.AddEvent(stripetest.Event{Type: "account.updated", Account: "acct_1Connected"})
	c := newClient(api, api.Key())
	e, err := c.AccountEvent(t.Context(), "acct_1Connected", id)
	if err != nil || e.ID != id || e.Account != "acct_1Connected" || string(e.Payload) != string(raw) {
		t.Errorf("under its account: got %+v, %v", e, err)
	}
	_, err = c.Event(t.Context(), id)
	if !errors.Is(err, stripeapi.ErrNotFound) {
		t.Errorf("on the platform's own account: got %v, want ErrNotFound", err)
	}
	_, err = c.AccountEvent(t.Context(), "acct_1Other", id)
	if !errors.Is(err, stripeapi.ErrNotFound) || !strings.Contains(err.Error(), "acct_1Other") ||
		!strings.Contains(err.Error(), "under the connected account they happened in") {
		t.Errorf("under another account: got %v, want ErrNotFound naming the account", err)
	}
}

func TestThinEventReadsOneThinEvent(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	id, raw := api.AddThinEvent(stripetest.ThinEvent{Type: "v1.invoice.paid"})
	c := newClient(api, api.Key())
	e, err := c.ThinEvent(t.Context(), "", id)
	if err != nil || e.ID != id || e.Type != "v1.invoice.paid" || string(e.Payload) != string(raw) {
		t.Errorf("got %+v, %v", e, err)
	}
	if _, err := c.ThinEvent(t.Context(), "", "evt_gone"); !errors.Is(err, stripeapi.ErrNotFound) ||
		!strings.Contains(err.Error(), "30 days") {
		t.Errorf("unknown thin event: got %v, want ErrNotFound and the 30 days", err)
	}
}

func TestRateLimitIsWaitedOut(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	ep := api.AddEndpoint(stripetest.Endpoint{})
	api.RateLimitNext(3)
	if _, err := newClient(api, api.Key()).Endpoint(t.Context(), ep.ID); err != nil {
		t.Fatalf("after three 429s: %v", err)
	}
	api.RateLimitNext(10)
	_, err := newClient(api, api.Key()).Endpoint(t.Context(), ep.ID)
	var ae *stripeapi.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || !strings.Contains(err.Error(), "try again later") {
		t.Errorf("after the retries ran out: got %v, want a 429 saying to try later", err)
	}
}
