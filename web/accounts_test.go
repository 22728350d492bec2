package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue/queuetest"
)

// createAccount adds an account straight through the store, as the CLI does.
func createAccount(t *testing.T, b *testBundle, email string, role accounts.Role) accounts.User {
	t.Helper()
	u, err := b.accounts.CreateUser(context.Background(), email, testPassword, role)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// signInAs signs the client in with an account that exists already.
func (c *client) signInAs(email string) {
	c.t.Helper()
	c.get("/login")
	r := c.post("/login", url.Values{"email": {email}, "password": {testPassword}})
	if r.status != http.StatusSeeOther {
		c.t.Fatalf("sign in as %s: status %d, want 303; body:\n%s", email, r.status, r.body)
	}
	c.follow(r)
}

func accountRow(doc *goquery.Document, email string) *goquery.Selection {
	return doc.Find(`tr[data-testid="account-row"][data-email="` + email + `"]`)
}

// submit posts form as a browser would: its inputs, the option selected in
// each select, then extra over them.
func (c *client) submit(form *goquery.Selection, extra url.Values) response {
	c.t.Helper()
	if form.Length() != 1 {
		c.t.Fatalf("%d forms to submit, want 1", form.Length())
	}
	values := formValues(form)
	form.Find("select").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		value, _ := s.Find("option[selected]").Attr("value")
		values.Set(name, value)
	})
	for k, v := range extra {
		values[k] = v
	}
	action, _ := form.Attr("action")
	return c.post(action, values)
}

// formWith finds, inside sel, the form with the button labelled button.
func formWith(sel *goquery.Selection, button string) *goquery.Selection {
	return sel.Find(`form:has(button:contains("` + button + `"))`)
}

func alertText(r response) string {
	return strings.TrimSpace(r.doc.Find(`[role="alert"]`).Text())
}

func userCount(t *testing.T, b *testBundle) int {
	t.Helper()
	return int(queuetest.Count(t, b.pool, `SELECT count(*) FROM users`))
}

func accountAudits(t *testing.T, b *testBundle) int {
	t.Helper()
	return countAudit(t, b, audit.AccountAdd) + countAudit(t, b, audit.AccountRole) +
		countAudit(t, b, audit.AccountRemove)
}

func roleNow(t *testing.T, b *testBundle, id int64) accounts.Role {
	t.Helper()
	u, err := b.accounts.User(context.Background(), id)
	if err != nil {
		t.Fatalf("account %d: %v", id, err)
	}
	return u.Role
}

func TestAccounts_AdminAddsAnAccountThatCanSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.client(t)
	me := admin.signIn(accounts.RoleAdmin)

	page := admin.get("/accounts")
	wantStatus(t, page, http.StatusOK)
	if admin.get("/").doc.Find(`nav a:contains("Accounts")`).Length() != 1 {
		t.Error("an admin's nav has no Accounts link")
	}
	row := accountRow(page.doc, me.Email)
	if row.Length() != 1 {
		t.Fatalf("the admin's own account is not listed")
	}
	if title, _ := row.Find("time").Attr("title"); !strings.HasSuffix(title, " UTC") || !strings.Contains(row.Text(), "just now") {
		t.Errorf("created cell %q (title %q), want a relative time with the absolute one in its title", row.Find("time").Text(), title)
	}
	for _, label := range []string{"Email", "Password", "Role"} {
		if page.doc.Find(`form[action="/accounts"] label:contains("`+label+`")`).Length() != 1 {
			t.Errorf("the add form has no label %q", label)
		}
	}
	if min, _ := page.doc.Find(`input[name="password"][type="password"]`).Attr("minlength"); min != strconv.Itoa(accounts.MinPasswordLength) {
		t.Errorf("password minlength %q, want %d", min, accounts.MinPasswordLength)
	}

	r := admin.submit(formWith(page.doc.Selection, "Add account"), url.Values{
		"email": {"new@example.com"}, "password": {"a new long password"}, "role": {"operator"}})
	page = admin.follow(r)
	if got := testid(page.doc, "flash"); got != "Added new@example.com (operator)" {
		t.Errorf("flash %q, want %q", got, "Added new@example.com (operator)")
	}
	if accountRow(page.doc, "new@example.com").Length() != 1 {
		t.Error("the new account is not listed")
	}

	newcomer := b.client(t)
	newcomer.get("/login")
	wantStatus(t, newcomer.post("/login", url.Values{"email": {"new@example.com"}, "password": {"a new long password"}}),
		http.StatusSeeOther)
	if r := newcomer.get("/events?status=dead"); r.status != http.StatusOK {
		t.Errorf("the new account gets %d on the dead list, want 200", r.status)
	}

	if n := countAudit(t, b, audit.AccountAdd); n != 1 {
		t.Fatalf("%d account_add entries, want 1", n)
	}
	if a := lastAudit(t, b, audit.AccountAdd); a.Email != me.Email || a.Target != "new@example.com (operator)" || a.Count != 1 {
		t.Errorf("audit entry %+v, want account_add of new@example.com (operator) by %s", a, me.Email)
	}
	audit := admin.get("/audit")
	if audit.doc.Find(`tr[data-testid="audit-row"] .pill:contains("account added")`).Length() != 1 {
		t.Error("the audit page does not show the addition as \"account added\"")
	}
}

