package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/alexedwards/scs/pgxstore"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/web"
)

const testRoles = "admin:hookd-admins,operator:support,viewer:staff"

// provider is an OpenID provider run in the test (mockoidc), which signs
// in whoever is queued next, and the dashboard configured to use it.
type provider struct {
	mock *mockoidc.MockOIDC
	// mu is held around every request the provider answers, so a test
	// that changes it between sign-ins (its keys, its token lifetime)
	// does not race with it.
	mu sync.Mutex
	// tokenDown, when set, is the status the token endpoint answers
	// every request with, as a provider that is down.
	tokenDown int
	// offline is the provider as hookd knows it, for a re-check loop.
	offline *idp.Provider
}

// change runs fn on the provider while it answers no request.
func (p *provider) change(fn func(m *mockoidc.MockOIDC)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p.mock)
}

// setupOIDC serves the dashboard with sign-in through a provider of its
// own, roles mapped by roles, and opts for the rest.
func setupOIDC(t *testing.T, roles string, opts web.Options, allowedDomains ...string) (*testBundle, *provider) {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{mock: m}
	if err := m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.tokenDown != 0 && r.URL.Path == mockoidc.TokenEndpoint {
				http.Error(w, "upstream database unavailable at 10.0.3.7:5432", p.tokenDown)
				return
			}
			next.ServeHTTP(w, r)
		})
	}); err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(mln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })

	b := setup(t, withoutServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	publicURL := "http://" + ln.Addr().String()
	mapping, err := idp.ParseRoles(roles)
	if err != nil {
		t.Fatal(err)
	}
	opts.OIDC = idp.New(idp.Config{Issuer: m.Issuer(), ClientID: m.ClientID, ClientSecret: m.ClientSecret,
		RedirectURL: publicURL + idp.CallbackPath, Roles: mapping, AllowedDomains: allowedDomains, Offline: opts.OIDCRecheck > 0})
	p.offline = opts.OIDC
	opts.Sessions = pgxstore.NewWithCleanupInterval(b.pool, 0)
	opts.Stores, opts.Gatherer = storesOn(b.store, b.pool), prometheus.NewRegistry()
	b.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: web.NewServer(opts)}}
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	return b, p
}

// providerUser is a person at the provider: the ID token carries the
// standard claims mockoidc makes for them, then claims, which may override
// any of them (aud, nonce) to make a token hookd must refuse.
type providerUser struct {
	sub    string
	claims map[string]any
}

func (u providerUser) ID() string { return u.sub }

func (u providerUser) Userinfo([]string) ([]byte, error) {
	return json.Marshal(map[string]any{"sub": u.sub})
}

func (u providerUser) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	raw, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	claims := jwt.MapClaims{}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, err
	}
	for k, v := range u.claims {
		claims[k] = v
	}
	return claims, nil
}

// member is a verified person in groups.
func member(sub string, groups ...string) providerUser {
	return providerUser{sub: sub, claims: map[string]any{
		"email": sub + "@example.com", "email_verified": true, "groups": groups}}
}

// answer starts a sign-in with the provider, which signs in u at once, and
// returns the provider's redirect back to hookd (its callback URL), not
// yet followed.
func (c *client) answer(p *provider, u providerUser) string {
	c.t.Helper()
	p.mock.QueueUser(u)
	start := c.get("/auth/oidc")
	if start.status != http.StatusSeeOther {
		c.t.Fatalf("GET /auth/oidc: %d %s, want a redirect to the provider", start.status, start.body)
	}
	res, err := c.http.Get(start.header.Get("Location"))
	if err != nil {
		c.t.Fatal(err)
	}
	res.Body.Close()
	callback := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(callback, c.b.srv.URL+idp.CallbackPath) {
		c.t.Fatalf("the provider answered %d to %q, want a redirect to hookd's callback", res.StatusCode, callback)
	}
	return callback
}

// callback sends the browser to the provider's answer.
func (c *client) callback(callback string) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, callback, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.do(req)
}

