package maintenance_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/store/ungenerated"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/stripehealth"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/maintenance"
)

// watched is three labelled endpoints at a fake Stripe: a snapshot webhook
// endpoint, a thin event destination and a Connect endpoint.
type watched struct {
	stripe                 *stripetest.Server
	account, thin, connect string // their stripe ids
	endpoints              []endpoint.Endpoint
}

const versionA, versionB = "2025-03-31.basil", "2025-06-30.basil"

func newWatched(t *testing.T) watched {
	s := stripetest.NewServer(t)
	w := watched{stripe: s,
		account: s.AddEndpoint(stripetest.Endpoint{APIVersion: versionA}).ID,
		thin:    s.AddDestination(stripetest.Destination{}).ID,
		connect: s.AddEndpoint(stripetest.Endpoint{APIVersion: versionA}).ID,
	}
	account, thin, connect := endpoint.New("account"), endpoint.New("thin"), endpoint.New("connect")
	account.StripeID, account.Quiet = w.account, time.Hour
	thin.StripeID, thin.Kind = w.thin, endpoint.Thin
	connect.StripeID, connect.Connect = w.connect, true
	w.endpoints = []endpoint.Endpoint{account, thin, connect}
	return w
}

func (w watched) config(url string) maintenance.AlerterConfig {
	cfg := alerterConfig(url)
	cfg.Endpoints = w.endpoints
	cfg.Stripe = stripeapi.New(stripeapi.Config{Key: w.stripe.Key(), URL: w.stripe.URL, RateLimitWait: time.Millisecond})
	// Every check reads Stripe again, so the tests' flips are seen at once.
	cfg.WatchInterval = time.Nanosecond
	return cfg
}

// eventArrived records an event through label at the database's now minus
// ago, as the receiver does.
func eventArrived(t *testing.T, exec func(string, ...any), label string, ago time.Duration) {
	t.Helper()
	exec(`INSERT INTO endpoint_activity (endpoint, account, last_event_at) VALUES ($1, '', now() - make_interval(secs => $2))
		ON CONFLICT (endpoint, account) DO UPDATE SET last_event_at = excluded.last_event_at`, label, ago.Seconds())
}

func TestWatch(t *testing.T) {
	t.Parallel()

	t.Run("EachConditionAlertsOnceWhenItStartsAndOnceWhenItClears", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		run := func(sql string, args ...any) { exec(t, bundle.pool, sql, args...) }
		hook := newIncomingWebhook(t)
		w := newWatched(t)
		a := maintenance.NewAlerter(bundle.store, discardLogger, w.config(hook.srv.URL))
		eventArrived(t, run, "account", 0)
		runAlerter(t, a)
		check(t, a)
		if got := hook.received(); len(got) != 0 {
			t.Fatalf("alerts with every endpoint healthy: %q", got)
		}
		n := 0
		expectAlert := func(parts ...string) {
			t.Helper()
			n++
			texts := hook.waitTexts(t, n)
			wantContains(t, texts[n-1], parts...)
		}

		// (1) Stripe disables the snapshot endpoint and the destination.
		w.stripe.UpdateEndpoint(w.account, func(e *stripetest.Endpoint) { e.Status = "disabled" })
		w.stripe.UpdateDestination(w.thin, func(d *stripetest.Destination) { d.Status = "disabled" })
		check(t, a)
		check(t, a)
		texts := hook.waitTexts(t, 2)
		n = 2
		wantContains(t, strings.Join(texts, "\n"), "Stripe has disabled endpoint account ("+w.account+")",
			"Stripe has disabled endpoint thin ("+w.thin+")", "hookd reconcile")
		w.stripe.UpdateEndpoint(w.account, func(e *stripetest.Endpoint) { e.Status = "enabled" })
		w.stripe.UpdateDestination(w.thin, func(d *stripetest.Destination) { d.Status = "enabled" })
		check(t, a)
		check(t, a)
		texts = hook.waitTexts(t, 4)
		n = 4
		wantContains(t, strings.Join(texts[2:], "\n"), "cleared: endpoint account ("+w.account+") is enabled",
			"cleared: endpoint thin ("+w.thin+") is enabled")

		// (2) Someone changes the Connect endpoint's API version; the
		// next event through it is in the new version, so the app now
		// gets it.
		w.stripe.UpdateEndpoint(w.connect, func(e *stripetest.Endpoint) { e.APIVersion = versionB })
		check(t, a)
		check(t, a)
		expectAlert("API version of endpoint connect ("+w.connect+") is "+versionB, "getting "+versionA)
		eventArrived(t, run, "connect", 0)
		check(t, a)
		check(t, a)
		expectAlert("cleared: the events of endpoint connect", "are in "+versionB)

		// (3) The account endpoint falls quiet for longer than its hour.
		eventArrived(t, run, "account", 2*time.Hour)
		check(t, a)
		check(t, a)
		expectAlert("no event has come through endpoint account for 1 h")
		eventArrived(t, run, "account", 0)
		check(t, a)
		expectAlert("cleared: events come through endpoint account again")

		// (4) Stripe says it could not generate an event.
		notices := stripehealth.Processor(worker.Discard, ungenerated.New(bundle.pool))
		id := stripeevent.NewID("evt")
		if res := notices.Process(t.Context(), worker.Delivery{EventID: id, EventType: stripeevent.GenerationFailureType,
			Payload: stripeevent.GenerationFailure(id)}); res.Err != nil {
			t.Fatal(res.Err)
		}
		check(t, a)
		check(t, a)
		expectAlert("Stripe could not generate 1 event", id, "no reconciliation can recover them",
			"https://hooks.example.com/failures")
		run(`UPDATE alert_conditions SET last_seen_at = now() - interval '2 hours' WHERE condition = 'generation_failures'`)
		check(t, a)
		expectAlert("cleared: no event-generation failure for 1 h", "1 event since")

		check(t, a)
		if got := hook.received(); len(got) != n {
			t.Errorf("got %d alerts, want %d: %q", len(got), n, got[n:])
		}
	})

	t.Run("AVersionDifferingFromRecentEventsAlerts", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		hook := newIncomingWebhook(t)
		w := newWatched(t)
		// A failed event through the account endpoint, in an older version.
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusFailed, Attempts: 1})
		exec(t, bundle.pool, `UPDATE webhook_events SET endpoint = 'account', api_version = '2024-06-20'`)
		a := maintenance.NewAlerter(bundle.store, discardLogger, w.config(hook.srv.URL))
		runAlerter(t, a)
		texts := hook.waitTexts(t, 1)
		wantContains(t, texts[0], "API version of endpoint account ("+w.account+") is "+versionA, "getting 2024-06-20")
	})

	t.Run("ReplicasReadStripeOncePerIntervalAndAnnounceOnce", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		hook := newIncomingWebhook(t)
		w := newWatched(t)
		w.stripe.UpdateEndpoint(w.account, func(e *stripetest.Endpoint) { e.Status = "disabled" })
		cfg := w.config(hook.srv.URL)
		cfg.WatchInterval = time.Hour
		replicas := []*maintenance.Alerter{
			maintenance.NewAlerter(bundle.store, discardLogger, cfg),
			maintenance.NewAlerter(queue.New(bundle.pool), discardLogger, cfg),
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				<-start
				if err := replicas[i%2].Check(context.Background()); err != nil {
					t.Errorf("check: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		for _, r := range replicas {
			runAlerter(t, r)()
		}
		for _, id := range []string{w.account, w.connect} {
			if got := w.stripe.Requests("/v1/webhook_endpoints/" + id); got != 1 {
				t.Errorf("%s read %d times by 18 checks within one interval, want 1", id, got)
			}
		}
		if got := w.stripe.Requests("/v2/core/event_destinations/" + w.thin); got != 1 {
			t.Errorf("%s read %d times, want 1", w.thin, got)
		}
		texts := hook.received()
		if len(texts) != 1 || !strings.Contains(texts[0], "disabled endpoint account") {
			t.Errorf("alerts: %q, want the one of the disabled endpoint", texts)
		}
	})
}

