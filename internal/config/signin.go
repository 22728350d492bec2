package config

import (
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/views/humanize"
)

// The sign-in settings that keep leavers and strangers out: the re-check
// of signed-in people at the identity provider, and the email domains it
// may let in.

// oidcRecheckOff turns the re-check off.
const oidcRecheckOff = "off"

var oidcRecheckSetting = setting{flag: "oidc-recheck", env: "HOOKD_OIDC_RECHECK", def: humanize.Typed(idp.DefaultRecheck),
	usage: "how often hookd asks the identity provider again, with each signed-in person's refresh token, whether it still lets them in, ending the sessions of anyone it refuses; off asks only at sign-in (needs HOOKD_OIDC_CLIENT_SECRET, which the tokens are sealed with)",
	set: func(c *Config, v string) error {
		if v == oidcRecheckOff {
			c.OIDCRecheck = 0
			return nil
		}
		return parsePositiveDuration(&c.OIDCRecheck, v)
	}}

var oidcAllowedDomainsSetting = setting{flag: "oidc-allowed-domains", env: "HOOKD_OIDC_ALLOWED_DOMAINS",
	usage: "email domains whose people may sign in through the identity provider, e.g. example.com,example.de: only a verified email of one of them (and from Google, an account of that Workspace) signs in (none: whoever HOOKD_OIDC_ROLES lets in)",
	set: func(c *Config, v string) error {
		domains, err := idp.ParseDomains(v)
		c.OIDCAllowedDomains = domains
		return err
	}}

// checkIssuer refuses an issuer that is not an https URL (loopback aside).
func checkIssuer(v string) error {
	if v == "" {
		return nil
	}
	if err := checkURL(v); err != nil {
		return err
	}
	return idp.CheckIssuer(v)
}

// OIDCRechecks reports whether signed-in people are re-checked at the
// identity provider: unless HOOKD_OIDC_RECHECK=off, and only for a
// confidential client, whose secret seals the refresh tokens.
func OIDCRechecks(cfg Config) bool {
	return cfg.OIDCIssuer != "" && cfg.OIDCRecheck > 0 && cfg.OIDCClientSecret != ""
}