// signInWith signs in through the provider as u and fails the test unless
// it lands on the overview.
func (c *client) signInWith(p *provider, u providerUser) {
	c.t.Helper()
	r := c.callback(c.answer(p, u))
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		c.t.Fatalf("callback: %d to %q, want 303 to /; page: %s", r.status, r.header.Get("Location"), pageText(r))
	}
}

func pageText(r response) string {
	if r.doc == nil {
		return r.body
	}
	return strings.Join(strings.Fields(r.doc.Find("main, body").First().Text()), " ")
}

func providerAccount(t *testing.T, b *testBundle, sub string) (accounts.User, bool) {
	t.Helper()
	users, err := b.accounts.Users(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if u.OIDCSubject == sub {
			return u, true
		}
	}
	return accounts.User{}, false
}

func auditTargets(t *testing.T, b *testBundle, action string) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT target FROM audit_log WHERE action = $1 ORDER BY id`, action)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// signedInStatus is what the overview answers the client: 200 while its
// session lasts, 303 to the sign-in page after.
func (c *client) signedInStatus() int {
	c.t.Helper()
	return c.get("/").status
}

// refusedAndNothingWritten checks that a failed callback showed a page
// saying why (containing want) with status, and left no account and no
// session behind.
func refusedAndNothingWritten(t *testing.T, b *testBundle, c *client, r response, status int, want string) {
	t.Helper()
	if r.status != status || !strings.Contains(pageText(r), want) {
		t.Errorf("callback: %d %q; want %d saying %q", r.status, pageText(r), status, want)
	}
	if n := userCount(t, b); n != 0 {
		t.Errorf("%d accounts after a failed sign-in, want 0", n)
	}
	var sessions int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM sessions`).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if sessions != 0 {
		t.Errorf("%d sessions after a failed sign-in, want 0", sessions)
	}
	if got := c.signedInStatus(); got != http.StatusSeeOther {
		t.Errorf("overview after a failed sign-in: %d, want 303 to sign in", got)
	}
}

func TestOIDC_EachRoleComesFromItsGroup(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	for i, tc := range []struct {
		groups []string
		role   accounts.Role
	}{
		{[]string{"hookd-admins"}, accounts.RoleAdmin},
		{[]string{"support", "engineering"}, accounts.RoleOperator},
		{[]string{"staff"}, accounts.RoleViewer},
		// The highest role any of the groups gives.
		{[]string{"staff", "hookd-admins", "support"}, accounts.RoleAdmin},
	} {
		sub := "person-" + string(rune('a'+i))
		c := b.client(t)
		c.signInWith(p, member(sub, tc.groups...))
		u, ok := providerAccount(t, b, sub)
		if !ok || u.Role != tc.role || u.Email != sub+"@example.com" || u.LastSignInAt == nil {
			t.Errorf("groups %v: account %+v (found %v), want a signed-in %s", tc.groups, u, ok, tc.role)
		}
		if got := c.signedInStatus(); got != http.StatusOK {
			t.Errorf("groups %v: overview %d, want 200", tc.groups, got)
		}
		accountsPage := c.get("/accounts").status
		if wantAdmin := tc.role == accounts.RoleAdmin; (accountsPage == http.StatusOK) != wantAdmin {
			t.Errorf("groups %v: accounts page %d as %s", tc.groups, accountsPage, tc.role)
		}
	}
	logins := auditTargets(t, b, "oidc_login")
	if len(logins) != 4 {
		t.Fatalf("%d oidc_login audit entries, want 4: %q", len(logins), logins)
	}
	want := "issuer " + p.mock.Issuer() + ", subject person-a: role admin, first sign-in"
	if logins[0] != want {
		t.Errorf("audit entry %q, want %q", logins[0], want)
	}
	for _, l := range logins {
		if strings.Contains(l, "ey") && strings.Count(l, ".") >= 2 {
			t.Errorf("an audit entry looks like it holds a token: %q", l)
		}
	}
}

