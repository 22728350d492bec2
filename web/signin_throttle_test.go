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
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

const adminEmail = "admin@example.com"

// setupBehindProxy serves the dashboard behind a trusted proxy on the
// loopback, so each request's X-Forwarded-For is its client's address, and
// creates the admin account.
func setupBehindProxy(t *testing.T) *testBundle {
	t.Helper()
	_, proxy, err := net.ParseCIDR("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	b := setupWith(t, web.Options{TrustedProxies: []*net.IPNet{proxy}}, httptest.NewServer)
	if _, err := b.accounts.CreateUser(context.Background(), adminEmail, testPassword, accounts.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	return b
}

// signOut signs the client out, as a person does at the end of the day:
// its browser stays one the account signed in from.
func (c *client) signOut(signedIn response) {
	c.t.Helper()
	c.follow(signedIn)
	if r := c.post("/logout", nil); r.status != http.StatusSeeOther {
		c.t.Fatalf("sign out: status %d, want 303", r.status)
	}
	c.csrf = ""
}

// signInFrom posts the sign-in form as the client at address from.
func (c *client) signInFrom(from, email, password string) response {
	c.t.Helper()
	if c.csrf == "" {
		c.get("/login")
	}
	form := url.Values{"email": {email}, "password": {password}, "_csrf": {c.csrf}}
	req, err := http.NewRequest(http.MethodPost, c.b.srv.URL+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", from)
	return c.do(req)
}

// countsClock moves the sign-in counts' clock, the database's now(), on by
// aging every count: what real time has not moved it already. It keeps
// the simulated time a test asks for however long the test's requests
// take, as long as each step takes less real time than it simulates.
type countsClock struct {
	t     *testing.T
	b     *testBundle
	start time.Time
	aged  time.Duration
}

// moveTo makes it as if elapsed had passed since the clock was made.
func (c *countsClock) moveTo(elapsed time.Duration) {
	c.t.Helper()
	d := elapsed - time.Since(c.start) - c.aged
	if d <= 0 {
		return
	}
	if _, err := c.b.pool.Exec(context.Background(),
		`UPDATE login_failures SET last_failed_at = last_failed_at - make_interval(secs => $1)`, d.Seconds()); err != nil {
		c.t.Fatal(err)
	}
	c.aged += d
}

// 100 addresses of one IPv6 /64 guessing the admin's password, all of
// them every 5 seconds for two minutes of the counts' clock, get the
// checks one address would: the /64 is one address to the throttle.
// Meanwhile the admin, from a fresh browser at another address, signs in.
func TestSignIn_GuessesFromOneIPv6BlockShareOneBudget(t *testing.T) {
	t.Parallel()
	b := setupBehindProxy(t)
	guesser := b.client(t)
	const addresses, steps, step = 100, 24, 5 * time.Second
	clock := &countsClock{t: t, b: b, start: time.Now()}
	answers := map[int]int{}
	var perMinute [2]int64
	for s := range steps {
		before := b.accounts.PasswordChecks()
		for i := range addresses {
			from := fmt.Sprintf("2001:db8:77:1:%x:%x::%x", i, s, (7919*i+1)&0xffff)
			r := guesser.signInFrom(from, adminEmail, fmt.Sprintf("guess %d.%d", s, i))
			answers[r.status]++
		}
		perMinute[s*int(step)/int(time.Minute)] += b.accounts.PasswordChecks() - before
		if s == steps/2 {
			owner := b.client(t)
			wantStatus(t, owner.signInFrom("198.51.100.7", adminEmail, testPassword), http.StatusSeeOther)
		}
		clock.moveTo(time.Duration(s+1) * step)
	}
	// The owner's sign-in was one check.
	checks := b.accounts.PasswordChecks() - 1
	t.Logf("%d guesses from %d addresses of one /64 over %s: password checks %d in the first minute, %d in the second; %d answered 401, %d answered 429",
		addresses*steps, addresses, steps*step, perMinute[0], perMinute[1],
		answers[http.StatusUnauthorized], answers[http.StatusTooManyRequests])
	if answers[http.StatusUnauthorized]+answers[http.StatusTooManyRequests] != addresses*steps {
		t.Errorf("answers %v: want every guess answered 401 or 429", answers)
	}
	if int64(answers[http.StatusUnauthorized]) != checks {
		t.Errorf("%d guesses answered 401 but %d checked", answers[http.StatusUnauthorized], checks)
	}
	// One address's count for the account: 6 checks at once, then one
	// 1, 2, 4, 8 and 16 seconds after the last (at 5, 10, 15, 25 and 45 s
	// here), then one at 77 s. One more each is allowed should a step
	// take longer than it simulates.
	if perMinute[0] > 12 || perMinute[1] > 2 {
		t.Errorf("password checks per minute from one /64: %d, then %d; want at most 12, then 2", perMinute[0], perMinute[1])
	}
}

// Guessers spread over many addresses, each within its own budget, spend
// the account's budget across all of them; then a new browser with the
// right password is told to wait, and a browser the admin signed in from
// before still signs in, even from one of the guessers' addresses.
func TestSignIn_AccountBudgetSlowsSpreadGuessesButNotAKnownBrowser(t *testing.T) {
	t.Parallel()
	b := setupBehindProxy(t)
	ctx := context.Background()
	known := b.client(t)
	r := known.signInFrom("198.51.100.7", adminEmail, testPassword)
	wantStatus(t, r, http.StatusSeeOther)
	known.signOut(r)
	// Known to another account only: no use for the admin's.
	viewer := b.client(t)
	if _, err := b.accounts.CreateUser(ctx, "viewer@example.com", testPassword, accounts.RoleViewer); err != nil {
		t.Fatal(err)
	}
	r = viewer.signInFrom("198.51.100.9", "viewer@example.com", testPassword)
	wantStatus(t, r, http.StatusSeeOther)
	viewer.signOut(r)

	before := b.accounts.PasswordChecks()
	guesser := b.client(t)
	const spread = 40
	answers := map[int]int{}
	began := time.Now()
	for i := range spread {
		answers[guesser.signInFrom(fmt.Sprintf("203.0.113.%d", i+1), adminEmail, "a guess").status]++
	}
	took := time.Since(began)
	checks := b.accounts.PasswordChecks() - before
	t.Logf("%d guesses, one from each of %d addresses in %s: %d checked, answers %v", spread, spread, took, checks, answers)
	// The account's 20 free checks, and the one that makes the next wait:
	// 1 s, then 2 s, 4 s, ... So a machine slow enough that the guesses
	// outlast those waits sees one more check per wait that ended while
	// they went on, and never another.
	late := 0
	for wait := time.Second; wait <= took; wait = 2*wait + time.Second {
		late++
	}
	if checks < 21 || checks > int64(21+late) || answers[http.StatusUnauthorized] != int(checks) ||
		answers[http.StatusTooManyRequests] != spread-int(checks) {
		t.Errorf("%d checks, answers %v; want 21 checked (401), %d more at most for the waits that ended in %s, "+
			"and the rest 429", checks, answers, late, took)
	}
	// Ten more checks, counted directly, make the account's wait the
	// 15-minute ceiling. (Only the account's count is past 20.)
	if _, err := b.pool.Exec(ctx, `UPDATE login_failures SET failures = failures + 10 WHERE failures > 20`); err != nil {
		t.Fatal(err)
	}

	stranger := b.client(t)
	r = stranger.signInFrom("192.0.2.50", adminEmail, testPassword)
	wantStatus(t, r, http.StatusTooManyRequests)
	if alert := r.doc.Find(`[role="alert"]`).Text(); !strings.Contains(alert, "from a browser you have signed in with before") {
		t.Errorf("alert %q, want it to say a known browser still gets in", alert)
	}
	if after, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || after < 60 || after > 900 {
		t.Errorf("Retry-After %q, want what is left of 15 minutes", r.header.Get("Retry-After"))
	}
	wantStatus(t, viewer.signInFrom("198.51.100.9", adminEmail, testPassword), http.StatusTooManyRequests)
	wantStatus(t, guesser.signInFrom("203.0.113.5", adminEmail, testPassword), http.StatusTooManyRequests)
	if got := b.accounts.PasswordChecks() - before; got != checks {
		t.Errorf("%d more checks while the account must wait, want none", got-checks)
	}

	// The admin's own browser, from one of the guessers' addresses.
	wantStatus(t, known.signInFrom("203.0.113.5", adminEmail, testPassword), http.StatusSeeOther)
	if r := known.get("/"); r.status != http.StatusOK {
		t.Fatalf("GET / after signing in from a known browser: %d", r.status)
	}
}

// Sign-ins from rotating addresses hold every password-check slot but the
// one kept for known browsers; an address holds one slot at most, and a
// browser the admin signed in from before still signs in.
func TestSignIn_FloodOfSlotsLeavesOneForAKnownBrowser(t *testing.T) {
	t.Parallel()
	b := setupBehindProxy(t)
	ctx := context.Background()
	known := b.client(t)
	r := known.signInFrom("198.51.100.7", adminEmail, testPassword)
	wantStatus(t, r, http.StatusSeeOther)
	known.signOut(r)

	// Each guess below holds its slot, waiting to count itself against
	// the account, whose row this transaction keeps locked.
	hold, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `SELECT FROM login_failures FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	waiting := func() int64 {
		return queuetest.Count(t, b.pool, `
			SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	}
	guessers := make(chan int, 3)
	held := []string{"2001:db8:5:6::1", "203.0.113.2", "203.0.113.3"}
	for i, from := range held {
		c := b.client(t)
		c.get("/login")
		form := url.Values{"email": {adminEmail}, "password": {"a guess"}, "_csrf": {c.csrf}}
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/login", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", from)
		go func() {
			res, err := c.http.Do(req)
			if err != nil {
				t.Error(err)
				guessers <- 0
				return
			}
			res.Body.Close()
			guessers <- res.StatusCode
		}()
		queuetest.WaitFor(t, 10*time.Second, fmt.Sprintf("%d sign-ins holding a slot", i+1), func() bool { return waiting() == int64(i+1) })
		if i == 0 {
			// Another address of the same /64 gets no second slot.
			r := b.client(t).signInFrom("2001:db8:5:6:ffff::2", adminEmail, "a guess")
			wantStatus(t, r, http.StatusTooManyRequests)
			if got := r.header.Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After %q for a busy slot, want 1", got)
			}
		}
	}
	// Every slot for unknown browsers is held: a fresh address, even with
	// the right password, is turned away at once.
	r = b.client(t).signInFrom("192.0.2.50", adminEmail, testPassword)
	wantStatus(t, r, http.StatusTooManyRequests)
	if alert := r.doc.Find(`[role="alert"]`).Text(); !strings.Contains(alert, "Too many sign-ins at once") {
		t.Errorf("alert %q, want it to say too many sign-ins at once", alert)
	}
	// The admin's known browser takes the slot kept for it.
	wantStatus(t, known.signInFrom("198.51.100.8", adminEmail, testPassword), http.StatusSeeOther)

	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range held {
		if status := <-guessers; status != http.StatusUnauthorized {
			t.Errorf("a held guess was answered %d, want 401 once it was checked", status)
		}
	}
}
