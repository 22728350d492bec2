package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue/queuetest"
)

// tokenSection is an account's part of the API tokens panel.
func tokenSection(doc *goquery.Document, email string) *goquery.Selection {
	return doc.Find(`section[data-testid="token-account"][data-email="` + email + `"]`)
}

// createToken makes a token for the account accountID straight through
// the store, as `hookd tokens create` does, and returns its secret.
func createToken(t *testing.T, b *testBundle, accountID int64, name string, scope tokens.Scope) (string, tokens.Token) {
	t.Helper()
	ctx := context.Background()
	var secret string
	var tok tokens.Token
	if err := b.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		var err error
		secret, tok, err = tokens.New(b.pool).Create(ctx, tx.PgxTx(), accountID, name, scope, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return secret, tok
}

func tokenCount(t *testing.T, b *testBundle) int64 {
	t.Helper()
	return queuetest.Count(t, b.pool, `SELECT count(*) FROM api_tokens`)
}

// An admin creates a token through the account's form: the page it lands
// on shows the secret, which authenticates as that account; the next
// showing of the page shows it no more, and lists the token.
func TestAccountTokens_SecretShownOnceAndAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	ops := createAccount(t, b, "ops@example.com", accounts.RoleOperator)

	page := c.get("/accounts")
	form := tokenSection(page.doc, "ops@example.com").Find("form.token-form")
	if got := form.Find(`select[name="scope"] option`).Map(func(_ int, s *goquery.Selection) string { return s.Text() }); fmt.Sprint(got) != "[read operate]" {
		t.Errorf("an operator's scopes offered: %v, want [read operate]", got)
	}
	r := c.submit(form, url.Values{"name": {"deploy pipeline"}, "scope": {"operate"}, "expires": {"30d"}})
	wantStatus(t, r, http.StatusSeeOther)
	shown := c.follow(r)
	wantStatus(t, shown, http.StatusOK)
	if cc := shown.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the page showing the secret has Cache-Control %q, want no-store", cc)
	}
	secret := testid(shown.doc, "new-token-secret")
	tok, err := tokens.New(b.pool).Authenticate(context.Background(), secret)
	if err != nil || tok.AccountID != ops.ID || tok.Scope != tokens.ScopeOperate || tok.Name != "deploy pipeline" || tok.ExpiresAt == nil {
		t.Fatalf("the secret shown, %q, authenticates as %+v, %v", secret, tok, err)
	}
	if !strings.Contains(testid(shown.doc, "new-token"), "shown this once") {
		t.Errorf("the new token's note says %q", testid(shown.doc, "new-token"))
	}

	again := c.get("/accounts")
	if again.doc.Find(`[data-testid="new-token"]`).Length() != 0 || strings.Contains(again.body, secret) {
		t.Fatal("the secret is shown a second time")
	}
	row := tokenSection(again.doc, "ops@example.com").Find(`tr[data-testid="token-row"]`)
	if row.Length() != 1 || row.AttrOr("data-name", "") != "deploy pipeline" {
		t.Fatalf("ops's token rows: %d, named %q", row.Length(), row.AttrOr("data-name", ""))
	}
	if got := strings.TrimSpace(row.Find(`[data-testid="token-last-used"]`).Text()); got == "never" {
		t.Errorf("last used %q after an authentication", got)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM sessions WHERE position($1 in encode(data, 'escape')) > 0`, secret); n != 0 {
		t.Errorf("the secret is in %d sessions", n)
	}
	e := lastAudit(t, b, audit.TokenCreate)
	if want := fmt.Sprintf("token %d (deploy pipeline) of ops@example.com, scope operate", tok.ID); e.Target != want || e.Email != "admin@example.com" {
		t.Errorf("audit entry %q by %s, want %q by admin@example.com", e.Target, e.Email, want)
	}
}

func TestAccountTokens_RefusalsSayWhyAndStoreNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	viewer := createAccount(t, b, "viewer@example.com", accounts.RoleViewer)
	path := "/accounts/" + strconv.FormatInt(viewer.ID, 10) + "/tokens"
	c.get("/accounts")
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"ScopeAboveRole", url.Values{"name": {"ci"}, "scope": {"operate"}, "expires": {"90d"}},
			"Not created: the scope operate exceeds the role of viewer@example.com (viewer), whose tokens may have scope read at most."},
		{"NoName", url.Values{"name": {" "}, "scope": {"read"}, "expires": {"90d"}},
			"Not created: a token needs a name, saying where it is used."},
		{"UnknownScope", url.Values{"name": {"ci"}, "scope": {"root"}, "expires": {"90d"}},
			`Not created: unknown scope "root": want read, operate or admin.`},
		{"BadLifetime", url.Values{"name": {"ci"}, "scope": {"read"}, "expires": {"forever"}},
			`Not created: lifetime "forever": want days (90d), a duration (12h) or never.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.post(path, tc.form)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			section := tokenSection(r.doc, "viewer@example.com")
			if got := strings.TrimSpace(section.Find(`[role="alert"]`).Text()); got != tc.want {
				t.Errorf("alert %q, want %q", got, tc.want)
			}
			if got := section.Find(`input[name="name"]`).AttrOr("value", ""); got != strings.TrimSpace(tc.form.Get("name")) {
				t.Errorf("the name typed is %q after the refusal, want it kept", got)
			}
		})
	}
	r := c.post("/accounts/999999/tokens", url.Values{"name": {"ci"}, "scope": {"read"}, "expires": {"90d"}})
	wantStatus(t, r, http.StatusNotFound)
	if got := alertText(r); got != "There is no such account; it may have been removed. Nothing was changed." {
		t.Errorf("a token for no account: %q", got)
	}
	if n := tokenCount(t, b); n != 0 {
		t.Errorf("%d tokens after refusals only", n)
	}
	if n := countAudit(t, b, audit.TokenCreate); n != 0 {
		t.Errorf("%d token_create entries after refusals only", n)
	}
}