func TestAccounts_RoleChangeTakesEffectOnTheNextRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.client(t)
	me := admin.signIn(accounts.RoleAdmin)
	other := b.client(t)
	u := other.signIn(accounts.RoleViewer)
	wantStatus(t, other.get("/accounts"), http.StatusForbidden)

	change := func(role accounts.Role) {
		t.Helper()
		page := admin.get("/accounts")
		form := formWith(accountRow(page.doc, u.Email), "Save role")
		if form.Find(`label:contains("Role")`).Length() != 1 {
			t.Errorf("the role form of %s has no label Role", u.Email)
		}
		page = admin.follow(admin.submit(form, url.Values{"role": {string(role)}}))
		if got, want := testid(page.doc, "flash"), u.Email+" is now "+string(role); got != want {
			t.Errorf("flash %q, want %q", got, want)
		}
	}

	change(accounts.RoleAdmin)
	// The same session, not signed in again.
	wantStatus(t, other.get("/accounts"), http.StatusOK)
	if a := lastAudit(t, b, audit.AccountRole); a.Email != me.Email ||
		a.Target != "viewer@example.com from viewer to admin" || a.Count != 1 {
		t.Errorf("audit entry %+v, want account_role of viewer@example.com from viewer to admin by %s", a, me.Email)
	}

	change(accounts.RoleViewer)
	wantStatus(t, other.get("/accounts"), http.StatusForbidden)
	if n := countAudit(t, b, audit.AccountRole); n != 2 {
		t.Errorf("%d account_role entries after two changes, want 2", n)
	}

	// Saving the role an account has already changes and records nothing.
	page := admin.follow(admin.submit(formWith(accountRow(admin.get("/accounts").doc, u.Email), "Save role"), nil))
	if got := testid(page.doc, "flash"); !strings.Contains(got, "already viewer") {
		t.Errorf("flash %q, want one saying the account is already viewer", got)
	}
	if n := countAudit(t, b, audit.AccountRole); n != 2 {
		t.Errorf("%d account_role entries after a change to the same role, want 2", n)
	}
}

func TestAccounts_RemovedAccountsSessionStopsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.client(t)
	me := admin.signIn(accounts.RoleAdmin)
	op := b.client(t)
	u := op.signIn(accounts.RoleOperator)
	wantStatus(t, op.get("/"), http.StatusOK)

	page := admin.get("/accounts")
	confirm := admin.submit(formWith(accountRow(page.doc, u.Email), "Remove"), nil)
	wantStatus(t, confirm, http.StatusOK)
	if text := confirm.doc.Find("h1").Text(); text != "Remove "+u.Email+"?" {
		t.Fatalf("confirmation asks %q, want %q", text, "Remove "+u.Email+"?")
	}
	if _, err := b.accounts.User(context.Background(), u.ID); err != nil {
		t.Fatalf("the confirmation page removed the account: %v", err)
	}
	if confirm.doc.Find(`a:contains("Cancel")`).Length() != 1 {
		t.Error("the confirmation has no Cancel")
	}

	page = admin.follow(admin.submit(formWith(confirm.doc.Selection, "Confirm remove"), nil))
	if got := testid(page.doc, "flash"); got != "Removed "+u.Email {
		t.Errorf("flash %q, want %q", got, "Removed "+u.Email)
	}
	if accountRow(page.doc, u.Email).Length() != 0 {
		t.Error("the removed account is still listed")
	}

	r := op.get("/")
	wantStatus(t, r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "/login") {
		t.Errorf("the removed account's session is sent to %q, want /login", loc)
	}
	again := b.client(t)
	again.get("/login")
	wantStatus(t, again.post("/login", url.Values{"email": {u.Email}, "password": {testPassword}}), http.StatusUnauthorized)

	if n := countAudit(t, b, audit.AccountRemove); n != 1 {
		t.Fatalf("%d account_remove entries, want 1", n)
	}
	if a := lastAudit(t, b, audit.AccountRemove); a.Email != me.Email || a.Target != u.Email+" (operator)" {
		t.Errorf("audit entry %+v, want account_remove of %s (operator) by %s", a, u.Email, me.Email)
	}
}

