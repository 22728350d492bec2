package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
)

// The signed-in session: its cookie and store, the role each page needs,
// and its start and end.

// Session keys.
const (
	sessUserID = "user_id"
	// sessStamp is the account's SessionStamp at sign-in (under the key
	// sessions signed in before it had that name keep it in).
	sessStamp = "password_stamp"
	sessCSRF  = "csrf"
	// sessIDToken is the provider's ID token of a sign-in through it,
	// which its end_session_endpoint takes as the sign-out's hint.
	sessIDToken = "oidc_id_token"
	sessFlash   = "flash"
)

// Echo context keys.
const (
	ctxSessions = "hookd.sessions"
	ctxUser     = "hookd.user"
)

// sessionManagers holds two scs managers over one store that differ only in
// the cookie's Secure flag: scs fixes the flag per manager, and a request
// over TLS must get a Secure cookie even when the configuration does not ask
// for one.
type sessionManagers struct {
	plain, secure *scs.SessionManager
	alwaysSecure  bool
}

// cookiePolicy names the dashboard's cookies. With an https public URL
// each takes the __Host- prefix, which a browser keeps only when it is
// Secure, for this host alone (no Domain) and at path /: neither a page of
// a sibling subdomain nor one over plain HTTP can plant or overwrite it.
type cookiePolicy struct {
	hostOnly bool
}

// name is the cookie's name under the policy.
func (p cookiePolicy) name(name string) string {
	if p.hostOnly {
		return "__Host-" + name
	}
	return name
}

// path is where the cookie is sent: path, or / for a __Host- cookie.
func (p cookiePolicy) path(path string) string {
	if p.hostOnly {
		return "/"
	}
	return path
}

// isHTTPS reports whether the public URL (HOOKD_PUBLIC_URL) is https.
func isHTTPS(publicURL string) bool {
	u, err := url.Parse(publicURL)
	return err == nil && u.Scheme == "https"
}

func newSessionManagers(store scs.Store, alwaysSecure bool, maxAge time.Duration, cookies cookiePolicy) sessionManagers {
	mk := func(secure bool) *scs.SessionManager {
		sm := scs.New()
		sm.Store = store
		// A session lasts maxAge (HOOKD_SESSION_MAX_AGE) from its sign-in,
		// whose new token sets scs's deadline, and the store refuses it
		// after that: someone the identity provider no longer lets in is
		// out by then at the latest. There is no idle timeout: the
		// overview polls every 2 seconds, so an open tab is never idle, and
		// scs would rewrite the session on every poll to extend it.
		sm.Lifetime = maxAge
		sm.Cookie.Name = cookies.name("hookd_session")
		sm.Cookie.HttpOnly = true
		sm.Cookie.SameSite = http.SameSiteLaxMode
		sm.Cookie.Path = "/"
		sm.Cookie.Secure = secure
		return sm
	}
	return sessionManagers{plain: mk(false), secure: mk(true), alwaysSecure: alwaysSecure}
}

func (m sessionManagers) forRequest(r *http.Request) *scs.SessionManager {
	if m.alwaysSecure || r.TLS != nil {
		return m.secure
	}
	return m.plain
}

// loadSession loads the request's session and saves it, with its cookie,
// just before the response's header goes out, whoever writes it (a handler
// or the error handler).
func (d *dashboard) loadSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		sm := d.sessions.forRequest(c.Request())
		var token string
		if cookie, err := c.Cookie(sm.Cookie.Name); err == nil {
			token = cookie.Value
		}
		ctx, err := sm.Load(c.Request().Context(), token)
		if err != nil {
			return fmt.Errorf("load session: %w", err)
		}
		c.SetRequest(c.Request().WithContext(ctx))
		c.Set(ctxSessions, sm)
		res := c.Response()
		res.Header().Add("Vary", "Cookie")
		noStore(c)
		res.Before(func() {
			switch sm.Status(ctx) {
			case scs.Modified:
				token, expiry, err := sm.Commit(ctx)
				if err != nil {
					// The header is going out already; the change is
					// lost and the person signs in again.
					d.logger.ErrorContext(ctx, "save session", "err", err,
						"request_id", res.Header().Get(echo.HeaderXRequestID))
					return
				}
				sm.WriteSessionCookie(ctx, res, token, expiry)
			case scs.Destroyed:
				sm.WriteSessionCookie(ctx, res, "", time.Time{})
			}
		})
		return next(c)
	}
}

func session(c echo.Context) *scs.SessionManager {
	return c.Get(ctxSessions).(*scs.SessionManager)
}

