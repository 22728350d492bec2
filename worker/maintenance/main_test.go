package maintenance_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/hookd/hookd/queue/queuetest"
)

// TestMain fails the package's tests when any goroutine outlives them: a
// Service left running after Stop is a shutdown bug.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func markers(t testing.TB, pool *pgxpool.Pool) int64 {
	return queuetest.Count(t, pool, `SELECT count(*) FROM processed_webhook_events`)
}