func TestAccounts_OnlyAdminsSeeOrChangeThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := createAccount(t, b, "target@example.com", accounts.RoleOperator)
	id := strconv.FormatInt(target.ID, 10)
	for _, role := range []accounts.Role{accounts.RoleViewer, accounts.RoleOperator} {
		c := b.client(t)
		c.signIn(role)
		if c.get("/").doc.Find(`nav a:contains("Accounts")`).Length() != 0 {
			t.Errorf("%s: the nav shows Accounts", role)
		}
		r := c.get("/accounts")
		wantStatus(t, r, http.StatusForbidden)
		if r.doc.Find(`[role="alert"]`).Length() == 0 {
			t.Errorf("%s: the 403 page has no alert", role)
		}
		c.get("/") // a page carrying the session's CSRF token, so only the role refuses
		for path, form := range map[string]url.Values{
			"/accounts":                           {"email": {"sneaky@example.com"}, "password": {testPassword}, "role": {"admin"}},
			"/accounts/" + id + "/role":           {"role": {"admin"}},
			"/accounts/" + id + "/remove/preview": nil,
			"/accounts/" + id + "/remove":         nil,
		} {
			wantStatus(t, c.post(path, form), http.StatusForbidden)
		}
	}
	if n := userCount(t, b); n != 3 {
		t.Errorf("%d accounts, want the 3 there were", n)
	}
	if got := roleNow(t, b, target.ID); got != accounts.RoleOperator {
		t.Errorf("target is %s, want operator", got)
	}
	if n := accountAudits(t, b); n != 0 {
		t.Errorf("%d account entries in the audit log, want 0", n)
	}
}

func TestAccounts_AdminCannotChangeOwnAccount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A second admin, so "the last admin" is not why it is refused.
	createAccount(t, b, "other-admin@example.com", accounts.RoleAdmin)
	c := b.client(t)
	me := c.signIn(accounts.RoleAdmin)

	page := c.get("/accounts")
	own := accountRow(page.doc, me.Email)
	if own.Find("form").Length() != 0 {
		t.Error("the admin's own row offers a role form or Remove")
	}
	id := strconv.FormatInt(me.ID, 10)
	r := c.post("/accounts/"+id+"/role", url.Values{"role": {"viewer"}})
	wantStatus(t, r, http.StatusConflict)
	if got := alertText(r); !strings.Contains(got, "your own role") {
		t.Errorf("alert %q, want one about your own role", got)
	}
	r = c.post("/accounts/"+id+"/remove", nil)
	wantStatus(t, r, http.StatusConflict)
	if got := alertText(r); !strings.Contains(got, "your own account") {
		t.Errorf("alert %q, want one about your own account", got)
	}
	if got := roleNow(t, b, me.ID); got != accounts.RoleAdmin {
		t.Errorf("the admin is now %s", got)
	}
	if n := accountAudits(t, b); n != 0 {
		t.Errorf("%d account entries in the audit log, want 0", n)
	}
}