func TestOIDC_EveryoneMapping(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, "admin:hookd-admins,viewer:*", web.Options{})
	c := b.client(t)
	c.signInWith(p, member("nobody-special"))
	if u, _ := providerAccount(t, b, "nobody-special"); u.Role != accounts.RoleViewer {
		t.Errorf("a person in no group got %q, want viewer from *", u.Role)
	}
}

func TestOIDC_NoRoleIsRefusedNamingTheClaim(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	c := b.client(t)
	r := c.callback(c.answer(p, member("outsider", "marketing")))
	refusedAndNothingWritten(t, b, c, r, http.StatusForbidden, `claim "groups": marketing`)
	refusals := auditTargets(t, b, "oidc_refused")
	if len(refusals) != 1 || !strings.Contains(refusals[0], "subject outsider: no role given") {
		t.Errorf("audit refusals %q, want one naming the subject", refusals)
	}

	// A provider that sends no groups claim at all is told apart.
	c = b.client(t)
	r = c.callback(c.answer(p, providerUser{sub: "no-groups", claims: map[string]any{"email": "ng@example.com"}}))
	refusedAndNothingWritten(t, b, c, r, http.StatusForbidden, `claim "groups", which the provider did not send`)
}

func TestOIDC_UnverifiedEmailIsRefused(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	c := b.client(t)
	u := member("unverified", "hookd-admins")
	u.claims["email_verified"] = false
	r := c.callback(c.answer(p, u))
	refusedAndNothingWritten(t, b, c, r, http.StatusForbidden, "is not verified")
	if refusals := auditTargets(t, b, "oidc_refused"); len(refusals) != 1 {
		t.Errorf("audit refusals %q, want one", refusals)
	}
}

// Tokens that must not sign anyone in: each is refused with a page that
// says why, and leaves nothing behind.
func TestOIDC_InvalidTokensAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		edit   func(u *providerUser, p *provider)
		saying string
	}{
		{"wrong nonce", func(u *providerUser, _ *provider) { u.claims["nonce"] = "another-sign-in" }, "nonce"},
		{"wrong audience", func(u *providerUser, _ *provider) { u.claims["aud"] = "another-client" }, "audience"},
		// Past the minute of clock skew a token is given.
		{"expired", func(_ *providerUser, p *provider) {
			p.change(func(m *mockoidc.MockOIDC) { m.AccessTTL = -2 * idp.ClockSkew })
		}, "expired"},
		{"wrong issuer", func(u *providerUser, _ *provider) { u.claims["iss"] = "https://elsewhere.example.com" }, "issued by a different provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &e2etest.SyncBuffer{}
			b, p := setupOIDC(t, testRoles, web.Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
			c := b.client(t)
			u := member("someone", "hookd-admins")
			tc.edit(&u, p)
			r := c.callback(c.answer(p, u))
			// The page says what happened in general terms; what was
			// wrong, in go-oidc's words, goes to the log alone.
			refusedAndNothingWritten(t, b, c, r, http.StatusUnauthorized, "could not be accepted")
			if strings.Contains(pageText(r), tc.saying) {
				t.Errorf("the page tells go-oidc's error: %q", pageText(r))
			}
			if !strings.Contains(log.String(), tc.saying) {
				t.Errorf("the log does not say %q:\n%s", tc.saying, log)
			}
			if n := len(auditTargets(t, b, "oidc_login")); n != 0 {
				t.Errorf("%d sign-ins audited", n)
			}
		})
	}
}

// A token the provider's clock says expired less than idp.ClockSkew ago
// is still taken: a provider or replica a few seconds off refuses nobody.
func TestOIDC_ClockSkewOfLessThanAMinuteIsTolerated(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	p.change(func(m *mockoidc.MockOIDC) { m.AccessTTL = -idp.ClockSkew / 2 })
	b.client(t).signInWith(p, member("ana", "staff"))
}

