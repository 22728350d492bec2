package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/netblock"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/views"
)

// Session keys.
const (
	sessUserID = "user_id"
	// sessStamp is the account's SessionStamp at sign-in (under the key
	// sessions signed in before it had that name keep it in).
	sessStamp = "password_stamp"
	sessCSRF  = "csrf"
	sessFlash = "flash"
)

// Echo context keys.
const (
	ctxSessions = "hookd.sessions"
	ctxUser     = "hookd.user"
)

// Sign-in attempts each count may make within an hour before sign-ins must
// wait. The account is counted per address, so a guesser elsewhere cannot
// make its owner wait; the address alone gets more, as several people
// behind one NAT share it. An IPv6 address counts as its /64, which one
// home or server is given whole: counted one by one, its 2^64 addresses
// would be 2^64 fresh budgets.
const (
	freeAttemptsPerAccount = 5
	// maxEmailLen is the longest email address there is (RFC 5321's path
	// limit less its angle brackets).
	maxEmailLen         = 254
	freeAttemptsPerAddr = 50
	// freeChecksPerAccount is an account's budget across every address:
	// guessers spread over many addresses (each within its own budget)
	// together get this many checks an hour before each further check of
	// the account waits, 1 s, 2 s, 4 s, ... up to 15 minutes. It never
	// applies to a browser the account signed in from before (see
	// knownDeviceCookie), so a stranger can slow new browsers down but
	// never keep the account's owner out. A single address cannot spend it
	// alone: its own count for the account lets it about 17 checks in
	// the first hour.
	freeChecksPerAccount = 20
)

// maxPasswordChecks is how many password checks run at once on a replica.
// Each holds argon2's 19 MiB for about 30 ms of a core; more at once would
// not finish sooner, only hold more memory, so a flood of sign-ins beyond
// it is turned away at once rather than queued. An address (an IPv6 /64)
// holds at most one of them, and one is kept for known browsers, so a
// flood from rotating addresses can fill the others and still not keep out
// a person who signed in from that browser before.
const maxPasswordChecks = 4

// sessionManagers holds two scs managers over one store that differ only in
// the cookie's Secure flag: scs fixes the flag per manager, and a request
// over TLS must get a Secure cookie even when the configuration does not ask
// for one.
type sessionManagers struct {
	plain, secure *scs.SessionManager
	alwaysSecure  bool
}

func newSessionManagers(store scs.Store, alwaysSecure bool, maxAge time.Duration) sessionManagers {
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
		sm.Cookie.Name = "hookd_session"
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

// The sign-in form's CSRF token. Before sign-in there is no session to keep
// a token in, and storing a session for every visit to /login would let
// anyone fill the sessions table. The browser keeps a random nonce in a
// cookie instead, and the form carries the nonce's HMAC under a key kept in
// the database, so every replica checks it alike: another site can neither
// read the cookie nor compute the HMAC of a nonce it planted.
const (
	csrfCookie   = "hookd_csrf"
	ctxCSRFNonce = "hookd.csrf_nonce"
)

// maxFormBody is the largest dashboard form accepted; the forms hold a few
// short fields.
const maxFormBody = 64 << 10

// sessionCSRF returns the signed-in session's CSRF token, creating it on
// first use, or "" without a signed-in session: nothing is stored for a
// visitor who has not signed in.
func sessionCSRF(c echo.Context) string {
	sm, ctx := session(c), c.Request().Context()
	if sm.GetInt64(ctx, sessUserID) == 0 {
		return ""
	}
	tok := sm.GetString(ctx, sessCSRF)
	if tok == "" {
		tok = randomToken()
		sm.Put(ctx, sessCSRF, tok)
	}
	return tok
}

// loginCSRF returns the sign-in form's token, setting its cookie when the
// browser has none.
func (d *dashboard) loginCSRF(c echo.Context) (string, error) {
	nonce := csrfNonce(c)
	if nonce == "" {
		nonce = randomToken()
		c.Set(ctxCSRFNonce, nonce)
		c.SetCookie(&http.Cookie{
			Name:     csrfCookie,
			Value:    nonce,
			Path:     "/login",
			HttpOnly: true,
			SameSite: http.SameSiteLaxMode,
			Secure:   d.sessions.forRequest(c.Request()).Cookie.Secure,
		})
	}
	return d.signNonce(c.Request().Context(), nonce)
}

// csrfNonce returns the sign-in form's nonce: the one set during this
// request, else the cookie's when it is one hookd could have made.
func csrfNonce(c echo.Context) string {
	if n, ok := c.Get(ctxCSRFNonce).(string); ok {
		return n
	}
	cookie, err := c.Cookie(csrfCookie)
	if err != nil {
		return ""
	}
	if b, err := base64.RawURLEncoding.DecodeString(cookie.Value); err != nil || len(b) != 32 {
		return ""
	}
	return cookie.Value
}

func (d *dashboard) signNonce(ctx context.Context, nonce string) (string, error) {
	key, err := d.formKeys.Current(ctx)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(nonceMAC(key.Key, nonce)), nil
}

func nonceMAC(key []byte, nonce string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("hookd sign-in form\x00" + nonce))
	return mac.Sum(nil)
}