// An endpoint whose declaration contradicts what arrives through it raises
// one alert, which clears once the declaration is fixed; an endpoint that
// declares nothing learns instead, and raises none.
func TestWatch_DeclarationContradictedByWhatArrives(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	run := func(sql string, args ...any) { exec(t, bundle.pool, sql, args...) }
	hook := newIncomingWebhook(t)
	declared := func(settings string) []endpoint.Endpoint {
		eps, err := endpoint.ParseSecrets("account=whsec_a;learned=whsec_l")
		if err != nil {
			t.Fatal(err)
		}
		if err := endpoint.Configure(eps, settings); err != nil {
			t.Fatal(err)
		}
		return eps
	}
	// account is declared (not Connect); learned is not named at all.
	// Both bring events of a connected account.
	for _, label := range []string{"account", "learned"} {
		run(`INSERT INTO endpoint_activity (endpoint, account, last_event_at, last_snapshot_at)
			VALUES ($1, 'acct_1A', now(), now())`, label)
	}
	cfg := alerterConfig(hook.srv.URL)
	cfg.Endpoints = declared("account:stripe_id=we_1")
	a := maintenance.NewAlerter(bundle.store, discardLogger, cfg)
	stop := runAlerter(t, a)
	check(t, a)
	check(t, a)
	texts := hook.waitTexts(t, 1)
	wantContains(t, texts[0], "endpoint `account` receives Connect events but is not declared `connect=true`: "+
		"reconciliation lists no connected account for it", "still accepted",
		"https://hooks.example.com/events?endpoint=account")
	if strings.Contains(texts[0], "learned") {
		t.Errorf("the alert names the endpoint that declares nothing: %q", texts[0])
	}

	// The replica with the old declaration stops before the fixed one
	// starts, as a redeploy does: a check of its own still running would
	// hold the condition's row, and the fixed replica's checks, which skip
	// a row another replica is checking, would then see nothing to clear.
	stop()
	cfg.Endpoints = declared("account:stripe_id=we_1,connect=true")
	fixed := maintenance.NewAlerter(bundle.store, discardLogger, cfg)
	runAlerter(t, fixed)
	check(t, fixed)
	check(t, fixed)
	texts = hook.waitTexts(t, 2)
	wantContains(t, texts[1], "cleared: what arrives through endpoint account is what HOOKD_ENDPOINTS declares")
}
