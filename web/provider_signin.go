package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/netblock"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/views"
)

// Sign-in through the identity provider (OpenID Connect). GET /auth/oidc
// sends the browser to the provider with a fresh state, nonce and PKCE
// verifier, which it keeps in a cookie signed under the sign-in form's key:
// a visit writes no row, and the state is tied to the browser that started
// the sign-in. The callback takes the state once (a row per used state,
// so a replayed answer is refused on every replica), counts against the
// address's sign-in budget like a password sign-in, and signs in only when
// the ID token checks out and the groups give a role. A callback that
// fails creates no account, changes no role and starts no session.

const (
	oidcStateCookie = "hookd_oidc"
	// oidcStateLifetime is how long a started sign-in may take at the
	// provider, typing a password and a second factor included.
	oidcStateLifetime = 10 * time.Minute
)

// signInMethods is what the sign-in page offers.
func (d *dashboard) signInMethods() views.SignInMethods {
	return views.SignInMethods{Provider: d.opts.OIDC != nil, PasswordOff: d.opts.PasswordSignInOff}
}

// oidcState is what the browser keeps between /auth/oidc and the callback.
type oidcState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"next"`
	Started  int64  `json:"t"`
}

func stateMAC(key []byte, payload string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("hookd oidc sign-in\x00" + payload))
	return mac.Sum(nil)
}

func (d *dashboard) handleOIDCStart() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		next := localPath(c.QueryParam("next"), "/")
		if session(c).GetInt64(ctx, sessUserID) != 0 {
			return c.Redirect(http.StatusSeeOther, next)
		}
		start, err := d.opts.OIDC.Start(ctx)
		if err != nil {
			// What went wrong goes to the log alone: go-oidc's errors carry
			// the provider's answer and addresses inside the network.
			d.logger.WarnContext(ctx, "identity provider unreachable", "issuer", d.opts.OIDC.Issuer(), "err", err,
				"request_id", requestID(c))
			return d.signInFailed(c, http.StatusServiceUnavailable, "The identity provider does not answer, so sign-in "+
				"cannot start. Try again in a moment; "+d.fallback()+" "+d.seeLog(c))
		}
		payload, err := json.Marshal(oidcState{State: start.State, Nonce: start.Nonce, Verifier: start.Verifier,
			Next: next, Started: time.Now().Unix()})
		if err != nil {
			return err
		}
		key, err := d.formKeys.Current(ctx)
		if err != nil {
			return err
		}
		value := base64.RawURLEncoding.EncodeToString(payload)
		value += "." + base64.RawURLEncoding.EncodeToString(stateMAC(key.Key, value))
		d.setStateCookie(c, value, int(oidcStateLifetime.Seconds()))
		return c.Redirect(http.StatusSeeOther, start.URL)
	}
}

// setStateCookie sets the started sign-in's cookie, or clears it with a
// negative maxAge. It is sent on the provider's redirect back (a top-level
// GET navigation, which SameSite=Lax lets through) and to no other path.
func (d *dashboard) setStateCookie(c echo.Context, value string, maxAge int) {
	c.SetCookie(&http.Cookie{
		Name:     d.cookies.name(oidcStateCookie),
		Value:    value,
		Path:     d.cookies.path("/auth/oidc"),
		MaxAge:   maxAge,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   d.sessions.forRequest(c.Request()).Cookie.Secure,
	})
}

// fallback says how else to get in, for the pages of a failed sign-in.
func (d *dashboard) fallback() string {
	if d.opts.PasswordSignInOff {
		return "if the provider stays down, the emergency admin can still sign in with a password."
	}
	return "you can also sign in with a password."
}

// seeLog tells whoever sees a failed sign-in where its details are.
func (d *dashboard) seeLog(c echo.Context) string {
	return "If it goes on, tell whoever runs hookd: its log says why, under request " + requestID(c) + "."
}

func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

func (d *dashboard) signInFailed(c echo.Context, status int, msg string) error {
	p := d.page(c, "Not signed in", "")
	return render(c, status, views.SignInFailed(p, msg))
}

// readStateCookie returns the started sign-in this browser holds, or why
// there is none it may finish.
func (d *dashboard) readStateCookie(c echo.Context) (oidcState, string, error) {
	const startAgain = " Start the sign-in again from this browser."
	cookie, err := c.Cookie(d.cookies.name(oidcStateCookie))
	if err != nil || cookie.Value == "" {
		return oidcState{}, "This browser did not start a sign-in here, or it was finished already, so the provider's answer " +
			"cannot be taken (it may have been meant for another browser)." + startAgain, nil
	}
	payload, macText, _ := strings.Cut(cookie.Value, ".")
	mac, err := base64.RawURLEncoding.DecodeString(macText)
	if err != nil {
		return oidcState{}, "This browser's sign-in cookie was not made by hookd." + startAgain, nil
	}
	verdict, err := d.formKeys.Verify(c.Request().Context(), func(key []byte) bool { return hmac.Equal(stateMAC(key, payload), mac) })
	if err != nil {
		return oidcState{}, "", err
	}
	if verdict != accounts.Accepted {
		return oidcState{}, "This browser's sign-in cookie was not made by hookd, or under a key replaced since." + startAgain, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var st oidcState
	if err == nil {
		err = json.Unmarshal(raw, &st)
	}
	if err != nil {
		return oidcState{}, "This browser's sign-in cookie could not be read." + startAgain, nil
	}
	if !stateFresh(time.Unix(st.Started, 0), time.Now()) {
		return oidcState{}, fmt.Sprintf("This sign-in was started more than %d minutes ago.", int(oidcStateLifetime.Minutes())) + startAgain, nil
	}
	return st, "", nil
}

// stateFresh reports whether a sign-in started at started may still be
// finished at now: within oidcStateLifetime, give or take idp.ClockSkew, as
// another replica, whose clock may be that far off, may have started it.
func stateFresh(started, now time.Time) bool {
	age := now.Sub(started)
	return age >= -idp.ClockSkew && age <= oidcStateLifetime+idp.ClockSkew
}

func (d *dashboard) handleOIDCCallback() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		// The address's budget, as for a password sign-in: each callback
		// costs a request to the provider and a row, so a flood of forged
		// ones waits like a flood of guesses.
		address := accounts.LoginKey{Key: loginKey("ip:" + netblock.Of(c.RealIP())), Free: freeAttemptsPerAddr}
		wait, err := d.accounts.AdmitLogin(ctx, address)
		if err != nil {
			return err
		}
		if wait > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second).Seconds())))
			return d.signInFailed(c, http.StatusTooManyRequests,
				fmt.Sprintf("Too many failed sign-ins from your address. Try again in %s.", waitText(wait)))
		}
		st, ok, err := d.spendCallbackState(c)
		if !ok {
			return err
		}
		id, role, ok, err := d.providerIdentity(c, st)
		if !ok {
			return err
		}
		u, err := d.signInFromProvider(ctx, id, role, address.Key)
		if err != nil {
			return err
		}
		if err := signIn(c, u); err != nil {
			return err
		}
		// Kept for the sign-out, which hands it to the provider's
		// end_session_endpoint as the hint of whose session to end.
		session(c).Put(ctx, sessIDToken, id.Tokens.ID)
		return c.Redirect(http.StatusSeeOther, localPath(st.Next, "/"))
	}
}

// spendCallbackState checks that the provider's answer is for the sign-in
// this browser started, and spends that sign-in, whatever comes of it: each
// is good once. It returns false once it has answered the request itself.
func (d *dashboard) spendCallbackState(c echo.Context) (oidcState, bool, error) {
	st, why, err := d.readStateCookie(c)
	if err != nil {
		return st, false, err
	}
	d.setStateCookie(c, "", -1)
	if why != "" {
		return st, false, d.signInFailed(c, http.StatusBadRequest, why)
	}
	if subtle.ConstantTimeCompare([]byte(c.QueryParam("state")), []byte(st.State)) != 1 {
		return st, false, d.signInFailed(c, http.StatusBadRequest, "The provider's answer is for another sign-in than the one "+
			"this browser started (its state does not match). Start the sign-in again.")
	}
	fresh, err := d.accounts.UseSignInState(c.Request().Context(), st.State, time.Unix(st.Started, 0).Add(oidcStateLifetime))
	if err != nil {
		return st, false, err
	}
	if !fresh {
		return st, false, d.signInFailed(c, http.StatusBadRequest, "This answer of the provider was used already: each sign-in "+
			"is good once. Start the sign-in again.")
	}
	return st, true, nil
}

// providerIdentity redeems the answer's code for the ID token the provider
// signed (checked against st's verifier and nonce), and the role its
// groups give. It returns false once it has answered the request itself:
// the provider refused, the token was not accepted, or no group maps to a
// role (audited).
func (d *dashboard) providerIdentity(c echo.Context, st oidcState) (idp.Identity, accounts.Role, bool, error) {
	ctx, provider := c.Request().Context(), d.opts.OIDC
	if e := c.QueryParam("error"); e != "" {
		return idp.Identity{}, "", false, d.signInFailed(c, http.StatusUnauthorized, "The identity provider did not sign you in: "+
			strings.TrimSpace(e+" "+c.QueryParam("error_description"))+".")
	}
	if c.QueryParam("code") == "" {
		return idp.Identity{}, "", false, d.signInFailed(c, http.StatusBadRequest, "The provider's answer has no code to sign in with.")
	}
	id, err := provider.Finish(ctx, c.QueryParam("code"), st.Verifier, st.Nonce)
	if err != nil {
		// Nobody's access changes here: the provider may be down, or its
		// answer unreadable, which says nothing about the person.
		d.logger.WarnContext(ctx, "sign-in through the identity provider failed", "issuer", provider.Issuer(), "err", err,
			"request_id", requestID(c))
		return id, "", false, d.signInFailed(c, http.StatusUnauthorized, "The identity provider's answer could not be "+
			"accepted, so you are not signed in. Start the sign-in again. "+d.seeLog(c))
	}
	role, err := provider.Role(id)
	if refusal, ok := errors.AsType[*idp.Refusal](err); ok {
		// The provider vouched for these claims: a person it no longer
		// lets in loses the account they had, its role and its sessions.
		revoked, err := idp.Revoke(ctx, d.accounts, id, "refused at sign-in: "+refusal.Reason)
		if err != nil {
			return id, "", false, err
		}
		if !revoked {
			if err := d.auditProvider(ctx, id, audit.OIDCRefused, "no role given: "+refusal.Reason); err != nil {
				return id, "", false, err
			}
		}
		return id, "", false, d.signInFailed(c, http.StatusForbidden, refusal.Reason)
	}
	return id, role, err == nil, err
}

// signInFromProvider makes or updates the account of the provider's
// identity with role, forgives the address's attempt, and audits the
// sign-in, in one transaction.
func (d *dashboard) signInFromProvider(ctx context.Context, id idp.Identity, role accounts.Role, addressKey string) (accounts.User, error) {
	var u accounts.User
	var sealed []byte
	if d.opts.OIDC.Offline() {
		var err error
		if sealed, err = d.opts.OIDC.SealRefreshToken(id.Tokens.Refresh); err != nil {
			return u, err
		}
	}
	err := d.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		var before accounts.Role
		var err error
		if u, before, err = tx.SignInFromProvider(ctx, accounts.ProviderIdentity{
			Issuer: id.Issuer, Subject: id.Subject, Email: id.Email}, role); err != nil {
			return err
		}
		if err := tx.ForgiveLoginAttempt(ctx, addressKey); err != nil {
			return err
		}
		if err := tx.KeepRefreshToken(ctx, u.ID, sealed, time.Now().Add(d.opts.OIDCRecheck)); err != nil {
			return err
		}
		what := "role " + string(role)
		switch {
		case before == "":
			what += ", first sign-in"
		case before != role:
			what += ", was " + string(before)
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), idp.AuditAccount(u), audit.OIDCLogin, idp.ProviderTarget(u)+": "+what, 0)
	})
	return u, err
}

// auditProvider audits what became of a person the provider vouched for
// who has no account here.
func (d *dashboard) auditProvider(ctx context.Context, id idp.Identity, action audit.Action, what string) error {
	who := accounts.User{Email: id.Email, OIDCIssuer: id.Issuer, OIDCSubject: id.Subject}
	return d.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		return audit.RecordAccount(ctx, tx.PgxTx(), audit.Account{Email: id.Email, Issuer: id.Issuer, Subject: id.Subject},
			action, idp.ProviderTarget(who)+": "+what, 0)
	})
}
