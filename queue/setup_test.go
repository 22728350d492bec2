package queue_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is what a test of the queue works with besides its Store.
type testBundle struct {
	// pool is on the test's own fresh, migrated database, for the
	// assertions a test makes in SQL and the rows it puts in place.
	pool *pgxpool.Pool
	// rec holds the statements the pool ran; nil without withRecorder.
	rec *queuetest.QueryRecorder
}

type setupConfig struct {
	storeOpts []queue.Option
	maxConns  int32
	record    bool
}

type setupOption func(*setupConfig)

// withStoreOptions gives the Store these options.
func withStoreOptions(opts ...queue.Option) setupOption {
	return func(c *setupConfig) { c.storeOpts = append(c.storeOpts, opts...) }
}

// withOneConnection gives the pool one connection, for a test of what a
// connection keeps between statements (its plans).
func withOneConnection() setupOption { return func(c *setupConfig) { c.maxConns = 1 } }

// withRecorder records every statement the pool runs in the bundle's rec.
func withRecorder() setupOption { return func(c *setupConfig) { c.record = true } }

// setup returns a Store on a fresh, migrated database of t's own, and the
// bundle of what else the test needs. Every test of the package starts
// with it.
func setup(t testing.TB, opts ...setupOption) (*queue.Store, *testBundle) {
	t.Helper()
	// Enough connections for the race tests' goroutines to really overlap.
	c := setupConfig{maxConns: 32}
	for _, o := range opts {
		o(&c)
	}
	cfg, err := pgxpool.ParseConfig(queuetest.NewDatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = c.maxConns
	bundle := &testBundle{}
	if c.record {
		bundle.rec = &queuetest.QueryRecorder{}
		cfg.ConnConfig.Tracer = bundle.rec
	}
	if bundle.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// Registered after the database's own cleanup, so it runs first.
	t.Cleanup(bundle.pool.Close)
	return queue.New(bundle.pool, c.storeOpts...), bundle
}