// requireRole lets through only a signed-in account whose role allows need.
// Without a session it sends the person to sign in and back; with too low a
// role it answers 403.
func (d *dashboard) requireRole(need accounts.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ctx := c.Request().Context()
			sm := session(c)
			id := sm.GetInt64(ctx, sessUserID)
			if id == 0 {
				return redirectToLogin(c)
			}
			u, err := d.accounts.User(ctx, id)
			if err != nil && !errors.Is(err, accounts.ErrNotFound) {
				return err
			}
			// The account was removed, or its password changed, since
			// this session signed in: the session ends here.
			if errors.Is(err, accounts.ErrNotFound) || sm.GetString(ctx, sessStamp) != u.SessionStamp() {
				if err := sm.Destroy(ctx); err != nil {
					return err
				}
				return redirectToLogin(c)
			}
			c.Set(ctxUser, &u)
			if !u.Role.Allows(need) {
				return echo.NewHTTPError(http.StatusForbidden,
					fmt.Sprintf("Your role, %s, may not do this. Ask an admin if you need it.", u.Role))
			}
			return next(c)
		}
	}
}

// actor names the signed-in account in the audit log: its email, id and,
// for the provider's, issuer and subject.
func actor(c echo.Context) audit.Account {
	return idp.AuditAccount(*currentUser(c))
}

// actor is the person signed in, as the shared actions name who acts.
func (d *dashboard) actor(c echo.Context) actions.Actor {
	return actions.Actor{Account: actor(c)}
}

func currentUser(c echo.Context) *accounts.User {
	u, _ := c.Get(ctxUser).(*accounts.User)
	return u
}

func redirectToLogin(c echo.Context) error {
	r := c.Request()
	target := "/login"
	if r.Method == http.MethodGet && r.URL.Path != "/" {
		target += "?next=" + url.QueryEscape(r.URL.RequestURI())
	}
	if r.Header.Get("HX-Request") == "true" {
		// The stats block polls with htmx: make it load the sign-in page
		// in place of the whole page, not inside the block.
		c.Response().Header().Set("HX-Redirect", "/login?next=%2F")
		return c.String(http.StatusUnauthorized, "Your session has ended: sign in again.\n")
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// localPath returns p when it is a path on this site, and fallback
// otherwise, so a crafted ?next= or back= cannot send anyone elsewhere.
func localPath(p, fallback string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, `/\`) ||
		strings.ContainsAny(p, "\r\n\t") {
		return fallback
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return fallback
	}
	return p
}

// signIn gives the browser a session signed in as u.
func signIn(c echo.Context, u accounts.User) error {
	ctx := c.Request().Context()
	// A new token at sign-in, so a session id planted before it (session
	// fixation) is worth nothing after; a new CSRF token for the same
	// reason. The new token also starts the session's lifetime afresh.
	sm := session(c)
	if err := sm.RenewToken(ctx); err != nil {
		return fmt.Errorf("renew session: %w", err)
	}
	sm.Put(ctx, sessUserID, u.ID)
	sm.Put(ctx, sessStamp, u.SessionStamp())
	sm.Put(ctx, sessCSRF, randomToken())
	return nil
}

func (d *dashboard) handleLogout() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		u := currentUser(c)
		if err := d.accounts.InTx(ctx, func(tx *accounts.Tx) error {
			return audit.RecordAccount(ctx, tx.PgxTx(), idp.AuditAccount(*u), audit.Logout, "", 0)
		}); err != nil {
			return err
		}
		idToken := session(c).GetString(ctx, sessIDToken)
		// Destroy deletes the session from the store, so its token is
		// useless even if it was copied. The goodbye travels in the URL:
		// a session kept only to carry it would be stored for nobody.
		if err := session(c).Destroy(ctx); err != nil {
			return fmt.Errorf("end session: %w", err)
		}
		// Signed in through the provider, the person is signed out there
		// too when it has an end_session_endpoint: on a shared computer
		// the next click on "Sign in" would otherwise be signed straight
		// back in by the provider's own session.
		if u.FromProvider() && d.opts.OIDC != nil && d.opts.PublicURL != "" {
			back := strings.TrimRight(d.opts.PublicURL, "/") + idp.SignedOutPath
			if to, ok := d.opts.OIDC.EndSessionURL(ctx, idToken, back); ok {
				return c.Redirect(http.StatusSeeOther, to)
			}
		}
		return c.Redirect(http.StatusSeeOther, "/login?signed_out=1")
	}
}
