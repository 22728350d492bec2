package e2e

import (
	"net/url"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/internal/stripeapi/stripetest"
)

// stripeEnv is the settings that point hookd at a fake Stripe API whose
// endpoint receives invoice.paid.
func stripeEnv(t *testing.T, interval string) (*stripetest.Server, []string) {
	api := stripetest.NewServer(t)
	ep := api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
	return api, []string{
		"STRIPE_API_KEY=" + api.Key(),
		"STRIPE_WEBHOOK_ENDPOINT_ID=" + ep.ID,
		"HOOKD_STRIPE_API_URL=" + api.URL,
		"HOOKD_RECONCILE_INTERVAL=" + interval,
	}
}

func TestReconcileFromTheDashboard(t *testing.T) {
	t.Parallel()
	api, env := stripeEnv(t, "0")
	h := startHookd(t, env...)
	delivered, _ := h.sendEvent(t, "invoice.paid", `{"id":"in_e2e1","object":"invoice"}`)
	api.AddEvent(stripetest.Event{ID: delivered, Type: "invoice.paid", Created: time.Now().Add(-time.Hour)})
	var missing []string
	for i := range 3 {
		id, _ := api.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Duration(i+2) * time.Hour)})
		missing = append(missing, id)
	}
	api.AddEvent(stripetest.Event{Type: "charge.refunded", Created: time.Now().Add(-time.Hour)})

	page := h.newPage(t)
	h.signIn(t, page)
	must(t, expect.Locator(page.GetByTestId("reconcile-last-run")).ToHaveText("never"), "no run yet")

	step(t, "PreviewSaysWhatWouldBeRecovered", func(t *testing.T) {
		must(t, page.GetByLabel("Hours back").Fill("24"), "fill Hours back")
		click(t, pageButton(page, "Preview…"), "Preview…")
		must(t, expect.Locator(page.GetByTestId("reconcile-preview")).ToHaveText("Would recover 3 of 5 events"), "the dry run's counts")
		if n := h.count(t, `SELECT count(*) FROM processed_webhook_events`); n != 1 {
			t.Errorf("the preview changed the markers: %d, want 1", n)
		}
	})

	step(t, "TheRunRecoversThemAndIsAudited", func(t *testing.T) {
		click(t, pageButton(page, "Recover 3 events"), "Recover 3 events")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("recovered 3, queued 0"), "the run's summary")
		must(t, expect.Locator(page.GetByTestId("reconcile-recovered")).ToHaveText("recovered 3"), "the overview's last run")
		for _, id := range missing {
			if !h.downstream.seen(id) {
				t.Errorf("%s never reached the app", id)
			}
		}
		visit(t, page, "/audit")
		must(t, expect.Locator(page.Locator(`tr[data-testid="audit-row"]`).First()).ToContainText("reconciled with Stripe"), "the audit row")
	})

	step(t, "PullFromStripeAnEventWithNoTrace", func(t *testing.T) {
		id, _ := api.AddEvent(stripetest.Event{Type: "invoice.paid"})
		visit(t, page, "/search?"+url.Values{"q": {id}}.Encode())
		must(t, expect.Locator(page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "Never seen"})).ToBeVisible(), "no trace of it")
		click(t, pageButton(page, "Pull from Stripe"), "Pull from Stripe")
		must(t, expect.Locator(page.GetByTestId("flash")).ToHaveText(id+" pulled from Stripe and processed"), "pulled")
		must(t, expect.Locator(page.GetByTestId("search-how")).ToContainText("by reconciliation"), "search now says how")
		if !h.downstream.seen(id) {
			t.Errorf("%s never reached the app", id)
		}
	})
}

func TestScheduledReconcileShowsOnTheOverview(t *testing.T) {
	t.Parallel()
	api, env := stripeEnv(t, "1h")
	id, _ := api.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Hour)})
	h := startHookd(t, env...)
	page := h.newPage(t)
	h.signIn(t, page)
	must(t, expect.Locator(page.GetByTestId("reconcile-recovered")).ToHaveText("recovered 1"), "the schedule's first run, at start")
	if !h.downstream.seen(id) {
		t.Errorf("%s never reached the app", id)
	}
	if n := h.count(t, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1 AND path = 'reconcile'`, id); n != 1 {
		t.Errorf("reconcile attempts of %s: got %d, want 1", id, n)
	}
}
