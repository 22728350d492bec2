package receiver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// TestMain fails the package's tests when any goroutine outlives them: a
// receiver's batchers and its late writes of outcomes must end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testSecret = "whsec_test_secret"

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// testBundle is what a test of the receiver works with besides its Store.
type testBundle struct {
	// pool is on the test's own fresh, migrated database, for the
	// assertions a test makes in SQL and the rows it puts in place.
	pool *pgxpool.Pool
}

// setup returns a Store on a fresh, migrated database of t's own, and the
// bundle of what else the test needs. Every test of the package starts
// with it.
func setup(t testing.TB) (*queue.Store, *testBundle) {
	t.Helper()
	store, pool := queuetest.NewStore(t)
	return store, &testBundle{pool: pool}
}

// queued counts the queue's rows exactly.
func (b *testBundle) queued(t testing.TB) int64 {
	return queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events`)
}

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

func newReceiver(store *queue.Store, p worker.Processor) *receiver.Receiver {
	return receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p,
	})
}

// blockingProcessor signals each run on started and waits for release.
type blockingProcessor struct {
	started chan string
	release chan struct{}
	mu      sync.Mutex
	runs    map[string]int
}

func newBlockingProcessor() *blockingProcessor {
	return &blockingProcessor{started: make(chan string, 16), release: make(chan struct{}), runs: map[string]int{}}
}

func (p *blockingProcessor) Process(ctx context.Context, d worker.Delivery) worker.Result {
	p.mu.Lock()
	p.runs[d.EventID]++
	p.mu.Unlock()
	p.started <- d.EventID
	select {
	case <-p.release:
		return worker.Result{}
	case <-ctx.Done():
		return worker.Result{Err: ctx.Err()}
	}
}
