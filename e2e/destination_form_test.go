package e2e

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"
)

// An admin adds a destination on the dashboard with its signing secrets
// and a header, which are never shown again, a rate and an order_by; a
// bad URL and a bad order_by are refused naming the field; the edit form
// shows the rate and order_by saved; an edit removes the header and keeps
// the secrets; the
// removal is confirmed first, and every change is in the audit log.
func TestDestinationFormInTheBrowser(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	h := startHookd(t, "HOOKD_DESTINATIONS_KEY="+key)
	page := h.newPage(t)
	h.signIn(t, page)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the billing app's key"))
	field := func(label string) playwright.Locator {
		return page.GetByLabel(label, playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)})
	}

	step(t, "ABadURLNamesTheField", func(t *testing.T) {
		visit(t, page, "/destinations/add")
		must(t, field("Name").Fill("billing"), "fill Name")
		must(t, field("URL").Fill("ftp://billing.internal"), "fill URL")
		click(t, pageButton(page, "Add destination"), "Add destination")
		must(t, expect.Locator(page.GetByRole("alert")).ToContainText(`destination "billing": url: "ftp://billing.internal" is not http or https`),
			"the refusal names the field")
		must(t, expect.Locator(field("URL")).ToHaveAttribute("aria-invalid", "true"), "the URL is marked")
		must(t, expect.Locator(field("Name")).ToHaveValue("billing"), "the name typed is kept")
	})

	step(t, "ABadOrderByNamesTheField", func(t *testing.T) {
		must(t, field("URL").Fill(h.downstream.srv.URL+"/billing"), "fill URL")
		must(t, field("Calls a second").Fill("2.5"), "fill Calls a second")
		must(t, field("Order by").Fill("data.object..customer"), "fill Order by")
		click(t, pageButton(page, "Add destination"), "Add destination")
		must(t, expect.Locator(page.GetByRole("alert")).ToContainText(
			`destination "billing": order_by: "data.object..customer" is not a field path like data.object.customer`),
			"the refusal names the field in the file's words")
		must(t, expect.Locator(field("Order by")).ToHaveAttribute("aria-invalid", "true"), "Order by is marked")
		must(t, expect.Locator(field("Calls a second")).ToHaveValue("2.5"), "the rate typed is kept")
		if n := h.count(t, `SELECT count(*) FROM destinations WHERE name = 'billing'`); n != 0 {
			t.Fatalf("a refused billing was written")
		}
	})

	step(t, "AddWithSecrets", func(t *testing.T) {
		must(t, field("URL").Fill(h.downstream.srv.URL+"/billing"), "fill URL")
		must(t, field("Order by").Fill("data.object.customer"), "fill Order by")
		must(t, field("Event types").Fill("invoice.*, customer.created"), "fill Event types")
		_, err := field("Live or test").SelectOption(playwright.SelectOptionValues{Values: &[]string{"live"}})
		must(t, err, "choose live")
		must(t, field("Signing secrets").Fill(secret), "fill Signing secrets")
		must(t, field("Extra headers").Fill("Authorization: Bearer billing-token-42"), "fill Extra headers")
		click(t, pageButton(page, "Add destination"), "Add destination")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Added destination billing"), "flash after adding")
		must(t, expect.Page(page).ToHaveURL(h.url("/destinations/billing/edit")), "on its edit page")
		must(t, expect.Locator(page.GetByTestId("secrets-state")).ToContainText("Now: set."), "the secrets are set")
		must(t, expect.Locator(page.GetByTestId("headers-state")).ToContainText("Now: set."), "the headers are set")
		must(t, expect.Locator(field("Calls a second")).ToHaveValue("2.5"), "the rate saved is shown")
		must(t, expect.Locator(field("Order by")).ToHaveValue("data.object.customer"), "the order_by saved is shown")
		must(t, expect.Locator(page.Locator("body")).Not().ToContainText(secret), "the secret nowhere on the page")
		must(t, expect.Locator(page.Locator("body")).Not().ToContainText("billing-token-42"), "the header nowhere on the page")
		if n := h.count(t, `SELECT count(*) FROM destinations WHERE name = 'billing' AND source = 'dashboard'
			AND signing_secrets_sealed IS NOT NULL AND encode(signing_secrets_sealed, 'escape') NOT LIKE '%whsec%'`); n != 1 {
			t.Fatalf("billing's sealed secrets: %d rows", n)
		}
	})

	step(t, "EditKeepsTheSecrets", func(t *testing.T) {
		must(t, field("Filter (optional)").Fill("data.object.amount >= 1000"), "fill Filter")
		must(t, field("Calls a second").Fill("5"), "fill Calls a second")
		must(t, page.GetByLabel("Remove the extra headers").Check(), "tick Remove the extra headers")
		click(t, pageButton(page, "Save changes"), "Save changes")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("filter, rate, headers changed"), "the flash says what changed")
		must(t, expect.Locator(field("Calls a second")).ToHaveValue("5"), "the new rate is shown")
		must(t, expect.Locator(field("Order by")).ToHaveValue("data.object.customer"), "the order_by is kept")
		if n := h.count(t, `SELECT count(*) FROM destinations WHERE name = 'billing'
			AND (route->>'rate')::float8 = 5 AND route->>'order_by' = 'data.object.customer'`); n != 1 {
			t.Fatalf("billing's rate and order_by as kept: %d rows", n)
		}
		must(t, expect.Locator(page.GetByTestId("headers-state")).ToContainText("Now: not set."), "the headers are gone")
		must(t, expect.Locator(page.GetByTestId("secrets-state")).ToContainText("Now: set."), "the secrets are kept")
		must(t, expect.Locator(field("Filter (optional)")).ToHaveValue("data.object.amount >= 1000"), "the filter is saved")
	})

	step(t, "RemoveAfterConfirming", func(t *testing.T) {
		click(t, pageButton(page, "Remove…"), "Remove…")
		must(t, expect.Locator(page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "Remove destination billing?"})).ToBeVisible(),
			"asked to confirm")
		must(t, expect.Locator(page.GetByTestId("removal-deletes")).ToBeVisible(), "it says billing is deleted")
		click(t, pageButton(page, "Confirm remove"), "Confirm remove")
		must(t, expect.Page(page).ToHaveURL(h.url("/destinations")), "on the destinations page")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Removed billing"), "flash after removing")
		if n := h.count(t, `SELECT count(*) FROM destinations WHERE name = 'billing'`); n != 0 {
			t.Fatalf("billing is still there")
		}
	})

	step(t, "AuditedInWords", func(t *testing.T) {
		visit(t, page, "/audit")
		for _, action := range []string{"destination added", "destination changed", "destination removed"} {
			entry := page.Locator(`tr[data-testid="audit-row"]`).Filter(playwright.LocatorFilterOptions{
				Has: page.GetByText(action, playwright.PageGetByTextOptions{Exact: playwright.Bool(true)}),
			})
			must(t, expect.Locator(entry).ToHaveCount(1), "one entry "+action)
		}
	})
}
