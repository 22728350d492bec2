package web_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/prometheus/client_golang/prometheus"

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
}

// change runs fn on the provider while it answers no request.
func (p *provider) change(fn func(m *mockoidc.MockOIDC)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p.mock)
}

// setupOIDC serves the dashboard with sign-in through a provider of its
// own, roles mapped by roles, and opts for the rest.
func setupOIDC(t *testing.T, roles string, opts web.Options) (*testBundle, *provider) {
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
		RedirectURL: publicURL + idp.CallbackPath, Roles: mapping})
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
		{"expired", func(_ *providerUser, p *provider) {
			p.change(func(m *mockoidc.MockOIDC) { m.AccessTTL = -time.Minute })
		}, "expired"},
		{"wrong issuer", func(u *providerUser, _ *provider) { u.claims["iss"] = "https://elsewhere.example.com" }, "issued by a different provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, p := setupOIDC(t, testRoles, web.Options{})
			c := b.client(t)
			u := member("someone", "hookd-admins")
			tc.edit(&u, p)
			r := c.callback(c.answer(p, u))
			refusedAndNothingWritten(t, b, c, r, http.StatusUnauthorized, tc.saying)
			if n := len(auditTargets(t, b, "oidc_login")); n != 0 {
				t.Errorf("%d sign-ins audited", n)
			}
		})
	}
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

	// Out of every group: refused, and the account keeps its last role
	// until its sessions end, which HOOKD_SESSION_MAX_AGE bounds.
	c := b.client(t)
	r := c.callback(c.answer(p, member("ana")))
	if r.status != http.StatusForbidden {
		t.Errorf("sign-in in no group: %d, want 403", r.status)
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
	createAccount(t, b, "admin@example.com", accounts.RoleAdmin)
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