// checkLoginCSRF checks the sign-in form's token against the nonce of its
// cookie under every key still accepted: the newest, and one replaced by
// `hookd keys rotate` less than an hour ago.
func (d *dashboard) checkLoginCSRF(ctx context.Context, nonce, got string) error {
	mac, err := base64.RawURLEncoding.DecodeString(got)
	if err != nil {
		return errCSRF
	}
	verdict, err := d.formKeys.Verify(ctx, func(key []byte) bool { return hmac.Equal(nonceMAC(key, nonce), mac) })
	switch {
	case err != nil:
		return err
	case verdict == accounts.Retired:
		return errFormKeyRetired
	case verdict != accounts.Accepted:
		return errCSRF
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

var (
	errCSRF = echo.NewHTTPError(http.StatusForbidden,
		"This form has expired or did not come from this site, so nothing was changed. Go back, reload the page and try again.")
	errFormKeyRetired = echo.NewHTTPError(http.StatusForbidden,
		"This sign-in form was signed with a key that was replaced more than an hour ago, so nothing was changed. "+
			"Reload the page and sign in again.")
	errFormTooLarge = echo.NewHTTPError(http.StatusRequestEntityTooLarge,
		fmt.Sprintf("This form is larger than the dashboard accepts (%d KiB), so nothing was changed.", maxFormBody>>10))
	errFormEncoding = echo.NewHTTPError(http.StatusUnsupportedMediaType,
		"Dashboard forms are sent URL-encoded (application/x-www-form-urlencoded); this one was not, so nothing was changed.")
	errBodyOnRead = echo.NewHTTPError(http.StatusBadRequest,
		"A GET request carries no body: the dashboard's pages read their filters from the address.")
)

// checkCSRF refuses any request that could change something unless its
// form carries the right token as _csrf. It knows which token that is, from
// the session or the sign-in cookie, before it reads the body, and reads
// only a URL-encoded body of at most maxFormBody: a request without a
// token to match costs no parsing at all, and none costs a multipart parse.
// A request that changes nothing is refused when it has a body, which no
// page sends: echo's FormValue would parse it, of any type, up to 32 MiB
// in memory and more on disk.
func (d *dashboard) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch r := c.Request(); r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			if r.ContentLength != 0 {
				return errBodyOnRead
			}
			return next(c)
		}
		// Which token to match is known, from the session or the
		// sign-in cookie, before the body is read.
		sm, ctx := session(c), c.Request().Context()
		signedIn := sm.GetInt64(ctx, sessUserID) != 0
		want, nonce := sm.GetString(ctx, sessCSRF), csrfNonce(c)
		if signedIn && want == "" || !signedIn && nonce == "" {
			return errCSRF
		}
		if err := readForm(c); err != nil {
			return err
		}
		got := c.Request().PostForm.Get("_csrf")
		if !signedIn {
			if err := d.checkLoginCSRF(ctx, nonce, got); err != nil {
				return err
			}
		} else if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return errCSRF
		}
		return next(c)
	}
}

// readForm parses the request's URL-encoded form, refusing any other
// encoding and any body over maxFormBody.
func readForm(c echo.Context) error {
	r := c.Request()
	if mt, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); mt != echo.MIMEApplicationForm {
		return errFormEncoding
	}
	if r.ContentLength > maxFormBody {
		return errFormTooLarge
	}
	r.Body = http.MaxBytesReader(c.Response(), r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return errFormTooLarge
		}
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read, so nothing was changed: "+err.Error())
	}
	return nil
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

func (d *dashboard) handleLoginPage() echo.HandlerFunc {
	return func(c echo.Context) error {
		next := localPath(c.QueryParam("next"), "/")
		if session(c).GetInt64(c.Request().Context(), sessUserID) != 0 {
			return c.Redirect(http.StatusSeeOther, next)
		}
		p := d.page(c, "Sign in", "")
		var err error
		if p.CSRF, err = d.loginCSRF(c); err != nil {
			return err
		}
		if c.QueryParam("signed_out") != "" {
			p.Flash = "You are signed out."
		}
		return render(c, http.StatusOK, views.Login(p, "", next, d.signInMethods()))
	}
}

func (d *dashboard) handleLogin() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		email := strings.TrimSpace(c.FormValue("email"))
		password := c.FormValue("password")
		next := localPath(c.FormValue("next"), "/")
		if status, msg := d.loginRefused(email); status != 0 {
			return d.refuseLogin(c, email, next, status, msg)
		}
		keys, release, wait, why, err := d.admitLogin(c, email)
		defer release()
		if err != nil {
			return err
		}
		if wait > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(max(wait, time.Second).Round(time.Second).Seconds())))
			return d.refuseLogin(c, email, next, http.StatusTooManyRequests, why)
		}

		u, err := d.accounts.Authenticate(ctx, email, password)
		if errors.Is(err, accounts.ErrBadCredentials) {
			return d.refuseLogin(c, email, next, http.StatusUnauthorized, "Wrong email or password.")
		}
		if err != nil {
			return err
		}

		if err := d.startSession(c, u, keys); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, next)
	}
}

