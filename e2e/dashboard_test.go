package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestLogin(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	page := h.newPage(t)

	step(t, "AnonymousVisitorLandsOnLogin", func(t *testing.T) {
		visit(t, page, "/")
		must(t, expect.Page(page).ToHaveURL(loginURL), "/ without a session redirects to /login")
	})

	step(t, "WrongPasswordShowsErrorAndOpensNoSession", func(t *testing.T) {
		must(t, page.GetByLabel("Email").Fill(adminEmail), "fill Email")
		must(t, page.GetByLabel("Password").Fill("not-the-password"), "fill Password")
		click(t, pageButton(page, "Sign in"), "Sign in")
		must(t, expect.Locator(page.GetByRole("alert")).ToContainText("Wrong email or password."), "error after a wrong password")
		visit(t, page, "/")
		must(t, expect.Page(page).ToHaveURL(loginURL), "/ still closed after a wrong password")
	})

	step(t, "RightPasswordLandsOnOverview", func(t *testing.T) {
		h.signIn(t, page)
		for _, link := range []string{"Overview", "Dead", "Pending", "Audit log"} {
			l := page.GetByRole("link", playwright.PageGetByRoleOptions{Name: link, Exact: playwright.Bool(true)})
			must(t, expect.Locator(l).ToBeVisible(), "nav link "+link)
		}
		must(t, expect.Locator(page.GetByTestId("count-failed")).ToBeVisible(), "overview counts")
	})

	step(t, "SignOutClosesTheDashboard", func(t *testing.T) {
		click(t, pageButton(page, "Sign out"), "Sign out")
		must(t, expect.Page(page).ToHaveURL(loginURL), "back on /login after signing out")
		visit(t, page, "/")
		must(t, expect.Page(page).ToHaveURL(loginURL), "/ closed again after signing out")
	})
}

func TestOverviewFollowsTheQueueWithoutReload(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	h.downstream.setFailing(true)
	sent := map[string][]byte{}
	for i := range 5 {
		id, payload := h.sendEvent(t, "invoice.paid", fmt.Sprintf(`{"id":"in_e2e%d","object":"invoice","amount_paid":%d}`, i, 1000+i))
		sent[id] = payload
	}

	page := h.newPage(t)
	h.signIn(t, page)
	// A new queue row waits a minute for its first retry.
	must(t, expect.Locator(page.GetByTestId("count-failed")).ToHaveText("5"), "five events in their first-attempt state")
	must(t, expect.Locator(page.GetByTestId("count-retrying")).ToHaveText("0"), "none retried yet")
	must(t, expect.Locator(page.GetByTestId("count-due")).ToHaveText("0"), "none due yet")
	must(t, expect.Locator(page.GetByTestId("marker-count")).ToHaveText("0"), "no markers while the downstream fails")

	// Survives only as long as the document does: a reload would drop it.
	_, err := page.Evaluate(`() => { window.__sameDocument = true }`)
	must(t, err, "mark the document")

	h.downstream.setFailing(false)
	h.exec(t, `UPDATE webhook_events SET next_retry_at = now()`)

	must(t, expect.Locator(page.GetByTestId("count-failed")).ToHaveText("0"), "the queue empties")
	must(t, expect.Locator(page.GetByTestId("marker-count")).ToHaveText("5"), "five markers")
	same, err := page.Evaluate(`() => window.__sameDocument === true`)
	must(t, err, "read the document mark")
	if same != true {
		t.Errorf("the overview was reloaded; want it to refresh itself in place")
	}

	var ids []string
	for id, payload := range sent {
		ids = append(ids, id)
		got, ok := h.downstream.deliveredBody(id)
		if !ok {
			t.Errorf("downstream never got a successful delivery of %s", id)
		} else if !bytes.Equal(got, payload) {
			t.Errorf("downstream got %s as %q, want the bytes Stripe sent, %q", id, got, payload)
		}
	}
	if n := h.count(t, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY($1)`, ids); n != 5 {
		t.Errorf("got %d markers for the five events, want 5", n)
	}
}

func TestRetryDeadEvent(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	h.downstream.setFailing(true)
	ids := h.sendEvents(t, 4, "invoice.payment_failed")
	dead, pending := ids[:3], ids[3]

	// The fifth failed attempt makes an event dead: start three at four
	// and let the retry loop make that attempt now.
	h.exec(t, `UPDATE webhook_events SET attempts = 4, next_retry_at = now() WHERE event_id = ANY($1)`, dead)
	queuetest.WaitFor(t, 15*time.Second, "three events dead", func() bool {
		return h.count(t, `SELECT count(*) FROM webhook_events WHERE status = 'dead'`) == 3
	})

	page := h.newPage(t)
	h.signIn(t, page)
	visit(t, page, "/events?status=dead")
	must(t, expect.Locator(page.Locator(`tr[data-testid="event-row"]`)).ToHaveCount(3), "three rows in the dead list")
	for _, id := range dead {
		must(t, expect.Locator(eventRow(page, id)).ToContainText(downstreamRefusal), "dead row of "+id+" shows its last error")
	}
	must(t, expect.Locator(eventRow(page, pending)).ToHaveCount(0), "the pending event is not in the dead list")

	h.downstream.setFailing(false)
	retried := dead[0]
	click(t, rowButton(eventRow(page, retried), "Retry"), "Retry on "+retried)
	must(t, expect.Locator(page.GetByTestId("flash")).ToContainText(retried+" queued for retry"), "flash after Retry")
	must(t, expect.Locator(eventRow(page, retried)).ToHaveCount(0), "retried event left the dead list")
	must(t, expect.Locator(page.Locator(`tr[data-testid="event-row"]`)).ToHaveCount(2), "two dead events left")

	queuetest.WaitFor(t, 15*time.Second, retried+" delivered", func() bool {
		_, ok := h.downstream.deliveredBody(retried)
		return ok
	})
	queuetest.WaitFor(t, 15*time.Second, retried+" off the queue with a marker", func() bool {
		return h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1`, retried) == 0 &&
			h.count(t, `SELECT count(*) FROM processed_webhook_events WHERE event_id = $1`, retried) == 1
	})
	for _, id := range dead[1:] {
		if _, ok := h.downstream.deliveredBody(id); ok {
			t.Errorf("%s was delivered, but nobody retried it", id)
		}
	}

	click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Audit log", Exact: playwright.Bool(true)}), "Audit log")
	entry := page.Locator(`tr[data-testid="audit-row"]`).Filter(playwright.LocatorFilterOptions{HasText: retried})
	must(t, expect.Locator(entry).ToHaveCount(1), "one audit row for the retry")
	must(t, expect.Locator(entry).ToContainText(adminEmail), "audit row says who retried")
	must(t, expect.Locator(entry.GetByText("retry", playwright.LocatorGetByTextOptions{Exact: playwright.Bool(true)})).ToBeVisible(), "audit row says what was done")
}

