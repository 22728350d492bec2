package web

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/views"
)

// The accounts page, for admins. Every change runs in one transaction with
// its audit entry; the rules that keep an admin in charge (nobody changes
// or removes their own account, the last admin stays) live in accounts, which
// checks them on locked rows.

const noSuchAccount = "There is no such account; it may have been removed. Nothing was changed."

// renderAccounts renders the accounts page: add is the add form's state,
// errMsg a refusal of a change to a listed account.
func (d *dashboard) renderAccounts(c echo.Context, status int, add views.AccountForm, errMsg string) error {
	return d.renderAccountList(c, status, views.AccountList{Add: add}, errMsg)
}

// renderAccountList renders the accounts page with the forms' state in l
// (the add form, an account's create-token form, a token just created),
// filling in the accounts and their tokens.
func (d *dashboard) renderAccountList(c echo.Context, status int, l views.AccountList, errMsg string) error {
	ctx := c.Request().Context()
	users, err := d.actions.Accounts(ctx)
	if err != nil {
		return err
	}
	all, err := d.tokens.List(ctx, 0)
	if err != nil {
		return err
	}
	l.Users, l.Tokens = accountViews(users), map[int64][]tokens.Token{}
	for _, t := range all {
		l.Tokens[t.AccountID] = append(l.Tokens[t.AccountID], t)
	}
	if l.Add.Role == "" {
		// The least a new account may do, as with `hookd user add`.
		l.Add.Role = accounts.RoleViewer
	}
	if f := l.TokenForm; f.Error != "" && !slices.ContainsFunc(users, func(u accounts.User) bool { return u.ID == f.AccountID }) {
		// Its account went meanwhile, and its form with it.
		errMsg = f.Error
	}
	p := d.page(c, "Accounts", "accounts")
	p.Error = errMsg
	return render(c, status, views.Accounts(p, l))
}

func (d *dashboard) handleAccounts() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.renderAccountList(c, http.StatusOK, views.AccountList{NewToken: d.takeNewToken(c)}, "")
	}
}

// accountView is what a page shows of u: everything but its password hash.
func accountView(u accounts.User) views.Account {
	return views.Account{ID: u.ID, Email: u.Email, Role: u.Role, CreatedAt: u.CreatedAt,
		FromProvider: u.FromProvider(), LastSignInAt: u.LastSignInAt}
}

func accountViews(users []accounts.User) []views.Account {
	out := make([]views.Account, len(users))
	for i, u := range users {
		out[i] = accountView(u)
	}
	return out
}

// refusal returns the reason of an *accounts.RefusedError as a sentence
// starting with what did not happen, and ok false for any other error.
func refusal(err error, what string) (string, bool) {
	var refused *accounts.RefusedError
	if !errors.As(err, &refused) {
		return "", false
	}
	return what + ": " + refused.Reason + ".", true
}

func (d *dashboard) handleAddAccount() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		form := views.AccountForm{Email: strings.TrimSpace(c.FormValue("email"))}
		role, err := accounts.ParseRole(c.FormValue("role"))
		if err != nil {
			form.Error = "Not added: " + err.Error() + "."
			return d.renderAccounts(c, http.StatusUnprocessableEntity, form, "")
		}
		form.Role = role
		u, err := d.actions.AddAccount(ctx, d.actor(c), form.Email, c.FormValue("password"), role)
		if msg, ok := refusal(err, "Not added"); ok {
			form.Error = msg
			return d.renderAccounts(c, http.StatusUnprocessableEntity, form, "")
		}
		if err != nil {
			return err
		}
		flash(c, "Added "+actions.AccountText(u))
		return c.Redirect(http.StatusSeeOther, "/accounts")
	}
}

// accountID parses the :id of the path; ok is false, with the accounts
// page rendered saying so, when no account can have it.
func (d *dashboard) accountID(c echo.Context) (id int64, ok bool, err error) {
	id, perr := strconv.ParseInt(c.Param("id"), 10, 64)
	if perr != nil || id < 1 {
		return 0, false, d.renderAccounts(c, http.StatusNotFound, views.AccountForm{}, noSuchAccount)
	}
	return id, true, nil
}

// accountChangeFailed renders the accounts page for a refused change or a
// missing account, and returns any other error as it is.
func (d *dashboard) accountChangeFailed(c echo.Context, err error, what string) error {
	if msg, ok := refusal(err, what); ok {
		return d.renderAccounts(c, http.StatusConflict, views.AccountForm{}, msg)
	}
	if errors.Is(err, accounts.ErrNotFound) {
		return d.renderAccounts(c, http.StatusNotFound, views.AccountForm{}, noSuchAccount)
	}
	return err
}

func (d *dashboard) handleSetRole() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id, ok, err := d.accountID(c)
		if !ok {
			return err
		}
		role, err := accounts.ParseRole(c.FormValue("role"))
		if err != nil {
			return d.renderAccounts(c, http.StatusUnprocessableEntity, views.AccountForm{},
				"Not changed: "+err.Error()+".")
		}
		r, err := d.actions.SetRole(ctx, d.actor(c), id, role)
		if err != nil {
			return d.accountChangeFailed(c, err, "Not changed")
		}
		before := r.Before
		if !r.Changed {
			flash(c, fmt.Sprintf("%s is already %s; nothing was changed.", before.Email, role))
		} else {
			flash(c, fmt.Sprintf("%s is now %s", before.Email, role))
		}
		return c.Redirect(http.StatusSeeOther, "/accounts")
	}
}

// handleRemovePreview asks before a removal. It checks only that the
// account exists; whether it may be removed is decided when it is, on
// locked rows.
func (d *dashboard) handleRemovePreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		id, ok, err := d.accountID(c)
		if !ok {
			return err
		}
		u, err := d.actions.RemoveAccount(c.Request().Context(), d.actor(c), id, true)
		if err != nil {
			return d.accountChangeFailed(c, err, "Not removed")
		}
		return render(c, http.StatusOK, views.AccountRemoveConfirm(d.page(c, "Remove account?", "accounts"), accountView(u)))
	}
}

func (d *dashboard) handleRemove() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id, ok, err := d.accountID(c)
		if !ok {
			return err
		}
		removed, err := d.actions.RemoveAccount(ctx, d.actor(c), id, false)
		if err != nil {
			return d.accountChangeFailed(c, err, "Not removed")
		}
		flash(c, "Removed "+removed.Email)
		return c.Redirect(http.StatusSeeOther, "/accounts")
	}
}

// handleEndSessions ends every session of an account, the admin's own
// included: the person is asked to sign in again on their next page, and
// an account of the identity provider gets in again only while its groups
// still give it a role.
func (d *dashboard) handleEndSessions() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id, ok, err := d.accountID(c)
		if !ok {
			return err
		}
		ended, err := d.actions.EndSessions(ctx, d.actor(c), id)
		if err != nil {
			return d.accountChangeFailed(c, err, "No session ended")
		}
		flash(c, "Ended every session of "+ended.Email)
		return c.Redirect(http.StatusSeeOther, "/accounts")
	}
}
