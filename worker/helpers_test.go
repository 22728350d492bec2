package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/receiver"
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

func markers(t testing.TB, pool *pgxpool.Pool) int64 {
	return queuetest.Count(t, pool, `SELECT count(*) FROM processed_webhook_events`)
}

func queued(t testing.TB, pool *pgxpool.Pool) int64 {
	return queuetest.Count(t, pool, `SELECT count(*) FROM webhook_events`)
}

func newReceiver(store *queue.Store, p worker.Processor) *receiver.Receiver {
	return receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p,
	})
}
