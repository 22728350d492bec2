package reconcile_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker/reconcile"
)

// sawAccount records that hookd received an event from account through the
// endpoint labelled label at, in endpoint_activity.
func sawAccount(t *testing.T, pool *pgxpool.Pool, label, account string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO endpoint_activity (endpoint, account, last_event_at) VALUES ($1, $2, $3)
		ON CONFLICT (endpoint, account) DO UPDATE SET last_event_at = excluded.last_event_at`, label, account, at); err != nil {
		t.Fatal(err)
	}
}

// kindsSetup is a database and a fake Stripe API with an account endpoint,
// a thin destination and a Connect endpoint, each labelled.
type kindsSetup struct {
	*bundle
	account, connect stripetest.Endpoint
	thin             stripetest.Destination
	endpoints        []endpoint.Endpoint
}

func setupKinds(t *testing.T) *kindsSetup {
	t.Helper()
	store, pool := queuetest.NewStore(t)
	k := &kindsSetup{bundle: &bundle{store: store, pool: pool, api: stripetest.NewServer(t), app: newApp()}}
	k.key = k.api.Key()
	k.account = k.api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
	k.connect = k.api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
	k.thin = k.api.AddDestination(stripetest.Destination{EnabledEvents: []string{"v1.invoice.paid"}})
	k.endpoints = []endpoint.Endpoint{
		{Label: "account", Kind: endpoint.Snapshot, StripeID: k.account.ID},
		{Label: "connect", Kind: endpoint.Snapshot, Connect: true, StripeID: k.connect.ID},
		{Label: "thin", Kind: endpoint.Thin, StripeID: k.thin.ID},
		{Label: "sandbox", Kind: endpoint.Snapshot}, // no Stripe id: not reconciled
	}
	return k
}

func (k *kindsSetup) reconciler(cfg reconcile.Config) *reconcile.Reconciler {
	if cfg.Client == nil {
		cfg.Client = stripeapi.New(stripeapi.Config{Key: k.key, URL: k.api.URL, PagePause: -1, RateLimitWait: time.Millisecond})
	}
	cfg.Endpoints = k.endpoints
	// The receiver knows the same endpoints, so a recovered event is
	// recorded as having come through the one that listed it.
	eps := slices.Clone(k.endpoints)
	for i := range eps {
		eps[i].Secrets = []string{testSecret + "_" + eps[i].Label}
	}
	return reconcile.New(k.store, receiver.New(k.store, discardLogger, receiver.Config{
		Endpoints: eps, Processor: k.app}), discardLogger, cfg)
}

func TestRunOnce_EveryKindOfEndpoint(t *testing.T) {
	t.Parallel()

	t.Run("AnEndpointThatDeclaresNothingAndReceivesThinEventsIsReadThroughV2", func(t *testing.T) {
		t.Parallel()
		k := setupKinds(t)
		// The thin destination is not named in HOOKD_ENDPOINTS: its
		// kind is left at the default, and learned from what arrives.
		k.endpoints[2] = endpoint.Endpoint{Label: "thin", Kind: endpoint.Snapshot, StripeID: k.thin.ID, Undeclared: true}
		if _, err := k.pool.Exec(t.Context(), `INSERT INTO endpoint_activity (endpoint, account, last_event_at, last_thin_at)
			VALUES ('thin', '', now(), now())`); err != nil {
			t.Fatal(err)
		}
		missed, _ := k.api.AddThinEvent(stripetest.ThinEvent{Type: "v1.invoice.paid", Created: time.Now().Add(-time.Hour)})
		res, err := k.reconciler(reconcile.Config{}).RunOnce(t.Context(), reconcile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Recovered != 1 || k.app.times(missed) != 1 {
			t.Fatalf("recovered %d, app got %s %d times; want 1, once (%s)", res.Recovered, missed, k.app.times(missed), res.Summary())
		}
		if n := k.api.Requests("/v2/core/events"); n != 1 {
			t.Errorf("v2 list requests: %d, want 1", n)
		}
	})

	t.Run("RecoversAMissedThinEvent", func(t *testing.T) {
		t.Parallel()
		k := setupKinds(t)
		missed, raw := k.api.AddThinEvent(stripetest.ThinEvent{Type: "v1.invoice.paid", Created: time.Now().Add(-time.Hour)})
		k.api.AddThinEvent(stripetest.ThinEvent{Type: "v1.charge.refunded", Created: time.Now().Add(-time.Hour)})
		res, err := k.reconciler(reconcile.Config{}).RunOnce(t.Context(), reconcile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Recovered != 1 || k.app.times(missed) != 1 {
			t.Fatalf("recovered %d, app got %s %d times; want 1, once (%s)", res.Recovered, missed, k.app.times(missed), res.Summary())
		}
		if got := k.app.payload[missed]; got != string(raw) {
			t.Errorf("the app got\n%s\nwant the API's bytes\n%s", got, raw)
		}
		// Stripe was asked for the destination's types only.
		if n := k.api.Requests("/v2/core/events"); n != 1 {
			t.Errorf("v2 list requests: %d, want 1", n)
		}
		again, err := k.reconciler(reconcile.Config{}).RunOnce(t.Context(), reconcile.Options{})
		if err != nil || again.Recovered != 0 || again.AlreadyProcessed != 1 || k.app.times(missed) != 1 {
			t.Errorf("second run: %s, %v; app got %s %d times", again.Summary(), err, missed, k.app.times(missed))
		}
	})

	t.Run("RecoversAMissedConnectEventOfASeenAccount", func(t *testing.T) {
		t.Parallel()
		k := setupKinds(t)
		sawAccount(t, k.pool, "connect", "acct_1Seen", time.Now().Add(-2*time.Hour))
		sawAccount(t, k.pool, "connect", "acct_1LongAgo", time.Now().Add(-30*24*time.Hour)) // before the window
		sawAccount(t, k.pool, "account", "acct_1OtherEndpoint", time.Now())                 // not a Connect endpoint's
		seen, _ := k.api.AddEvent(stripetest.Event{Account: "acct_1Seen", Created: time.Now().Add(-time.Hour)})
		configured, _ := k.api.AddEvent(stripetest.Event{Account: "acct_1Configured", Created: time.Now().Add(-time.Hour)})
		unknown, _ := k.api.AddEvent(stripetest.Event{Account: "acct_1Unknown", Created: time.Now().Add(-time.Hour)})
		own, _ := k.api.AddEvent(stripetest.Event{Created: time.Now().Add(-time.Hour)})

		res, err := k.reconciler(reconcile.Config{Accounts: []string{"acct_1Configured"}}).RunOnce(t.Context(), reconcile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{seen, configured, own} {
			if k.app.times(id) != 1 {
				t.Errorf("%s reached the app %d times, want once", id, k.app.times(id))
			}
		}
		if k.app.times(unknown) != 0 {
			t.Errorf("%s, of an account hookd never saw nor was told of, was recovered", unknown)
		}
		if res.Recovered != 3 {
			t.Errorf("recovered %d, want 3: %s", res.Recovered, res.Summary())
		}
		// The account's own events once for the account endpoint, then
		// the Connect endpoint's accounts one by one, in order.
		if got := k.api.ListAccounts(); !slices.Equal(got, []string{"", "acct_1Configured", "acct_1Seen"}) {
			t.Errorf("Stripe-Account of each /v1/events list: %q", got)
		}
		var connect reconcile.Surveyed
		for _, s := range res.Endpoints {
			if s.Label == "connect" {
				connect = s
			}
		}
		if !slices.Equal(connect.Accounts, []string{"acct_1Configured", "acct_1Seen"}) {
			t.Errorf("the Connect endpoint's accounts: %v", connect.Accounts)
		}
	})

	t.Run("AnEventTwoEndpointsListIsCountedOnce", func(t *testing.T) {
		t.Parallel()
		k := setupKinds(t)
		snapshotDest := k.api.AddDestination(stripetest.Destination{EventPayload: "snapshot", EnabledEvents: []string{"invoice.paid"}})
		k.endpoints = append(k.endpoints, endpoint.Endpoint{Label: "dest", Kind: endpoint.Snapshot, StripeID: snapshotDest.ID})
		id, _ := k.api.AddEvent(stripetest.Event{Created: time.Now().Add(-time.Hour)})
		res, err := k.reconciler(reconcile.Config{}).RunOnce(t.Context(), reconcile.Options{})
		if err != nil || res.Examined != 1 || res.Recovered != 1 || k.app.times(id) != 1 {
			t.Errorf("%s, %v; app got it %d times", res.Summary(), err, k.app.times(id))
		}
	})

	t.Run("AKindStripeContradictsIsRefusedBeforeAnyListing", func(t *testing.T) {
		t.Parallel()
		k := setupKinds(t)
		k.endpoints[2].Kind = endpoint.Snapshot // the thin destination labelled snapshot
		k.api.AddEvent(stripetest.Event{Created: time.Now().Add(-time.Hour)})
		_, err := k.reconciler(reconcile.Config{}).RunOnce(t.Context(), reconcile.Options{})
		if err == nil || k.app.total() != 0 || k.api.Requests("/v1/events") != 0 {
			t.Errorf("got %v, app calls %d, lists %d; want an error before any listing", err, k.app.total(), k.api.Requests("/v1/events"))
		}
	})

	t.Run("DisabledEndpointIsReported", func(t *testing.T) {
		t.Parallel()
		k := setupKinds(t)
		k.api.SetDestinationStatus(k.thin.ID, "disabled")
		res, err := k.reconciler(reconcile.Config{}).RunOnce(t.Context(), reconcile.Options{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Disabled(); len(d) != 1 || d[0].Label != "thin" || d[0].StripeID != k.thin.ID {
			t.Errorf("disabled: %+v", d)
		}
	})
}

// TestRunOnce_StaysWithinTheBudget: a survey over three kinds of endpoint and
// many pages, with the dashboard's fetches on the same budget at once,
// never asks Stripe for more than the budget allows over the time it took,
// counted by the fake.
func TestRunOnce_StaysWithinTheBudget(t *testing.T) {
	t.Parallel()
	k := setupKinds(t)
	sawAccount(t, k.pool, "connect", "acct_1Budget", time.Now().Add(-time.Hour))
	for i := range 250 {
		at := time.Now().Add(-time.Hour - time.Duration(i)*time.Second)
		k.api.AddEvent(stripetest.Event{Created: at})
		k.api.AddEvent(stripetest.Event{Account: "acct_1Budget", Created: at})
		k.api.AddThinEvent(stripetest.ThinEvent{Created: at})
	}
	k.api.PutObject("", map[string]any{"id": "in_budget", "object": "invoice"})
	const perSecond = 25
	budget := stripeapi.NewBudget(perSecond)
	client := func() *stripeapi.Client {
		return stripeapi.New(stripeapi.Config{Key: k.key, URL: k.api.URL, PagePause: -1, Budget: budget})
	}
	start := time.Now()
	dashboard := make(chan error, 1)
	go func() {
		c := client()
		for range 5 {
			if _, err := c.Object(context.Background(), stripeapi.ObjectRef{Type: "invoice", ID: "in_budget"}); err != nil {
				dashboard <- err
				return
			}
		}
		dashboard <- nil
	}()
	// A dry run: only the reads of Stripe's API take its time, so the
	// bound below is as tight as the budget.
	res, err := k.reconciler(reconcile.Config{Client: client()}).RunOnce(t.Context(), reconcile.Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-dashboard; err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if res.Recovered != 750 {
		t.Errorf("recovered %d, want 750: %s", res.Recovered, res.Summary())
	}
	// 3 endpoints read, 3 pages of each list, 5 fetches.
	n := k.api.TotalRequests()
	if n != 3+3*3+5 {
		t.Errorf("requests: %d, want %d", n, 3+3*3+5)
	}
	if allowed := 1 + int(perSecond*elapsed.Seconds()); n > allowed {
		t.Errorf("%d requests in %s: more than the budget's %d", n, elapsed, allowed)
	}
}

// A person pulls one event of a connected account: it is read under the
// account's Stripe-Account and recorded as having come through the Connect
// endpoint; the same id is not the platform's own.
func TestPull_AConnectedAccountsEvent(t *testing.T) {
	t.Parallel()
	k := setupKinds(t)
	id, _ := k.api.AddEvent(stripetest.Event{Account: "acct_1Pulled", Created: time.Now().Add(-time.Hour)})
	r := k.reconciler(reconcile.Config{})

	if _, err := r.Pull(t.Context(), id, ""); !errors.Is(err, stripeapi.ErrNotFound) {
		t.Errorf("pulled as the platform's own: got %v, want ErrNotFound", err)
	}
	p, err := r.Pull(t.Context(), id, "acct_1Pulled")
	if err != nil || p.Outcome != receiver.Processed || p.Event.Account != "acct_1Pulled" {
		t.Fatalf("pulled under its account: %+v, %v; want processed", p, err)
	}
	if k.app.times(id) != 1 {
		t.Errorf("%s reached the app %d times, want once", id, k.app.times(id))
	}
	var label, account string
	if err := k.pool.QueryRow(t.Context(), `SELECT endpoint, account FROM event_log WHERE event_id = $1`, id).
		Scan(&label, &account); err != nil || label != "connect" || account != "acct_1Pulled" {
		t.Errorf("its event log row: endpoint %q, account %q, %v; want the Connect endpoint's, acct_1Pulled", label, account, err)
	}
}

// Without a Connect endpoint that hookd reconciles, an account's event is
// refused before Stripe is asked for it.
func TestPull_AnAccountsEventWithoutAConnectEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, reconcile.Config{})
	id, _ := b.api.AddEvent(stripetest.Event{Account: "acct_1Pulled"})
	_, err := b.r.Pull(t.Context(), id, "acct_1Pulled")
	if !errors.Is(err, reconcile.ErrNotReceived) || !strings.Contains(err.Error(), "connect=true") {
		t.Errorf("got %v, want ErrNotReceived saying how to configure a Connect endpoint", err)
	}
	if b.app.total() != 0 {
		t.Errorf("app calls: got %d, want 0", b.app.total())
	}
}

// A person pulls one thin event: /v1/events has no such event, so it is
// read from /v2/core/events and recorded as having come through the thin
// destination, with the API's exact bytes.
func TestPull_AThinEvent(t *testing.T) {
	t.Parallel()
	k := setupKinds(t)
	id, raw := k.api.AddThinEvent(stripetest.ThinEvent{Type: "v1.invoice.paid", Created: time.Now().Add(-time.Hour)})
	other, _ := k.api.AddThinEvent(stripetest.ThinEvent{Type: "v1.charge.refunded"})
	r := k.reconciler(reconcile.Config{})

	p, err := r.Pull(t.Context(), id, "")
	if err != nil || p.Outcome != receiver.Processed {
		t.Fatalf("pulled: %+v, %v; want processed", p, err)
	}
	if k.app.times(id) != 1 || k.app.payload[id] != string(raw) {
		t.Errorf("the app got %s %d times, as\n%s\nwant once, as the API's bytes\n%s", id, k.app.times(id), k.app.payload[id], raw)
	}
	var label string
	if err := k.pool.QueryRow(t.Context(), `SELECT endpoint FROM event_log WHERE event_id = $1`, id).Scan(&label); err != nil || label != "thin" {
		t.Errorf("its event log row's endpoint: %q, %v; want thin", label, err)
	}
	if _, err := r.Pull(t.Context(), other, ""); !errors.Is(err, reconcile.ErrNotReceived) {
		t.Errorf("a thin event of a type the destination does not receive: got %v, want ErrNotReceived", err)
	}
	if _, err := r.Pull(t.Context(), "evt_nowhere", ""); !errors.Is(err, stripeapi.ErrNotFound) {
		t.Errorf("an id neither API has: got %v, want ErrNotFound", err)
	}
}
