package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// TestMain fails the package's tests when any goroutine outlives them: the
// flush loops must stop with their context.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// testBundle is what a test of telemetry works with: the stores its
// counters and its log write to, on a fresh database of the test's own.
type testBundle struct {
	// pool is on the test's database, for the assertions a test makes in
	// SQL and the rows it puts in place.
	pool       *pgxpool.Pool
	queue      *queue.Store
	activity   *activity.Store
	rejections *rejections.Store
	// counter counts the statements the pool ran.
	counter *queryCounter
}

// setup returns the bundle of a test on a fresh, migrated database. Every
// test of the package starts with it.
func setup(t testing.TB) *testBundle {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(queuetest.NewDatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	// Enough connections for the race tests' goroutines to really overlap.
	cfg.MaxConns = 32
	b := &testBundle{counter: &queryCounter{}}
	cfg.ConnConfig.Tracer = b.counter
	if b.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// Registered after the database's own cleanup, so it runs first.
	t.Cleanup(b.pool.Close)
	b.queue, b.activity, b.rejections = queue.New(b.pool), activity.New(b.pool), rejections.New(b.pool)
	return b
}

// queryCounter is a pgx tracer counting the statements a pool runs.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