func TestRetryAllWithTypeFilter(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	var matching, others []string
	for range 3 {
		matching = append(matching, queuetest.InsertEvent(t, h.db, queuetest.EventOpts{
			EventType: "invoice.payment_failed", Status: queue.StatusDead, Attempts: 5, LastError: downstreamRefusal,
		}).EventID)
	}
	for range 2 {
		others = append(others, queuetest.InsertEvent(t, h.db, queuetest.EventOpts{
			EventType: "customer.created", Status: queue.StatusDead, Attempts: 5, LastError: downstreamRefusal,
		}).EventID)
	}

	page := h.newPage(t)
	h.signIn(t, page)
	visit(t, page, "/events?status=dead")
	rows := page.Locator(`tr[data-testid="event-row"]`)
	must(t, expect.Locator(rows).ToHaveCount(5), "five dead events")

	must(t, page.GetByLabel("Event type").Fill("invoice.payment_failed"), "fill Event type")
	click(t, pageButton(page, "Filter"), "Filter")
	must(t, expect.Locator(rows).ToHaveCount(3), "three dead events match the type")
	for _, id := range matching {
		must(t, expect.Locator(eventRow(page, id)).ToBeVisible(), "matching event "+id+" listed")
	}

	click(t, pageButton(page, "Retry all"), "Retry all")
	must(t, expect.Locator(page.GetByText("Retry all 3 matching events?")).ToBeVisible(), "confirmation names the count")
	click(t, pageButton(page, "Confirm retry all"), "Confirm retry all")
	must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("3 events queued for retry"), "flash says how many")

	queuetest.WaitFor(t, 15*time.Second, "the three matching events delivered", func() bool {
		for _, id := range matching {
			if _, ok := h.downstream.deliveredBody(id); !ok {
				return false
			}
		}
		return true
	})
	for _, id := range others {
		if h.downstream.seen(id) {
			t.Errorf("%s (customer.created) reached the downstream; Retry all was filtered to invoice.payment_failed", id)
		}
	}
	if n := h.count(t, `SELECT count(*) FROM webhook_events WHERE status = 'dead' AND event_id = ANY($1)`, others); n != 2 {
		t.Errorf("got %d of the other type still dead, want 2", n)
	}

	visit(t, page, "/events?status=dead")
	must(t, expect.Locator(rows).ToHaveCount(2), "only the other type left in the dead list")
	for _, id := range others {
		must(t, expect.Locator(eventRow(page, id)).ToBeVisible(), "untouched event "+id+" still dead")
	}
}

