package queuetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// QueryRecorder is a pgx tracer that keeps every statement a pool runs, with
// its arguments, so a test can EXPLAIN exactly what the code ran rather than
// a hand-copied query that could drift from it.
type QueryRecorder struct {
	mu      sync.Mutex
	queries []RecordedQuery
}

// RecordedQuery is one statement as the code sent it.
type RecordedQuery struct {
	SQL  string
	Args []any
}

// TraceQueryStart records the statement; it is pgx's tracer hook.
func (r *QueryRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, RecordedQuery{SQL: data.SQL, Args: data.Args})
	return ctx
}

// TraceQueryEnd is pgx's tracer hook; nothing to do at the end.
func (r *QueryRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Take returns the statements recorded so far that mention table (all of
// them when table is empty), leaving out EXPLAINs and transaction control,
// and forgets every recorded statement.
func (r *QueryRecorder) Take(table string) []RecordedQuery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []RecordedQuery
	for _, q := range r.queries {
		head := strings.ToUpper(strings.TrimSpace(q.SQL))
		if strings.HasPrefix(head, "EXPLAIN") || head == "BEGIN" || head == "COMMIT" || head == "ROLLBACK" {
			continue
		}
		if table == "" || strings.Contains(q.SQL, table) {
			out = append(out, q)
		}
	}
	r.queries = nil
	return out
}

// NewRecordingPool returns a pool on a fresh database for t whose statements
// rec records.
func NewRecordingPool(t testing.TB) (*pgxpool.Pool, *QueryRecorder) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDatabaseURL(t))
	if err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	rec := &QueryRecorder{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("queuetest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, rec
}

// PlanNode is the part of EXPLAIN (FORMAT JSON) output the plan tests read.
type PlanNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Plans    []PlanNode `json:"Plans"`
	// PlanRows is the rows the planner expects the node to return per
	// loop.
	PlanRows float64 `json:"Plan Rows"`
	// TotalCost is the planner's cost of the node, with all below it.
	TotalCost float64 `json:"Total Cost"`
	// Set by EXPLAIN ANALYZE: the rows a node returned per loop, and its
	// loops.
	ActualRows  float64 `json:"Actual Rows"`
	ActualLoops float64 `json:"Actual Loops"`
}

// Walk calls fn on n and every node below it.
func (n PlanNode) Walk(fn func(PlanNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.Walk(fn)
	}
}

// Uses reports whether any node of the plan reads through index.
func (n PlanNode) Uses(index string) bool {
	found := false
	n.Walk(func(p PlanNode) { found = found || p.Index == index })
	return found
}

// String draws the plan as an indented tree, for failure messages.
func (n PlanNode) String() string {
	var b strings.Builder
	var write func(PlanNode, int)
	write = func(n PlanNode, depth int) {
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

// Querier is what Explain runs EXPLAIN on: a pool, or one connection whose
// planner settings a test has changed.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Explain plans q, with its recorded arguments, without running it.
func Explain(t testing.TB, db Querier, q RecordedQuery) PlanNode {
	t.Helper()
	var raw []byte
	if err := db.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+q.SQL, q.Args...).Scan(&raw); err != nil {
		t.Fatalf("explain %s: %v", q.SQL, err)
	}
	return ParsePlan(t, raw)
}

// ParsePlan reads the output of EXPLAIN (FORMAT JSON).
func ParsePlan(t testing.TB, raw []byte) PlanNode {
	t.Helper()
	var plans []struct {
		Plan PlanNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) == 0 {
		t.Fatalf("read EXPLAIN output %q: %v", raw, err)
	}
	return plans[0].Plan
}

// VacuumAllVisible vacuums and analyzes table until the visibility map marks
// every page all-visible, as autovacuum keeps a settled production table.
// One VACUUM is not always enough: while another transaction in the database
// holds a snapshot older than the rows (an autovacuum ANALYZE of the fresh
// database, say), VACUUM may not mark their pages, and the planner then
// rightly prefers reading the heap over an index-only scan with heap fetches.
func VacuumAllVisible(t testing.TB, pool *pgxpool.Pool, table string) {
	t.Helper()
	ctx := context.Background()
	WaitFor(t, time.Minute, table+" all-visible after VACUUM", func() bool {
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE `+pgx.Identifier{table}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		var pages, visible int64
		if err := pool.QueryRow(ctx, `SELECT relpages, relallvisible FROM pg_class WHERE oid = $1::regclass`, table).
			Scan(&pages, &visible); err != nil {
			t.Fatal(err)
		}
		return visible >= pages
	})
}
