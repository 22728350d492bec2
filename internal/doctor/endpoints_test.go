package doctor_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/doctor"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
)

// byCheck indexes results by their check's name.
func byCheck(t *testing.T, results []doctor.Result) map[string]doctor.Result {
	t.Helper()
	m := map[string]doctor.Result{}
	for _, r := range results {
		if _, dup := m[r.Check]; dup {
			t.Errorf("two lines named %q", r.Check)
		}
		m[r.Check] = r
	}
	return m
}

func TestEndpoints(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client := &http.Client{Timeout: 5 * time.Second}
	const public = "https://hooks.example.com"
	secret := "whsec_" + strings.Repeat("Ab1", 11)
	labelled := func(label string, change func(*endpoint.Endpoint)) endpoint.Endpoint {
		e := endpoint.New(label)
		e.Secrets = []string{secret + label}
		change(&e)
		return e
	}

	t.Run("EachKindCheckedOnItsOwnLines", func(t *testing.T) {
		t.Parallel()
		srv := stripetest.NewServer(t)
		we := srv.AddEndpoint(stripetest.Endpoint{APIVersion: "2025-03-31.basil"})
		thin := srv.AddDestination(stripetest.Destination{})
		connect := srv.AddDestination(stripetest.Destination{EventPayload: "snapshot", SnapshotAPIVersion: "2025-03-31.basil",
			EventsFrom: []string{"other_accounts"}})
		eps := []endpoint.Endpoint{
			labelled("account", func(e *endpoint.Endpoint) { e.StripeID = we.ID }),
			labelled("thin", func(e *endpoint.Endpoint) { e.StripeID, e.Kind = thin.ID, endpoint.Thin }),
			labelled("connect", func(e *endpoint.Endpoint) { e.StripeID, e.Connect = connect.ID, true }),
		}
		got := byCheck(t, doctor.Endpoints(ctx, doctor.Config{Endpoints: eps, StripeAPIKey: stripetest.DefaultKey,
			StripeAPIURL: srv.URL, HTTPClient: client, PublicURL: public}))
		if len(got) != 1+3*6 {
			t.Errorf("%d lines, want the key's and six per endpoint: %v", len(got), got)
		}
		expect(t, got["stripe api key"], doctor.OK, "restricted key, test mode")
		for _, label := range []string{"account", "thin", "connect"} {
			expect(t, got["signing secret "+label], doctor.OK, "shaped like Stripe's")
			expect(t, got["stripe endpoint "+label], doctor.OK, "is enabled and sends every event type")
			expect(t, got["public url "+label], doctor.OK, "this hookd's receiver")
			expect(t, got["endpoint kind "+label], doctor.OK, "as the label says")
			expect(t, got["endpoint declaration "+label], doctor.Skip, "cannot read what arrived")
		}
		expect(t, got["api version account"], doctor.OK, we.ID+" renders its events in 2025-03-31.basil")
		expect(t, got["api version thin"], doctor.OK, "sends thin events, which have no API version")
		expect(t, got["endpoint kind thin"], doctor.OK, "sends thin events")
		expect(t, got["endpoint kind connect"], doctor.OK, "snapshot events of connected accounts")
	})

	t.Run("WhatIsWrongAndWhatToDo", func(t *testing.T) {
		t.Parallel()
		srv := stripetest.NewServer(t)
		elsewhere := srv.AddEndpoint(stripetest.Endpoint{URL: "https://old.example.com/webhooks/stripe"})
		disabled := srv.AddDestination(stripetest.Destination{Status: "disabled"})
		snapshot := srv.AddDestination(stripetest.Destination{EventPayload: "snapshot", SnapshotAPIVersion: "2025-03-31.basil"})
		eps := []endpoint.Endpoint{
			// A we_ labelled thin: a webhook endpoint never sends thin events.
			labelled("account", func(e *endpoint.Endpoint) { e.StripeID, e.Kind = elsewhere.ID, endpoint.Thin }),
			labelled("thin", func(e *endpoint.Endpoint) { e.StripeID, e.Kind = disabled.ID, endpoint.Thin }),
			// A snapshot destination labelled thin and Connect.
			labelled("connect", func(e *endpoint.Endpoint) { e.StripeID, e.Kind, e.Connect = snapshot.ID, endpoint.Thin, true }),
			labelled("gone", func(e *endpoint.Endpoint) { e.StripeID = "we_missing" }),
			labelled("unset", func(e *endpoint.Endpoint) { e.Secrets = []string{"whsec_cut"} }),
		}
		got := byCheck(t, doctor.Endpoints(ctx, doctor.Config{Endpoints: eps, StripeAPIKey: stripetest.DefaultKey,
			StripeAPIURL: srv.URL, HTTPClient: client, PublicURL: public}))
		expect(t, got["public url account"], doctor.Warn, "sends to https://old.example.com/webhooks/stripe",
			"not to this hookd's receiver https://hooks.example.com/webhooks/stripe")
		expect(t, got["api version account"], doctor.OK, "follows the account's default version", "pin a version")
		expect(t, got["endpoint kind account"], doctor.Fail, "sends snapshot events", "says kind=thin", "ed_")
		expect(t, got["stripe endpoint thin"], doctor.Fail, disabled.ID+" is disabled", "hookd reconcile")
		expect(t, got["endpoint kind connect"], doctor.Fail, "sends snapshot events", "kind=snapshot")
		expect(t, got["stripe endpoint gone"], doctor.Fail, "no webhook endpoint we_missing (404")
		expect(t, got["signing secret unset"], doctor.Warn, "not shaped like Stripe's")
		expect(t, got["stripe endpoint unset"], doctor.Warn, "no stripe_id", "HOOKD_ENDPOINTS unset:stripe_id=")
		if _, ok := got["public url unset"]; ok {
			t.Error("an endpoint without a stripe_id got lines of what Stripe says")
		}

		// Right kind, wrong accounts.
		srv.UpdateDestination(snapshot.ID, func(d *stripetest.Destination) { d.EventsFrom = []string{"self"} })
		eps[2].Kind = endpoint.Snapshot
		got = byCheck(t, doctor.Endpoints(ctx, doctor.Config{Endpoints: eps[2:3], StripeAPIKey: stripetest.DefaultKey,
			StripeAPIURL: srv.URL, HTTPClient: client}))
		expect(t, got["endpoint kind connect"], doctor.Warn, "the account's own events", "connect=true", "connect:connect=false")
		expect(t, got["public url connect"], doctor.Skip, "set HOOKD_PUBLIC_URL")
	})

	t.Run("ARefusedKeyFailsOnceAndSkipsTheReads", func(t *testing.T) {
		t.Parallel()
		srv := stripetest.NewServer(t)
		thin := srv.AddDestination(stripetest.Destination{})
		eps := []endpoint.Endpoint{labelled("thin", func(e *endpoint.Endpoint) { e.StripeID, e.Kind = thin.ID, endpoint.Thin })}
		got := byCheck(t, doctor.Endpoints(ctx, doctor.Config{Endpoints: eps, StripeAPIKey: "rk_test_wrong",
			StripeAPIURL: srv.URL, HTTPClient: client}))
		expect(t, got["stripe api key"], doctor.Fail, "Stripe rejected STRIPE_API_KEY (401")
		expect(t, got["stripe endpoint thin"], doctor.Skip, "the key was refused")
	})

	t.Run("TheOneEndpointFormKeepsItsLines", func(t *testing.T) {
		t.Parallel()
		srv := stripetest.NewServer(t)
		we := srv.AddEndpoint(stripetest.Endpoint{})
		e := endpoint.New(endpoint.DefaultLabel)
		e.Secrets, e.StripeID = []string{secret}, we.ID
		got := byCheck(t, doctor.Endpoints(ctx, doctor.Config{Endpoints: []endpoint.Endpoint{e},
			StripeAPIKey: stripetest.DefaultKey, StripeAPIURL: srv.URL, HTTPClient: client}))
		expect(t, got["signing secret"], doctor.OK)
		expect(t, got["stripe endpoint"], doctor.OK, we.ID+" is enabled")
	})
}

