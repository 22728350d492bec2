package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/accounts"
)

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
	nonce := d.csrfNonce(c)
	if nonce == "" {
		nonce = randomToken()
		c.Set(ctxCSRFNonce, nonce)
		c.SetCookie(&http.Cookie{
			Name:     d.cookies.name(csrfCookie),
			Value:    nonce,
			Path:     d.cookies.path("/login"),
			HttpOnly: true,
			SameSite: http.SameSiteLaxMode,
			Secure:   d.sessions.forRequest(c.Request()).Cookie.Secure,
		})
	}
	return d.signNonce(c.Request().Context(), nonce)
}

// csrfNonce returns the sign-in form's nonce: the one set during this
// request, else the cookie's when it is one hookd could have made.
func (d *dashboard) csrfNonce(c echo.Context) string {
	if n, ok := c.Get(ctxCSRFNonce).(string); ok {
		return n
	}
	cookie, err := c.Cookie(d.cookies.name(csrfCookie))
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
		want, nonce := sm.GetString(ctx, sessCSRF), d.csrfNonce(c)
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
