package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/accounts"
)

// checkSlots bounds the password checks running at once on this replica:
// at most max in all, at most one per holder (an address, or a known
// browser), and the last one only for a known browser. It is counted in
// memory, per replica: a slot is held for about 30 ms, far too short a
// time to share through the database, and what it protects (the replica's
// memory and cores) is per replica too.
type checkSlots struct {
	mu  sync.Mutex
	max int
	// held maps each holder to whether it is a known browser.
	held    map[string]bool
	unknown int
}

func newCheckSlots(max int) *checkSlots {
	return &checkSlots{max: max, held: make(map[string]bool, max)}
}

// take takes a slot for holder and reports whether it got one; a holder
// that already has one gets none. known says the holder is a browser the
// account signed in from before, which may take the slot kept for it.
func (s *checkSlots) take(holder string, known bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[holder]; ok || len(s.held) >= s.max || !known && s.unknown >= s.max-1 {
		return false
	}
	s.held[holder] = known
	if !known {
		s.unknown++
	}
	return true
}

func (s *checkSlots) release(holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if known, ok := s.held[holder]; ok && !known {
		s.unknown--
	}
	delete(s.held, holder)
}

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
	cookie, err := c.Cookie(knownDeviceCookie)
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
		Name:     knownDeviceCookie,
		Value:    strconv.FormatInt(secs, 10) + "." + mac,
		Path:     "/login",
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

// signInCounts returns the counts a sign-in attempt moves, first the one
// a success clears, or how long it must wait and why when a budget read
// before any count is written is spent.
//
// The attempt counts before the password is checked, in the statement
// that decides whether it may be checked at all (AdmitLogin), so
// concurrent guesses get no more checks than the counts allow, and a
// guesser made to wait learns nothing from further guesses.
func (d *dashboard) signInCounts(ctx context.Context, email, addr, device string, known bool) (
	keys []accounts.LoginKey, wait time.Duration, why string, err error) {
	lower := strings.ToLower(email)
	if known {
		// A browser the account signed in from before has a count of its
		// own: no stranger, at its address or any other, can make it wait.
		return []accounts.LoginKey{{Key: loginKey("account:" + lower + "|device:" + device), Free: freeAttemptsPerAccount}}, 0, "", nil
	}
	accountAtAddress := accounts.LoginKey{Key: loginKey("account:" + lower + "|ip:" + addr), Free: freeAttemptsPerAccount}
	address := accounts.LoginKey{Key: loginKey("ip:" + addr), Free: freeAttemptsPerAddr}
	account := accounts.LoginKey{Key: loginKey("account:" + lower), Free: freeChecksPerAccount, IfAccount: email}
	// The address's and the account's budgets are read first: an attempt
	// that must wait for them is refused before any count is written, so a
	// flood of guesses at fresh emails from one address, or at one account
	// from many, writes nothing.
	if wait, err = d.accounts.LoginDelay(ctx, address.Key, address.Free); err != nil || wait > 0 {
		return nil, wait, fmt.Sprintf("Too many failed sign-ins. Try again in %s.", waitText(wait)), err
	}
	if wait, err = d.accounts.LoginDelay(ctx, account.Key, account.Free); err != nil || wait > 0 {
		return nil, wait, fmt.Sprintf("This account has had too many failed sign-ins from elsewhere. "+
			"Try again in %s, or from a browser you have signed in with before.", waitText(wait)), err
	}
	// The account's own count goes last: only an attempt every other
	// count admits moves it.
	return []accounts.LoginKey{accountAtAddress, address, account}, 0, "", nil
}