func TestEventDetailShowsPayloadEscaped(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	h.downstream.setFailing(true)
	const script = `<script>window.__pwned=1</script>`
	const img = `<img src=x onerror="window.__pwned=2;alert(document.domain)">`
	id, _ := h.sendEvent(t, "customer.updated",
		`{"id":"cus_e2e","object":"customer","name":"`+script+`","description":"`+strings.ReplaceAll(img, `"`, `\"`)+`"}`)

	page := h.newPage(t)
	var dialogs atomic.Int32
	page.OnDialog(func(d playwright.Dialog) {
		dialogs.Add(1)
		_ = d.Dismiss()
	})
	h.signIn(t, page)
	visit(t, page, "/events/"+h.queueID(t, id))

	payload := page.GetByTestId("payload")
	must(t, expect.Locator(payload).ToContainText(script), "the script tag is shown as text")
	must(t, expect.Locator(payload).ToContainText(`<img src=x onerror=`), "the img tag is shown as text")
	// hookd's Content-Security-Policy would stop injected script from
	// running even if the payload were not escaped, so the checks on
	// window.__pwned and dialogs alone could pass on an escaping bug; the
	// DOM itself must hold no element made from the payload.
	must(t, expect.Locator(payload.Locator("script, img")).ToHaveCount(0), "no elements made from the payload")
	must(t, expect.Locator(page.Locator(`img[src="x"]`)).ToHaveCount(0), "no img from the payload anywhere")
	must(t, expect.Locator(page.GetByTestId("attempt-row")).ToHaveCount(1), "the inline attempt listed")

	pwned, err := page.Evaluate(`() => typeof window.__pwned`)
	must(t, err, "read window.__pwned")
	if pwned != "undefined" {
		t.Errorf("window.__pwned is %v: the payload ran as script", pwned)
	}
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened; the payload ran as script", n)
	}
}