// The state is good once, and only in the browser that started the
// sign-in.
func TestOIDC_StateIsSingleUseAndBoundToTheBrowser(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	c := b.client(t)
	callback := c.answer(p, member("ana", "staff"))
	base, _ := url.Parse(b.srv.URL + "/auth/oidc")
	var started *http.Cookie
	for _, ck := range c.http.Jar.Cookies(base) {
		if ck.Name == "hookd_oidc" {
			started = ck
		}
	}
	if started == nil {
		t.Fatal("no sign-in cookie after /auth/oidc")
	}

	// Another browser, given the answer but not the cookie.
	other := b.client(t)
	r := other.callback(callback)
	refusedAndNothingWritten(t, b, other, r, http.StatusBadRequest, "did not start a sign-in")

	// The browser that started it signs in; the cookie is spent.
	if r := c.callback(callback); r.status != http.StatusSeeOther {
		t.Fatalf("callback in the browser that started it: %d %s", r.status, pageText(r))
	}
	// A replay with a copy of the cookie, from anywhere, is refused.
	thief := b.client(t)
	thief.http.Jar.SetCookies(base, []*http.Cookie{{Name: started.Name, Value: started.Value, Path: "/auth/oidc"}})
	r = thief.callback(callback)
	if r.status != http.StatusBadRequest || !strings.Contains(pageText(r), "used already") {
		t.Errorf("replayed callback: %d %q, want 400 saying it was used already", r.status, pageText(r))
	}
	if got := thief.signedInStatus(); got != http.StatusSeeOther {
		t.Errorf("the replaying browser is signed in (%d)", got)
	}
}

func TestOIDC_KeyRotatedBetweenSignIns(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	b.client(t).signInWith(p, member("ana", "staff"))
	rotated, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	p.change(func(m *mockoidc.MockOIDC) { m.Keypair = rotated })
	b.client(t).signInWith(p, member("ana", "staff"))
	if n := len(auditTargets(t, b, "oidc_login")); n != 2 {
		t.Errorf("%d sign-ins, want 2: the second signed with the new key", n)
	}
}

// Removed from the admins' group at the provider, the person is a viewer
// from their next sign-in, in the same account, and every session of the
// account has the new role at its next request.
func TestOIDC_GroupRemovedBetweenSignInsRecomputesTheRole(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	first := b.client(t)
	first.signInWith(p, member("ana", "hookd-admins", "staff"))
	before, _ := providerAccount(t, b, "ana")
	if first.get("/accounts").status != http.StatusOK {
		t.Fatal("the admin cannot see the accounts page")
	}
	b.client(t).signInWith(p, member("ana", "staff"))
	after, _ := providerAccount(t, b, "ana")
	if after.ID != before.ID || after.Role != accounts.RoleViewer {
		t.Errorf("after the group was removed: %+v, want account %d as viewer", after, before.ID)
	}
	if got := first.get("/accounts").status; got != http.StatusForbidden {
		t.Errorf("the first session's accounts page: %d, want 403 now the account is a viewer", got)
	}
	logins := auditTargets(t, b, "oidc_login")
	if len(logins) != 2 || !strings.HasSuffix(logins[1], "role viewer, was admin") {
		t.Errorf("audit %q, want the second sign-in to say the role went from admin to viewer", logins)
	}

	// Out of every group: refused, and, the provider having vouched for
	// the claims that refuse her, her account goes with its role and every
	// session, at once.
	c := b.client(t)
	r := c.callback(c.answer(p, member("ana")))
	if r.status != http.StatusForbidden {
		t.Errorf("sign-in in no group: %d, want 403", r.status)
	}
	if u, ok := providerAccount(t, b, "ana"); ok {
		t.Errorf("ana's account is still there after the provider refused her: %+v", u)
	}
	if got := first.signedInStatus(); got != http.StatusSeeOther {
		t.Errorf("the first session's overview after the refusal: %d, want 303 to sign in", got)
	}
	revoked := auditTargets(t, b, "access_revoked")
	if len(revoked) != 1 || !strings.Contains(revoked[0], "subject ana: role viewer and every session ended; refused at sign-in") {
		t.Errorf("audit %q, want one access_revoked for ana", revoked)
	}
	var accountID int64
	var issuer, subject string
	if err := b.pool.QueryRow(context.Background(), `SELECT account_id, account_issuer, account_subject FROM audit_log
		WHERE action = 'access_revoked'`).Scan(&accountID, &issuer, &subject); err != nil {
		t.Fatal(err)
	}
	if accountID != before.ID || issuer != p.mock.Issuer() || subject != "ana" {
		t.Errorf("access_revoked names account %d, %s, %s; want %d, %s, ana", accountID, issuer, subject, before.ID, p.mock.Issuer())
	}
}