// loginRefused says, with a status and a message, why a sign-in as email
// is refused before anything is counted or checked; status 0 lets it go on.
func (d *dashboard) loginRefused(email string) (status int, msg string) {
	// No address is that long (RFC 5321), and a longer one would only
	// be a large key to store: refused before anything else.
	if len(email) > maxEmailLen {
		return http.StatusBadRequest, fmt.Sprintf("An email address has at most %d characters.", maxEmailLen)
	}
	// With password sign-in off, only the emergency admin's email gets
	// as far as a count or a password check.
	if d.opts.PasswordSignInOff && (d.opts.EmergencyAdmin == "" || !strings.EqualFold(email, d.opts.EmergencyAdmin)) {
		return http.StatusForbidden, "Password sign-in is off: sign in with your identity provider. " +
			"Only the emergency admin account signs in with a password."
	}
	return 0, ""
}

// admitLogin decides whether the sign-in as email may check its password
// now. It takes one of the password checks' slots, of the browser when it
// is one known to have signed in as email and of the address otherwise,
// then asks the counts of failed sign-ins. It returns the keys the attempt
// counts under and the release of its slot (always callable), or how long
// to wait and why.
func (d *dashboard) admitLogin(c echo.Context, email string) (keys []accounts.LoginKey, release func(), wait time.Duration, why string, err error) {
	ctx := c.Request().Context()
	release = func() {}
	addr := netblock.Of(c.RealIP())
	device, known, err := d.knownDevice(c, email)
	if err != nil {
		return nil, release, 0, "", err
	}
	// A slot first, so a flood costs neither memory nor a write.
	holder := "address " + addr
	if known {
		holder = "device " + device
	}
	if !d.passwordChecks.take(holder, known) {
		return nil, release, time.Second, "Too many sign-ins at once. Try again in a second.", nil
	}
	release = func() { d.passwordChecks.release(holder) }

	keys, wait, why, err = d.signInCounts(ctx, email, addr, device, known)
	if err != nil || wait > 0 {
		return nil, release, wait, why, err
	}
	if wait, err = d.accounts.AdmitLogin(ctx, keys...); err != nil || wait > 0 {
		return nil, release, wait, fmt.Sprintf("Too many failed sign-ins. Try again in %s.", waitText(wait)), err
	}
	return keys, release, 0, "", nil
}

// refuseLogin answers status with the sign-in form again, email and next
// kept, saying msg.
func (d *dashboard) refuseLogin(c echo.Context, email, next string, status int, msg string) error {
	p := d.page(c, "Sign in", "")
	var err error
	if p.CSRF, err = d.loginCSRF(c); err != nil {
		return err
	}
	p.Error = msg
	return render(c, status, views.Login(p, email, next, d.signInMethods()))
}

// startSession signs u in: the attempt's counts forgiven and the sign-in
// audited, the browser remembered as one that signed in, and a session
// under a new token.
func (d *dashboard) startSession(c echo.Context, u accounts.User, keys []accounts.LoginKey) error {
	ctx := c.Request().Context()
	err := d.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		if err := tx.ClearLoginFailures(ctx, keys[0].Key); err != nil {
			return err
		}
		for _, k := range keys[1:] {
			if err := tx.ForgiveLoginAttempt(ctx, k.Key); err != nil {
				return err
			}
		}
		if err := tx.RecordSignIn(ctx, u.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx.PgxTx(), u.Email, audit.Login, "", 0)
	})
	if err != nil {
		return err
	}
	if err := d.rememberDevice(c, u.Email); err != nil {
		return err
	}
	return signIn(c, u)
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

func waitText(d time.Duration) string {
	if s := int(d.Round(time.Second).Seconds()); s < 60 {
		return fmt.Sprintf("%d seconds", max(s, 1))
	}
	return fmt.Sprintf("%d minutes", int(d.Round(time.Minute).Minutes()))
}

func (d *dashboard) handleLogout() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		u := currentUser(c)
		if err := d.accounts.InTx(ctx, func(tx *accounts.Tx) error {
			return audit.Record(ctx, tx.PgxTx(), u.Email, audit.Logout, "", 0)
		}); err != nil {
			return err
		}
		// Destroy deletes the session from the store, so its token is
		// useless even if it was copied. The goodbye travels in the URL:
		// a session kept only to carry it would be stored for nobody.
		if err := session(c).Destroy(ctx); err != nil {
			return fmt.Errorf("end session: %w", err)
		}
		return c.Redirect(http.StatusSeeOther, "/login?signed_out=1")
	}
}

// loginKey is how a sign-in count's name is stored: a hash of fixed length,
// so a count costs the same row whatever the email typed, and the table
// holds no address in the clear.
func loginKey(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}
