package doctor

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/views/humanize"
)

// OIDC is the sign-in through the identity provider, as hookd serve would
// run it: off without Issuer.
type OIDC struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	GroupsClaim  string
	Roles        idp.Roles
	// RedirectURL is HOOKD_PUBLIC_URL + idp.CallbackPath.
	RedirectURL string
	// PasswordSignInOff and EmergencyAdmin are HOOKD_PASSWORD_SIGNIN=off
	// and HOOKD_EMERGENCY_ADMIN.
	PasswordSignInOff bool
	EmergencyAdmin    string
	// AllowedDomains is HOOKD_OIDC_ALLOWED_DOMAINS; Recheck is
	// HOOKD_OIDC_RECHECK (0: off); Alerts says HOOKD_ALERT_URL is set.
	AllowedDomains []string
	Recheck        time.Duration
	Alerts         bool
}

// IdentityProvider checks the sign-in through the identity provider: its
// discovery document, whether it takes hookd's redirect URL, the role
// mapping, and that password sign-in turned off leaves a way in.
func IdentityProvider(ctx context.Context, client *http.Client, cfg OIDC) []Result {
	const discovery, redirect, roles, passwords = "oidc discovery", "oidc redirect url", "oidc roles", "password sign-in"
	if cfg.Issuer == "" {
		return append([]Result{{discovery, Skip, "HOOKD_OIDC_ISSUER is not set: people sign in with passwords"}},
			emergencyAdmin(cfg)...)
	}
	results := make([]Result, 0, 4)
	p := idp.New(idp.Config{Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		RedirectURL: cfg.RedirectURL, GroupsClaim: cfg.GroupsClaim, Roles: cfg.Roles, HTTPClient: client})
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start, err := p.Start(ctx)
	if err != nil {
		results = append(results,
			Result{discovery, Fail, err.Error() + ": check HOOKD_OIDC_ISSUER (the issuer exactly as the provider names it) " +
				"and that hookd reaches the provider; nobody can sign in through it until then"},
			Result{redirect, Skip, "not checked: no discovery document"})
	} else {
		results = append(results,
			Result{discovery, OK, cfg.Issuer + " publishes its endpoints and keys"},
			probeRedirect(ctx, client, start.URL, cfg.RedirectURL))
	}

	if admins := cfg.Roles.AdminGroups(); len(admins) == 0 {
		results = append(results, Result{roles, Warn, "HOOKD_OIDC_ROLES (" + cfg.Roles.String() + ") names no admin group: " +
			"nobody who signs in through the provider can manage accounts; add admin:<group>"})
	} else {
		results = append(results, Result{roles, OK, fmt.Sprintf("%s, read from the claim %s; admins from %s",
			cfg.Roles, p.GroupsClaim(), strings.Join(admins, ", "))})
	}
	results = append(results, everyone(cfg), recheck(cfg))

	switch {
	case !cfg.PasswordSignInOff:
		results = append(results, Result{passwords, OK, "on, beside the identity provider (HOOKD_PASSWORD_SIGNIN=off leaves it to the emergency admin)"})
	case cfg.EmergencyAdmin == "":
		results = append(results, Result{passwords, Warn, "off, and HOOKD_EMERGENCY_ADMIN is not set: while the provider is " +
			"down or misconfigured nobody can sign in; name a password admin account there"})
	default:
		results = append(results, Result{passwords, OK, "off, except for the emergency admin " + cfg.EmergencyAdmin})
	}
	return append(results, emergencyAdmin(cfg)...)
}