// A provider that cannot be reached, or answers with an error, at a
// sign-in changes nobody's access: the person's earlier session goes on.
func TestOIDC_ProviderDownEndsNoSession(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	first := b.client(t)
	first.signInWith(p, member("ana", "hookd-admins"))
	c := b.client(t)
	callback := c.answer(p, member("ana"))
	p.change(func(*mockoidc.MockOIDC) { p.tokenDown = http.StatusBadGateway })
	r := c.callback(callback)
	if r.status != http.StatusUnauthorized || strings.Contains(pageText(r), "10.0.3.7") {
		t.Errorf("callback with the provider failing: %d %q, want 401 without the provider's answer", r.status, pageText(r))
	}
	if u, ok := providerAccount(t, b, "ana"); !ok || u.Role != accounts.RoleAdmin {
		t.Errorf("ana's account after the provider failed: %+v (found %v), want admin as before", u, ok)
	}
	if got := first.get("/accounts").status; got != http.StatusOK {
		t.Errorf("the earlier session's accounts page: %d, want 200", got)
	}
}

// HOOKD_OIDC_ALLOWED_DOMAINS lets in verified emails of its domains
// alone, and tells anyone else why not.
func TestOIDC_AllowedDomains(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, "viewer:*", web.Options{}, "example.com")
	b.client(t).signInWith(p, member("ana", "staff"))

	c := b.client(t)
	outsider := member("mallory")
	outsider.claims["email"] = "mallory@gmail.com"
	r := c.callback(c.answer(p, outsider))
	if r.status != http.StatusForbidden || !strings.Contains(pageText(r), "limited to the verified emails of the company's domains, and mallory@gmail.com is not one of them") {
		t.Errorf("a gmail.com person: %d %q, want 403 saying the domain is not let in", r.status, pageText(r))
	}
	c = b.client(t)
	unsure := member("eve")
	delete(unsure.claims, "email_verified")
	r = c.callback(c.answer(p, unsure))
	if r.status != http.StatusForbidden || !strings.Contains(pageText(r), "does not say your email eve@example.com is verified") {
		t.Errorf("an email of the domain not said verified: %d %q, want 403", r.status, pageText(r))
	}
	if _, ok := providerAccount(t, b, "mallory"); ok {
		t.Error("mallory has an account")
	}
}

func TestOIDC_SessionEndsAtItsMaxAge(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{SessionMaxAge: 2 * time.Second})
	c := b.client(t)
	c.signInWith(p, member("ana", "staff"))
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for c.signedInStatus() != http.StatusSeeOther {
		if time.Now().After(deadline) {
			t.Fatal("the session still works 30 s after its 2 s max age")
		}
		<-tick.C
	}
}

