package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

// queryRecorder is a pgx tracer that keeps every statement run, with its
// arguments, so a test can EXPLAIN exactly what a page ran.
type queryRecorder struct {
	mu      sync.Mutex
	queries []recordedQuery
}

type recordedQuery struct {
	sql  string
	args []any
}

func (r *queryRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, recordedQuery{sql: data.SQL, args: data.Args})
	return ctx
}

func (r *queryRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements recorded so far that read the queue, and
// forgets all of them.
func (r *queryRecorder) take() []recordedQuery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedQuery
	for _, q := range r.queries {
		if strings.Contains(q.sql, "FROM webhook_events") && !strings.HasPrefix(strings.TrimSpace(q.sql), "EXPLAIN") {
			out = append(out, q)
		}
	}
	r.queries = nil
	return out
}

// planNode is the part of EXPLAIN (FORMAT JSON) output the test looks at.
type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}

func (n planNode) String() string {
	var b strings.Builder
	var write func(planNode, int)
	write = func(n planNode, depth int) {
		fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", depth), n.NodeType)
		if n.Relation != "" {
			fmt.Fprintf(&b, " on %s", n.Relation)
		}
		if n.Index != "" {
			fmt.Fprintf(&b, " using %s", n.Index)
		}
		b.WriteByte('\n')
		for _, c := range n.Plans {
			write(c, depth+1)
		}
	}
	write(n, 0)
	return b.String()
}

// TestExplain_DashboardUsesIndexes renders the overview and the event lists
// on a queue shaped like production (a tenth dead, the rest pending, 1 KB
// payloads) and large enough for the planner to care, and EXPLAINs each
// statement they ran on the queue table: none may read all of it.
func TestExplain_DashboardUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(queuetest.NewDatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &queryRecorder{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts, last_error, next_retry_at, created_at)
		SELECT 'stripe', 'evt_' || g, 'invoice.paid', '{"filler":"' || repeat('x', 900) || '"}',
		       CASE WHEN g % 10 = 0 THEN 'dead' WHEN g % 2 = 0 THEN 'failed' ELSE 'retrying' END, g % 5, 'HTTP 500',
		       now() + g * interval '1 second', now() - g * interval '1 second'
		FROM generate_series(1, 20000) g`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE webhook_events`); err != nil {
		t.Fatal(err)
	}

	store := queue.New(pool)
	srv := httptest.NewServer(web.NewServer(slog.New(slog.DiscardHandler), store, nil, nil, prometheus.NewRegistry(),
		web.Options{Sessions: pgxstore.NewWithCleanupInterval(pool, 0)}))
	t.Cleanup(srv.Close)
	c := (&testBundle{srv: srv, store: store, pool: pool}).client(t)
	c.signIn(queue.RoleViewer)

	for _, path := range []string{
		"/",
		"/events?status=dead",
		"/events?status=dead&page=3",
		"/events?status=dead&type=invoice.paid&error=500",
		"/events?status=pending",
		"/events?status=failed",
		"/events?status=retrying&page=2",
	} {
		rec.take()
		wantStatus(t, c.get(path), 200)
		queries := rec.take()
		if len(queries) == 0 {
			t.Fatalf("GET %s ran no query on webhook_events", path)
		}
		for _, q := range queries {
			var raw []byte
			if err := pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+q.sql, q.args...).Scan(&raw); err != nil {
				t.Fatalf("explain %s: %v", q.sql, err)
			}
			var plans []struct {
				Plan planNode `json:"Plan"`
			}
			if err := json.Unmarshal(raw, &plans); err != nil {
				t.Fatal(err)
			}
			plan := plans[0].Plan
			usesIndex := false
			plan.walk(func(n planNode) {
				if n.Relation != "webhook_events" {
					return
				}
				if n.NodeType == "Seq Scan" {
					t.Errorf("GET %s reads all of webhook_events:\n%s\n%s", path, q.sql, plan)
				}
				if n.Index != "" {
					usesIndex = true
				}
			})
			if !usesIndex {
				t.Errorf("GET %s runs a query on webhook_events without an index:\n%s\n%s", path, q.sql, plan)
			}
			t.Logf("GET %s:\n%s", path, plan)
		}
	}
}