// Two admins each demote the other at the same moment. Exactly one wins and
// one admin remains. The other is refused either inside its transaction
// (409, the other is the last admin) or, when the winner committed before
// its request was let in, by the role check (403, no longer an admin).
func TestAccounts_TwoAdminsDemotingEachOtherLeaveOneAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := createAccount(t, b, "a@example.com", accounts.RoleAdmin)
	bee := createAccount(t, b, "b@example.com", accounts.RoleAdmin)
	ca, cb := b.client(t), b.client(t)
	ca.signInAs(a.Email)
	cb.signInAs(bee.Email)

	// The goroutines may not call t.Fatal, so they post with the bare
	// http.Client and report what came back.
	type result struct {
		status int
		err    error
	}
	results := make([]result, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, tc := range []struct {
		c      *client
		victim accounts.User
	}{{ca, bee}, {cb, a}} {
		form := url.Values{"_csrf": {tc.c.csrf}, "role": {"operator"}}
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/accounts/"+strconv.FormatInt(tc.victim.ID, 10)+"/role",
			strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		wg.Go(func() {
			<-start
			res, err := tc.c.http.Do(req)
			if err != nil {
				results[i] = result{err: err}
				return
			}
			res.Body.Close()
			results[i] = result{status: res.StatusCode}
		})
	}
	close(start)
	wg.Wait()

	var won, refused int
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Fatal(r.err)
		case r.status == http.StatusSeeOther:
			won++
		case r.status == http.StatusConflict || r.status == http.StatusForbidden:
			refused++
		default:
			t.Errorf("status %d, want 303, 409 or 403", r.status)
		}
	}
	var admins int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM users WHERE role = 'admin'`).Scan(&admins); err != nil {
		t.Fatal(err)
	}
	if won != 1 || refused != 1 || admins != 1 {
		t.Errorf("%d demotions won, %d refused, %d admins left; want 1, 1, 1", won, refused, admins)
	}
	if n := countAudit(t, b, audit.AccountRole); n != 1 {
		t.Errorf("%d account_role entries, want the 1 demotion that happened", n)
	}
}

func TestAccounts_AddRefusalsSayWhyAndStoreNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	createAccount(t, b, "taken@example.com", accounts.RoleViewer)

	for _, tc := range []struct {
		name, email, password, role, want string
	}{
		{"DuplicateEmail", "Taken@Example.com", testPassword, "viewer", "exists already"},
		{"ShortPassword", "new@example.com", "short", "operator", "at least " + strconv.Itoa(accounts.MinPasswordLength) + " characters"},
		{"BadEmail", "not-an-email", testPassword, "viewer", "not an email address"},
		{"UnknownRole", "new@example.com", testPassword, "root", "unknown role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := c.get("/accounts")
			r := c.submit(formWith(page.doc.Selection, "Add account"),
				url.Values{"email": {tc.email}, "password": {tc.password}, "role": {tc.role}})
			wantStatus(t, r, http.StatusUnprocessableEntity)
			if got := alertText(r); !strings.HasPrefix(got, "Not added:") || !strings.Contains(got, tc.want) {
				t.Errorf("alert %q, want \"Not added: ...%s...\"", got, tc.want)
			}
			if v, _ := r.doc.Find(`input[name="email"]`).Attr("value"); v != tc.email {
				t.Errorf("email field %q after the refusal, want %q kept", v, tc.email)
			}
			if v, _ := r.doc.Find(`input[name="password"]`).Attr("value"); v != "" {
				t.Error("the password is sent back in the page")
			}
		})
	}
	if n := userCount(t, b); n != 2 {
		t.Errorf("%d accounts, want the admin and taken@example.com only", n)
	}
	if n := accountAudits(t, b); n != 0 {
		t.Errorf("%d account entries in the audit log, want 0", n)
	}
}

func TestAccounts_PostWithoutCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	target := createAccount(t, b, "target@example.com", accounts.RoleOperator)
	id := strconv.FormatInt(target.ID, 10)
	for path, form := range map[string]url.Values{
		"/accounts":                           {"email": {"new@example.com"}, "password": {testPassword}, "role": {"viewer"}},
		"/accounts/" + id + "/role":           {"role": {"admin"}},
		"/accounts/" + id + "/remove/preview": {},
		"/accounts/" + id + "/remove":         {},
	} {
		form.Set("_csrf", "")
		wantStatus(t, c.post(path, form), http.StatusForbidden)
	}
	if n := userCount(t, b); n != 2 {
		t.Errorf("%d accounts, want 2", n)
	}
	if got := roleNow(t, b, target.ID); got != accounts.RoleOperator {
		t.Errorf("target is %s, want operator", got)
	}
	if n := accountAudits(t, b); n != 0 {
		t.Errorf("%d account entries in the audit log, want 0", n)
	}
}

func TestAccounts_UnknownAccountIs404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	c.get("/accounts")
	for _, path := range []string{"/accounts/999999/role", "/accounts/999999/remove/preview",
		"/accounts/999999/remove", "/accounts/not-a-number/remove"} {
		r := c.post(path, url.Values{"role": {"viewer"}})
		wantStatus(t, r, http.StatusNotFound)
		if got := alertText(r); !strings.Contains(got, "no such account") {
			t.Errorf("POST %s: alert %q, want one saying there is no such account", path, got)
		}
	}
	if n := accountAudits(t, b); n != 0 {
		t.Errorf("%d account entries in the audit log, want 0", n)
	}
}