func TestOIDC_PasswordSignInOffLeavesTheEmergencyAdmin(t *testing.T) {
	t.Parallel()
	b, _ := setupOIDC(t, testRoles, web.Options{PasswordSignInOff: true, EmergencyAdmin: "Break-Glass@example.com"})
	createAccount(t, b, "break-glass@example.com", accounts.RoleAdmin)
	createAccount(t, b, "ana@example.com", accounts.RoleAdmin)

	c := b.client(t)
	page := c.get("/login")
	button := page.doc.Find(`[data-testid="oidc-signin"]`)
	if button.Length() != 1 {
		t.Fatal("the sign-in page has no identity provider button")
	}
	if !page.doc.Find(`.login a, .login input:not([type="hidden"]), .login button`).First().Is(`[data-testid="oidc-signin"]`) {
		t.Error("the identity provider's button is not the page's first control")
	}

	r := c.post("/login", url.Values{"email": {"ana@example.com"}, "password": {testPassword}})
	if r.status != http.StatusForbidden || !strings.Contains(pageText(r), "Password sign-in is off") {
		t.Errorf("password sign-in of another admin: %d %q, want 403 saying password sign-in is off", r.status, pageText(r))
	}
	if got := c.signedInStatus(); got != http.StatusSeeOther {
		t.Errorf("overview after the refused password sign-in: %d", got)
	}

	c = b.client(t)
	c.get("/login")
	r = c.post("/login", url.Values{"email": {"break-glass@example.com"}, "password": {testPassword}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("emergency admin's password sign-in: %d %q, want 303", r.status, pageText(r))
	}
	if got := c.get("/accounts").status; got != http.StatusOK {
		t.Errorf("the emergency admin's accounts page: %d, want 200", got)
	}
}

// The accounts page tells the provider's accounts apart and shows their
// last sign-in; an admin ends any account's sessions from it.
func TestOIDC_AdminEndsAProviderAccountsSessions(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{})
	ana := b.client(t)
	ana.signInWith(p, member("ana", "support"))
	adminAccount := createAccount(t, b, "admin@example.com", accounts.RoleAdmin)
	admin := b.client(t)
	admin.signInAs("admin@example.com")

	page := admin.get("/accounts")
	row := accountRow(page.doc, "ana@example.com")
	if src := strings.TrimSpace(row.Find(`[data-testid="account-source"]`).Text()); src != "identity provider" {
		t.Errorf("ana's account signs in with %q, want identity provider", src)
	}
	if last := strings.TrimSpace(row.Find(`[data-testid="account-last-sign-in"]`).Text()); last == "" || last == "never" {
		t.Errorf("ana's last sign-in shows %q", last)
	}
	if row.Find(`select[name="role"]`).Length() != 0 {
		t.Error("the provider's account has a role form; its groups set its role")
	}
	r := admin.submit(formWith(row, "End sessions"), nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("end sessions: %d %s", r.status, pageText(r))
	}
	if got := ana.signedInStatus(); got != http.StatusSeeOther {
		t.Errorf("ana's overview after her sessions were ended: %d, want 303 to sign in", got)
	}
	if got := admin.signedInStatus(); got != http.StatusOK {
		t.Errorf("the admin's own session: %d, want 200", got)
	}
	if ends := auditTargets(t, b, "sessions_end"); len(ends) != 1 || !strings.Contains(ends[0], "ana@example.com") {
		t.Errorf("audit %q, want one sessions_end for ana", ends)
	}
	// The entry names the admin's account beside the email, as the audit
	// page shows; ana's sign-in names hers with its issuer and subject.
	var by int64
	if err := b.pool.QueryRow(context.Background(), `SELECT account_id FROM audit_log WHERE action = 'sessions_end'`).
		Scan(&by); err != nil || by != adminAccount.ID {
		t.Errorf("sessions_end names account %d (%v), want the admin's %d", by, err, adminAccount.ID)
	}
	shown := admin.get("/audit").doc.Find(`[data-testid="audit-account"]`)
	want := map[string]bool{fmt.Sprintf("account %d", adminAccount.ID): false}
	ana2, _ := providerAccount(t, b, "ana")
	want[fmt.Sprintf("account %d, issuer %s, subject ana", ana2.ID, p.mock.Issuer())] = false
	shown.Each(func(_ int, s *goquery.Selection) { want[strings.TrimSpace(s.Text())] = true })
	for text, seen := range want {
		if !seen {
			t.Errorf("the audit page does not show %q", text)
		}
	}
}

