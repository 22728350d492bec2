package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue"
)

// openPool connects to DATABASE_URL and checks it answers: pgxpool.New does
// not connect, and a wrong DATABASE_URL should stop the program at start.
func openPool(ctx context.Context, cfg config.Config, opts ...poolOption) (*pgxpool.Pool, error) {
	// A delivery holds a connection only for its two short transactions,
	// never while the app runs, but the receiver's two group commits, the
	// retry loop's claims and outcomes, the dashboard and /readyz all run
	// at once, and pgxpool's default of max(4, CPUs) would queue them behind
	// each other. pool_max_conns in DATABASE_URL still wins.
	return connect(ctx, "DATABASE_URL", cfg.DatabaseURL, defaultMaxConns, opts...)
}

// poolOption changes a pool's configuration before it is opened.
type poolOption func(*pgxpool.Config)

// traced makes each statement a pool runs under a traced span a child span
// of it; with tracing off (t nil) it changes nothing.
func traced(t *tracing.Tracer) poolOption {
	return func(pcfg *pgxpool.Config) {
		if qt := t.QueryTracer(); qt != nil {
			pcfg.ConnConfig.Tracer = qt
		}
	}
}

// defaultMaxConns leaves room for three replicas under PostgreSQL's default
// max_connections of 100.
const defaultMaxConns = 30

// migrateConns is the size of the migrations' own pool: one for the
// migrations, one for the heartbeat of goose's lock row.
const migrateConns = 2

// openDashboardPool opens the dashboard's own pool on DATABASE_URL, of
// HOOKD_DASHBOARD_CONNS connections whatever pool_max_conns says: that
// sizes the receiver's pool, and the point of this one is to stay small.
func openDashboardPool(ctx context.Context, cfg config.Config, opts ...poolOption) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %v", err)
	}
	for _, o := range opts {
		o(pcfg)
	}
	pcfg.MaxConns = int32(cfg.DashboardConns)
	pcfg.MinConns = min(pcfg.MinConns, pcfg.MaxConns)
	return open(ctx, "DATABASE_URL", pcfg)
}

// openBeatPool opens the heartbeat's own connection: a beat that waited for
// one of the main pool's behind a burst of work would let this replica's
// leases look silent, and fence its processors, for nothing.
func openBeatPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %v", err)
	}
	pcfg.MaxConns, pcfg.MinConns = 1, 0
	return open(ctx, "DATABASE_URL", pcfg)
}

// connect opens a pool of maxConns connections (unless the connection
// string sets pool_max_conns) on the database named by setting and checks it
// answers.
func connect(ctx context.Context, setting, connString string, maxConns int32, opts ...poolOption) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", setting, err)
	}
	for _, o := range opts {
		o(pcfg)
	}
	if !strings.Contains(connString, "pool_max_conns") {
		pcfg.MaxConns = maxConns
	}
	return open(ctx, setting, pcfg)
}

// open opens the pool pcfg describes, hardened for a failover (harden),
// and checks it answers.
func open(ctx context.Context, setting string, pcfg *pgxpool.Config) (*pgxpool.Pool, error) {
	opened := harden(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", setting, err)
	}
	opened(pool)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database at %s (%s): %v", queue.DescribeDB(&pcfg.ConnConfig.Config), setting, err)
	}
	return pool, nil
}

// applyMigrations applies the pending migrations over the migrate URL, on a
// pool of its own closed before it returns, and returns the files it
// applied. goose's lock is a row of a table, not a session lock, so the
// migrate URL may go through PgBouncer in transaction pooling mode too.
func applyMigrations(ctx context.Context, cfg config.Config) ([]string, error) {
	setting, connString := cfg.MigrateURL()
	pool, err := connect(ctx, setting, connString, migrateConns)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return migrations.Up(ctx, pool)
}

// openMigrated applies the pending migrations, then opens the pool on
// DATABASE_URL, returning the files it applied: every command that touches
// the database starts so.
func openMigrated(ctx context.Context, cfg config.Config, opts ...poolOption) (*pgxpool.Pool, []string, error) {
	applied, err := applyMigrations(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	pool, err := openPool(ctx, cfg, opts...)
	if err != nil {
		return nil, nil, err
	}
	return pool, applied, nil
}

// openCurrent opens the pool on a database whose schema is this binary's,
// and changes nothing: for a command that promises to change nothing (a
// dry run), it is an error to find migrations pending, since applying
// them is a change, and one the upgrade steps order with the replicas.
func openCurrent(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st, err := migrations.Check(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if len(st.Pending) > 0 {
		pool.Close()
		return nil, fmt.Errorf("the database's schema is %d migrations behind this hookd (%s): run hookd migrate first, "+
			"as this command changes nothing", len(st.Pending), strings.Join(st.Pending, ", "))
	}
	return pool, nil
}

func migrate(ctx context.Context, cfg config.Config, stdout io.Writer) error {
	applied, err := applyMigrations(ctx, cfg)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "migrate: schema is up to date")
	}
	for _, name := range applied {
		fmt.Fprintln(stdout, "migrate: applied", name)
	}
	return nil
}
