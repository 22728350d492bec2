package maintenance_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// TestMain fails the package's tests when any goroutine outlives them: a
// Service left running after Stop is a shutdown bug.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// testBundle is what a test of maintenance works with: the stores its
// services clean and watch, on a fresh, migrated database of the test's own.
type testBundle struct {
	// pool is on the test's database, for the assertions a test makes in
	// SQL and the rows it puts in place.
	pool       *pgxpool.Pool
	store      *queue.Store
	accounts   *accounts.Store
	activity   *activity.Store
	rejections *rejections.Store
}

// setup returns the bundle of a test on a fresh database. Every test of the
// package that needs a database starts with it.
func setup(t testing.TB) *testBundle {
	t.Helper()
	store, pool := queuetest.NewStore(t)
	return &testBundle{pool: pool, store: store, accounts: accounts.New(pool), activity: activity.New(pool),
		rejections: rejections.New(pool)}
}