// The callback counts against the address's sign-in budget: a flood of
// forged answers is made to wait like a flood of password guesses.
func TestOIDC_ThrottleAppliesToTheCallback(t *testing.T) {
	t.Parallel()
	b, _ := setupOIDC(t, testRoles, web.Options{})
	c := b.client(t)
	for i := range 200 {
		r := c.get(idp.CallbackPath + "?code=forged&state=forged")
		if r.status == http.StatusTooManyRequests {
			if r.header.Get("Retry-After") == "" || !strings.Contains(pageText(r), "Too many failed sign-ins") {
				t.Errorf("429 without Retry-After or reason: %q", pageText(r))
			}
			return
		}
		if r.status != http.StatusBadRequest {
			t.Fatalf("forged callback %d: %d, want 400", i, r.status)
		}
	}
	t.Fatal("200 forged callbacks from one address, none made to wait")
}

// startRecheck runs the re-check loop over b's accounts with p, asking
// again every: a test's stand-in for hookd serve's loop.
func startRecheck(t *testing.T, b *testBundle, p *provider, every time.Duration, log *e2etest.SyncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := idp.NewRechecker(p.offline, b.accounts, slog.New(slog.NewTextHandler(log, nil)),
		idp.RecheckConfig{Every: every, Poll: 20 * time.Millisecond, Retry: every})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// eventually polls cond until it holds, failing the test after 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
		<-tick.C
	}
}

// With a refresh token, the re-check ends a leaver's sessions without
// their signing in again: removed from every group at the provider, the
// person loses the account at the next re-check.
func TestOIDC_RecheckEndsALeaversSessions(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{OIDCRecheck: 50 * time.Millisecond})
	ana := member("ana", "hookd-admins")
	c := b.client(t)
	c.signInWith(p, ana)
	var sealed []byte
	if err := b.pool.QueryRow(context.Background(), `SELECT oidc_refresh_token FROM users WHERE oidc_subject = 'ana'`).
		Scan(&sealed); err != nil || len(sealed) == 0 {
		t.Fatalf("no refresh token kept (%v)", err)
	}
	log := &e2etest.SyncBuffer{}
	startRecheck(t, b, p, 50*time.Millisecond, log)
	// A re-check that lets her in changes nothing.
	eventually(t, "a re-check that keeps ana as admin", func() bool {
		var rechecked bool
		_ = b.pool.QueryRow(context.Background(), `SELECT oidc_refresh_token <> $1 OR oidc_recheck_at > now()
			FROM users WHERE oidc_subject = 'ana'`, sealed).Scan(&rechecked)
		return rechecked
	})
	if got := c.get("/accounts").status; got != http.StatusOK {
		t.Fatalf("ana's accounts page after a re-check that lets her in: %d", got)
	}
	p.change(func(*mockoidc.MockOIDC) { ana.claims["groups"] = []string{} })
	eventually(t, "ana's session ended by the re-check", func() bool { return c.signedInStatus() == http.StatusSeeOther })
	if _, ok := providerAccount(t, b, "ana"); ok {
		t.Error("ana's account is still there")
	}
	if revoked := auditTargets(t, b, "access_revoked"); len(revoked) != 1 || !strings.Contains(revoked[0], "re-check refused") {
		t.Errorf("audit %q, want one access_revoked at a re-check", revoked)
	}
}

