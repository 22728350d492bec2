package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/accounts"
)

// knownDeviceCookie marks a browser that signed in to an account: a
// successful sign-in sets it, signed under a key kept in the database, so
// every replica recognises it. A sign-in from such a browser to that
// account is counted on its own (not with its address's, nor with the
// account's across all addresses) and may take the password-check slot
// kept for known browsers, so no stranger's guesses, from anywhere, keep
// the account's owner out.
//
// A cookie rather than a table of addresses that signed in before: it
// follows the person to another network (a train, home, a rotating IPv6
// prefix) at no row per sign-in, and it is not shared with every stranger
// behind the same NAT or carrier-grade NAT, as an address is. It names no
// account: it is the HMAC of the email and the time it was set, so it works
// only for the email it was set for, and tells whoever reads it nothing. A
// browser keeps one, for the account it last signed in to.
const (
	knownDeviceCookie   = "hookd_device"
	knownDeviceLifetime = 180 * 24 * time.Hour
)

// knownDevice returns the request's known-browser mark for email, and
// whether it has a valid one.
func (d *dashboard) knownDevice(c echo.Context, email string) (string, bool, error) {
	cookie, err := c.Cookie(d.cookies.name(knownDeviceCookie))
	if err != nil {
		return "", false, nil
	}
	at, mac, ok := strings.Cut(cookie.Value, ".")
	if !ok {
		return "", false, nil
	}
	secs, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return "", false, nil
	}
	if age := time.Since(time.Unix(secs, 0)); age < 0 || age > knownDeviceLifetime {
		return "", false, nil
	}
	want, err := d.deviceMAC(c.Request().Context(), email, secs)
	if err != nil {
		return "", false, err
	}
	if !hmac.Equal([]byte(mac), []byte(want)) {
		return "", false, nil
	}
	return mac, true, nil
}

// rememberDevice marks the browser as one that signed in to email.
func (d *dashboard) rememberDevice(c echo.Context, email string) error {
	secs := time.Now().Unix()
	mac, err := d.deviceMAC(c.Request().Context(), email, secs)
	if err != nil {
		return err
	}
	cookie := &http.Cookie{
		Name:     d.cookies.name(knownDeviceCookie),
		Value:    strconv.FormatInt(secs, 10) + "." + mac,
		Path:     d.cookies.path("/login"),
		MaxAge:   int(knownDeviceLifetime.Seconds()),
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   d.sessions.forRequest(c.Request()).Cookie.Secure,
	}
	// Added as the response goes out, after the session's cookie (added
	// the same way by loadSession), which stays the response's first.
	res := c.Response()
	res.Before(func() { http.SetCookie(res, cookie) })
	return nil
}

func (d *dashboard) deviceMAC(ctx context.Context, email string, secs int64) (string, error) {
	key, err := d.deviceKey(ctx)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("hookd known browser\x00" + strings.ToLower(email) + "\x00" + strconv.FormatInt(secs, 10)))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// deviceKey returns the key known-browser cookies are signed with.
func (d *dashboard) deviceKey(ctx context.Context) ([]byte, error) {
	key, err := d.deviceKeys.Current(ctx)
	if err != nil {
		return nil, err
	}
	return key.Key, nil
}

// deviceKeys is the key ring of known-browser cookies, when the server has
// accounts.
func deviceKeys(opts Options) *accounts.KeyRing {
	if opts.Stores.Accounts == nil {
		return nil
	}
	return accounts.NewKeyRing(opts.Stores.Accounts, accounts.KnownBrowserKey, accounts.KeyRingConfig{})
}