// A declaration that contradicts what arrived through its endpoint is a
// failing line, which passes once the declaration says what arrives; an
// endpoint HOOKD_ENDPOINTS does not name learns instead.
func TestEndpoints_DeclarationAgainstWhatArrived(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, label := range []string{"account", "learned"} {
		if _, err := b.pool.Exec(t.Context(), `INSERT INTO endpoint_activity (endpoint, account, last_event_at, last_thin_at)
			VALUES ($1, 'acct_1A', now(), now())`, label); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(settings string) map[string]doctor.Result {
		eps, err := endpoint.ParseSecrets("account=whsec_a;learned=whsec_l")
		if err != nil {
			t.Fatal(err)
		}
		if err := endpoint.Configure(eps, settings); err != nil {
			t.Fatal(err)
		}
		return byCheck(t, doctor.Endpoints(t.Context(), doctor.Config{Endpoints: eps, DatabaseURL: b.url}))
	}
	got := lines("account:test_events=forward")
	expect(t, got["endpoint declaration account"], doctor.Fail,
		"endpoint `account` receives thin events but is not declared `kind=thin`",
		"endpoint `account` receives Connect events but is not declared `connect=true`: reconciliation lists no connected account for it")
	expect(t, got["endpoint declaration learned"], doctor.OK, "does not declare it", "thin, Connect")

	got = lines("account:kind=thin,connect=true")
	expect(t, got["endpoint declaration account"], doctor.OK, "declared thin, Connect")
}
