package web

import (
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

// Sign-in with an email and a password: the form, its refusals, and the
// session it starts.

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
		a, err := d.admitLogin(c, email)
		defer d.passwordChecks.release(a.slot)
		if err != nil {
			return err
		}
		if a.wait > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(max(a.wait, time.Second).Round(time.Second).Seconds())))
			return d.refuseLogin(c, email, next, http.StatusTooManyRequests, a.why)
		}

		u, err := d.accounts.Authenticate(ctx, email, password)
		if errors.Is(err, accounts.ErrBadCredentials) {
			return d.refuseLogin(c, email, next, http.StatusUnauthorized, "Wrong email or password.")
		}
		if err != nil {
			return err
		}

		if err := d.startSession(c, u, a.keys); err != nil {
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

// loginAdmission is what admitLogin decided: the attempt may check its
// password now, counted under keys (the one a success clears first), or
// must wait, for how long and why. slot names the password-check slot it
// holds, "" when it took none; the caller releases it once the check is
// done, whatever the verdict.
type loginAdmission struct {
	keys []accounts.LoginKey
	wait time.Duration
	why  string
	slot string
}

// admitLogin decides whether the sign-in as email may check its password
// now. It takes one of the password checks' slots, of the browser when it
// is one known to have signed in as email and of the address otherwise,
// then asks the counts of failed sign-ins.
func (d *dashboard) admitLogin(c echo.Context, email string) (loginAdmission, error) {
	ctx := c.Request().Context()
	addr := netblock.Of(c.RealIP())
	device, known, err := d.knownDevice(c, email)
	if err != nil {
		return loginAdmission{}, err
	}
	// A slot first, so a flood costs neither memory nor a write.
	holder := "address " + addr
	if known {
		holder = "device " + device
	}
	if !d.passwordChecks.take(holder, known) {
		return loginAdmission{wait: time.Second, why: "Too many sign-ins at once. Try again in a second."}, nil
	}
	a := loginAdmission{slot: holder}
	keys, wait, why, err := d.signInCounts(ctx, email, addr, device, known)
	if err != nil || wait > 0 {
		a.wait, a.why = wait, why
		return a, err
	}
	if wait, err = d.accounts.AdmitLogin(ctx, keys...); err != nil || wait > 0 {
		a.wait, a.why = wait, fmt.Sprintf("Too many failed sign-ins. Try again in %s.", waitText(wait))
		return a, err
	}
	a.keys = keys
	return a, nil
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
	// The emergency admin skips the provider and its second factor: its
	// sign-ins are audited apart and alerted.
	emergency := d.opts.EmergencyAdmin != "" && strings.EqualFold(u.Email, d.opts.EmergencyAdmin)
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
		if emergency {
			return audit.RecordAccount(ctx, tx.PgxTx(), idp.AuditAccount(u), audit.EmergencyLogin, "from "+c.RealIP(), 0)
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), idp.AuditAccount(u), audit.Login, "", 0)
	})
	if err != nil {
		return err
	}
	if emergency && d.opts.Alert != nil {
		d.opts.Alert(ctx, fmt.Sprintf("The emergency admin %s signed in with a password from %s, past the identity "+
			"provider and its second factor. If nobody meant to, end its sessions on the accounts page and change its password.",
			u.Email, c.RealIP()))
	}
	if err := d.rememberDevice(c, u.Email); err != nil {
		return err
	}
	return signIn(c, u)
}

func waitText(d time.Duration) string {
	if s := int(d.Round(time.Second).Seconds()); s < 60 {
		return fmt.Sprintf("%d seconds", max(s, 1))
	}
	return fmt.Sprintf("%d minutes", int(d.Round(time.Minute).Minutes()))
}
