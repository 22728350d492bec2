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
