package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

// shiftedClock is the time now plus an offset a test sets.
type shiftedClock struct{ offset atomic.Int64 }

func (c *shiftedClock) Now() time.Time      { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *shiftedClock) Set(d time.Duration) { c.offset.Store(int64(d)) }

// loginToken loads the sign-in form and returns its CSRF token.
func loginToken(t *testing.T, c *client) string {
	t.Helper()
	c.get("/login")
	return c.csrf
}

func withToken(form url.Values, tok string) url.Values {
	form.Set("_csrf", tok)
	return form
}

// TestFormKeyRotation_TwoReplicas: two replicas share one database, each
// rereading the sign-in form key every 100ms. After a rotation both sign
// new forms with the new key, without a restart; a form signed with the
// old key before the rotation is still accepted by either replica within
// the hour, and refused, saying why, after it.
func TestFormKeyRotation_TwoReplicas(t *testing.T) {
	t.Parallel()
	dbURL := setup(t, withoutServer()).dbURL
	clock := &shiftedClock{}
	var replicas [2]*testBundle
	for i := range replicas {
		pool, err := pgxpool.New(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		store := queue.New(pool)
		stores := storesOn(store, pool)
		srv := httptest.NewServer(web.NewServer(web.Options{Stores: stores, Gatherer: prometheus.NewRegistry(),
			Sessions: pgxstore.NewWithCleanupInterval(pool, 0),
			FormKeys: accounts.NewKeyRing(stores.Accounts, accounts.SignInFormKey,
				accounts.KeyRingConfig{Refresh: 100 * time.Millisecond, Now: clock.Now})}))
		t.Cleanup(srv.Close)
		replicas[i] = &testBundle{srv: srv, store: store, accounts: stores.Accounts, audit: stores.Audit, pool: pool}
	}
	a, b := replicas[0], replicas[1]
	ctx := context.Background()
	u, err := a.accounts.CreateUser(ctx, "ana@example.com", testPassword, accounts.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	signIn := url.Values{"email": {u.Email}, "password": {testPassword}}

	// Three browsers load the sign-in form before the rotation, from
	// either replica: both sign with the one key there is.
	early, late, watcher := a.client(t), b.client(t), a.client(t)
	earlyTok, lateTok, watchTok := loginToken(t, early), loginToken(t, late), loginToken(t, watcher)
	watcherOnB := b.client(t)
	watcherOnB.http.Jar = watcher.http.Jar
	if tok := loginToken(t, watcherOnB); tok != watchTok {
		t.Fatalf("the replicas sign one nonce differently before any rotation: %q and %q", watchTok, tok)
	}

	var made accounts.SigningKey
	err = a.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		var err error
		made, _, err = tx.RotateSigningKey(ctx, accounts.SignInFormKey)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if made.Generation != 2 {
		t.Fatalf("rotation made generation %d, want 2", made.Generation)
	}
	// The watcher keeps its nonce: once a replica signs it differently,
	// that replica signs with the new key.
	queuetest.WaitFor(t, 10*time.Second, "both replicas to sign with the new key", func() bool {
		return loginToken(t, watcher) != watchTok && loginToken(t, watcherOnB) != watchTok
	})
	if x, y := loginToken(t, watcher), loginToken(t, watcherOnB); x != y {
		t.Fatalf("after the rotation the replicas sign one nonce differently: %q and %q", x, y)
	}

	// 59 minutes on, the early form, signed with the old key by replica
	// a, signs in on replica b.
	clock.Set(59 * time.Minute)
	early.b = b
	r := early.post("/login", withToken(signIn, earlyTok))
	wantStatus(t, r, http.StatusSeeOther)

	// 61 minutes on, the late form is refused, saying why, and nothing
	// is written: no sign-in in the audit log beyond the early one.
	clock.Set(61 * time.Minute)
	for _, replica := range replicas {
		late.b = replica
		r = late.post("/login", withToken(signIn, lateTok))
		wantStatus(t, r, http.StatusForbidden)
		if msg := strings.Join(strings.Fields(r.doc.Find("main").Text()), " "); !strings.Contains(msg,
			"signed with a key that was replaced more than an hour ago") {
			t.Errorf("an old-key form after the hour says %q, want that its key was replaced more than an hour ago", msg)
		}
	}
	if n := countAudit(t, a, "login"); n != 1 {
		t.Errorf("%d sign-ins in the audit log, want the early one alone", n)
	}
	// A fresh form, signed with the new key, signs in.
	late.b = b
	r = late.post("/login", withToken(signIn, loginToken(t, late)))
	wantStatus(t, r, http.StatusSeeOther)

	// A token no key made is the plain CSRF refusal, old key or not.
	forger := a.client(t)
	loginToken(t, forger)
	r = forger.post("/login", withToken(signIn, "AAAA"+lateTok[4:]))
	wantStatus(t, r, http.StatusForbidden)
	if strings.Contains(r.body, "replaced") {
		t.Errorf("a forged token is told about a replaced key:\n%s", r.body)
	}
}

// A replica whose copy of the keys predates a rotation accepts a form the
// other replica signed with the new key at once: the miss rereads them, if
// the copy is over a second old.
func TestFormKeyRotation_AStaleReplicaAcceptsTheNewKeyAtOnce(t *testing.T) {
	t.Parallel()
	dbURL := setup(t, withoutServer()).dbURL
	clock := &shiftedClock{}
	var replicas [2]*testBundle
	for i, refresh := range []time.Duration{time.Millisecond, time.Hour} {
		pool, err := pgxpool.New(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		store := queue.New(pool)
		stores := storesOn(store, pool)
		srv := httptest.NewServer(web.NewServer(web.Options{Stores: stores, Gatherer: prometheus.NewRegistry(),
			Sessions: pgxstore.NewWithCleanupInterval(pool, 0),
			FormKeys: accounts.NewKeyRing(stores.Accounts, accounts.SignInFormKey, accounts.KeyRingConfig{Refresh: refresh, Now: clock.Now})}))
		t.Cleanup(srv.Close)
		replicas[i] = &testBundle{srv: srv, store: store, accounts: stores.Accounts, audit: stores.Audit, pool: pool}
	}
	fresh, stale := replicas[0], replicas[1]
	ctx := context.Background()
	u, err := fresh.accounts.CreateUser(ctx, "ana@example.com", testPassword, accounts.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	c := stale.client(t)
	old := loginToken(t, c) // the stale replica reads the keys now, and not for an hour
	if err := fresh.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		_, _, err := tx.RotateSigningKey(ctx, accounts.SignInFormKey)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.b = fresh
	tok := loginToken(t, c)
	if tok == old {
		t.Fatal("the replica that rereads at once still signs with the old key")
	}
	clock.Set(2 * time.Second)
	c.b = stale
	r := c.post("/login", url.Values{"_csrf": {tok}, "email": {u.Email}, "password": {testPassword}})
	wantStatus(t, r, http.StatusSeeOther)
}
