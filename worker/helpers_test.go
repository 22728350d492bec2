package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

const testSecret = "whsec_test_secret"

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// countingProcessor counts its runs per event and answers with fail's
// result (nil: success).
type countingProcessor struct {
	runs atomic.Int64
	fail atomic.Bool
}

func (p *countingProcessor) Process(_ context.Context, _ worker.Delivery) worker.Result {
	p.runs.Add(1)
	if p.fail.Load() {
		return worker.Result{Err: fmt.Errorf("downstream answered 500: boom"), HTTPStatus: 500}
	}
	return worker.Result{HTTPStatus: 200}
}

// testBundle is what a test of the worker works with: a Store on a fresh,
// migrated database of the test's own, and its pool for the assertions a
// test makes in SQL and the rows it puts in place.
type testBundle struct {
	store *queue.Store
	pool  *pgxpool.Pool
}

// setup returns the bundle of a test on a fresh database. Every test of the
// package that needs a database starts with it.
func setup(t testing.TB) *testBundle {
	t.Helper()
	store, pool := queuetest.NewStore(t)
	return &testBundle{store: store, pool: pool}
}

// queued counts the queue's rows exactly.
func (b *testBundle) queued(t testing.TB) int64 {
	t.Helper()
	return queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events`)
}

func newReceiver(store *queue.Store, p worker.Processor) *receiver.Receiver {
	return receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p,
	})
}
