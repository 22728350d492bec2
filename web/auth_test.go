package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

func TestAuth_PagesRedirectToLoginAndBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)

	r := c.get("/events?status=dead")
	wantStatus(t, r, http.StatusSeeOther)
	loc := r.header.Get("Location")
	if want := "/login?next=" + url.QueryEscape("/events?status=dead"); loc != want {
		t.Fatalf("redirect to %q, want %q", loc, want)
	}
	login := c.get(loc)
	wantStatus(t, login, http.StatusOK)
	next, _ := login.doc.Find(`input[name="next"]`).Attr("value")
	if next != "/events?status=dead" {
		t.Fatalf("login form next = %q, want /events?status=dead", next)
	}
	for _, label := range []string{"Email", "Password"} {
		if login.doc.Find(`label:contains("`+label+`")`).Length() != 1 {
			t.Errorf("login page has no label %q", label)
		}
	}

	if _, err := b.accounts.CreateUser(context.Background(), "Ana@Example.com", testPassword, accounts.RoleViewer); err != nil {
		t.Fatal(err)
	}
	// Emails are matched without case.
	r = c.post("/login", url.Values{"email": {"ana@example.com"}, "password": {testPassword}, "next": {next}})
	wantStatus(t, r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/events?status=dead" {
		t.Fatalf("after sign-in redirect to %q, want /events?status=dead", loc)
	}
	page := c.follow(r)
	wantStatus(t, page, http.StatusOK)
	for _, link := range []string{"Overview", "Dead", "Pending", "Audit log"} {
		if page.doc.Find(`nav a:contains("`+link+`")`).Length() == 0 {
			t.Errorf("nav has no link %q", link)
		}
	}
	if lastAudit(t, b, audit.Login).Email != "Ana@Example.com" {
		t.Errorf("login not audited with the account's email")
	}
}

func TestAuth_PublicRoutesNeedNoSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	for _, path := range []string{"/healthz", "/readyz", "/static/style.css", "/static/htmx.min.js", "/login"} {
		if r := c.get(path); r.status != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", path, r.status)
		}
	}
}

func TestAuth_NextMustBeLocal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.accounts.CreateUser(context.Background(), "op@example.com", testPassword, accounts.RoleOperator); err != nil {
		t.Fatal(err)
	}
	for _, next := range []string{"https://evil.example/", "//evil.example/x", `/\evil.example`, "javascript:alert(1)"} {
		c := b.client(t)
		c.get("/login")
		r := c.post("/login", url.Values{"email": {"op@example.com"}, "password": {testPassword}, "next": {next}})
		wantStatus(t, r, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != "/" {
			t.Errorf("next=%q: redirect to %q, want /", next, loc)
		}
	}
}

func TestAuth_WrongPasswordIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	if _, err := b.accounts.CreateUser(context.Background(), "op@example.com", testPassword, accounts.RoleOperator); err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"op@example.com", "nobody@example.com"} {
		c.get("/login")
		r := c.post("/login", url.Values{"email": {email}, "password": {"not the password"}})
		wantStatus(t, r, http.StatusUnauthorized)
		if got := strings.TrimSpace(r.doc.Find(`[role="alert"]`).Text()); got != "Wrong email or password." {
			t.Errorf("%s: alert %q, want %q", email, got, "Wrong email or password.")
		}
	}
	if r := c.get("/"); r.status != http.StatusSeeOther {
		t.Fatalf("after a failed sign-in GET / gives %d, want a redirect to /login", r.status)
	}
	if n := countAudit(t, b, audit.Login); n != 0 {
		t.Errorf("%d login entries after failed sign-ins, want 0", n)
	}
}

func TestAuth_RepeatedFailuresLockTheAccountOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.accounts.CreateUser(ctx, "op@example.com", testPassword, accounts.RoleOperator); err != nil {
		t.Fatal(err)
	}
	c := b.client(t)
	// Five misses are free; the sixth makes the next attempt wait a second.
	for range 6 {
		c.get("/login")
		r := c.post("/login", url.Values{"email": {"op@example.com"}, "password": {"guess"}})
		wantStatus(t, r, http.StatusUnauthorized)
	}
	// Four more attempts, counted directly, make the wait 16 seconds: long
	// enough that the right password, tried at once, is refused. (The keys
	// are hashes: both counts, the account's and the address's, get the
	// four; the address's 10 are well within its 50 free.)
	if _, err := b.pool.Exec(ctx, `UPDATE login_failures SET failures = failures + 4 WHERE failures = 6`); err != nil {
		t.Fatal(err)
	}
	c.get("/login")
	r := c.post("/login", url.Values{"email": {"OP@example.com"}, "password": {testPassword}})
	wantStatus(t, r, http.StatusTooManyRequests)
	if alert := r.doc.Find(`[role="alert"]`).Text(); !strings.Contains(alert, "Too many failed sign-ins") {
		t.Errorf("alert %q, want it to say there were too many failed sign-ins", alert)
	}
	// Retry-After is what is left of the 16 seconds, so it shrinks with the
	// time the requests took; above 1 it shows the wait grew past the first
	// step, at most 16 that it never exceeds the rule.
	if after, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || after < 2 || after > 16 {
		t.Errorf("Retry-After %q, want what is left of the 16 seconds", r.header.Get("Retry-After"))
	}

	// Another account from the same address is not locked out.
	other := b.client(t)
	other.signIn(accounts.RoleViewer)
}

// Behind a trusted proxy each client is its own address: a guesser from
// one address locks neither the account's owner, signing in from another,
// nor anyone else out. A proxy that is not trusted has its
// X-Forwarded-For ignored, so a guesser cannot pick a fresh address per try.
func TestAuth_ThrottleIsPerAccountAndAddress(t *testing.T) {
	t.Parallel()
	_, proxy, err := net.ParseCIDR("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		trusted []*net.IPNet
	}{
		{"TrustedProxy", []*net.IPNet{proxy}},
		{"NoTrustedProxy", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupWith(t, web.Options{TrustedProxies: tc.trusted}, httptest.NewServer)
			if _, err := b.accounts.CreateUser(context.Background(), "admin@example.com", testPassword, accounts.RoleAdmin); err != nil {
				t.Fatal(err)
			}
			signIn := func(from, password string) response {
				c := b.client(t)
				c.get("/login")
				form := url.Values{"email": {"admin@example.com"}, "password": {password}, "_csrf": {c.csrf}}
				req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/login", strings.NewReader(form.Encode()))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("X-Forwarded-For", from)
				return c.do(req)
			}
			// The guesser uses up its free attempts, and four more
			// counted directly make it wait 16 seconds (its address's
			// count, 10 of 50 free, stays free).
			for range 6 {
				wantStatus(t, signIn("203.0.113.66", "a guess"), http.StatusUnauthorized)
			}
			if _, err := b.pool.Exec(context.Background(),
				`UPDATE login_failures SET failures = failures + 4 WHERE failures = 6`); err != nil {
				t.Fatal(err)
			}
			wantStatus(t, signIn("203.0.113.66", testPassword), http.StatusTooManyRequests)
			owner := signIn("198.51.100.7", testPassword)
			if tc.trusted != nil {
				wantStatus(t, owner, http.StatusSeeOther)
			} else {
				// Every client is the proxy: the guesser's count is the owner's.
				wantStatus(t, owner, http.StatusTooManyRequests)
			}
		})
	}
}

func TestAuth_LogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	u := c.signIn(accounts.RoleViewer)
	c.get("/")
	u0, _ := url.Parse(b.srv.URL)
	stolen := c.http.Jar.Cookies(u0)

	r := c.post("/logout", nil)
	wantStatus(t, r, http.StatusSeeOther)
	login := c.follow(r)
	if got := testid(login.doc, "flash"); got != "You are signed out." {
		t.Errorf("flash %q after sign-out", got)
	}
	if r := c.get("/"); r.status != http.StatusSeeOther {
		t.Errorf("after sign-out GET / gives %d, want a redirect to /login", r.status)
	}
	// The old session cookie is worthless once signed out.
	replay := b.client(t)
	replay.http.Jar.SetCookies(u0, stolen)
	if r := replay.get("/"); r.status != http.StatusSeeOther {
		t.Errorf("replayed session cookie: GET / gives %d, want a redirect to /login", r.status)
	}
	if e := lastAudit(t, b, audit.Logout); e.Email != u.Email {
		t.Errorf("logout audited for %q, want %q", e.Email, u.Email)
	}
}

