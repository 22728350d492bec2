package web_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

// TestExplain_DashboardUsesIndexes renders the overview and the event lists
// on a queue shaped like production (a tenth dead, the rest pending, 1 KB
// payloads) and large enough for the planner to care, and EXPLAINs each
// statement they ran on the queue table: none may read all of it.
func TestExplain_DashboardUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, rec := queuetest.NewRecordingPool(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts, last_error, next_retry_at, created_at)
		SELECT 'stripe', 'evt_' || g, 'invoice.paid', '{"filler":"' || repeat('x', 900) || '"}',
		       CASE WHEN g % 10 = 0 THEN 'dead' WHEN g % 2 = 0 THEN 'failed' ELSE 'retrying' END, g % 5, 'HTTP 500',
		       now() + g * interval '1 second', now() - g * interval '1 second'
		FROM generate_series(1, 20000) g`)
	if err != nil {
		t.Fatal(err)
	}
	queuetest.VacuumAllVisible(t, pool, "webhook_events")

	store := queue.New(pool)
	stores := storesOn(store, pool)
	srv := httptest.NewServer(web.NewServer(web.Options{Stores: stores, Gatherer: prometheus.NewRegistry(),
		Sessions: pgxstore.NewWithCleanupInterval(pool, 0)}))
	t.Cleanup(srv.Close)
	c := (&testBundle{srv: srv, store: store, accounts: stores.Accounts, audit: stores.Audit, pool: pool}).client(t)
	c.signIn(accounts.RoleViewer)

	for _, path := range []string{
		"/",
		"/events?status=dead",
		"/events?status=dead&page=3",
		"/events?status=dead&type=invoice.paid&error=500",
		"/events?status=pending",
		"/events?status=failed",
		"/events?status=retrying&page=2",
	} {
		rec.Take("")
		wantStatus(t, c.get(path), 200)
		queries := rec.Take("FROM webhook_events")
		if len(queries) == 0 {
			t.Fatalf("GET %s ran no query on webhook_events", path)
		}
		for _, q := range queries {
			plan := queuetest.Explain(t, pool, q)
			usesIndex := false
			plan.Walk(func(n queuetest.PlanNode) {
				if n.Relation != "webhook_events" {
					return
				}
				if n.NodeType == "Seq Scan" {
					t.Errorf("GET %s reads all of webhook_events:\n%s\n%s", path, q.SQL, plan)
				}
				if n.Index != "" {
					usesIndex = true
				}
			})
			if !usesIndex {
				t.Errorf("GET %s runs a query on webhook_events without an index:\n%s\n%s", path, q.SQL, plan)
			}
			t.Logf("GET %s:\n%s", path, plan)
		}
	}
}