// A provider that does not answer the re-check ends nobody's session: it
// says nothing about the person. The refresh token is kept for the next.
func TestOIDC_RecheckWithTheProviderDownEndsNoSession(t *testing.T) {
	t.Parallel()
	b, p := setupOIDC(t, testRoles, web.Options{OIDCRecheck: 50 * time.Millisecond})
	c := b.client(t)
	c.signInWith(p, member("ana", "hookd-admins"))
	p.change(func(*mockoidc.MockOIDC) { p.tokenDown = http.StatusServiceUnavailable })
	log := &e2etest.SyncBuffer{}
	startRecheck(t, b, p, 50*time.Millisecond, log)
	eventually(t, "three re-checks that could not ask the provider", func() bool {
		return strings.Count(log.String(), "could not be asked") >= 3
	})
	if got := c.get("/accounts").status; got != http.StatusOK {
		t.Errorf("ana's accounts page with the provider down: %d, want 200", got)
	}
	var kept bool
	if err := b.pool.QueryRow(context.Background(), `SELECT oidc_refresh_token IS NOT NULL FROM users WHERE oidc_subject = 'ana'`).
		Scan(&kept); err != nil || !kept {
		t.Errorf("refresh token kept: %v (%v)", kept, err)
	}
}

// With an https public URL every response says Strict-Transport-Security
// and the cookies are __Host- ones at path /; with http, neither.
func TestOIDC_HTTPSPublicURLMeansHSTSAndHostCookies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		publicURL string
		https     bool
	}{{"https://hooks.example.com", true}, {"http://127.0.0.1:8080", false}} {
		t.Run(tc.publicURL, func(t *testing.T) {
			t.Parallel()
			b, p := setupOIDC(t, testRoles, web.Options{PublicURL: tc.publicURL})
			r := b.client(t).get("/login")
			// The sign-out's redirect to the provider is a form's: the
			// pages let forms reach its origin.
			if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+idp.Origin(p.mock.Issuer())+";") {
				t.Errorf("Content-Security-Policy %q does not let the sign-out reach the provider", csp)
			}
			if got := r.header.Get("Strict-Transport-Security"); (got == "max-age=31536000") != tc.https || !tc.https && got != "" {
				t.Errorf("Strict-Transport-Security %q with %s", got, tc.publicURL)
			}
			for _, path := range []string{"/login", "/auth/oidc"} {
				res, err := b.client(t).http.Get(b.srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				cookies := res.Cookies()
				if len(cookies) == 0 {
					t.Fatalf("GET %s set no cookie", path)
				}
				for _, ck := range cookies {
					host := strings.HasPrefix(ck.Name, "__Host-")
					if host != tc.https || tc.https && (!ck.Secure || ck.Path != "/" || ck.Domain != "") {
						t.Errorf("GET %s with %s: cookie %s (Secure %v, Path %q, Domain %q)", path, tc.publicURL,
							ck.Name, ck.Secure, ck.Path, ck.Domain)
					}
				}
			}
		})
	}
}

// The emergency admin's sign-in is audited apart, naming the account, and
// alerted.
func TestOIDC_EmergencyAdminSignInIsAuditedAndAlerted(t *testing.T) {
	t.Parallel()
	alerts := make(chan string, 1)
	b, _ := setupOIDC(t, testRoles, web.Options{PasswordSignInOff: true, EmergencyAdmin: "break-glass@example.com",
		Alert: func(_ context.Context, text string) { alerts <- text }})
	u := createAccount(t, b, "break-glass@example.com", accounts.RoleAdmin)
	c := b.client(t)
	c.get("/login")
	r := c.post("/login", url.Values{"email": {"break-glass@example.com"}, "password": {testPassword}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("emergency admin's sign-in: %d %q", r.status, pageText(r))
	}
	select {
	case text := <-alerts:
		if !strings.Contains(text, "emergency admin break-glass@example.com signed in") {
			t.Errorf("alert %q", text)
		}
	default:
		t.Error("no alert for the emergency admin's sign-in")
	}
	var id int64
	if err := b.pool.QueryRow(context.Background(), `SELECT account_id FROM audit_log WHERE action = 'emergency_login'`).
		Scan(&id); err != nil || id != u.ID {
		t.Errorf("emergency_login names account %d (%v), want %d", id, err, u.ID)
	}
	if n := len(auditTargets(t, b, "login")); n != 0 {
		t.Errorf("%d ordinary login entries for the emergency admin", n)
	}
}