// Revoking asks first; confirmed, the token is refused at once and the
// revocation audited; a token is revoked through its own account only.
func TestAccountTokens_RevokeAfterConfirming(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	ops := createAccount(t, b, "ops@example.com", accounts.RoleOperator)
	other := createAccount(t, b, "other@example.com", accounts.RoleViewer)
	store := tokens.New(b.pool)
	secret, tok := createToken(t, b, ops.ID, "runbook", tokens.ScopeRead)
	base := fmt.Sprintf("/accounts/%d/tokens/%d/revoke", ops.ID, tok.ID)

	page := c.get("/accounts")
	row := tokenSection(page.doc, "ops@example.com").Find(`tr[data-testid="token-row"]`)
	preview := c.submit(formWith(row, "Revoke"), nil)
	wantStatus(t, preview, http.StatusOK)
	if h := strings.TrimSpace(preview.doc.Find("h1").Text()); h != "Revoke token runbook?" {
		t.Errorf("confirm page heading %q", h)
	}
	if _, err := store.Authenticate(ctx, secret); err != nil {
		t.Fatalf("the preview revoked the token: %v", err)
	}

	wrong := c.post(fmt.Sprintf("/accounts/%d/tokens/%d/revoke", other.ID, tok.ID), nil)
	wantStatus(t, wrong, http.StatusNotFound)
	if got := alertText(wrong); got != "There is no such token of other@example.com. Nothing was changed." {
		t.Errorf("revoke through another account: %q", got)
	}

	r := c.submit(formWith(preview.doc.Selection, "Confirm revoke"), nil)
	done := c.follow(r)
	want := fmt.Sprintf("Revoked token %d (runbook) of ops@example.com: every request with it is refused from now on", tok.ID)
	if got := testid(done.doc, "flash"); got != want {
		t.Errorf("flash %q, want %q", got, want)
	}
	if _, err := store.Authenticate(ctx, secret); !errors.Is(err, tokens.ErrRefused) {
		t.Errorf("Authenticate after the revocation: %v", err)
	}
	row = tokenSection(done.doc, "ops@example.com").Find(`tr[data-testid="token-row"]`)
	if formWith(row, "Revoke").Length() != 0 || strings.TrimSpace(row.Find(`[data-testid="token-revoked"]`).Text()) == "no" {
		t.Error("the revoked token's row still offers Revoke or says it is not revoked")
	}

	again := c.post(base, nil)
	wantStatus(t, again, http.StatusConflict)
	if got := alertText(again); got != fmt.Sprintf("Not revoked: token %d (runbook) was revoked already; nothing was changed.", tok.ID) {
		t.Errorf("revoke twice: %q", got)
	}
	if n := countAudit(t, b, audit.TokenRevoke); n != 1 {
		t.Errorf("%d token_revoke entries, want 1", n)
	}
}

func TestAccountTokens_OnlyAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ops := createAccount(t, b, "ops@example.com", accounts.RoleOperator)
	_, tok := createToken(t, b, ops.ID, "runbook", tokens.ScopeRead)
	for _, role := range []accounts.Role{accounts.RoleViewer, accounts.RoleOperator} {
		c := b.client(t)
		c.signIn(role)
		c.get("/") // a page carrying the session's CSRF token, so only the role refuses
		for _, path := range []string{
			fmt.Sprintf("/accounts/%d/tokens", ops.ID),
			fmt.Sprintf("/accounts/%d/tokens/%d/revoke/preview", ops.ID, tok.ID),
			fmt.Sprintf("/accounts/%d/tokens/%d/revoke", ops.ID, tok.ID),
		} {
			wantStatus(t, c.post(path, url.Values{"name": {"sneaky"}, "scope": {"read"}, "expires": {"never"}}), http.StatusForbidden)
		}
	}
	if n := tokenCount(t, b); n != 1 {
		t.Errorf("%d tokens, want the 1 there was", n)
	}
	if got, _ := tokens.New(b.pool).Get(ctx, tok.ID); got.RevokedAt != nil {
		t.Error("a non-admin revoked a token")
	}
}