func TestPruneMarkers(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	ids := h.sendEvents(t, 5, "invoice.paid")
	old, fresh := ids[:3], ids[3:]
	h.exec(t, `UPDATE processed_webhook_events SET processed_at = now() - interval '31 days' WHERE event_id = ANY($1)`, old)

	page := h.newPage(t)
	h.signIn(t, page)
	markers := page.GetByTestId("marker-count")
	must(t, expect.Locator(markers).ToHaveText("5"), "five markers before the prune")

	step(t, "ThirtyDaysRemovesTheOldMarkers", func(t *testing.T) {
		must(t, page.GetByLabel("Days").Fill("30"), "fill Days")
		click(t, pageButton(page, "Prune…"), "Prune…")
		must(t, expect.Locator(page.GetByText("will remove 3 event ids older than 30 days from the redelivery guard")).ToBeVisible(), "confirmation says how many")
		click(t, pageButton(page, "Confirm prune"), "Confirm prune")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Removed 3 event ids older than 30 days from the redelivery guard"), "result says how many")
		must(t, expect.Locator(markers).ToHaveText("2"), "marker count drops by three")
		if n := h.count(t, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY($1)`, fresh); n != 2 {
			t.Errorf("got %d of the two recent markers, want 2", n)
		}
	})

	step(t, "ZeroDaysIsRefused", func(t *testing.T) {
		days := page.GetByLabel("Days")
		// Whatever checks the form itself may grow, the server must refuse;
		// with the browser's validation off, this test reaches it.
		_, err := days.Evaluate(`input => { input.form.noValidate = true }`, nil)
		must(t, err, "turn off the browser's form validation")
		must(t, days.Fill("0"), "fill Days")
		click(t, pageButton(page, "Prune…"), "Prune…")
		must(t, expect.Locator(page.GetByRole("alert")).ToContainText("at least 3"), "0 days refused with a message")
		must(t, expect.Locator(pageButton(page, "Confirm prune")).ToHaveCount(0), "no confirmation for 0 days")
		must(t, expect.Locator(markers).ToHaveText("2"), "marker count unchanged")
		if n := h.count(t, `SELECT count(*) FROM processed_webhook_events`); n != 2 {
			t.Errorf("got %d markers after a refused prune, want 2", n)
		}
	})

	step(t, "AuditLogRecordsTheOnePrune", func(t *testing.T) {
		visit(t, page, "/audit")
		prunes := page.Locator(`tr[data-testid="audit-row"]`).Filter(playwright.LocatorFilterOptions{
			Has: page.GetByText("prune", playwright.PageGetByTextOptions{Exact: playwright.Bool(true)}),
		})
		must(t, expect.Locator(prunes).ToHaveCount(1), "one prune in the audit log, none for the refused ones")
		must(t, expect.Locator(prunes).ToContainText(adminEmail), "audit row says who pruned")
	})
}

func TestFormWithoutCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	id := queuetest.InsertEvent(t, h.db, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5}).EventID

	page := h.newPage(t)
	h.signIn(t, page)
	visit(t, page, "/events?status=dead")
	row := eventRow(page, id)
	token := row.Locator(`form input[name="_csrf"]`)
	must(t, expect.Locator(token).ToHaveCount(1), "the Retry form carries a CSRF token")
	_, err := token.Evaluate(`input => input.remove()`, nil)
	must(t, err, "remove the CSRF field")

	resp, err := page.ExpectResponse(func(r playwright.Response) bool {
		return r.Request().Method() == http.MethodPost
	}, func() error { return rowButton(row, "Retry").Click() })
	must(t, err, "submit the Retry form without its token")
	if resp.Status() != http.StatusForbidden {
		t.Errorf("POST %s without _csrf: got %d, want 403", resp.URL(), resp.Status())
	}

	var status string
	var attempts int
	must(t, h.db.QueryRow(t.Context(), `SELECT status, attempts FROM webhook_events WHERE event_id = $1`, id).Scan(&status, &attempts), "read the event")
	if status != string(queue.StatusDead) || attempts != 5 {
		t.Errorf("after the refused retry the event is %s with %d attempts, want dead with 5", status, attempts)
	}
	visit(t, page, "/events?status=dead")
	must(t, expect.Locator(eventRow(page, id)).ToHaveCount(1), "event still in the dead list")
	visit(t, page, "/audit")
	must(t, expect.Locator(page.Locator(`tr[data-testid="audit-row"]`).Filter(playwright.LocatorFilterOptions{HasText: id})).ToHaveCount(0), "no audit entry for a refused retry")
	if h.downstream.seen(id) {
		t.Errorf("%s reached the downstream after a refused retry", id)
	}
}

func TestOverviewFitsAPhone(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	// Some of everything, so the overview renders its fullest.
	longError := "downstream returned 502: " + strings.Repeat("upstream_connect_error_or_disconnect_reset_before_headers ", 4)
	// Not due for an hour, so the retry loop leaves them be.
	queuetest.InsertEvent(t, h.db, queuetest.EventOpts{Status: queue.StatusFailed, LastError: longError, Age: 3 * time.Hour, DueIn: time.Hour})
	queuetest.InsertEvent(t, h.db, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2, LastError: longError, DueIn: time.Hour})
	queuetest.InsertEvent(t, h.db, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, LastError: longError})
	h.sendEvents(t, 2, "invoice.paid")

	page := h.newPage(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 390, Height: 844},
		IsMobile: playwright.Bool(true),
		HasTouch: playwright.Bool(true),
	})
	h.signIn(t, page)
	must(t, expect.Locator(page.GetByTestId("marker-count")).ToHaveText("2"), "overview rendered with its data")

	widths, err := page.Evaluate(`() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
	must(t, err, "measure the page")
	w := widths.([]any)
	if scroll, client := toInt(w[0]), toInt(w[1]); scroll > client {
		t.Errorf("overview scrolls sideways at 390 px: scrollWidth %d > clientWidth %d", scroll, client)
	}

	buttons, err := page.GetByRole("button").All()
	must(t, err, "list the buttons")
	if len(buttons) == 0 {
		t.Fatal("no buttons on the overview; want at least Sign out and Prune…")
	}
	for i, b := range buttons {
		name, _ := b.TextContent()
		what := fmt.Sprintf("button %d %q", i, strings.TrimSpace(name))
		must(t, b.ScrollIntoViewIfNeeded(), "scroll to "+what)
		must(t, expect.Locator(b).ToBeVisible(), what+" visible")
		must(t, expect.Locator(b).ToBeInViewport(playwright.LocatorAssertionsToBeInViewportOptions{Ratio: playwright.Float(1)}), what+" wholly on screen")
	}
}

func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	}
	panic(fmt.Sprintf("not a number: %T %v", v, v))
}

// An admin manages accounts on a phone: add one, make it admin, remove it,
// each through the page's own forms, and the page never scrolls sideways.
func TestAccountsOnAPhone(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	page := h.newPage(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 390, Height: 844},
		IsMobile: playwright.Bool(true),
		HasTouch: playwright.Bool(true),
	})
	h.signIn(t, page)
	const email = "new-operator-with-a-long-address@hookd.test"
	row := page.Locator(fmt.Sprintf(`tr[data-testid="account-row"][data-email="%s"]`, email))

	step(t, "AddAnAccount", func(t *testing.T) {
		click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Accounts", Exact: playwright.Bool(true)}), "Accounts")
		add := page.GetByRole("region", playwright.PageGetByRoleOptions{Name: "Add account"})
		must(t, add.GetByLabel("Email").Fill(email), "fill Email")
		must(t, add.GetByLabel("Password").Fill("short"), "fill a short Password")
		_, err := add.GetByLabel("Role").SelectOption(playwright.SelectOptionValues{Values: &[]string{"operator"}})
		must(t, err, "choose operator")
		click(t, pageButton(page, "Add account"), "Add account")
		must(t, expect.Locator(add.GetByRole("alert")).ToContainText("at least"), "a short password refused with a message")
		must(t, expect.Locator(row).ToHaveCount(0), "nothing added")

		must(t, add.GetByLabel("Password").Fill("a long enough password"), "fill Password")
		_, err = add.GetByLabel("Role").SelectOption(playwright.SelectOptionValues{Values: &[]string{"operator"}})
		must(t, err, "choose operator")
		click(t, pageButton(page, "Add account"), "Add account")
		must(t, expect.Locator(page.GetByTestId("flash")).ToHaveText("Added "+email+" (operator)"), "flash after Add account")
		must(t, expect.Locator(row).ToHaveCount(1), "the new account is listed")
	})

	step(t, "FitsTheScreen", func(t *testing.T) {
		widths, err := page.Evaluate(`() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
		must(t, err, "measure the page")
		w := widths.([]any)
		if scroll, client := toInt(w[0]), toInt(w[1]); scroll > client {
			t.Errorf("accounts page scrolls sideways at 390 px: scrollWidth %d > clientWidth %d", scroll, client)
		}
		buttons, err := page.GetByRole("button").All()
		must(t, err, "list the buttons")
		for i, b := range buttons {
			name, _ := b.TextContent()
			what := fmt.Sprintf("button %d %q", i, strings.TrimSpace(name))
			must(t, b.ScrollIntoViewIfNeeded(), "scroll to "+what)
			must(t, expect.Locator(b).ToBeInViewport(playwright.LocatorAssertionsToBeInViewportOptions{Ratio: playwright.Float(1)}), what+" wholly on screen")
		}
	})

	step(t, "ChangeItsRole", func(t *testing.T) {
		_, err := row.GetByLabel("Role").SelectOption(playwright.SelectOptionValues{Values: &[]string{"admin"}})
		must(t, err, "choose admin")
		click(t, rowButton(row, "Save role"), "Save role")
		must(t, expect.Locator(page.GetByTestId("flash")).ToHaveText(email+" is now admin"), "flash after Save role")
		must(t, expect.Locator(row.GetByLabel("Role")).ToHaveValue("admin"), "the row shows the new role")
	})

	step(t, "RemoveItAfterConfirming", func(t *testing.T) {
		click(t, rowButton(row, "Remove"), "Remove")
		must(t, expect.Locator(page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "Remove " + email + "?"})).ToBeVisible(), "asked to confirm")
		click(t, pageButton(page, "Confirm remove"), "Confirm remove")
		must(t, expect.Locator(page.GetByTestId("flash")).ToHaveText("Removed "+email), "flash after removing")
		must(t, expect.Locator(row).ToHaveCount(0), "the account is gone from the list")
	})

	step(t, "AuditedInWords", func(t *testing.T) {
		visit(t, page, "/audit")
		for _, action := range []string{"account added", "role changed", "account removed"} {
			entry := page.Locator(`tr[data-testid="audit-row"]`).Filter(playwright.LocatorFilterOptions{
				Has: page.GetByText(action, playwright.PageGetByTextOptions{Exact: playwright.Bool(true)}),
			})
			must(t, expect.Locator(entry).ToHaveCount(1), "one audit row: "+action)
		}
	})
}
