package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

// A page whose read runs past the dashboard's limit is refused with a 503
// that says so and what to do, not a 500; the page works again once the
// read is quick.
func TestDashboard_ASlowReadSaysNarrowTheFilter(t *testing.T) {
	t.Parallel()
	bundle := setup(t, withoutServer())
	stores := storesOn(bundle.store, bundle.pool)
	stores.Reads = queue.NewReader(bundle.pool, 200*time.Millisecond)
	srv := httptest.NewServer(web.NewServer(web.Options{Stores: stores, Gatherer: prometheus.NewRegistry(),
		Sessions: pgxstore.NewWithCleanupInterval(bundle.pool, 0)}))
	t.Cleanup(srv.Close)
	bundle.srv = srv
	b := bundle
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})

	// Every read of the queue waits behind this lock, as it would behind
	// a scan too large for the limit.
	tx, err := bundle.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `LOCK TABLE webhook_events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/failures", "/events?error=x", "/"} {
		r := c.get(path)
		wantStatus(t, r, http.StatusServiceUnavailable)
		msg := strings.Join(strings.Fields(r.doc.Find("main").Text()), " ")
		if !strings.Contains(msg, "This view took longer than 200ms to read") || !strings.Contains(msg, "Narrow the filter") {
			t.Errorf("GET %s past the limit says %q, want that it took longer than 200ms and to narrow the filter", path, msg)
		}
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/failures", "/events?error=x", "/"} {
		wantStatus(t, c.get(path), http.StatusOK)
	}
}
