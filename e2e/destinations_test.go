package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/queue/queuetest"
)

// TestDestinations: hookd delivers to two apps from a destinations file,
// the CRM's failing. The destinations page shows both and says the file is
// the truth; an operator pauses billing and resumes it (the page and the
// audit log say so); retries the CRM's delivery of an event from the
// event's page, billing's delivery of it untouched; then, with a third
// destination added to the file and hookd sent SIGHUP, replays the event
// to that destination alone: the backfill reaches its app.
func TestDestinations(t *testing.T) {
	t.Parallel()
	billing, crm, analytics := newDownstream(t), newDownstream(t), newDownstream(t)
	crm.setFailing(true)
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	write := func(t *testing.T, names ...string) {
		t.Helper()
		urls := map[string]string{"billing": billing.srv.URL, "crm": crm.srv.URL, "analytics": analytics.srv.URL}
		yaml := "destinations:\n"
		for _, n := range names {
			yaml += fmt.Sprintf("  - name: %s\n    url: %s\n", n, urls[n])
		}
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(t, "billing", "crm")
	h := startHookd(t, "HOOKD_FORWARD_URL=", "HOOKD_DESTINATIONS_FILE="+file)
	page := h.newPage(t)
	h.signIn(t, page)
	row := func(name string) playwright.Locator {
		return page.Locator(fmt.Sprintf(`tr[data-testid="destination"][data-destination="%s"]`, name))
	}

	step(t, "TheDestinationsPageShowsBoth", func(t *testing.T) {
		click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Destinations", Exact: playwright.Bool(true)}), "Destinations in the nav")
		must(t, expect.Locator(page.GetByTestId("destination")).ToHaveCount(2), "two destinations")
		must(t, expect.Locator(row("billing").GetByTestId("destination-state")).ToHaveText("delivering"), "billing delivering")
		must(t, expect.Locator(row("crm").GetByTestId("destination-state")).ToHaveText("delivering"), "crm delivering")
		must(t, expect.Locator(page.GetByTestId("destinations-from-file")).ToContainText("edit the file and send SIGHUP"), "the file's notice")
	})

	step(t, "PauseAndResumeBilling", func(t *testing.T) {
		must(t, row("billing").GetByLabel("Reason to pause billing").Fill("billing deploy"), "fill the reason")
		click(t, pageButton(page, "Pause billing"), "Pause billing")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Destination billing paused"), "flash after pausing")
		must(t, expect.Locator(row("billing").GetByTestId("destination-state")).ToHaveText("paused"), "billing paused")
		must(t, expect.Locator(row("billing").GetByTestId("destination-paused")).ToContainText("billing deploy"), "why")
		must(t, expect.Locator(row("crm").GetByTestId("destination-state")).ToHaveText("delivering"), "crm still delivering")
		click(t, pageButton(page, "Resume billing"), "Resume billing")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Destination billing resumed"), "flash after resuming")
		must(t, expect.Locator(row("billing").GetByTestId("destination-state")).ToHaveText("delivering"), "billing delivering again")
		visit(t, page, "/audit")
		must(t, expect.Locator(page.GetByTestId("audit-row").Filter(playwright.LocatorFilterOptions{HasText: "destination paused"})).
			ToContainText("billing: billing deploy"), "the pause in the audit log")
		must(t, expect.Locator(page.GetByTestId("audit-row").Filter(playwright.LocatorFilterOptions{HasText: "destination resumed"})).
			ToHaveCount(1), "the resume in the audit log")
	})

	var id string
	step(t, "RetryTheCRMsDeliveryFromTheEventsPage", func(t *testing.T) {
		id, _ = h.sendEvent(t, "invoice.paid", `{"id":"in_dest","object":"invoice"}`)
		queuetest.WaitFor(t, 15*time.Second, "billing got "+id, func() bool { _, ok := billing.deliveredBody(id); return ok })
		queuetest.WaitFor(t, 15*time.Second, "the CRM's delivery of "+id+" queued", func() bool {
			return h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND destination = 'crm'`, id) == 1
		})
		crm.setFailing(false)
		visit(t, page, "/events/"+id)
		crmDelivery := page.Locator(`[data-testid="delivery"][data-destination="crm"]`)
		must(t, expect.Locator(page.Locator(`[data-testid="delivery"][data-destination="billing"] [data-testid="delivery-state"]`)).
			ToHaveText("delivered"), "billing's delivery shown delivered")
		click(t, rowButton(crmDelivery, "Retry now"), "Retry now on the CRM's delivery")
		queuetest.WaitFor(t, 15*time.Second, "the CRM got "+id, func() bool { _, ok := crm.deliveredBody(id); return ok })
		queuetest.WaitFor(t, 15*time.Second, id+" processed", func() bool {
			return h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1`, id) == 0
		})
		if n := h.count(t, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1 AND destination = 'billing'`, id); n != 1 {
			t.Errorf("billing has %d attempts of %s, want its one: the CRM's retry must leave it alone", n, id)
		}
	})

	step(t, "ReplayToANewDestination", func(t *testing.T) {
		write(t, "billing", "crm", "analytics")
		must(t, syscall.Kill(h.pid, syscall.SIGHUP), "send hookd SIGHUP")
		queuetest.WaitFor(t, 15*time.Second, "analytics applied", func() bool {
			return h.count(t, `SELECT count(*) FROM destinations WHERE name = 'analytics'`) == 1
		})
		visit(t, page, "/replays")
		_, err := page.GetByLabel("Deliver to").SelectOption(playwright.SelectOptionValues{Values: playwright.StringSlice("analytics")})
		must(t, err, "choose analytics")
		click(t, pageButton(page, "Preview"), "Preview")
		must(t, expect.Locator(page.GetByTestId("replay-count")).ToHaveText("Replay 1 event matching"), "the count")
		must(t, page.GetByLabel("Name").Fill("backfill analytics"), "fill Name")
		click(t, pageButton(page, "Start the replay"), "Start the replay")
		must(t, expect.Locator(page.GetByTestId("replay-destination")).ToContainText("analytics alone"), "the replay's destination")
		must(t, expect.Locator(page.GetByTestId("replay-state")).ToHaveText("done", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30_000)}), "the replay done")
		if got := analytics.replays(id); !slices.Equal(got, []string{"backfill analytics"}) {
			t.Errorf("analytics got %s from replays %q, want once from the backfill", id, got)
		}
		if got := billing.replays(id); len(got) != 0 {
			t.Errorf("billing got %s from replays %q, want none: the replay was to analytics alone", id, got)
		}
	})
}

// TestDestinations_HeldKeyReleased: a destination ordered by customer
// whose app fails gets three events of one customer; the first dies and
// holds the key, the two after it waiting. The destinations page shows the
// destination's order_by and the held key with its dead event and its two
// waiting; Release asks to confirm, saying so, then flashes, the key
// leaves the page, the two waiting are delivered in order once the app is
// back, and the audit log names the release. /metrics counts the held key
// while it is held, and the waits under the destination's rate.
func TestDestinations_HeldKeyReleased(t *testing.T) {
	t.Parallel()
	billing := newDownstream(t)
	billing.setFailing(true)
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	yaml := fmt.Sprintf("destinations:\n  - name: billing\n    url: %s\n    order_by: data.object.customer\n    rate: 0.5\n",
		billing.srv.URL)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHookd(t, "HOOKD_FORWARD_URL=", "HOOKD_DESTINATIONS_FILE="+file, "HOOKD_METRICS_PUBLIC=true")
	ids := make([]string, 3)
	for i := range ids {
		ids[i], _ = h.sendEvent(t, "invoice.paid", fmt.Sprintf(`{"id":"in_held%d","object":"invoice","customer":"cus_held"}`, i))
	}
	queuetest.WaitFor(t, 15*time.Second, "the three events queued", func() bool {
		return h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = ANY($1) AND order_key = 'cus_held'`, ids) == 3
	})
	// The fifth failed attempt makes the first dead: start it at four and
	// let the retry loop make that attempt now.
	h.exec(t, `UPDATE webhook_events SET attempts = 4, next_retry_at = now() WHERE event_id = $1`, ids[0])
	queuetest.WaitFor(t, 15*time.Second, ids[0]+" dead", func() bool {
		return h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND status = 'dead'`, ids[0]) == 1
	})

	page := h.newPage(t)
	h.signIn(t, page)
	held := page.Locator(`tr[data-testid="held-key"][data-key="cus_held"]`)

	step(t, "ThePageListsTheHeldKey", func(t *testing.T) {
		visit(t, page, "/destinations")
		billingRow := page.Locator(`tr[data-testid="destination"][data-destination="billing"]`)
		must(t, expect.Locator(billingRow.GetByTestId("destination-order-by")).ToContainText("data.object.customer"), "the order_by")
		must(t, expect.Locator(billingRow.GetByTestId("destination-rate-limit")).
			ToHaveText("at most 0.5 calls a second, over every replica"), "the rate")
		must(t, expect.Locator(held).ToHaveCount(1), "cus_held listed as held")
		must(t, expect.Locator(held.GetByTestId("held-key-event")).ToHaveText(ids[0]), "the dead event")
		must(t, expect.Locator(held.GetByTestId("held-key-event")).ToHaveAttribute("href", "/events/"+ids[0]), "linked to its page")
		must(t, expect.Locator(held.GetByTestId("held-key-waiting")).ToHaveText("2"), "two waiting behind it")
		queuetest.WaitFor(t, 15*time.Second, "the held key in /metrics", func() bool {
			return strings.Contains(h.metrics(t), `hookd_order_held_keys{destination="billing"} 1`)
		})
	})

	step(t, "ReleaseAsksToConfirmThenFlashes", func(t *testing.T) {
		click(t, rowButton(held, "Release"), "Release")
		must(t, expect.Locator(page.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})).
			ToHaveText("Release key cus_held of billing?"), "the confirmation")
		must(t, expect.Locator(page.GetByTestId("release-waiting")).ToHaveText("2 deliveries wait"), "what waits, on the confirmation")
		if n := h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND order_key IS NOT NULL`, ids[0]); n != 1 {
			t.Fatal("the confirmation released the key")
		}
		billing.setFailing(false)
		must(t, page.GetByLabel("Reason (optional)").Fill("the app skips that invoice"), "fill the reason")
		click(t, pageButton(page, "Confirm release"), "Confirm release")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Released key cus_held of billing: "+ids[0]+" stays dead"), "the flash")
		must(t, expect.Locator(held).ToHaveCount(0), "the key no longer listed")
		must(t, expect.Locator(page.GetByTestId("held-keys")).ToHaveCount(0), "no held keys left")
	})

	step(t, "TheKeyGoesOnAndTheAuditLogSaysSo", func(t *testing.T) {
		queuetest.WaitFor(t, 30*time.Second, "the two waiting delivered, and their attempts recorded", func() bool {
			_, second := billing.deliveredBody(ids[1])
			_, third := billing.deliveredBody(ids[2])
			return second && third && h.count(t, `SELECT count(*) FROM webhook_attempts
				WHERE event_id = ANY($1) AND outcome = 'succeeded'`, ids[1:]) == 2
		})
		if n := h.count(t, `SELECT count(*) FROM webhook_attempts a2 JOIN webhook_attempts a3 ON a3.event_id = $2
			WHERE a2.event_id = $1 AND a2.outcome = 'succeeded' AND a3.outcome = 'succeeded'
			  AND a2.attempted_at <= a3.attempted_at`, ids[1], ids[2]); n != 1 {
			t.Errorf("%s was not delivered before %s: the key's order", ids[1], ids[2])
		}
		if n := h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND status = 'dead'`, ids[0]); n != 1 {
			t.Errorf("%s is no longer dead after the release", ids[0])
		}
		// At one call in two seconds, the second of the two calls made
		// back to back waited for its turn.
		if m := h.metrics(t); !regexp.MustCompile(`(?m)^hookd_rate_waits_total\{destination="billing"\} [1-9]`).MatchString(m) {
			t.Errorf("no wait under billing's rate in /metrics:\n%s", m)
		}
		queuetest.WaitFor(t, 15*time.Second, "no held key in /metrics", func() bool {
			return strings.Contains(h.metrics(t), `hookd_order_held_keys{destination="billing"} 0`)
		})
		visit(t, page, "/audit")
		must(t, expect.Locator(page.GetByTestId("audit-row").Filter(playwright.LocatorFilterOptions{HasText: "held key released"})).
			ToContainText("billing key cus_held: "+ids[0]+": the app skips that invoice"), "the release in the audit log")
	})
}

// metrics scrapes hookd's /metrics, served on its listen address
// (HOOKD_METRICS_PUBLIC).
func (h *hookd) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(h.url("/metrics"))
	if err != nil {
		t.Fatalf("scrape /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape /metrics: %d, %v", resp.StatusCode, err)
	}
	return string(body)
}
