package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/views"
)

// The accounts page's API tokens, for admins: each account's tokens, the
// form that creates one, and the revocation of one after a confirmation.
// Each change runs in one transaction with its audit entry.
//
// A new token's secret is shown once. The create form's answer is a
// redirect to the accounts page, as for every form, and the secret rides
// to it in a cookie that lives a minute and that page deletes as it shows
// it: a reload shows it no more, and the secret is never written to the
// database, not even into the session.

// newTokenCookie carries a token just created to the page that shows its
// secret: "<admin id>.<token id>.<secret>".
const newTokenCookie = "hookd_new_token"

// newTokenCookieLife is how long the cookie lives if the redirect never
// comes.
const newTokenCookieLife = 60

func (d *dashboard) setNewTokenCookie(c echo.Context, value string, maxAge int) {
	c.SetCookie(&http.Cookie{
		Name:     d.cookies.name(newTokenCookie),
		Value:    value,
		Path:     d.cookies.path("/accounts"),
		MaxAge:   maxAge,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   d.sessions.forRequest(c.Request()).Cookie.Secure,
	})
}

// takeNewToken returns the token just created by the signed-in admin, with
// its secret, and deletes the cookie that carried it; nil when there is
// none. The page that shows it is kept in no cache.
func (d *dashboard) takeNewToken(c echo.Context) *views.NewToken {
	cookie, err := c.Cookie(d.cookies.name(newTokenCookie))
	if err != nil {
		return nil
	}
	d.setNewTokenCookie(c, "", -1)
	noStore(c)
	parts := strings.SplitN(cookie.Value, ".", 3)
	if len(parts) != 3 || parts[0] != strconv.FormatInt(currentUser(c).ID, 10) ||
		!strings.HasPrefix(parts[2], tokens.Prefix) || len(parts[2]) != len(tokens.Prefix)+tokens.SecretLength {
		return nil
	}
	id, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return nil
	}
	t, err := d.tokens.Get(c.Request().Context(), id)
	if err != nil {
		return nil
	}
	return &views.NewToken{Token: t, Secret: parts[2]}
}

func (d *dashboard) handleCreateToken() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id, ok, err := d.accountID(c)
		if !ok {
			return err
		}
		if _, err := d.accounts.User(ctx, id); err != nil {
			return d.accountChangeFailed(c, err, "Not created")
		}
		form := views.TokenForm{AccountID: id, Name: strings.TrimSpace(c.FormValue("name")),
			Scope: tokens.Scope(c.FormValue("scope")), Expires: c.FormValue("expires")}
		notCreated := func(why string) error {
			form.Error = "Not created: " + why + "."
			return d.renderAccountList(c, http.StatusUnprocessableEntity, views.AccountList{TokenForm: form}, "")
		}
		scope, err := tokens.ParseScope(string(form.Scope))
		if err != nil {
			return notCreated(err.Error())
		}
		ttl, err := tokens.ParseLifetime(form.Expires)
		if err != nil {
			return notCreated(err.Error())
		}
		var secret string
		var t tokens.Token
		err = d.accounts.InTx(ctx, func(tx *accounts.Tx) error {
			var err error
			if secret, t, err = d.tokens.Create(ctx, tx.PgxTx(), id, form.Name, scope, ttl); err != nil {
				return err
			}
			return audit.RecordAccount(ctx, tx.PgxTx(), actor(c), audit.TokenCreate, t.AuditTarget(), 1)
		})
		if errors.Is(err, tokens.ErrNotCreated) {
			return notCreated(strings.TrimPrefix(err.Error(), tokens.ErrNotCreated.Error()+": "))
		}
		if err != nil {
			return err
		}
		d.setNewTokenCookie(c, fmt.Sprintf("%d.%d.%s", currentUser(c).ID, t.ID, secret), newTokenCookieLife)
		return c.Redirect(http.StatusSeeOther, "/accounts")
	}
}

// accountToken returns the account :id and its token :token; ok is false,
// with the accounts page rendered saying so, when there is no such token
// of that account.
func (d *dashboard) accountToken(c echo.Context) (accounts.User, tokens.Token, bool, error) {
	id, ok, err := d.accountID(c)
	if !ok {
		return accounts.User{}, tokens.Token{}, false, err
	}
	ctx := c.Request().Context()
	u, err := d.accounts.User(ctx, id)
	if err != nil {
		return accounts.User{}, tokens.Token{}, false, d.accountChangeFailed(c, err, "Not revoked")
	}
	tokenID, perr := strconv.ParseInt(c.Param("token"), 10, 64)
	t, err := d.tokens.Get(ctx, tokenID)
	if perr != nil || errors.Is(err, tokens.ErrNotFound) || (err == nil && t.AccountID != u.ID) {
		return accounts.User{}, tokens.Token{}, false, d.renderAccounts(c, http.StatusNotFound, views.AccountForm{},
			"There is no such token of "+u.Email+". Nothing was changed.")
	}
	if err != nil {
		return accounts.User{}, tokens.Token{}, false, err
	}
	return u, t, true, nil
}

// handleRevokeTokenPreview asks before a token is revoked.
func (d *dashboard) handleRevokeTokenPreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		u, t, ok, err := d.accountToken(c)
		if !ok {
			return err
		}
		return render(c, http.StatusOK, views.TokenRevokeConfirm(d.page(c, "Revoke token?", "accounts"), accountView(u), t))
	}
}

func (d *dashboard) handleRevokeToken() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		_, t, ok, err := d.accountToken(c)
		if !ok {
			return err
		}
		alreadyRevoked := func() error {
			return d.renderAccounts(c, http.StatusConflict, views.AccountForm{},
				fmt.Sprintf("Not revoked: token %d (%s) was revoked already; nothing was changed.", t.ID, t.Name))
		}
		if t.RevokedAt != nil {
			return alreadyRevoked()
		}
		revoked, err := d.actions.RevokeToken(ctx, d.actor(c), t.ID)
		if errors.Is(err, tokens.ErrAlreadyRevoked) {
			return alreadyRevoked()
		}
		if err != nil {
			return err
		}
		flash(c, fmt.Sprintf("Revoked token %d (%s) of %s: every request with it is refused from now on",
			revoked.ID, revoked.Name, revoked.AccountEmail))
		return c.Redirect(http.StatusSeeOther, "/accounts")
	}
}
