package config

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
)

func TestParseConfig_OIDC(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("serve", nil, envOf(nil), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OIDCIssuer != "" || cfg.OIDCGroupsClaim != "groups" || cfg.SessionMaxAge != 12*time.Hour || cfg.PasswordSignInOff ||
		OIDCProvider(cfg) != nil {
		t.Fatalf("defaults: %+v; want no provider, the groups claim, 12h sessions and password sign-in on", cfg)
	}

	full := map[string]string{
		"HOOKD_OIDC_ISSUER": "https://idp.example.com/realms/acme", "HOOKD_OIDC_CLIENT_ID": "hookd",
		"HOOKD_OIDC_CLIENT_SECRET": "s3cret", "HOOKD_OIDC_ROLES": "admin:hookd-admins, operator:support,viewer:*",
		"HOOKD_PUBLIC_URL": "https://hooks.example.com/", "HOOKD_PASSWORD_SIGNIN": "off",
		"HOOKD_EMERGENCY_ADMIN": "break-glass@example.com", "HOOKD_SESSION_MAX_AGE": "8h", "HOOKD_OIDC_GROUPS_CLAIM": "roles",
	}
	cfg, err = Parse("serve", nil, envOf(full), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OIDCRoles.String() != "admin:hookd-admins,operator:support,viewer:*" || !cfg.PasswordSignInOff ||
		cfg.SessionMaxAge != 8*time.Hour || cfg.OIDCGroupsClaim != "roles" || OIDCProvider(cfg) == nil {
		t.Fatalf("set: %+v", cfg)
	}
	if got := OIDCRedirectURL(cfg); got != "https://hooks.example.com/auth/oidc/callback" {
		t.Errorf("redirect URL %q, want HOOKD_PUBLIC_URL's /auth/oidc/callback", got)
	}
	if role, _ := cfg.OIDCRoles.For([]string{"support"}); role != accounts.RoleOperator {
		t.Errorf("support's role %q, want operator", role)
	}

	without := func(names ...string) map[string]string {
		env := map[string]string{}
		for k, v := range full {
			env[k] = v
		}
		for _, n := range names {
			delete(env, n)
		}
		return env
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{without("HOOKD_OIDC_CLIENT_ID"), "HOOKD_OIDC_CLIENT_ID: required with HOOKD_OIDC_ISSUER"},
		{without("HOOKD_OIDC_ROLES"), "HOOKD_OIDC_ROLES: required with HOOKD_OIDC_ISSUER"},
		{without("HOOKD_PUBLIC_URL"), "HOOKD_PUBLIC_URL: required with HOOKD_OIDC_ISSUER"},
		{without("HOOKD_OIDC_ISSUER"), "HOOKD_OIDC_ISSUER: required with"},
		{map[string]string{"HOOKD_PASSWORD_SIGNIN": "off"}, "HOOKD_PASSWORD_SIGNIN: off needs HOOKD_OIDC_ISSUER"},
		{map[string]string{"HOOKD_PASSWORD_SIGNIN": "no"}, "HOOKD_PASSWORD_SIGNIN: on or off"},
		{map[string]string{"HOOKD_OIDC_ROLES": "boss:hookd-admins"}, `HOOKD_OIDC_ROLES: unknown role "boss"`},
		{map[string]string{"HOOKD_OIDC_ROLES": "admin"}, `HOOKD_OIDC_ROLES: "admin" is not role:group`},
		{map[string]string{"HOOKD_EMERGENCY_ADMIN": "break-glass"}, "HOOKD_EMERGENCY_ADMIN: not an email address"},
		{map[string]string{"HOOKD_SESSION_MAX_AGE": "0"}, "HOOKD_SESSION_MAX_AGE: must be greater than zero"},
		{map[string]string{"HOOKD_OIDC_ISSUER": "idp.example.com"}, "HOOKD_OIDC_ISSUER: not an absolute http(s) URL"},
	} {
		_, err := Parse("serve", nil, envOf(tc.env), new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.env, err, tc.want)
		}
	}
	// The client secret is never echoed in an error.
	_, err = Parse("serve", nil, envOf(without("HOOKD_OIDC_ISSUER")), new(bytes.Buffer))
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("an error shows the client secret: %v", err)
	}
}

func TestParseConfig_OIDCLeaversAndStrangers(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"HOOKD_OIDC_ISSUER": "https://idp.example.com/realms/acme", "HOOKD_OIDC_CLIENT_ID": "hookd",
		"HOOKD_OIDC_CLIENT_SECRET": "s3cret", "HOOKD_OIDC_ROLES": "admin:hookd-admins",
		"HOOKD_PUBLIC_URL": "https://hooks.example.com/",
	}
	with := func(extra map[string]string) map[string]string {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	cfg, err := Parse("serve", nil, envOf(base), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OIDCRecheck != time.Hour || !OIDCRechecks(cfg) || cfg.OIDCAllowedDomains != nil {
		t.Errorf("defaults: re-check %v (on %v), domains %v; want 1h, on, none", cfg.OIDCRecheck, OIDCRechecks(cfg), cfg.OIDCAllowedDomains)
	}
	cfg, err = Parse("serve", nil, envOf(with(map[string]string{"HOOKD_OIDC_RECHECK": "off",
		"HOOKD_OIDC_ALLOWED_DOMAINS": " Example.com, example.de "})), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if OIDCRechecks(cfg) || strings.Join(cfg.OIDCAllowedDomains, ",") != "example.com,example.de" {
		t.Errorf("set: re-check %v, domains %q", cfg.OIDCRecheck, cfg.OIDCAllowedDomains)
	}
	// A public client has no secret to seal refresh tokens with.
	public := with(nil)
	delete(public, "HOOKD_OIDC_CLIENT_SECRET")
	if cfg, err := Parse("serve", nil, envOf(public), new(bytes.Buffer)); err != nil || OIDCRechecks(cfg) {
		t.Errorf("public client: re-checks %v (%v), want off", OIDCRechecks(cfg), err)
	}
	// http is taken on this host alone.
	for _, issuer := range []string{"http://localhost:9998/", "http://127.0.0.1:9998", "http://[::1]:9998"} {
		if _, err := Parse("serve", nil, envOf(with(map[string]string{"HOOKD_OIDC_ISSUER": issuer})), new(bytes.Buffer)); err != nil {
			t.Errorf("issuer %s: %v", issuer, err)
		}
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HOOKD_OIDC_ISSUER": "http://sso.example.com/realms/acme"}, "HOOKD_OIDC_ISSUER: \"http://sso.example.com/realms/acme\" is not https"},
		{map[string]string{"HOOKD_OIDC_RECHECK": "0"}, "HOOKD_OIDC_RECHECK: must be greater than zero"},
		{map[string]string{"HOOKD_OIDC_ALLOWED_DOMAINS": "ana@example.com"}, `HOOKD_OIDC_ALLOWED_DOMAINS: "ana@example.com" is not an email domain`},
	} {
		_, err := Parse("serve", nil, envOf(with(tc.env)), new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.env, err, tc.want)
		}
	}
}