func TestAuth_SessionCookieFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		secure     bool
		newServer  func(http.Handler) *httptest.Server
		wantSecure bool
	}{
		{"PlainHTTP", false, httptest.NewServer, false},
		{"PlainHTTPConfiguredSecure", true, httptest.NewServer, true},
		{"TLS", false, httptest.NewTLSServer, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupWith(t, web.Options{SecureCookies: tc.secure}, tc.newServer)
			c := b.client(t)
			c.get("/login")
			if _, err := b.accounts.CreateUser(context.Background(), "v@example.com", testPassword, accounts.RoleViewer); err != nil {
				t.Fatal(err)
			}
			r := c.post("/login", url.Values{"email": {"v@example.com"}, "password": {testPassword}})
			wantStatus(t, r, http.StatusSeeOther)
			setCookie := r.header.Get("Set-Cookie")
			for _, want := range []string{"hookd_session=", "HttpOnly", "SameSite=Lax"} {
				if !strings.Contains(setCookie, want) {
					t.Errorf("Set-Cookie %q lacks %q", setCookie, want)
				}
			}
			if got := strings.Contains(setCookie, "; Secure"); got != tc.wantSecure {
				t.Errorf("Set-Cookie %q: Secure %v, want %v", setCookie, got, tc.wantSecure)
			}
		})
	}
}

// Every POST form carries the CSRF token, and no GET form does: what a GET
// form sends (the search box, the list filters) lands in the URL, and so in
// the browser's history and in proxy logs, where the token that guards
// every POST must not.
func TestCSRF_EveryPostFormCarriesTheTokenAndNoGetForm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := b.client(t)
	pages := map[string]response{"/login": anon.get("/login")}

	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	dead := insertDead(t, b, "evt_forms")
	pending := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 1})
	for _, path := range []string{"/", "/events?status=dead", "/events?status=pending",
		"/events/" + dead.ID.String(), "/events/" + pending.ID.String(), "/events/" + uuid.NewString(), "/audit",
		"/search?q=evt_forms", "/rejections", "/failures"} {
		pages[path] = c.get(path)
	}
	pages["prune confirmation"] = c.post("/prune/preview", url.Values{"days": {"30"}})
	pages["retry all confirmation"] = c.post("/events/retry-all/preview", nil)
	other, err := b.accounts.CreateUser(context.Background(), "other@example.com", testPassword, accounts.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	pages["/accounts"] = c.get("/accounts")
	pages["remove confirmation"] = c.post("/accounts/"+strconv.FormatInt(other.ID, 10)+"/remove/preview", nil)

	for name, r := range pages {
		forms := r.doc.Find("form")
		if forms.Length() == 0 {
			t.Errorf("%s: no form at all (not even Sign out)", name)
		}
		forms.Each(func(_ int, f *goquery.Selection) {
			action, _ := f.Attr("action")
			tok, _ := f.Find(`input[type="hidden"][name="_csrf"]`).Attr("value")
			switch method, _ := f.Attr("method"); {
			case strings.EqualFold(method, "get"):
				if f.Find(`input[name="_csrf"]`).Length() != 0 {
					t.Errorf("%s: the GET form to %s carries the _csrf token", name, action)
				}
			case tok == "":
				t.Errorf("%s: the form to %s has no _csrf token", name, action)
			}
		})
	}
}

func TestCSRF_PostWithoutValidTokenChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	dead := insertDead(t, b, "evt_csrf")

	for name, token := range map[string]string{"missing": "", "wrong": "not-the-token"} {
		r := c.post("/events/"+dead.ID.String()+"/retry", url.Values{"_csrf": {token}})
		wantStatus(t, r, http.StatusForbidden)
		if r.doc.Find(`[role="alert"]`).Length() == 0 {
			t.Errorf("%s token: the 403 page has no alert", name)
		}
	}
	if e := eventNow(t, b, dead); e.Status != queue.StatusDead || e.ManualRetry {
		t.Errorf("after refused POSTs the event is %s (manual_retry %v), want dead and untouched", e.Status, e.ManualRetry)
	}
	if n := countAudit(t, b, audit.Retry); n != 0 {
		t.Errorf("%d retry entries, want 0", n)
	}

	// Signing in needs the token too, or another site could sign a browser
	// into its own account.
	anon := b.client(t)
	r := anon.post("/login", url.Values{"_csrf": {"forged"}, "email": {"operator@example.com"}, "password": {testPassword}})
	wantStatus(t, r, http.StatusForbidden)
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	want := map[string]string{
		"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "same-origin",
		"X-Content-Type-Options":  "nosniff",
	}
	for _, path := range []string{"/login", "/", "/events?status=dead", "/audit", "/no-such-page"} {
		r := c.get(path)
		for h, v := range want {
			if got := r.header.Get(h); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, h, got, v)
			}
		}
		if r.doc != nil && r.doc.Find("script:not([src])").Length() > 0 {
			t.Errorf("GET %s: page has an inline script", path)
		}
	}
}