// everyone warns of a role given to every person the provider signs in:
// with Google, GitLab.com, Entra's common endpoint or a realm people may
// register at themselves, that is anyone.
func everyone(cfg OIDC) Result {
	const name = "oidc open door"
	role, ok := cfg.Roles.Everyone()
	switch {
	case !ok && len(cfg.AllowedDomains) == 0:
		return Result{name, OK, "no role is given to every person: only the groups of HOOKD_OIDC_ROLES let people in"}
	case !ok:
		return Result{name, OK, "only the groups of HOOKD_OIDC_ROLES let people in, with verified emails of " +
			strings.Join(cfg.AllowedDomains, ", ")}
	case len(cfg.AllowedDomains) == 0:
		return Result{name, Warn, fmt.Sprintf("HOOKD_OIDC_ROLES gives %s to every person the provider signs in (%s): "+
			"if anyone can get an account there (Google, GitLab.com, Entra's common endpoint, self-registration), anyone "+
			"reads the events' payloads; map a group instead, or set HOOKD_OIDC_ALLOWED_DOMAINS", role, idp.AnyGroup)}
	}
	return Result{name, Warn, fmt.Sprintf("HOOKD_OIDC_ROLES gives %s to every person the provider signs in (%s) "+
		"with a verified email of %s: map a group instead unless everyone there may read the events' payloads",
		role, idp.AnyGroup, strings.Join(cfg.AllowedDomains, ", "))}
}

func recheck(cfg OIDC) Result {
	const name = "oidc re-check"
	switch {
	case cfg.Recheck == 0:
		return Result{name, Warn, "HOOKD_OIDC_RECHECK is off: someone the provider stops letting in keeps a session " +
			"they have until HOOKD_SESSION_MAX_AGE, or until they sign in again"}
	case cfg.ClientSecret == "":
		return Result{name, Warn, "off: HOOKD_OIDC_RECHECK needs HOOKD_OIDC_CLIENT_SECRET, which refresh tokens are sealed with; " +
			"someone the provider stops letting in keeps a session they have until HOOKD_SESSION_MAX_AGE"}
	}
	return Result{name, OK, "every signed-in person is asked about again every " + humanize.Duration(cfg.Recheck) +
		" (the provider must give refresh tokens: offline_access)"}
}

// emergencyAdmin says the emergency admin is on: a password sign-in past
// the provider and its second factor.
func emergencyAdmin(cfg OIDC) []Result {
	const name = "emergency admin"
	if cfg.EmergencyAdmin == "" {
		return nil
	}
	if !cfg.Alerts {
		return []Result{{name, Warn, "on: " + cfg.EmergencyAdmin + " signs in with a password, past the identity " +
			"provider's second factor; each sign-in is audited as emergency_login, but HOOKD_ALERT_URL is not set to alert on it"}}
	}
	return []Result{{name, OK, "on: " + cfg.EmergencyAdmin + " signs in with a password, past the identity provider's " +
		"second factor; each sign-in is audited as emergency_login and alerted through HOOKD_ALERT_URL"}}
}

// probeRedirect asks the provider's authorization endpoint to start a
// sign-in that comes back to redirectURL, without following where it
// sends the browser, and reads the answer: a provider that does not know
// the URL refuses at once (Keycloak, Okta, ZITADEL answer 400), one that
// knows it sends the browser on to its sign-in page, or back to the URL.
func probeRedirect(ctx context.Context, client *http.Client, authURL, redirectURL string) Result {
	const name = "oidc redirect url"
	noFollow := *client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return Result{name, Warn, "could not build the authorization request: " + err.Error()}
	}
	res, err := noFollow.Do(req)
	if err != nil {
		return Result{name, Warn, "the authorization endpoint did not answer: " + err.Error()}
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	switch {
	case res.StatusCode >= 300 && res.StatusCode < 400:
		where := res.Header.Get("Location")
		if strings.HasPrefix(where, redirectURL) {
			if u, err := url.Parse(where); err == nil && u.Query().Get("error") != "" {
				return Result{name, Warn, fmt.Sprintf("the provider sends sign-ins back to %s, but with the error %s %s",
					redirectURL, u.Query().Get("error"), u.Query().Get("error_description"))}
			}
		}
		return Result{name, OK, "the provider takes " + redirectURL + " and sends the browser on to sign in"}
	case res.StatusCode >= 400:
		return Result{name, Fail, fmt.Sprintf("the provider refuses to start a sign-in that comes back to %s (HTTP %d: %s): "+
			"register it as a redirect URL of hookd's client there, or fix HOOKD_PUBLIC_URL", redirectURL, res.StatusCode,
			firstLine(string(body)))}
	}
	return Result{name, OK, fmt.Sprintf("the provider answered HTTP %d with a page, not a refusal, for %s", res.StatusCode, redirectURL)}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return cmp.Or(s, "no explanation")
}
