package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/internal/store/tokens"
)

// secretShape is a token's secret as Authorization headers and secret
// scanners see it.
var secretShape = regexp.MustCompile(`^hkd_[0-9A-Za-z]{43}$`)

// An admin creates an API token on the Accounts page and sees its secret
// once: it authenticates, and a reload shows it no more. Revoked after the
// confirmation, the token is refused.
func TestAPITokenOnTheAccountsPage(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	page := h.newPage(t)
	h.signIn(t, page)
	store := tokens.New(h.db)
	mine := page.Locator(fmt.Sprintf(`section[data-testid="token-account"][data-email="%s"]`, adminEmail))
	row := mine.Locator(`tr[data-testid="token-row"][data-name="deploy pipeline"]`)
	secretShown := page.GetByTestId("new-token-secret")
	var secret string

	step(t, "CreateAndSeeTheSecretOnce", func(t *testing.T) {
		click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Accounts", Exact: playwright.Bool(true)}), "Accounts")
		must(t, mine.GetByLabel("Token name").Fill("deploy pipeline"), "fill Token name")
		_, err := mine.GetByLabel("Scope").SelectOption(playwright.SelectOptionValues{Values: &[]string{"operate"}})
		must(t, err, "choose operate")
		_, err = mine.GetByLabel("Expires after").SelectOption(playwright.SelectOptionValues{Values: &[]string{"30d"}})
		must(t, err, "choose 30 days")
		click(t, mine.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Create token"}), "Create token")
		must(t, expect.Locator(secretShown).ToHaveText(secretShape), "the secret is shown")
		must(t, expect.Locator(page.GetByTestId("new-token")).ToContainText("shown this once"), "it says it is shown once")
		secret, err = secretShown.TextContent()
		must(t, err, "read the secret")
		must(t, expect.Locator(row).ToHaveCount(1), "the token is listed")

		_, err = page.Reload()
		must(t, err, "reload")
		must(t, expect.Locator(row).ToHaveCount(1), "the token is listed after the reload")
		must(t, expect.Locator(secretShown).ToHaveCount(0), "no secret after the reload")
		must(t, expect.Locator(page.Locator("body")).Not().ToContainText(secret), "the secret nowhere on the page")
	})

	step(t, "TheSecretAuthenticates", func(t *testing.T) {
		tok, err := store.Authenticate(context.Background(), secret)
		if err != nil || tok.Name != "deploy pipeline" || tok.Scope != tokens.ScopeOperate || tok.AccountEmail != adminEmail {
			t.Fatalf("Authenticate(secret shown) = %+v, %v", tok, err)
		}
		_, err = page.Reload()
		must(t, err, "reload")
		must(t, expect.Locator(row.GetByTestId("token-last-used")).Not().ToHaveText("never"), "its last use is shown")
	})

	step(t, "RevokeAfterConfirming", func(t *testing.T) {
		click(t, rowButton(row, "Revoke"), "Revoke")
		must(t, expect.Locator(page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "Revoke token deploy pipeline?"})).ToBeVisible(), "asked to confirm")
		click(t, pageButton(page, "Confirm revoke"), "Confirm revoke")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Revoked token"), "flash after revoking")
		must(t, expect.Locator(row.GetByTestId("token-revoked")).Not().ToHaveText("no"), "the row says it is revoked")
		must(t, expect.Locator(rowButton(row, "Revoke")).ToHaveCount(0), "no Revoke on a revoked token")
		if _, err := store.Authenticate(context.Background(), secret); !errors.Is(err, tokens.ErrRefused) {
			t.Fatalf("Authenticate after the revocation: %v, want refused", err)
		}
	})

	step(t, "AuditedInWords", func(t *testing.T) {
		visit(t, page, "/audit")
		for _, action := range []string{"API token created", "API token revoked"} {
			entry := page.Locator(`tr[data-testid="audit-row"]`).Filter(playwright.LocatorFilterOptions{
				Has: page.GetByText(action, playwright.PageGetByTextOptions{Exact: playwright.Bool(true)}),
			})
			must(t, expect.Locator(entry).ToHaveCount(1), "one audit row: "+action)
		}
	})
}