// A password change (hookd user passwd calls SetPassword) ends every
// session signed in with the old password, and only those.
func TestAuth_PasswordChangeEndsTheAccountsSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	u, err := b.accounts.CreateUser(ctx, "ops@example.com", testPassword, accounts.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	signIn := func(email, password string) *client {
		c := b.client(t)
		c.get("/login")
		wantStatus(t, c.post("/login", url.Values{"email": {email}, "password": {password}}), http.StatusSeeOther)
		wantStatus(t, c.get("/"), http.StatusOK)
		return c
	}
	laptop, phone := signIn(u.Email, testPassword), signIn(u.Email, testPassword)
	other := b.client(t)
	other.signIn(accounts.RoleViewer)

	const newPassword = "a brand new passphrase"
	if err := b.accounts.SetPassword(ctx, u.Email, newPassword); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*client{"laptop": laptop, "phone": phone} {
		r := c.get("/events?status=dead")
		wantStatus(t, r, http.StatusSeeOther)
		if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "/login") {
			t.Errorf("%s after the password change: redirect to %q, want /login", name, loc)
		}
	}
	wantStatus(t, other.get("/"), http.StatusOK)
	signIn(u.Email, newPassword)
}

func TestDashboardPagesAreNotCached(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := b.client(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	dead := insertDead(t, b, "evt_no_store")
	pages := map[string]response{
		"GET /login (anonymous)": anon.get("/login"),
		"GET / (anonymous)":      anon.get("/"),
	}
	for _, path := range []string{"/", "/overview/stats", "/events?status=dead", "/events?status=pending",
		"/events/" + dead.ID.String(), "/audit", "/accounts", "/no-such-page"} {
		pages["GET "+path] = c.get(path)
	}
	pages["POST /events/retry-all/preview"] = c.post("/events/retry-all/preview", nil)
	for name, r := range pages {
		if got := r.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", name, got)
		}
	}
}

// A flood of sign-ins at fresh random emails from one address writes
// almost nothing: the address's budget is read before any count is
// written, so once it is spent each further guess is refused with no
// write, and every count's key is a hash of fixed length whatever the
// email. An email longer than any address is refused before anything.
func TestAuth_SignInFloodWritesAlmostNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const attempts, clients = 10_000, 8
	var wg sync.WaitGroup
	for w := range clients {
		c := b.client(t)
		c.get("/login")
		wg.Go(func() {
			for i := range attempts / clients {
				email := fmt.Sprintf("guess-%d-%d-%s@example.com", w, i, strings.Repeat("x", i%200))
				r := c.post("/login", url.Values{"email": {email}, "password": {"a guess"}})
				if r.status != http.StatusUnauthorized && r.status != http.StatusTooManyRequests {
					t.Errorf("sign-in %d: got %d, want 401 or 429", i, r.status)
					return
				}
			}
		})
	}
	wg.Wait()
	rows := queuetest.Count(t, b.pool, `SELECT count(*) FROM login_failures`)
	longest := queuetest.Count(t, b.pool, `SELECT coalesce(max(length(key)), 0) FROM login_failures`)
	t.Logf("%d sign-ins at fresh emails from one address wrote %d rows, keys of at most %d bytes", attempts, rows, longest)
	// The address's 50 free attempts each count against their email, and
	// a few more get through, some at once from the 8 clients, each time
	// the address's wait runs out and doubles.
	if rows > 80 || longest > 64 {
		t.Errorf("%d rows, keys up to %d bytes; want a few dozen rows of fixed-length keys", rows, longest)
	}

	c := b.client(t)
	c.get("/login")
	// (A form over 64 KiB is refused whole, unread: see TestForms.)
	r := c.post("/login", url.Values{"email": {strings.Repeat("a", 1000) + "@example.com"}, "password": {"a guess"}})
	wantStatus(t, r, http.StatusBadRequest)
	if after := queuetest.Count(t, b.pool, `SELECT count(*) FROM login_failures`); after != rows {
		t.Errorf("a 1 KB email wrote %d rows", after-rows)
	}
}
