package doctor_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hookd/hookd/internal/doctor"
	"github.com/hookd/hookd/internal/idp"
)

// startProvider runs an OpenID provider in the test; refuseRedirects makes
// its authorization endpoint refuse every redirect URL, as a provider does
// one it does not have registered.
func startProvider(t *testing.T, refuseRedirects bool) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if refuseRedirects {
		err := m.AddMiddleware(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == mockoidc.AuthorizationEndpoint {
					http.Error(w, "Invalid parameter: redirect_uri", http.StatusBadRequest)
					return
				}
				next.ServeHTTP(w, r)
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

func oidcConfig(t *testing.T, m *mockoidc.MockOIDC, roles string) doctor.OIDC {
	t.Helper()
	mapping, err := idp.ParseRoles(roles)
	if err != nil {
		t.Fatal(err)
	}
	return doctor.OIDC{Issuer: m.Issuer(), ClientID: m.ClientID, ClientSecret: m.ClientSecret, Roles: mapping,
		RedirectURL: "https://hooks.example.com" + idp.CallbackPath, Recheck: idp.DefaultRecheck}
}

func TestIdentityProvider_AllWell(t *testing.T) {
	t.Parallel()
	m := startProvider(t, false)
	cfg := oidcConfig(t, m, "admin:hookd-admins,viewer:staff")
	cfg.PasswordSignInOff, cfg.EmergencyAdmin, cfg.Alerts = true, "break-glass@example.com", true
	got := byCheck(t, doctor.IdentityProvider(context.Background(), http.DefaultClient, cfg))
	expect(t, got["oidc open door"], doctor.OK, "only the groups")
	expect(t, got["oidc re-check"], doctor.OK, "every 1 h")
	expect(t, got["emergency admin"], doctor.OK, "break-glass@example.com", "emergency_login", "alerted")
	expect(t, got["oidc discovery"], doctor.OK, m.Issuer())
	expect(t, got["oidc redirect url"], doctor.OK, "https://hooks.example.com/auth/oidc/callback")
	expect(t, got["oidc roles"], doctor.OK, "admins from hookd-admins", "claim groups")
	expect(t, got["password sign-in"], doctor.OK, "break-glass@example.com")
}

func TestIdentityProvider_RedirectURLNotRegistered(t *testing.T) {
	t.Parallel()
	m := startProvider(t, true)
	got := byCheck(t, doctor.IdentityProvider(context.Background(), http.DefaultClient, oidcConfig(t, m, "admin:a")))
	expect(t, got["oidc redirect url"], doctor.Fail, "HTTP 400", "Invalid parameter: redirect_uri", "register it")
}

func TestIdentityProvider_Misconfigured(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	cfg := doctor.OIDC{Issuer: gone.URL, ClientID: "hookd", RedirectURL: "https://hooks.example.com" + idp.CallbackPath,
		Roles: idp.Roles{{Role: "viewer", Group: "*"}}, PasswordSignInOff: true}
	got := byCheck(t, doctor.IdentityProvider(context.Background(), http.DefaultClient, cfg))
	expect(t, got["oidc discovery"], doctor.Fail, "HOOKD_OIDC_ISSUER")
	expect(t, got["oidc redirect url"], doctor.Skip)
	expect(t, got["oidc roles"], doctor.Warn, "no admin group")
	expect(t, got["password sign-in"], doctor.Warn, "HOOKD_EMERGENCY_ADMIN")

	off := doctor.IdentityProvider(context.Background(), http.DefaultClient, doctor.OIDC{})
	if len(off) != 1 || off[0].Status != doctor.Skip || !strings.Contains(off[0].Detail, "HOOKD_OIDC_ISSUER") {
		t.Errorf("without an issuer: %+v, want one skipped line naming HOOKD_OIDC_ISSUER", off)
	}
}

// A role given to * lets in everyone the provider knows: doctor warns,
// whether or not HOOKD_OIDC_ALLOWED_DOMAINS narrows it.
func TestIdentityProvider_EveryoneMappedWarns(t *testing.T) {
	t.Parallel()
	m := startProvider(t, false)
	cfg := oidcConfig(t, m, "admin:hookd-admins,viewer:*")
	got := byCheck(t, doctor.IdentityProvider(context.Background(), http.DefaultClient, cfg))
	expect(t, got["oidc open door"], doctor.Warn, "gives viewer to every person", "HOOKD_OIDC_ALLOWED_DOMAINS")
	cfg.AllowedDomains = []string{"example.com"}
	got = byCheck(t, doctor.IdentityProvider(context.Background(), http.DefaultClient, cfg))
	expect(t, got["oidc open door"], doctor.Warn, "gives viewer to every person", "example.com")
}

func TestIdentityProvider_RecheckOffAndEmergencyAdminWithoutAlerts(t *testing.T) {
	t.Parallel()
	m := startProvider(t, false)
	cfg := oidcConfig(t, m, "admin:hookd-admins")
	cfg.Recheck, cfg.EmergencyAdmin = 0, "break-glass@example.com"
	got := byCheck(t, doctor.IdentityProvider(context.Background(), http.DefaultClient, cfg))
	expect(t, got["oidc re-check"], doctor.Warn, "HOOKD_OIDC_RECHECK is off")
	expect(t, got["emergency admin"], doctor.Warn, "break-glass@example.com", "HOOKD_ALERT_URL is not set")
	cfg.Recheck, cfg.ClientSecret = idp.DefaultRecheck, ""
	got = byCheck(t, doctor.IdentityProvider(context.Background(), http.DefaultClient, cfg))
	expect(t, got["oidc re-check"], doctor.Warn, "needs HOOKD_OIDC_CLIENT_SECRET")
}
